"""warca_jax's NCA (its defaults) against metric-learn's NCA on scikit-learn's digits.

Data: ``sklearn.datasets.load_digits`` (1,797 x 64, 10 classes, bundled with
scikit-learn), split once 50/50 stratified (``random_state=0``), standardised with the
training half's mean and standard deviation (constant pixels left at 0).

Learners, all on the training half, L: [64, 64] starting at the identity:

* warca_jax NCA with ``configs/nca.py``'s defaults (at most 100 L-BFGS steps, stopping at
  the first step that changes the loss by at most 1e-7 of itself);
* metric-learn 0.7.0's ``NCA()`` with its defaults (``init='auto'``, which is the
  identity here: D' = D = 64 is more than the 9 LDA directions and not below
  min(D, N); L-BFGS-B, ``max_iter=100``, ``tol=None``), when ``--metric_learn_python``
  names an interpreter that has it (a throwaway virtualenv, never a dependency of this
  project): it runs in a subprocess, which saves L to a .npy.

Evaluation, the same for every L:

* objective: ``warca_jax.methods.nca.objective`` on the training half, the expected
  leave-one-out accuracy f(L) / N of the paper's stochastic neighbour rule (eq. 2, over
  N). metric-learn's own loss (``_loss_grad_lbfgs`` in metric_learn/nca.py) is f(L), the
  same softmax with p_ii = 0, i.e. N times the number printed here.
* retrieval on the test half: each test image is a query against the other test images
  (``warca_jax.evaluation.evaluate``; the query itself is junk), rank-1 and mAP.
* wall time of the fit (warca_jax: including compilation; metric-learn: its ``fit`` only,
  measured inside the subprocess).
* agreement: ||M - M_ml||_F / ||M_ml||_F of the Mahalanobis matrices M = L^T L against
  metric-learn's (NCA is not convex: two optimisers from the same start need not meet).

Run:
  python benchmarks/bench_nca_vs_metric_learn.py \\
      --metric_learn_python=/work/exp/ml_venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.digits import load, retrieval  # noqa: E402
from warca_jax import config_files  # noqa: E402

get_config = config_files.load_config_module("configs/nca.py").get_config  # noqa: E402
from warca_jax.methods import nca  # noqa: E402

ML_SCRIPT = """
import sys, time, numpy as np, metric_learn
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
model = metric_learn.NCA()
t = time.perf_counter()
model.fit(x, y)
seconds = time.perf_counter() - t
np.save(sys.argv[3], model.components_)
print(seconds, metric_learn.__version__, getattr(model, "n_iter_", -1))
"""


def run_metric_learn(python, xtr, ytr):
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, f) for f in ("x.npy", "y.npy", "l.npy")]
        np.save(paths[0], xtr.astype(np.float64))
        np.save(paths[1], ytr)
        out = subprocess.run(
            [python, "-c", ML_SCRIPT, *paths], check=True, capture_output=True, text=True
        )
        seconds, version, n_iter = out.stdout.split()[-3:]
        return np.load(paths[2]), float(seconds), version, int(n_iter)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metric_learn_python", default="", help="python with metric-learn")
    args = ap.parse_args()
    xtr, xte, ytr, yte = load()
    print(
        f"digits: {len(ytr)} train / {len(yte)} test images, {xtr.shape[1]}-d, standardised; "
        f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPU cores"
    )
    rows = [("Euclidean (L = I)", np.eye(xtr.shape[1], dtype=np.float32), 0.0, "-")]
    t = time.perf_counter()
    metric, hist = nca.fit(xtr, ytr, get_config().method)
    rows.append(
        ("warca_jax NCA, defaults", metric.projection, time.perf_counter() - t, hist[-1]["stopped"])
    )
    reference = None
    if args.metric_learn_python:
        lmap, seconds, version, n_iter = run_metric_learn(args.metric_learn_python, xtr, ytr)
        rows.append((f"metric-learn {version} NCA()", lmap, seconds, f"n_iter_ {n_iter}"))
        reference = lmap.T.astype(np.float64) @ lmap
    print(
        "objective: warca_jax.methods.nca.objective on the training half (expected "
        "leave-one-out accuracy f / N; metric-learn's loss is N times it). Retrieval: test "
        "half, each image a query against the other test images. dM: ||M - M_ml||_F / "
        "||M_ml||_F."
    )
    head = f"| {'learner':<30} | {'objective':>9} | {'rank-1':>6} | {'mAP':>6} | "
    head += f"{'fit s':>6} | {'dM':>6} | stopped |"
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    for name, lmap, seconds, stopped in rows:
        obj = nca.objective(lmap, xtr, ytr)
        r1, ap = retrieval(lmap, xte, yte)
        dm = "-"
        if reference is not None:
            m = np.asarray(lmap, np.float64).T @ np.asarray(lmap, np.float64)
            dm = f"{np.linalg.norm(m - reference) / np.linalg.norm(reference):6.3f}"
        print(
            f"| {name:<30} | {obj:9.4f} | {r1:6.1f} | {ap:6.1f} | {seconds:6.1f} | {dm:>6} | "
            f"{stopped} |"
        )


if __name__ == "__main__":
    main()
