"""Times every learner next to WARCA on the same problems; prints one JSON line per run.

Problems (synthetic features; identities split half for training, half for test, test
queries from camera 0 and gallery from camera 1):
  small: 2,000 training samples, 256-d, 200 training identities x 10 images;
  large: 7,368 training samples, 2,048-d, with the real identity labels of the CUHK03
         new-protocol training set (767 identities) from data/reid_protocols.

Each config file in configs/ is run with its default variant (plus the ``:chi2``
variants, on the histogram version of the data, and on the large problem the ``:large``
variants of the learners that have one). A learner whose fit takes longer than
--timeout seconds is stopped and reported as such.

  python benchmarks/bench_methods.py [--problem=small|large] [--timeout=600]
      [--only=lmnn,kissme,rpcca:large]
"""

import argparse
import copy
import json
import multiprocessing as mp
import os
import pkgutil
import time
from pathlib import Path

import numpy as np
import scipy.io

from warca_jax import config_files, dataset_arrays, evaluation, methods

# the repository's config files (run from anywhere)
CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")

SHARED = Path(__file__).resolve().parents[1] / "data" / "reid_protocols"


def _problem(name: str, histogram: bool):
    if name == "small":
        x, y, cams = dataset_arrays.make_synthetic(
            num_ids=400,
            images_per_id=10,
            num_cams=2,
            dim=256,
            signal_dim=16,
            num_nuisance=8,
            histogram=histogram,
            seed=0,
        )
        train = y < 200
        return x[train], y[train], x[~train], y[~train], cams[~train]
    mat = scipy.io.loadmat(SHARED / "cuhk03_new_protocol_config_labeled.mat")
    labels = mat["labels"].ravel().astype(np.int64)
    _, counts = np.unique(
        labels[mat["train_idx"].ravel().astype(np.int64) - 1], return_counts=True
    )  # 767 identities, 7,368 images, <= 10 each
    x, y, cams = dataset_arrays.make_synthetic(
        num_ids=len(counts) + 700,
        images_per_id=10,
        num_cams=2,
        dim=2048,
        signal_dim=64,
        num_nuisance=32,
        histogram=histogram,
        seed=0,
    )
    rank_in_id = np.arange(len(y)) % 10
    train = (y < len(counts)) & (rank_in_id < np.append(counts, np.zeros(700, int))[y])
    test = y >= len(counts)
    return x[train], y[train], x[test], y[test], cams[test]


def _configs(only, problem):
    out, seen = [], []
    for info in pkgutil.iter_modules([CONFIGS]):
        module = config_files.load_config_module(os.path.join(CONFIGS, f"{info.name}.py"))
        for variant in (None, "chi2", "large"):
            if variant == "large" and problem != "large":
                continue
            try:
                cfg = module.get_config() if variant is None else module.get_config(variant)
            except ValueError:
                continue
            label = info.name if variant is None else f"{info.name}:{variant}"
            names = {info.name, label} | ({cfg.method.name} if "method" in cfg else set())
            if only and not names & only:
                continue
            if cfg.to_dict() in seen:  # a ':chi2' variant that is the default already
                continue
            seen.append(cfg.to_dict())
            out.append((label, cfg))
    return out


def _run(label, cfg, problem, queue):
    hist = bool(cfg.data.synthetic.histogram)
    xt, yt, xe, ye, ce = _problem(problem, hist)
    m = copy.deepcopy(cfg.method)
    t0 = time.perf_counter()
    metric, _ = methods.get(m.name).fit(xt, yt, m, seed=0)
    fit_s = time.perf_counter() - t0
    q, g = ce == 0, ce == 1
    t0 = time.perf_counter()
    if metric.kind in ("identity", "linear", "kernel"):
        res = evaluation.evaluate(
            metric.transform(xe[q]),
            metric.transform(xe[g]),
            ye[q],
            ye[g],
            ce[q],
            ce[g],
            distance=metric.distance,
        )
    else:
        res = evaluation.evaluate_distances(
            metric.pairwise_distances(xe[q], xe[g]), ye[q], ye[g], ce[q], ce[g]
        )
    queue.put(
        {
            "config": label,
            "method": m.name,
            "problem": problem,
            "n_train": len(yt),
            "dim": xt.shape[1],
            "fit_s": round(fit_s, 2),
            "eval_s": round(time.perf_counter() - t0, 2),
            "rank1": round(res["rank1"], 2),
            "mAP": round(res["mAP"], 2),
        }
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default="small", choices=("small", "large"))
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    ctx = mp.get_context("spawn")
    for label, cfg in _configs(only, args.problem):
        queue = ctx.Queue()
        proc = ctx.Process(target=_run, args=(label, cfg, args.problem, queue))
        proc.start()
        proc.join(args.timeout)
        if proc.is_alive():
            proc.terminate()
            print(
                json.dumps(
                    {
                        "config": label,
                        "problem": args.problem,
                        "fit_s": f"> {args.timeout:.0f} (stopped)",
                    }
                ),
                flush=True,
            )
        elif proc.exitcode != 0:
            print(
                json.dumps(
                    {
                        "config": label,
                        "problem": args.problem,
                        "error": f"exit code {proc.exitcode}",
                    }
                ),
                flush=True,
            )
        else:
            print(json.dumps(queue.get()), flush=True)


if __name__ == "__main__":
    main()
