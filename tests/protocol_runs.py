"""A tiny protocol run the protocol's tests share (tests/protocol/, tests/bad_input/): its
config and the results of its runs as they lie on disk."""

import json
import os

from repo_configs import config_module

get_config = config_module("protocol").get_config


def tiny(**changes):
    """Two methods (one cross-validated over a 1 x 2 grid), 2 splits of 40 identities."""
    c = get_config("small")
    c.unlock()
    c.methods = ("warca:linear", "nn", "nn:chi2")
    c.cv.methods = ("warca:linear",)
    c.cv.lams = (1e-2,)
    c.cv.etas = (1e-2, 1e-1)
    c.cv.num_iters = 30
    c.overrides = {"warca:linear": {"num_iters": 60, "log_every": 30}}
    c.data.synthetic.num_ids = 40
    c.skip = {"synthetic": ("nn:chi2",)}
    for key, value in changes.items():
        section, _, field = key.rpartition(".")
        (c[section] if section else c)[field] = value
    c.lock()
    return c


def run_results(workdir):
    """(rank-1, mAP, CMC to rank 5) of every run's split, by its file under ``workdir``."""
    out = {}
    for root, _, files in os.walk(os.path.join(workdir, "runs")):
        for f in files:
            if f.startswith("split_") and f.endswith(".json"):
                with open(os.path.join(root, f)) as fh:
                    res = json.load(fh)
                out[os.path.relpath(os.path.join(root, f), workdir)] = (
                    res["rank1"],
                    res["mAP"],
                    res["cmc"][:5],
                )
    return out
