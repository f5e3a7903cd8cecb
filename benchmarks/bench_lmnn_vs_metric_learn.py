"""warca_jax's LMNN (its defaults) against metric-learn's LMNN on scikit-learn's digits.

Data: ``sklearn.datasets.load_digits`` (1,797 x 64, 10 classes, bundled with
scikit-learn), split once 50/50 stratified (``random_state=0``), standardised with the
training half's mean and standard deviation (constant pixels left at 0).

Learners, all on the training half with k = 3 target neighbours:

* warca_jax LMNN with ``configs/lmnn.py``'s defaults (at most 3,000 cosine-decayed Adam
  steps from 1e-2, early stop at a relative change <= 1e-4 over 100 steps);
* warca_jax LMNN with the old defaults (300 Adam steps at a constant 1e-3), for reference;
* metric-learn 0.7.0's ``LMNN(n_neighbors=3)``, otherwise its defaults, when
  ``--metric_learn_python`` names an interpreter that has it (a throwaway virtualenv,
  never a dependency of this project): it runs in a subprocess, which saves L to a .npy.

Evaluation, the same for every L:

* objective: ``warca_jax.methods.lmnn.objective`` on the training half, pull + mu * push
  with every impostor (no truncated set), k = 3, margin 1, mu = 1, divided by N.
  metric-learn's own objective (``_loss_grad`` in metric_learn/lmnn.py) is
  reg * sum_ij d_ij + (1 - reg) * sum_active (1 + d_ij - d_il) with reg = 0.5: the same
  targets (k nearest same-label points in the input space), margin 1 and hinge, without
  the 1/N and with weights reg, 1 - reg; so it equals N * reg * (warca_jax's objective
  with mu = (1 - reg) / reg = 1), i.e. N / 2 times the number printed here.
* retrieval on the test half: each test image is a query against the other test images
  (``warca_jax.evaluation.evaluate``; the query itself is junk), rank-1 and mAP.
* wall time of the fit (warca_jax: including compilation; metric-learn: its ``fit`` only,
  measured inside the subprocess).

Run:
  python benchmarks/bench_lmnn_vs_metric_learn.py \\
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
from warca_jax import config_files, defaults  # noqa: E402

get_config = config_files.load_config_module("configs/lmnn.py").get_config  # noqa: E402
from warca_jax.methods import lmnn  # noqa: E402

K = 3

ML_SCRIPT = """
import sys, time, numpy as np, metric_learn
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
model = metric_learn.LMNN(n_neighbors={k})
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
            [python, "-c", ML_SCRIPT.format(k=K), *paths],
            check=True,
            capture_output=True,
            text=True,
        )
        seconds, version, n_iter = out.stdout.split()[-3:]
        return np.load(paths[2]), float(seconds), version, int(n_iter)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metric_learn_python", default="", help="python with metric-learn")
    args = ap.parse_args()
    xtr, xte, ytr, yte = load()
    n = len(ytr)
    print(
        f"digits: {n} train / {len(yte)} test images, {xtr.shape[1]}-d, standardised; "
        f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPU cores"
    )
    rows = [("Euclidean (L = I)", np.eye(xtr.shape[1], dtype=np.float32), 0.0, "-")]
    variants = [
        ("warca_jax LMNN, defaults", {}),
        (
            "warca_jax LMNN, old defaults (300 @ 1e-3)",
            dict(num_iters=300, learning_rate=1e-3, schedule="constant", tol=0.0),
        ),
    ]
    for name, overrides in variants:
        cfg = defaults.overridden(get_config().method, k=K, **overrides)
        t = time.perf_counter()
        metric, hist = lmnn.fit(xtr, ytr, cfg)
        seconds = time.perf_counter() - t
        rows.append((name, metric.projection, seconds, hist[-1]["stopped"]))
    if args.metric_learn_python:
        lmap, seconds, version, n_iter = run_metric_learn(args.metric_learn_python, xtr, ytr)
        rows.append(
            (f"metric-learn {version} LMNN(n_neighbors={K})", lmap, seconds, f"n_iter_ {n_iter}")
        )
    cfg = get_config().method
    print(
        f"objective: warca_jax.methods.lmnn.objective on the training half (k={K}, "
        f"mu={cfg.mu:g}, margin={cfg.margin:g}, every impostor, / N); metric-learn's own "
        f"objective (reg=0.5) is N/2 = {n / 2:g} times it. Retrieval: test half, each image "
        "a query against the other test images."
    )
    head = f"| {'learner':<44} | {'objective':>9} | {'pull':>7} | {'push':>7} | "
    head += f"{'rank-1':>6} | {'mAP':>6} | {'fit s':>6} | stopped |"
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    for name, lmap, seconds, stopped in rows:
        obj = lmnn.objective(lmap, xtr, ytr, k=K, mu=cfg.mu, margin=cfg.margin)
        r1, ap = retrieval(lmap, xte, yte)
        print(
            f"| {name:<44} | {obj['loss']:9.4f} | {obj['pull']:7.4f} | {obj['push']:7.4f} | "
            f"{r1:6.1f} | {ap:6.1f} | {seconds:6.1f} | {stopped} |"
        )


if __name__ == "__main__":
    main()
