"""warca_jax's RCA against metric-learn's RCA on scikit-learn's digits.

Data: ``sklearn.datasets.load_digits`` (1,797 x 64, 10 classes, bundled with
scikit-learn), split once 50/50 stratified (``random_state=0``), standardised with the
training half's mean and standard deviation (constant pixels left at 0). Three of the 64
pixels are constant on the training half and more never differ within a chunklet, so with
metric-learn's default 100 chunklets of 2 the within-chunklet covariance C is singular
(8 zero eigenvalues for the chunklets of seed 0); a second block of rows projects both
halves on the training half's top 40 principal components, where C is invertible, to
compare the closed forms.

Learners, all on the training half:

* warca_jax RCA with ``configs/rca.py``'s defaults (100 chunklets of 2 drawn from seed 0,
  ridge reg = 1e-3 * trace(C) / D), and with reg = 1e-9 (next to no ridge);
* metric-learn 0.7.0's ``RCA_Supervised(random_state=0)`` (its defaults: 100 chunklets of
  2 drawn by its own generator, no ridge; 200 of 4 in the second block), when
  ``--metric_learn_python`` names an interpreter that has it (a throwaway virtualenv,
  never a dependency of this project);
* metric-learn's weakly supervised ``RCA`` given warca_jax's chunklets of seed 0, so that
  both solve the same problem: the agreement of the two closed forms;
* the same with 20 output dimensions (``dim=20`` / ``n_components=20``).

Evaluation, the same for every W: retrieval on the test half, each test image a query
against the other test images (``warca_jax.evaluation.evaluate``), rank-1 and mAP; the fit
time (metric-learn's measured in its subprocess); the relative difference
||M - M_ml||_F / ||M_ml||_F of the Mahalanobis matrices M = W^T W against metric-learn's
RCA on the same chunklets; and the largest eigenvalue of M (RCA has no objective to
compare; M = C^{-1} shows the ridge where C is singular).

Run:
  python benchmarks/bench_rca_vs_metric_learn.py \\
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

get_config = config_files.load_config_module("configs/rca.py").get_config  # noqa: E402
from warca_jax.methods import constraints, rca  # noqa: E402

PCA_DIM = 40  # the second block: the training half's top principal components

ML_SCRIPT = """
import sys, json, time, warnings, numpy as np, metric_learn
x, y, chunks = (np.load(p) for p in sys.argv[1:4])
opts = json.loads(sys.argv[5])
if opts["supervised"]:
    model = metric_learn.RCA_Supervised(
        n_components=opts["dim"], n_chunks=opts["n_chunks"], chunk_size=opts["chunk_size"],
        random_state=0)
else:
    model = metric_learn.RCA(n_components=opts["dim"])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    t = time.perf_counter()
    model.fit(x, y if opts["supervised"] else chunks)
    seconds = time.perf_counter() - t
np.save(sys.argv[4], model.components_)
print(json.dumps({"seconds": seconds, "version": metric_learn.__version__,
                  "warnings": len(caught)}))
"""


def run_metric_learn(python, x, y, chunks, *, supervised, dim, n_chunks, chunk_size):
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, f) for f in ("x.npy", "y.npy", "c.npy", "l.npy")]
        np.save(paths[0], x.astype(np.float64))
        np.save(paths[1], y)
        np.save(paths[2], chunks)
        opts = json.dumps(
            {
                "supervised": supervised,
                "dim": dim or None,
                "n_chunks": n_chunks,
                "chunk_size": chunk_size,
            }
        )
        out = subprocess.run(
            [python, "-c", ML_SCRIPT, *paths, opts], check=True, capture_output=True, text=True
        )
        info = json.loads(out.stdout.strip().splitlines()[-1])
        return np.load(paths[3]), info


def rel_diff(w, ref):
    if ref is None:
        return "-"
    m, m_ref = w.T.astype(np.float64) @ w, ref.T @ ref
    if not np.all(np.isfinite(m_ref)):
        return "ref NaN"
    return f"{np.linalg.norm(m - m_ref) / np.linalg.norm(m_ref):.2e}"


def block(title, xtr, ytr, python, *, n_chunks, chunk_size):
    """Rows of the table for one version of the data and one chunklet setting."""
    d = xtr.shape[1]
    chunks = constraints.chunklets(ytr, n_chunks, chunk_size, np.random.default_rng(0))
    title = f"{title}, {n_chunks}x{chunk_size}"
    rows = []
    kw = dict(n_chunks=n_chunks, chunk_size=chunk_size)
    for dim in (0, 20):
        ref = None
        if python:
            ref, info = run_metric_learn(python, xtr, ytr, chunks, supervised=False, dim=dim, **kw)
        for reg in (1e-3, 1e-9):
            cfg = defaults.overridden(get_config().method, dim=dim, reg=reg, **kw)
            t = time.perf_counter()
            metric, _ = rca.fit(xtr, ytr, cfg, seed=0)
            name = f"{title}: warca_jax RCA dim={dim or d} reg={reg:g}"
            rows.append((name, metric.projection, time.perf_counter() - t, ref))
        if python:
            name = f"{title}: metric-learn {info['version']} RCA dim={dim or d}, same chunklets"
            rows.append((name, ref, info["seconds"], None))
    if python:
        w, info = run_metric_learn(python, xtr, ytr, chunks, supervised=True, dim=0, **kw)
        name = f"{title}: metric-learn RCA_Supervised(random_state=0)"
        rows.append((name, w, info["seconds"], None))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metric_learn_python", default="", help="python with metric-learn")
    args = ap.parse_args()
    xtr, xte, ytr, yte = load()
    keep = np.ptp(xtr, axis=0) > 0
    mean, comps = linalg.pca(xtr, variance=1.0, max_dim=PCA_DIM)
    ptr, pte = (xtr - mean) @ comps.T, (xte - mean) @ comps.T
    print(
        f"digits: {len(ytr)} train / {len(yte)} test images, {xtr.shape[1]}-d standardised "
        f"({int((~keep).sum())} pixels constant on the training half); rel. diff: "
        "||M - M_ml||_F / ||M_ml||_F against metric-learn's RCA on the same chunklets."
    )
    python = args.metric_learn_python
    rows = [("64-d: Euclidean", np.eye(xtr.shape[1], dtype=np.float32), 0.0, None)]
    rows += block("64-d", xtr, ytr, python, n_chunks=100, chunk_size=2)
    rows += block(f"PCA {PCA_DIM}-d", ptr, ytr, python, n_chunks=100, chunk_size=2)
    head = f"| {'learner':<62} | {'rank-1':>6} | {'mAP':>6} | {'max eig M':>9} | "
    head += f"{'rel. diff M':>11} | {'fit s':>6} |"
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    for name, w, seconds, ref in rows:
        d = w.shape[1]
        xt = xte if d == xte.shape[1] else pte
        if np.all(np.isfinite(w)):
            r1, ap = retrieval(w, xt, yte)
            top = f"{np.linalg.eigvalsh(w.T.astype(np.float64) @ w)[-1]:9.3g}"
            r1, ap = f"{r1:6.1f}", f"{ap:6.1f}"
        else:
            r1 = ap = f"{'NaN':>6}"
            top = f"{'NaN':>9}"
        print(f"| {name:<62} | {r1} | {ap} | {top} | {rel_diff(w, ref):>11} | {seconds:6.2f} |")


if __name__ == "__main__":
    main()
