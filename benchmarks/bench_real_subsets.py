"""Any learner on the real images shipped in data/, as tests/end_to_end/test_real_data.py
scores them.

Data (data/README.md), read as configs/real_subsets.py says, which the test reads too:
``data/orl_faces`` (40 people x 10 images, 2 splits of 20 test people) and
``data/viper_subset`` (80 VIPeR people, one image per camera, 3 splits of 30 test people,
probe cam_a); ``data/cuhk01_subset`` (60 CUHK01 people x 4 images, 3 splits of 30 test
people: ``cuhk01`` under the camera rule, as the test reads it, ``cuhk01_draw`` under the
loader's default gallery draw). Features: the 2,580-d colour + LBP histograms for labels
whose config is a chi2-kernel one (``warca:chi2``, ``lfda:chi2``, ``rpcca:chi2``,
``nn:chi2``, ...), the top ``--pca_dims`` principal axes (default: the config's, 64) of
each split's training images for the rest (``real_data.on_pca``).
Each label's default config (``protocol.plan.method_config``), with optional overrides
after ``@``, is fitted on every split; the mean rank-1 and mAP over the splits are printed.

With ``--val_fraction`` > 0 a share of each split's training people is held out and the
model is scored on them after every logged chunk (``pipeline``'s validation, as
``data.val_fraction`` in a run); with ``--keep_best`` the chunk with the best held-out mAP
is the model tested (``eval.keep_best``). Only iterative learners take this.

With ``--metric_learn_python`` (an interpreter with metric-learn 0.7.0, in a throwaway
virtualenv, never a dependency of this project) each of ``nca``, ``lmnn``, ``scml``,
``sdml`` and ``mmc`` among the labels is also fitted by metric-learn's estimator with
its defaults (LMNN: n_neighbors=3), in a subprocess, on the same training features of
every split; its transform is scored the same way.

Run from the repository root, e.g.:
  python -m benchmarks.bench_real_subsets --dataset=orl nn mahalanobis lmnn \\
      lmnn@num_iters=50 nca@tol=0
  python -m benchmarks.bench_real_subsets --dataset=orl --val_fraction=0.25 --keep_best lmnn
"""

from __future__ import annotations

import ast
import os
import subprocess
import tempfile
import time

import numpy as np
from absl import app, flags

from benchmarks import real_data
from warca_jax.io import config_files
from warca_jax.metric import Metric
from warca_jax.protocol import plan
from warca_jax.runs import defaults, pipeline, run_plan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# metric-learn's estimators, run in the peer's interpreter: fit on (x[train], y[train]),
# save transform(x).
ML_SCRIPT = """
import sys, warnings
import numpy as np
import metric_learn
warnings.simplefilter("ignore")
name, src, dst = sys.argv[1:4]
f = np.load(src)
est = {"nca": lambda: metric_learn.NCA(random_state=0),
       "lmnn": lambda: metric_learn.LMNN(n_neighbors=3, random_state=0),
       "scml": lambda: metric_learn.SCML_Supervised(random_state=0),
       "sdml": lambda: metric_learn.SDML_Supervised(random_state=0),
       "mmc": lambda: metric_learn.MMC_Supervised(random_state=0)}[name]()
est.fit(f["x"][f["train"]], f["y"][f["train"]])
np.save(dst, est.transform(f["x"]))
"""
PEERS = ("nca", "lmnn", "scml", "sdml", "mmc")

flags.DEFINE_enum(
    "dataset", "orl", ("orl", "viper", "both", "cuhk01", "cuhk01_draw"), "the subset(s) of data/"
)
flags.DEFINE_integer("pca_dims", 0, "0: configs/real_subsets.py's")
flags.DEFINE_float("val_fraction", 0.0, "share of each split's training people held out")
flags.DEFINE_bool("keep_best", False, "test the chunk with the best held-out mAP")
flags.DEFINE_string("metric_learn_python", "", "python with metric-learn")
FLAGS = flags.FLAGS


def subset(name: str):
    """configs/real_subsets.py's ``name`` subset: what tests/end_to_end/test_real_data.py reads."""
    module = config_files.load_config_module(os.path.join(ROOT, "configs", "real_subsets.py"))
    return module.get_config(name)


def load(name: str):
    """The dataset as tests/end_to_end/test_real_data.py reads it (``cuhk01_draw``: the CUHK01
    subset under the loader's default protocol, the gallery draw, instead of the camera
    rule)."""
    config = subset("cuhk01" if name == "cuhk01_draw" else name)
    options = dict(config.options)
    if name == "cuhk01_draw":
        del options["protocol"]
    return real_data.read(config.name, config.path, **options)


