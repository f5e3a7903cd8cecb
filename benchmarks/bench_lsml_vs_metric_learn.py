"""warca_jax's LSML against metric-learn's LSML on scikit-learn's digits.

Data: ``sklearn.datasets.load_digits`` (1,797 x 64, 10 classes), split once 50/50
stratified (``random_state=0``), standardised with the training half's mean and standard
deviation (constant pixels left at 0), as benchmarks/bench_lmnn_vs_metric_learn.py does.
The covariance-prior rows project both halves on the training half's top 40 principal
components: the covariance of the standardised pixels is singular (4 constant pixels, and
one more that varies only on a sample no quadruplet holds), and metric-learn raises for a
singular prior.

Learners, all on the training half, with 20 * 10^2 = 2,000 quadruplets (both libraries'
default count):

* warca_jax LSML with ``configs/lsml.py``'s defaults (identity prior, lam = 1, tol 1e-3,
  at most 1,000 natural-gradient steps), quadruplets drawn from seed 0;
* metric-learn 0.7.0's weakly supervised ``LSML`` given the same quadruplets (its defaults:
  identity prior, tol 1e-3, max_iter 1000, gradient steps with a grid search over 10 step
  sizes), so that both minimise the same objective;
* metric-learn's ``LSML_Supervised(random_state=0)``, its defaults and its own draws;
* the same with the covariance prior (``prior="covariance"`` on both sides), on PCA 40-d;

when ``--metric_learn_python`` names an interpreter that has metric-learn (a throwaway
virtualenv, never a dependency of this project; run in a subprocess).

Evaluation, the same for every M = W^T W:

* objective: ``warca_jax.methods.lsml.objective`` on warca_jax's quadruplets of seed 0
  (float32): mean squared residual of the violated comparisons + D_ld(M, M0); for
  metric-learn's LSML_Supervised these are not the quadruplets it trained on;
* retrieval on the test half (each test image a query against the other test images),
  rank-1 and mAP; the relative difference ||M - M_ml||_F / ||M_ml||_F against
  metric-learn's LSML on the same quadruplets; fit seconds and steps.

Run:
  python benchmarks/bench_lsml_vs_metric_learn.py \\
      --metric_learn_python=/work/exp/ml_venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.digits import load, retrieval  # noqa: E402
from warca_jax import (
    config_files,  # noqa: E402
    defaults,  # noqa: E402
    linalg,  # noqa: E402
)

get_config = config_files.load_config_module("configs/lsml.py").get_config  # noqa: E402
from warca_jax.methods import lsml  # noqa: E402

PCA_DIM = 40  # the covariance-prior rows: the training half's top principal components

ML_SCRIPT = """
import sys, json, time, warnings, numpy as np, metric_learn
x, y, quads = (np.load(p) for p in sys.argv[1:4])
opts = json.loads(sys.argv[5])
warnings.simplefilter("ignore")
if opts["supervised"]:
    model = metric_learn.LSML_Supervised(prior=opts["prior"], random_state=0)
    t = time.perf_counter()
    model.fit(x, y)
else:
    model = metric_learn.LSML(prior=opts["prior"], preprocessor=x)
    t = time.perf_counter()
    model.fit(quads)
seconds = time.perf_counter() - t
np.save(sys.argv[4], model.components_)
print(json.dumps({"seconds": seconds, "version": metric_learn.__version__,
                  "n_iter": int(model.n_iter_)}))
"""


def run_metric_learn(python, x, y, quads, *, supervised, prior):
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, f) for f in ("x.npy", "y.npy", "q.npy", "l.npy")]
        np.save(paths[0], x.astype(np.float64))
        np.save(paths[1], y)
        np.save(paths[2], quads)
        opts = json.dumps({"supervised": supervised, "prior": prior})
        out = subprocess.run(
            [python, "-c", ML_SCRIPT, *paths, opts], check=True, capture_output=True, text=True
        )
        info = json.loads(out.stdout.strip().splitlines()[-1])
        return np.load(paths[3]), info


def block(xtr, ytr, python, prior):
    """(name, W, seconds, steps, reference W or None) rows for one prior."""
    quads = lsml.draw_quadruplets(ytr, 0, np.random.default_rng(0))
    cfg = defaults.overridden(get_config().method, prior=prior)
    ref = None
    rows = []
    if python:
        ref, info = run_metric_learn(python, xtr, ytr, quads, supervised=False, prior=prior)
    t = time.perf_counter()
    metric, hist = lsml.fit(xtr, ytr, cfg, seed=0)
    seconds = time.perf_counter() - t
    stop = hist[-1]["stopped"].split(":")[0]
    rows.append(
        (f"warca_jax LSML, {prior}", metric.projection, seconds, stop, hist[-1]["step"], ref)
    )
    if python:
        name = f"metric-learn {info['version']} LSML, {prior}, same quadruplets"
        rows.append((name, ref, info["seconds"], "", info["n_iter"], None))
        w, info = run_metric_learn(python, xtr, ytr, quads, supervised=True, prior=prior)
        name = f"metric-learn LSML_Supervised(random_state=0), {prior}"
        rows.append((name, w, info["seconds"], "", info["n_iter"], None))
    prior_inv = lsml.prior(xtr, quads, prior, float(cfg.prior_reg))
    return rows, quads, prior_inv


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metric_learn_python", default="", help="python with metric-learn")
    args = ap.parse_args()
    xtr, xte, ytr, yte = load()
    mean, comps = linalg.pca(xtr, variance=1.0, max_dim=PCA_DIM)
    ptr, pte = (xtr - mean) @ comps.T, (xte - mean) @ comps.T
    python = args.metric_learn_python
    print(
        f"digits: {len(ytr)} train / {len(yte)} test images, standardised; 64-d (identity "
        f"prior) and PCA {PCA_DIM}-d (covariance prior). objective: lsml.objective on "
        "warca_jax's 2,000 quadruplets of seed 0; rel. diff against metric-learn's LSML on "
        "the same quadruplets."
    )
    head = f"| {'learner':<58} | {'objective':>9} | {'residual':>8} | {'D_ld':>7} | "
    head += f"{'rank-1':>6} | {'mAP':>6} | {'rel. diff M':>11} | {'steps':>5} | {'fit s':>6} |"
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    for prior, xs, xt in (("identity", xtr, xte), ("covariance", ptr, pte)):
        rows, quads, prior_inv = block(xs, ytr, python, prior)
        rows.insert(0, (f"Euclidean ({xs.shape[1]}-d)", np.eye(xs.shape[1]), 0.0, "", 0, None))
        for name, w, seconds, stop, steps, ref in rows:
            m = w.T.astype(np.float64) @ w
            obj = lsml.objective(m, xs, quads, prior_inv)
            r1, ap = retrieval(w, xt, yte)
            rel = "-"
            if ref is not None:
                m_ref = ref.T @ ref
                rel = f"{np.linalg.norm(m - m_ref) / np.linalg.norm(m_ref):.2e}"
            label = f"{name} ({stop})" if stop else name
            print(
                f"| {label:<58} | {obj['loss']:9.4f} | {obj['residual']:8.4f} | "
                f"{obj['divergence']:7.3f} | {r1:6.1f} | {ap:6.1f} | {rel:>11} | {steps:5d} | "
                f"{seconds:6.1f} |"
            )


if __name__ == "__main__":
    main()
