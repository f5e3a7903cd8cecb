"""warca_jax's MMC (its defaults) against metric-learn's MMC on scikit-learn's digits.

Data: ``sklearn.datasets.load_digits`` (1,797 x 64, 10 classes, bundled with
scikit-learn), split once 50/50 stratified (``random_state=0``), standardised with the
training half's mean and standard deviation (constant pixels left at 0).

Learners, all on the training half, the full-matrix form from A = I:

* warca_jax MMC with ``configs/mmc.py``'s defaults (20 C^2 = 2,000 similar and 2,000
  dissimilar pairs drawn from seed 0, at most 100 tries, tol 1e-6, the paper's
  alternating projections), and the same with ``projection='exact'``;
* metric-learn 0.7.0's ``MMC_Supervised(random_state=0)``, otherwise its defaults (the
  same numbers of pairs, drawn by its own generator, ``max_iter=100``, ``tol=1e-6``);
* metric-learn's ``MMC(tol=1e-6)`` (the same settings as ``MMC_Supervised``) fitted on
  warca_jax's pairs, so that both solve the same problem: the row to compare A with.

metric-learn runs in a subprocess of ``--metric_learn_python`` (a throwaway virtualenv,
never a dependency of this project), which saves its A to a .npy.

Evaluation, the same for every A:

* objective: ``warca_jax.methods.mmc.objective``, g(A) / sqrt(f(A)) (the sum of
  dissimilar-pair distances at A scaled onto the constraint f = 1; metric-learn bounds
  f by f(I) / 100 instead of 1 and compares log g, which changes A's scale only), on
  warca_jax's drawn pairs (the training problem) and on every pair of the training half
  (independent of any draw);
* retrieval on the test half: each test image is a query against the other test images
  (``warca_jax.evaluation.evaluate``; the query itself is junk), rank-1 and mAP;
* wall time of the fit (warca_jax: including compilation; metric-learn: its ``fit`` only);
* dA: ||A' - A'_ml|| / ||A'_ml|| (Frobenius) with A' = A / f(A) on the drawn pairs,
  against metric-learn's ``MMC`` on the same pairs.

Run:
  python benchmarks/bench_mmc_vs_metric_learn.py \\
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

from benchmarks.digits import load  # noqa: E402
from warca_jax import config_files, defaults  # noqa: E402

get_config = config_files.load_config_module("configs/mmc.py").get_config  # noqa: E402
from warca_jax.evaluation import evaluate  # noqa: E402
from warca_jax.methods import mmc  # noqa: E402

ML_SCRIPT = """
import sys, time, numpy as np, metric_learn
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
if sys.argv[4] == "supervised":
    model = metric_learn.MMC_Supervised(random_state=0)
    t = time.perf_counter()
    model.fit(x, y)
else:
    sim, dis = np.load(sys.argv[4]), np.load(sys.argv[5])
    pairs = np.concatenate([sim, dis])
    target = np.concatenate([np.ones(len(sim)), -np.ones(len(dis))])
    model = metric_learn.MMC(tol=1e-6, preprocessor=x)
    t = time.perf_counter()
    model.fit(pairs, target)
seconds = time.perf_counter() - t
np.save(sys.argv[3], model.get_mahalanobis_matrix())
print(seconds, metric_learn.__version__, getattr(model, "n_iter_", -1))
"""


def retrieval(a, x, y):
    w, v = np.linalg.eigh(np.asarray(a, np.float64))
    z = x.astype(np.float64) @ (v * np.sqrt(np.maximum(w, 0.0)))
    cams = np.arange(len(y))  # each query's own entry is junk (same id, same camera)
    res = evaluate(z.astype(np.float32), z.astype(np.float32), y, y, cams, cams)
    return res["rank1"], res["mAP"]


def run_metric_learn(python, xtr, ytr, pairs=None):
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, f) for f in ("x.npy", "y.npy", "a.npy")]
        np.save(paths[0], xtr.astype(np.float64))
        np.save(paths[1], ytr)
        extra = ["supervised"]
        if pairs is not None:
            extra = [os.path.join(tmp, "s.npy"), os.path.join(tmp, "d.npy")]
            np.save(extra[0], pairs.similar)
            np.save(extra[1], pairs.dissimilar)
        out = subprocess.run(
            [python, "-c", ML_SCRIPT, *paths, *extra], capture_output=True, text=True
        )
        if out.returncode != 0:
            return None, out.stderr.strip().splitlines()[-1]
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
    cfg = get_config().method
    drawn = mmc.draw_pairs(ytr, cfg.num_constraints, 0)
    i, j = np.triu_indices(len(ytr), k=1)
    same = ytr[i] == ytr[j]
    every = (np.stack([i[same], j[same]], 1), np.stack([i[~same], j[~same]], 1))
    rows = [("Euclidean (A = I)", np.eye(xtr.shape[1]), 0.0, "-")]
    for name, overrides in [("defaults", {}), ("projection='exact'", {"projection": "exact"})]:
        t = time.perf_counter()
        metric, hist = mmc.fit(xtr, ytr, defaults.overridden(cfg, **overrides), seed=0)
        seconds = time.perf_counter() - t
        rows.append(
            (f"warca_jax MMC, {name}", metric.mahalanobis_matrix(), seconds, hist[-1]["stopped"])
        )
    reference = None
    if args.metric_learn_python:
        for name, pairs in [
            ("MMC_Supervised(random_state=0)", None),
            ("MMC on warca_jax's pairs", drawn),
        ]:
            out = run_metric_learn(args.metric_learn_python, xtr, ytr, pairs)
            if out[0] is None:  # metric-learn raised: say what, and go on
                print(f"metric-learn {name} failed: {out[1]}")
                continue
            a, seconds, version, n_iter = out
            rows.append((f"metric-learn {version} {name}", a, seconds, f"n_iter_ {n_iter}"))
            reference = a if pairs is not None else reference
    print(
        f"pairs: {len(drawn.similar)} similar + {len(drawn.dissimilar)} dissimilar drawn from "
        f"seed 0 ('drawn'); every pair of the training half: {len(every[0])} + "
        f"{len(every[1])} ('all'). objective: g(A) / sqrt(f(A)). dA: ||A' - A'_ml||_F / "
        "||A'_ml||_F, A' = A / f_drawn(A), against metric-learn's MMC on the drawn pairs."
    )
    head = f"| {'learner':<46} | {'obj drawn':>9} | {'obj all':>8} | {'rank-1':>6} | "
    head += f"{'mAP':>6} | {'fit s':>6} | {'dA':>6} | stopped |"
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")

    def normalised(a):
        return a / mmc.objective(a, xtr, drawn.similar, drawn.dissimilar)["similar"]

    for name, a, seconds, stopped in rows:
        on_drawn = mmc.objective(a, xtr, drawn.similar, drawn.dissimilar)["objective"]
        on_all = mmc.objective(a, xtr, *every)["objective"]
        r1, ap = retrieval(a, xte, yte)
        da = "-"
        if reference is not None:
            ref = normalised(reference)
            da = f"{np.linalg.norm(normalised(a) - ref) / np.linalg.norm(ref):6.3f}"
        print(
            f"| {name:<46} | {on_drawn:9.2f} | {on_all:8.1f} | {r1:6.1f} | {ap:6.1f} | "
            f"{seconds:6.1f} | {da:>6} | {stopped} |"
        )


if __name__ == "__main__":
    main()
