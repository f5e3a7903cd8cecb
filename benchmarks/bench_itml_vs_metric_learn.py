"""warca_jax's ITML (its defaults) against metric-learn's ITML on scikit-learn's digits.

Data: ``sklearn.datasets.load_digits`` (1,797 x 64, 10 classes, bundled with
scikit-learn), split once 50/50 stratified (``random_state=0``), standardised with the
training half's mean and standard deviation (constant pixels left at 0).

Learners, all on the training half:

* warca_jax ITML with ``configs/itml.py``'s defaults (gamma 1, tol 1e-3, at most 1,000
  sweeps, 20 C^2 = 2,000 pairs of each kind drawn from seed 0, identity prior, bounds
  the 5th / 95th percentiles of the squared distances, as the paper's d_A);
* warca_jax ITML with ``bounds="euclidean"``: metric-learn's bounds (percentiles of the
  plain Euclidean distances, compared with squared Mahalanobis distances);
* metric-learn 0.7.0's ``ITML_Supervised(random_state=0)`` (its defaults, its own pairs),
  when ``--metric_learn_python`` names an interpreter that has it (a throwaway virtualenv,
  never a dependency of this project); it runs in a subprocess;
* metric-learn 0.7.0's ``ITML`` given warca_jax's constraints of the second row (the same
  pair differences, in the same order, and the same bounds u, l): the same problem, so that
  the two solvers can be compared matrix to matrix (``rel diff``: ||A - A_ml||_F / ||A_ml||_F
  against that row's A_ml).

Evaluation, the same for every A = L^T L:

* ``logdet div``: D_ld(A, I) = tr A - log det A - D, ITML's distance to its prior;
* ``viol``: the share of warca_jax's default constraints (seed 0, squared bounds u, l) that
  A violates (similar pairs with d_A > u, dissimilar ones with d_A < l);
* retrieval on the test half: each test image a query against the other test images
  (``warca_jax.evaluation.evaluate``; the query itself is junk), rank-1 and mAP;
* wall time of the fit (warca_jax: including compilation; metric-learn: its ``fit`` only,
  measured inside the subprocess) and the sweeps run.

Run:
  python benchmarks/bench_itml_vs_metric_learn.py \\
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
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.digits import load, retrieval  # noqa: E402
from warca_jax import config_files, defaults  # noqa: E402

get_config = config_files.load_config_module("configs/itml.py").get_config  # noqa: E402
from warca_jax.methods import itml  # noqa: E402

# argv: x.npy y.npy out.npy [pairs.npy bounds.npy]; with pairs, ITML on those pair
# differences (pairs[:, 0] - pairs[:, 1]), +1 for the first n_similar rows, -1 after.
ML_SCRIPT = """
import sys, time, warnings, numpy as np, metric_learn
warnings.simplefilter("ignore")
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
if len(sys.argv) > 4:
    pairs, b = np.load(sys.argv[4]), np.load(sys.argv[5])
    model, args = metric_learn.ITML(), (pairs, np.where(np.arange(len(pairs)) < b[2], 1, -1))
    kwargs = dict(bounds=b[:2])
else:
    model, args, kwargs = metric_learn.ITML_Supervised(random_state=0), (x, y), {}
