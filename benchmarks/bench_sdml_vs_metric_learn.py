"""warca_jax's SDML against metric-learn's SDML and scikit-learn's graphical lasso on digits.

Data: ``sklearn.datasets.load_digits`` (1,797 x 64, 10 classes, bundled with
scikit-learn), split once 50/50 stratified (``random_state=0``), standardised with the
training half's mean and standard deviation (constant pixels left at 0).

Problems, all from the training half's 20 C^2 = 2,000 similar and 2,000 dissimilar
pairs (warca_jax: drawn from seed 0) and the identity prior, alpha = 0.01:

* P_norm: ``configs/sdml.py``'s default, the normalized loss matrix, balance_param 0.5;
* P_sum: metric-learn's loss matrix, the pairs' sum (``configs/sdml.py:metric_learn``).
  At metric-learn's balance_param 0.5 its diagonal is negative (no minimiser: warca_jax
  refuses it); the rows below use half the largest balance_param for which P_sum is
  positive definite (named by that refusal), for warca_jax and metric-learn alike.

Learners:

* warca_jax SDML (ADMM, float32) on P_norm and on P_sum;
* ``sklearn.covariance.graphical_lasso(P_norm, 0.01)`` (this environment's scikit-learn,
  its defaults): the same problem as the first row, another solver (``rel diff``:
  ||M - M_ref||_F / ||M_ref||_F against it);
* metric-learn 0.7.0 (in a subprocess of ``--metric_learn_python``, a throwaway virtualenv):
  ``SDML_Supervised(random_state=0)`` with its defaults, then, because metric-learn 0.7.0
  passes ``cov_init`` to scikit-learn's ``graphical_lasso``, which scikit-learn 1.7 no
  longer takes, with a shim that drops that argument (scikit-learn then starts from P
  itself): ``SDML_Supervised`` at the feasible balance_param on its own pairs, and ``SDML``
  on warca_jax's pairs (the pairs' differences, same order), i.e. on P_sum itself (``rel
  diff`` against warca_jax's P_sum row).

Evaluation, the same for every M = L^T L: the SDML objective
f(M) = tr(M P) - log det M + alpha sum_{i != j} |M_ij| (``warca_jax.methods.sdml.objective``)
on P_norm and on P_sum; the share of zero off-diagonal entries (|M_ij| < 1e-5 max |M|);
retrieval on the test half (each test image a query against the other test images,
``warca_jax.evaluation.evaluate``), rank-1 and mAP; fit seconds (warca_jax including
compilation; metric-learn inside the subprocess).

Run:
  python benchmarks/bench_sdml_vs_metric_learn.py \\
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
import warnings

import jax
import numpy as np
from sklearn.covariance import graphical_lasso

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.digits import load, retrieval  # noqa: E402
from warca_jax import config_files, defaults  # noqa: E402

get_config = config_files.load_config_module("configs/sdml.py").get_config  # noqa: E402
from warca_jax.methods import constraints, sdml  # noqa: E402

# argv: x.npy y.npy out.npy job.json; job: {"shim": bool, "balance": float or null,
# "n_similar": int or absent}; with n_similar, SDML on the pairs in pairs.npy.
ML_SCRIPT = """
import json, sys, time, warnings, numpy as np, metric_learn, metric_learn.sdml as ms
import sklearn.covariance
warnings.simplefilter("ignore")
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
job = json.loads(open(sys.argv[4]).read())
if job["shim"]:
    def graphical_lasso(emp_cov, alpha, cov_init=None, **kwargs):
        return sklearn.covariance.graphical_lasso(emp_cov, alpha, **kwargs)
    ms.graphical_lasso = graphical_lasso
kw = {} if job["balance"] is None else {"balance_param": job["balance"]}
if "n_similar" in job:
    pairs = np.load(sys.argv[5])
    model = metric_learn.SDML(**kw)
    args = (pairs, np.where(np.arange(len(pairs)) < job["n_similar"], 1, -1))
else:
    model, args = metric_learn.SDML_Supervised(random_state=0, **kw), (x, y)
t = time.perf_counter()
try:
    model.fit(*args)
except Exception as e:
    print("ERROR", metric_learn.__version__, type(e).__name__ + ": " + str(e)[-160:])
    sys.exit(0)
seconds = time.perf_counter() - t
np.save(sys.argv[3], model.components_)
print("OK", metric_learn.__version__, seconds)
"""


def run_metric_learn(python, xtr, ytr, job, pairs=None):
    """(M, seconds, version) or (None, error message, version)."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, f) for f in ("x.npy", "y.npy", "l.npy", "j.json", "p.npy")]
        np.save(paths[0], xtr.astype(np.float64))
        np.save(paths[1], ytr)
        with open(paths[3], "w") as f:
            json.dump(job, f)
        if pairs is not None:
            np.save(paths[4], pairs)
        out = subprocess.run(
            [python, "-c", ML_SCRIPT, *paths], check=True, capture_output=True, text=True
        )
        status, version, rest = out.stdout.strip().splitlines()[-1].split(" ", 2)
        if status == "ERROR":
            return None, rest, version
        comps = np.load(paths[2])
        return comps.T @ comps, float(rest), version