def parse(arg: str):
    """``label@field=value,...`` -> (label, method config with the overrides)."""
    label, _, rest = arg.partition("@")
    method = plan.method_config(label)
    for item in filter(None, rest.split(",")):
        key, _, text = item.partition("=")
        if key not in method:
            raise ValueError(f"{label} has no field {key!r}; its fields: {sorted(method)}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        setattr(method, key, type(method[key])(value))
    return label, method


def score(ds, method, uses_hist: bool, pca_dims: int) -> tuple[float, float]:
    """Mean (rank-1, mAP) of ``method`` over the splits of ``ds``."""
    config = defaults.base_config()
    config.method = method
    config.data.val_fraction = FLAGS.val_fraction
    config.eval.keep_best = FLAGS.keep_best
    config.progress = False
    rows = []
    for s, split in enumerate(ds.splits):
        d = ds if uses_hist else real_data.on_pca(ds, split, pca_dims)
        val = run_plan.plan_split(d, s, config).val
        with tempfile.TemporaryDirectory() as tmp:
            metric, _, _ = pipeline.fit_split(d, s, val, config, os.path.join(tmp, "m.jsonl"))
        r = real_data.score(metric, d, split, config.eval, seed=config.seed + s)
        rows.append((r["rank1"], r["mAP"]))
    return tuple(np.mean(rows, 0))


def score_peer(ds, name: str, pca_dims: int) -> tuple[float, float]:
    """Mean (rank-1, mAP) of metric-learn's ``name`` over the splits of ``ds`` (PCA)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for split in ds.splits:
            d = real_data.on_pca(ds, split, pca_dims)
            src, dst = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npy")
            np.savez(src, x=d.features, y=d.labels, train=split.train_idx)
            cmd = [FLAGS.metric_learn_python, "-c", ML_SCRIPT, name, src, dst]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode:  # the peer refused or failed: its last line says why
                raise ValueError(f"metric-learn: {out.stderr.strip().splitlines()[-1]}")
            z = np.load(dst).astype(np.float32)
            eye = Metric(kind="linear", input_dim=z.shape[1], projection=np.eye(z.shape[1]))
            r = real_data.score(eye, d._replace(features=z), split)
            rows.append((r["rank1"], r["mAP"]))
    return tuple(np.mean(rows, 0))


def main(argv):
    labels = argv[1:]  # config labels, e.g. lmnn or nca@tol=0
    if not labels:
        raise app.UsageError("give one or more config labels, e.g. lmnn or nca@tol=0")
    parsed = [parse(a) for a in labels]  # bad labels or fields fail before any fit
    names = ("orl", "viper") if FLAGS.dataset == "both" else (FLAGS.dataset,)
    extra = f"val_fraction {FLAGS.val_fraction:g}, keep_best {FLAGS.keep_best}"
    for name in names:
        ds = load(name)
        pca_dims = FLAGS.pca_dims or subset(name.removesuffix("_draw")).pca_dims
        print(f"{name}: colour + LBP histograms (chi2 labels) or PCA {pca_dims}; {extra}")
        for arg, (label, method) in zip(labels, parsed, strict=True):
            uses_hist = label.endswith(":chi2")
            t0 = time.perf_counter()
            try:
                rank1, mean_ap = score(ds, method, uses_hist, pca_dims)
            except ValueError as e:  # a learner that refuses the dataset says why
                print(f"{name:6s} {arg:44s} refused: {e}")
                continue
            took = time.perf_counter() - t0
            print(f"{name:6s} {arg:44s} rank-1 {rank1:6.2f}  mAP {mean_ap:6.2f}  ({took:.0f} s)")
            if FLAGS.metric_learn_python and arg in PEERS and not uses_hist:
                t0 = time.perf_counter()
                try:
                    rank1, mean_ap = score_peer(ds, arg, pca_dims)
                except ValueError as e:
                    print(f"{name:6s} {'metric-learn 0.7.0 ' + arg:44s} failed: {e}")
                    continue
                took, peer = time.perf_counter() - t0, f"metric-learn 0.7.0 {arg}"
                row = f"rank-1 {rank1:6.2f}  mAP {mean_ap:6.2f}  ({took:.0f} s)"
                print(f"{name:6s} {peer:44s} {row}")


if __name__ == "__main__":
    app.run(main)
