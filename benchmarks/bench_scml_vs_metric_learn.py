"""warca_jax's SCML against metric-learn's SCML on scikit-learn's digits.

Data: ``sklearn.datasets.load_digits`` (1,797 x 64, 10 classes), split once 50/50
stratified (``random_state=0``), standardised with the training half's mean and standard
deviation (constant pixels left at 0), as benchmarks/bench_lmnn_vs_metric_learn.py does.

Learners, all on the training half, all with metric-learn's defaults (triplets from 3
genuine and 10 impostor neighbours, beta 1e-5, gamma 5e-3, 10,000 steps of 10 triplets,
F checked every 500 steps, the best kept):

* warca_jax SCML with ``configs/scml.py``'s defaults (its 'lda' basis: k-means++ from
  seed 0, local LDAs with a ridge), seed 0;
* metric-learn 0.7.0's ``SCML_Supervised(random_state=0)`` (its own 'lda' basis from
  scikit-learn's KMeans and LDA, its own minibatches);
* metric-learn's weakly supervised ``SCML`` given warca_jax's basis and triplets (same
  problem, other minibatches: agreement of the optimisers); its ``fit`` refuses an array
  basis in 0.7.0 (it compares the array with a string), so the script calls ``_fit`` with
  the basis, as ``SCML_Supervised.fit`` does with its own;

metric-learn runs in a subprocess of the interpreter ``--metric_learn_python`` names (a
throwaway virtualenv, never a dependency of this project).

Evaluation, the same for every W: ``warca_jax.methods.scml.objective`` on warca_jax's kNN
triplets of the training half, F = mean [1 + d_M(a, p) - d_M(a, n)]_+ + beta tr(M), which
is SCML's objective for any basis of unit rows (beta ||w||_1 = beta tr(M)); the share of
violated triplets; rank-1 and mAP on the test half (each test image a query against the
other test images); the rank of M (the active bases); fit seconds.

Run:
  python benchmarks/bench_scml_vs_metric_learn.py \\
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

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.digits import load, retrieval  # noqa: E402
from warca_jax import config_files  # noqa: E402

get_config = config_files.load_config_module("configs/scml.py").get_config  # noqa: E402
from warca_jax.methods import constraints, scml  # noqa: E402

ML_SCRIPT = """
import sys, json, time, warnings, numpy as np, metric_learn
x, y, triplets, basis = (np.load(p) for p in sys.argv[1:5])
opts = json.loads(sys.argv[6])
warnings.simplefilter("ignore")
if opts["supervised"]:
    model = metric_learn.SCML_Supervised(random_state=0)
    t = time.perf_counter()
    model.fit(x, y)
else:
    # SCML.fit with an array basis fails in 0.7.0 (``self.basis == 'triplet_diffs'`` on an
    # array); _fit with the basis is what SCML_Supervised.fit calls after building its own.
    model = metric_learn.SCML(random_state=0)
    t = time.perf_counter()
    model._fit(x[triplets], basis=basis, n_basis=basis.shape[0])
seconds = time.perf_counter() - t
np.save(sys.argv[5], model.components_)
print(json.dumps({"seconds": seconds, "version": metric_learn.__version__}))
"""


def run_metric_learn(python, x, y, triplets, basis, *, supervised):
    with tempfile.TemporaryDirectory() as tmp:
        names = ("x.npy", "y.npy", "t.npy", "b.npy", "l.npy")
        paths = [os.path.join(tmp, f) for f in names]
        for path, arr in zip(paths, (x.astype(np.float64), y, triplets, basis), strict=False):
            np.save(path, arr)
        opts = json.dumps({"supervised": supervised})
        out = subprocess.run(
            [python, "-c", ML_SCRIPT, *paths, opts], check=True, capture_output=True, text=True
        )
        info = json.loads(out.stdout.strip().splitlines()[-1])
        return np.load(paths[4]), info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metric_learn_python", default="", help="python with metric-learn")
    args = ap.parse_args()
    xtr, xte, ytr, yte = load()
    cfg = get_config().method
    triplets = constraints.knn_triplets(xtr, ytr, k_same=cfg.k_genuine, k_other=cfg.k_impostor)
    rows = [("Euclidean", np.eye(xtr.shape[1], dtype=np.float32), 0.0, "")]
    t = time.perf_counter()
    metric, hist = scml.fit(xtr, ytr, cfg, seed=0)
    rows.append(("warca_jax SCML, defaults", metric.projection, time.perf_counter() - t, ""))
    if args.metric_learn_python:
        basis = scml.lda_basis(
            xtr,
            ytr,
            n_basis=int(cfg.n_basis),
            kmeans_iters=int(cfg.kmeans_iters),
            key=jax.random.split(jax.random.PRNGKey(0))[0],  # fit's basis key for seed 0
        )
        for supervised in (True, False):
            w, info = run_metric_learn(
                args.metric_learn_python, xtr, ytr, triplets, basis, supervised=supervised
            )
            name = (
                f"metric-learn {info['version']} SCML_Supervised(random_state=0)"
                if supervised
                else "metric-learn SCML, warca_jax's basis and triplets"
            )
            rows.append((name, w, info["seconds"], ""))
    print(
        f"digits: {len(ytr)} train / {len(yte)} test images, {xtr.shape[1]}-d standardised; "
        f"{len(triplets)} kNN triplets (k_genuine={cfg.k_genuine}, k_impostor="
        f"{cfg.k_impostor}); objective: scml.objective on them (beta={cfg.beta:g}). "
        f"warca_jax: {hist[-1]['stopped']}."
    )
    head = f"| {'learner':<52} | {'objective':>9} | {'hinge':>8} | {'violated':>8} | "
    head += f"{'rank-1':>6} | {'mAP':>6} | {'rank M':>6} | {'fit s':>6} |"
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    for name, w, seconds, _ in rows:
        obj = scml.objective(w, xtr, triplets, beta=cfg.beta)
        r1, ap = retrieval(w, xte, yte)
        rank = np.linalg.matrix_rank(w.astype(np.float64))
        print(
            f"| {name:<52} | {obj['loss']:9.4f} | {obj['hinge']:8.4f} | "
            f"{obj['violated_frac']:8.4f} | {r1:6.1f} | {ap:6.1f} | {rank:6d} | {seconds:6.1f} |"
        )


if __name__ == "__main__":
    main()