def fit_ours(xtr, ytr, **overrides):
    cfg = defaults.overridden(get_config().method, **overrides)
    t = time.perf_counter()
    metric, hist = sdml.fit(xtr, ytr, cfg)
    return metric.mahalanobis_matrix().astype(np.float64), time.perf_counter() - t, hist


def feasible_balance(xtr, ytr) -> float:
    """Half the largest balance_param for which metric-learn's P (the sum) is definite, as
    warca_jax's refusal of balance_param 0.5 names it."""
    cfg = get_config("metric_learn").method
    try:
        sdml.fit(xtr, ytr, cfg)
    except ValueError as e:
        print(f"warca_jax SDML, metric_learn variant (sum, balance_param 0.5): refused: {e}")
        return 0.5 * float(str(e).split(" below ")[1].split(",")[0])
    return float(cfg.balance_param)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metric_learn_python", default="", help="python with metric-learn")
    args = ap.parse_args()
    xtr, xte, ytr, yte = load()
    print(
        f"digits: {len(ytr)} train / {len(yte)} test images, {xtr.shape[1]}-d, standardised; "
        f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPU cores"
    )
    eta = feasible_balance(xtr, ytr)
    alpha = float(get_config().method.sparsity_param)
    p_norm = sdml.lasso_input(xtr, ytr, get_config().method, np.random.default_rng(0))
    sum_cfg = defaults.overridden(get_config("metric_learn").method, balance_param=eta)
    p_sum = sdml.lasso_input(xtr, ytr, sum_cfg, np.random.default_rng(0))
    rows = [("Euclidean (M = I)", np.eye(xtr.shape[1]), 0.0, "-", None)]
    m, sec, hist = fit_ours(xtr, ytr)
    rows.append(("warca_jax SDML, defaults (P_norm)", m, sec, hist[-1]["stopped"], None))
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, ref = graphical_lasso(p_norm, alpha)
    rows.append(("sklearn graphical_lasso(P_norm)", ref, time.perf_counter() - t, "-", None))
    rows[1] = rows[1][:4] + (ref,)
    m, sec, hist = fit_ours(xtr, ytr, loss_matrix="sum", balance_param=eta)
    rows.append((f"warca_jax SDML, P_sum (eta {eta:.3g})", m, sec, hist[-1]["stopped"], None))
    if args.metric_learn_python:
        py = args.metric_learn_python
        _, err, version = run_metric_learn(py, xtr, ytr, {"shim": False, "balance": None})
        print(f"metric-learn {version} SDML_Supervised(), defaults: {err}")
        _, err, _ = run_metric_learn(py, xtr, ytr, {"shim": True, "balance": None})
        print(f"metric-learn {version} SDML_Supervised(), defaults, shim: {err}")
        job = {"shim": True, "balance": eta}
        m, sec, _ = run_metric_learn(py, xtr, ytr, job)
        rows.append((f"metric-learn SDML_Supervised(eta {eta:.3g}), shim", m, sec, "-", None))
        pairs = constraints.label_pairs(ytr, 20 * 10**2, np.random.default_rng(0))
        idx = np.concatenate([pairs.similar, pairs.dissimilar])
        diff = (xtr[idx[:, 0]] - xtr[idx[:, 1]]).astype(np.float64)
        job["n_similar"] = len(pairs.similar)
        m, sec, _ = run_metric_learn(py, xtr, ytr, job, np.stack([diff, 0 * diff], axis=1))
        rows.append(("metric-learn SDML on P_sum's pairs, shim", m, sec, "-", None))
        rows[3] = rows[3][:4] + (m,)
    print(f"objective f on P_norm and on P_sum (alpha {alpha:g}); retrieval on the test half.")
    head = f"| {'learner':<44} | {'f(P_norm)':>9} | {'f(P_sum)':>9} | {'zeros':>5} | "
    head += f"{'rank-1':>6} | {'mAP':>6} | {'fit s':>6} | {'rel diff':>8} | stopped |"
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    for name, m, sec, stopped, ref in rows:
        off = ~np.eye(len(m), dtype=bool)
        zeros = float(np.mean(np.abs(m[off]) < 1e-5 * np.abs(m).max()))
        r1, ap = retrieval(sdml.linalg.psd_factor(m), xte, yte)
        fn, fs = sdml.objective(m, p_norm, alpha), sdml.objective(m, p_sum, alpha)
        rel = "-" if ref is None else f"{np.linalg.norm(m - ref) / np.linalg.norm(ref):8.2e}"
        print(
            f"| {name:<44} | {fn:9.3f} | {fs:9.3f} | {zeros:5.2f} | {r1:6.1f} | {ap:6.1f} | "
            f"{sec:6.2f} | {rel:>8} | {stopped} |"
        )


if __name__ == "__main__":
    main()