t = time.perf_counter()
model.fit(*args, **kwargs)
seconds = time.perf_counter() - t
np.save(sys.argv[3], model.components_)
print(seconds, metric_learn.__version__, model.n_iter_ + 1)
"""


def run_metric_learn(python, xtr, ytr, pairs=None, bounds=None):
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, f) for f in ("x.npy", "y.npy", "l.npy", "p.npy", "b.npy")]
        np.save(paths[0], xtr.astype(np.float64))
        np.save(paths[1], ytr)
        if pairs is not None:
            np.save(paths[3], pairs)
            np.save(paths[4], np.asarray(bounds, np.float64))
        else:
            paths = paths[:3]
        out = subprocess.run(
            [python, "-c", ML_SCRIPT, *paths], check=True, capture_output=True, text=True
        )
        seconds, version, n_iter = out.stdout.split()[-3:]
        return np.load(paths[2]), float(seconds), version, int(n_iter)


def same_constraints(xtr, ytr, cfg):
    """warca_jax's constraints for ``cfg`` as metric-learn's pairs [P, 2, D] (difference, 0)
    and (u, l, number of similar pairs)."""
    v, delta, _, (u, low) = itml.itml_constraints(xtr, ytr, cfg, np.random.default_rng(0))
    pairs = np.stack([v, np.zeros_like(v)], axis=1).astype(np.float64)
    return pairs, (u, low, int(np.sum(delta > 0)))


def measures(lmap, v, delta, xi0):
    a = np.asarray(lmap, np.float64).T @ np.asarray(lmap, np.float64)
    div = itml.objective(a, xi0, xi0, np.eye(a.shape[0]), 1.0)["logdet_div"]
    p = np.asarray(itml.constraint_distances(jnp.asarray(a, jnp.float32), jnp.asarray(v)))
    viol = float(np.mean(np.where(delta > 0, p > xi0, p < xi0)))
    return a, div, viol


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metric_learn_python", default="", help="python with metric-learn")
    args = ap.parse_args()
    xtr, xte, ytr, yte = load()
    print(
        f"digits: {len(ytr)} train / {len(yte)} test images, {xtr.shape[1]}-d, standardised; "
        f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPU cores"
    )
    rows = [("Euclidean (A = I)", np.eye(xtr.shape[1], dtype=np.float32), 0.0, "-")]
    ml_cfg = defaults.overridden(get_config().method, bounds="euclidean")
    for name, cfg in [
        ("warca_jax ITML, defaults", get_config().method),
        ("warca_jax ITML, bounds='euclidean'", ml_cfg),
    ]:
        t = time.perf_counter()
        metric, hist = itml.fit(xtr, ytr, cfg)
        seconds = time.perf_counter() - t
        rows.append((name, metric.projection, seconds, hist[-1]["stopped"]))
    same_row = None
    if args.metric_learn_python:
        lmap, seconds, version, n_iter = run_metric_learn(args.metric_learn_python, xtr, ytr)
        name = f"metric-learn {version} ITML_Supervised()"
        rows.append((name, lmap, seconds, f"{n_iter} iterations"))
        pairs, bounds = same_constraints(xtr, ytr, ml_cfg)
        lmap, seconds, _, n_iter = run_metric_learn(
            args.metric_learn_python, xtr, ytr, pairs=pairs, bounds=bounds
        )
        same_row = len(rows)
        name = f"metric-learn {version} ITML, row 3's constraints"
        rows.append((name, lmap, seconds, f"{n_iter} iterations"))
    v, delta, xi0, (u, low) = itml.itml_constraints(
        xtr, ytr, get_config().method, np.random.default_rng(0)
    )
    print(
        f"constraints of the defaults: {int(np.sum(delta > 0))} similar + "
        f"{int(np.sum(delta < 0))} dissimilar, u = {u:.4g}, l = {low:.4g} (squared); "
        "retrieval: test half, each image a query against the other test images."
    )
    mats = {}
    head = f"| {'learner':<48} | {'logdet div':>10} | {'viol':>6} | {'rank-1':>6} | "
    head += f"{'mAP':>6} | {'fit s':>6} | {'rel diff':>8} | stopped |"
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    for i, (name, lmap, seconds, stopped) in enumerate(rows):
        mats[i], div, viol = measures(lmap, v, delta, xi0)
        r1, ap = retrieval(lmap, xte, yte)
        rel = "-"
        if same_row is not None and i in (2, same_row):
            ref = mats.get(same_row)
            if ref is None:  # row 2 is printed before the reference: computed here
                ref = measures(rows[same_row][1], v, delta, xi0)[0]
            rel = f"{np.linalg.norm(mats[i] - ref) / np.linalg.norm(ref):8.2e}"
        print(
            f"| {name:<48} | {div:10.3f} | {viol:6.3f} | {r1:6.1f} | {ap:6.1f} | "
            f"{seconds:6.1f} | {rel:>8} | {stopped} |"
        )


if __name__ == "__main__":
    main()
