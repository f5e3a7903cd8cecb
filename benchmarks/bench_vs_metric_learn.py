"""warca_jax's learners of metric-learn against metric-learn 0.7.0 on scikit-learn's digits.

  python -m benchmarks.bench_vs_metric_learn --learner=NAME \\
      [--metric_learn_python=/work/exp/ml_venv/bin/python]

NAME is one of itml, lmnn, lsml, mmc, nca, rca, scml and sdml; each prints its own table
(its rows and measures: the docstring of ``NAME_table`` below).

Data: ``sklearn.datasets.load_digits`` (1,797 x 64, 10 classes, bundled with
scikit-learn), split once 50/50 stratified (``random_state=0``), standardised with the
training half's mean and standard deviation (constant pixels left at 0), float32.

metric-learn is never a dependency of this project: ``--metric_learn_python`` names an
interpreter that has it (a throwaway virtualenv outside the repository), and metric-learn's
rows run in a subprocess of it (``run_peer``: the learner's script in ``PEERS`` reads its
inputs from one .npz, saves its matrix to a .npy and prints its fit seconds, measured
around its ``fit`` alone, as a JSON line). Without the flag the table has warca_jax's rows
alone.

Retrieval, the same for every learner: each test image a query against the other test
images (``warca_jax.evaluation.evaluate``; the query itself is junk), rank-1 and mAP.
warca_jax's fit seconds include compilation.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from sklearn.covariance import graphical_lasso
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from warca_jax.evaluation import evaluate
from warca_jax.io import config_files
from warca_jax.maths import linalg
from warca_jax.methods import constraints, itml, lmnn, lsml, mmc, nca, rca, scml, sdml
from warca_jax.runs import defaults

LEARNERS = ("itml", "lmnn", "lsml", "mmc", "nca", "rca", "scml", "sdml")
_LEARNER = flags.DEFINE_enum("learner", None, LEARNERS, "the learner compared", required=True)
_PYTHON = flags.DEFINE_string("metric_learn_python", "", "python with metric-learn")

PCA_DIM = 40  # LSML's covariance-prior rows and RCA's second block: the top principal axes

# metric-learn's side, one script per learner, run as PEER_HEAD + PEERS[name] + PEER_TAIL
# with argv: in.npz (x, float64; y; the learner's other arrays), out.npy, options (JSON).
# Each sets ``result`` (the matrix saved) and ``info`` (printed, with the version).
PEER_HEAD = """
import json, sys, time, warnings
import numpy as np, metric_learn
inputs, out, opts = np.load(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
x, y = inputs["x"], inputs["y"]
"""
PEER_TAIL = """
np.save(out, result)
print(json.dumps(dict(info, version=metric_learn.__version__)))
"""
PEERS = {
    # with pairs: ITML on those pair differences (pairs[:, 0] - pairs[:, 1]), +1 for the
    # first bounds[2] rows, -1 after, between the bounds u, l = bounds[:2]
    "itml": """
warnings.simplefilter("ignore")
if "pairs" in inputs:
    pairs, b = inputs["pairs"], inputs["bounds"]
    model, args = metric_learn.ITML(), (pairs, np.where(np.arange(len(pairs)) < b[2], 1, -1))
    kwargs = dict(bounds=b[:2])
else:
    model, args, kwargs = metric_learn.ITML_Supervised(random_state=0), (x, y), {}
t = time.perf_counter()
model.fit(*args, **kwargs)
info = {"seconds": time.perf_counter() - t, "n_iter": int(model.n_iter_) + 1}
result = model.components_
""",
    "lmnn": """
model = metric_learn.LMNN(n_neighbors=opts["k"])
t = time.perf_counter()
model.fit(x, y)
info = {"seconds": time.perf_counter() - t, "n_iter": int(getattr(model, "n_iter_", -1))}
result = model.components_
""",
    "lsml": """
warnings.simplefilter("ignore")
if opts["supervised"]:
    model = metric_learn.LSML_Supervised(prior=opts["prior"], random_state=0)
    t = time.perf_counter()
    model.fit(x, y)
else:
    model = metric_learn.LSML(prior=opts["prior"], preprocessor=x)
    t = time.perf_counter()
    model.fit(inputs["quads"])
info = {"seconds": time.perf_counter() - t, "n_iter": int(model.n_iter_)}
result = model.components_
""",
    # with similar and dissimilar pairs (indices into x): MMC on them
    "mmc": """
if "similar" in inputs:
    sim, dis = inputs["similar"], inputs["dissimilar"]
    pairs = np.concatenate([sim, dis])
    target = np.concatenate([np.ones(len(sim)), -np.ones(len(dis))])
    model = metric_learn.MMC(tol=1e-6, preprocessor=x)
    t = time.perf_counter()
    model.fit(pairs, target)
else:
    model = metric_learn.MMC_Supervised(random_state=0)
    t = time.perf_counter()
    model.fit(x, y)
info = {"seconds": time.perf_counter() - t, "n_iter": int(getattr(model, "n_iter_", -1))}
result = model.get_mahalanobis_matrix()
""",
    "nca": """
model = metric_learn.NCA()
t = time.perf_counter()
model.fit(x, y)
info = {"seconds": time.perf_counter() - t, "n_iter": int(getattr(model, "n_iter_", -1))}
result = model.components_
""",
    "rca": """
if opts["supervised"]:
    model = metric_learn.RCA_Supervised(
        n_components=opts["dim"], n_chunks=opts["n_chunks"], chunk_size=opts["chunk_size"],
        random_state=0)
else:
    model = metric_learn.RCA(n_components=opts["dim"])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    t = time.perf_counter()
    model.fit(x, y if opts["supervised"] else inputs["chunks"])
    info = {"seconds": time.perf_counter() - t}
info["warnings"] = len(caught)
result = model.components_
""",
    # SCML.fit with an array basis fails in 0.7.0 (``self.basis == 'triplet_diffs'`` on an
    # array); _fit with the basis is what SCML_Supervised.fit calls after building its own.
    "scml": """
warnings.simplefilter("ignore")
if opts["supervised"]:
    model = metric_learn.SCML_Supervised(random_state=0)
    t = time.perf_counter()
    model.fit(x, y)
else:
    basis = inputs["basis"]
    model = metric_learn.SCML(random_state=0)
    t = time.perf_counter()
    model._fit(x[inputs["triplets"]], basis=basis, n_basis=basis.shape[0])
info = {"seconds": time.perf_counter() - t}
result = model.components_
""",
    # opts: shim (drop graphical_lasso's cov_init, which scikit-learn 1.7 no longer takes),
    # balance (None: metric-learn's); with pairs, SDML on those pair differences, +1 for
    # the first opts["n_similar"] rows. A fit that raises prints its error instead.
    "sdml": """
import metric_learn.sdml as ms
import sklearn.covariance
warnings.simplefilter("ignore")
if opts["shim"]:
    def graphical_lasso(emp_cov, alpha, cov_init=None, **kwargs):
        return sklearn.covariance.graphical_lasso(emp_cov, alpha, **kwargs)
    ms.graphical_lasso = graphical_lasso
kw = {} if opts["balance"] is None else {"balance_param": opts["balance"]}
if "pairs" in inputs:
    pairs = inputs["pairs"]
    model = metric_learn.SDML(**kw)
    args = (pairs, np.where(np.arange(len(pairs)) < opts["n_similar"], 1, -1))
else:
    model, args = metric_learn.SDML_Supervised(random_state=0, **kw), (x, y)
t = time.perf_counter()
try:
    model.fit(*args)
except Exception as e:
    error = type(e).__name__ + ": " + str(e)[-160:]
    print(json.dumps({"error": error, "version": metric_learn.__version__}))
    sys.exit(0)
info = {"seconds": time.perf_counter() - t}
result = model.components_
""",
}


def run_peer(name: str, x, y, opts=None, *, check: bool = True, **arrays):
    """metric-learn's ``name`` in a subprocess of ``--metric_learn_python``, on x (as
    float64), y and ``arrays``: (its matrix, its info: seconds, version, ...), or (None,
    {"error": ...}) when it failed or refused (a failed process raises when ``check``)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npy")
        np.savez(src, x=np.asarray(x, np.float64), y=y, **arrays)
        script = PEER_HEAD + PEERS[name] + PEER_TAIL
        cmd = [_PYTHON.value, "-c", script, src, dst, json.dumps(opts or {})]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            if check:
                raise RuntimeError(f"metric-learn's {name} failed:\n{out.stderr[-4000:]}")
            return None, {"error": out.stderr.strip().splitlines()[-1]}
        info = json.loads(out.stdout.strip().splitlines()[-1])
        return (np.load(dst) if "error" not in info else None), info


def load():
    """(x_train, x_test, y_train, y_test) of the standardised digits."""
    x, y = load_digits(return_X_y=True)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.5, stratify=y, random_state=0)
    mean, sd = xtr.mean(0), xtr.std(0)
    sd[sd == 0] = 1.0
    return (
        ((xtr - mean) / sd).astype(np.float32),
        ((xte - mean) / sd).astype(np.float32),
        ytr,
        yte,
    )


def retrieval(lmap, x, y):
    """(rank-1, mAP) of x embedded by L = ``lmap``, each image a query against the others."""
    return _ranked(x @ np.asarray(lmap, np.float32).T, y)


def _ranked(z, y):
    cams = np.arange(len(y))  # each query's own entry is junk (same id, same camera)
    res = evaluate(z, z, y, y, cams, cams)
    return res["rank1"], res["mAP"]


def get_config(name: str, *variant):
    """The config of ``configs/<name>.py[:variant]``."""
    return config_files.load_config_module(f"configs/{name}.py").get_config(*variant)


def timed(fit, *args, **kwargs):
    """(fit(*args, **kwargs), its seconds)."""
    t = time.perf_counter()
    out = fit(*args, **kwargs)
    return out, time.perf_counter() - t


def print_digits(xtr, ytr, yte) -> None:
    print(
        f"digits: {len(ytr)} train / {len(yte)} test images, {xtr.shape[1]}-d, standardised; "
        f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPU cores"
    )


def print_head(head: str) -> None:
    """The table's head and its markdown rule."""
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")


def _pca(xtr, xte):
    """Both halves on the training half's top ``PCA_DIM`` principal axes."""
    mean, comps = linalg.pca(xtr, variance=1.0, max_dim=PCA_DIM)
    return (xtr - mean) @ comps.T, (xte - mean) @ comps.T


# --------------------------------------------------------------------------------------
# ITML


def _itml_same_constraints(xtr, ytr, cfg):
    """warca_jax's constraints for ``cfg`` as metric-learn's pairs [P, 2, D] (difference, 0)
    and (u, l, number of similar pairs)."""
    v, delta, _, (u, low) = itml.itml_constraints(xtr, ytr, cfg, np.random.default_rng(0))
    pairs = np.stack([v, np.zeros_like(v)], axis=1).astype(np.float64)
    return pairs, (u, low, int(np.sum(delta > 0)))


def _itml_measures(lmap, v, delta, xi0):
    a = np.asarray(lmap, np.float64).T @ np.asarray(lmap, np.float64)
    div = itml.objective(a, xi0, xi0, np.eye(a.shape[0]), 1.0)["logdet_div"]
    p = np.asarray(itml.constraint_distances(jnp.asarray(a, jnp.float32), jnp.asarray(v)))
    viol = float(np.mean(np.where(delta > 0, p > xi0, p < xi0)))
    return a, div, viol


def itml_table(xtr, xte, ytr, yte):
    """warca_jax's ITML (its defaults) against metric-learn's ITML on scikit-learn's digits.

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
    """
    print_digits(xtr, ytr, yte)
    rows = [("Euclidean (A = I)", np.eye(xtr.shape[1], dtype=np.float32), 0.0, "-")]
    ml_cfg = defaults.overridden(get_config("itml").method, bounds="euclidean")
    for name, cfg in [
        ("warca_jax ITML, defaults", get_config("itml").method),
        ("warca_jax ITML, bounds='euclidean'", ml_cfg),
    ]:
        (metric, hist), seconds = timed(itml.fit, xtr, ytr, cfg)
        rows.append((name, metric.projection, seconds, hist[-1]["stopped"]))
    same_row = None
    if _PYTHON.value:
        lmap, info = run_peer("itml", xtr, ytr)
        version = info["version"]
        name = f"metric-learn {version} ITML_Supervised()"
        rows.append((name, lmap, info["seconds"], f"{info['n_iter']} iterations"))
        pairs, bounds = _itml_same_constraints(xtr, ytr, ml_cfg)
        bounds = np.asarray(bounds, np.float64)
        lmap, info = run_peer("itml", xtr, ytr, pairs=pairs, bounds=bounds)
        same_row = len(rows)
        name = f"metric-learn {version} ITML, row 3's constraints"
        rows.append((name, lmap, info["seconds"], f"{info['n_iter']} iterations"))
    v, delta, xi0, (u, low) = itml.itml_constraints(
        xtr, ytr, get_config("itml").method, np.random.default_rng(0)
    )
    print(
        f"constraints of the defaults: {int(np.sum(delta > 0))} similar + "
        f"{int(np.sum(delta < 0))} dissimilar, u = {u:.4g}, l = {low:.4g} (squared); "
        "retrieval: test half, each image a query against the other test images."
    )
    mats = {}
    head = f"| {'learner':<48} | {'logdet div':>10} | {'viol':>6} | {'rank-1':>6} | "
    head += f"{'mAP':>6} | {'fit s':>6} | {'rel diff':>8} | stopped |"
    print_head(head)
    for i, (name, lmap, seconds, stopped) in enumerate(rows):
        mats[i], div, viol = _itml_measures(lmap, v, delta, xi0)
        r1, ap = retrieval(lmap, xte, yte)
        rel = "-"
        if same_row is not None and i in (2, same_row):
            ref = mats.get(same_row)
            if ref is None:  # row 2 is printed before the reference: computed here
                ref = _itml_measures(rows[same_row][1], v, delta, xi0)[0]
            rel = f"{np.linalg.norm(mats[i] - ref) / np.linalg.norm(ref):8.2e}"
        print(
            f"| {name:<48} | {div:10.3f} | {viol:6.3f} | {r1:6.1f} | {ap:6.1f} | "
            f"{seconds:6.1f} | {rel:>8} | {stopped} |"
        )


# --------------------------------------------------------------------------------------
# LMNN

LMNN_K = 3


def lmnn_table(xtr, xte, ytr, yte):
    """warca_jax's LMNN (its defaults) against metric-learn's LMNN on scikit-learn's digits.

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
    """
    n = len(ytr)
    print_digits(xtr, ytr, yte)
    rows = [("Euclidean (L = I)", np.eye(xtr.shape[1], dtype=np.float32), 0.0, "-")]
    variants = [
        ("warca_jax LMNN, defaults", {}),
        (
            "warca_jax LMNN, old defaults (300 @ 1e-3)",
            dict(num_iters=300, learning_rate=1e-3, schedule="constant", tol=0.0),
        ),
    ]
    for name, overrides in variants:
        cfg = defaults.overridden(get_config("lmnn").method, k=LMNN_K, **overrides)
        (metric, hist), seconds = timed(lmnn.fit, xtr, ytr, cfg)
        rows.append((name, metric.projection, seconds, hist[-1]["stopped"]))
    if _PYTHON.value:
        lmap, info = run_peer("lmnn", xtr, ytr, {"k": LMNN_K})
        name = f"metric-learn {info['version']} LMNN(n_neighbors={LMNN_K})"
        rows.append((name, lmap, info["seconds"], f"n_iter_ {info['n_iter']}"))
    cfg = get_config("lmnn").method
    print(
        f"objective: warca_jax.methods.lmnn.objective on the training half (k={LMNN_K}, "
        f"mu={cfg.mu:g}, margin={cfg.margin:g}, every impostor, / N); metric-learn's own "
        f"objective (reg=0.5) is N/2 = {n / 2:g} times it. Retrieval: test half, each image "
        "a query against the other test images."
    )
    head = f"| {'learner':<44} | {'objective':>9} | {'pull':>7} | {'push':>7} | "
    head += f"{'rank-1':>6} | {'mAP':>6} | {'fit s':>6} | stopped |"
    print_head(head)
    for name, lmap, seconds, stopped in rows:
        obj = lmnn.objective(lmap, xtr, ytr, k=LMNN_K, mu=cfg.mu, margin=cfg.margin)
        r1, ap = retrieval(lmap, xte, yte)
        print(
            f"| {name:<44} | {obj['loss']:9.4f} | {obj['pull']:7.4f} | {obj['push']:7.4f} | "
            f"{r1:6.1f} | {ap:6.1f} | {seconds:6.1f} | {stopped} |"
        )


# --------------------------------------------------------------------------------------
# LSML


def _lsml_block(xtr, ytr, prior):
    """(name, W, seconds, steps, reference W or None) rows for one prior."""
    quads = lsml.draw_quadruplets(ytr, 0, np.random.default_rng(0))
    cfg = defaults.overridden(get_config("lsml").method, prior=prior)
    ref = None
    rows = []
    if _PYTHON.value:
        ref, info = run_peer("lsml", xtr, ytr, {"supervised": False, "prior": prior}, quads=quads)
    (metric, hist), seconds = timed(lsml.fit, xtr, ytr, cfg, seed=0)
    stop = hist[-1]["stopped"].split(":")[0]
    rows.append(
        (f"warca_jax LSML, {prior}", metric.projection, seconds, stop, hist[-1]["step"], ref)
    )
    if _PYTHON.value:
        name = f"metric-learn {info['version']} LSML, {prior}, same quadruplets"
        rows.append((name, ref, info["seconds"], "", info["n_iter"], None))
        w, info = run_peer("lsml", xtr, ytr, {"supervised": True, "prior": prior})
        name = f"metric-learn LSML_Supervised(random_state=0), {prior}"
        rows.append((name, w, info["seconds"], "", info["n_iter"], None))
    prior_inv = lsml.prior(xtr, quads, prior, float(cfg.prior_reg))
    return rows, quads, prior_inv


def lsml_table(xtr, xte, ytr, yte):
    """warca_jax's LSML against metric-learn's LSML on scikit-learn's digits.

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
    """
    ptr, pte = _pca(xtr, xte)
    print(
        f"digits: {len(ytr)} train / {len(yte)} test images, standardised; 64-d (identity "
        f"prior) and PCA {PCA_DIM}-d (covariance prior). objective: lsml.objective on "
        "warca_jax's 2,000 quadruplets of seed 0; rel. diff against metric-learn's LSML on "
        "the same quadruplets."
    )
    head = f"| {'learner':<58} | {'objective':>9} | {'residual':>8} | {'D_ld':>7} | "
    head += f"{'rank-1':>6} | {'mAP':>6} | {'rel. diff M':>11} | {'steps':>5} | {'fit s':>6} |"
    print_head(head)
    for prior, xs, xt in (("identity", xtr, xte), ("covariance", ptr, pte)):
        rows, quads, prior_inv = _lsml_block(xs, ytr, prior)
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


# --------------------------------------------------------------------------------------
# MMC


def _mmc_retrieval(a, x, y):
    """(rank-1, mAP) of x under the Mahalanobis matrix ``a``."""
    w, v = np.linalg.eigh(np.asarray(a, np.float64))
    z = x.astype(np.float64) @ (v * np.sqrt(np.maximum(w, 0.0)))
    return _ranked(z.astype(np.float32), y)


def mmc_table(xtr, xte, ytr, yte):
    """warca_jax's MMC (its defaults) against metric-learn's MMC on scikit-learn's digits.

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
    """
    print_digits(xtr, ytr, yte)
    cfg = get_config("mmc").method
    drawn = mmc.draw_pairs(ytr, cfg.num_constraints, 0)
    i, j = np.triu_indices(len(ytr), k=1)
    same = ytr[i] == ytr[j]
    every = (np.stack([i[same], j[same]], 1), np.stack([i[~same], j[~same]], 1))
    rows = [("Euclidean (A = I)", np.eye(xtr.shape[1]), 0.0, "-")]
    for name, overrides in [("defaults", {}), ("projection='exact'", {"projection": "exact"})]:
        (metric, hist), seconds = timed(
            mmc.fit, xtr, ytr, defaults.overridden(cfg, **overrides), seed=0
        )
        rows.append(
            (f"warca_jax MMC, {name}", metric.mahalanobis_matrix(), seconds, hist[-1]["stopped"])
        )
    reference = None
    if _PYTHON.value:
        warca_pairs = {"similar": drawn.similar, "dissimilar": drawn.dissimilar}
        for name, pairs in [
            ("MMC_Supervised(random_state=0)", {}),
            ("MMC on warca_jax's pairs", warca_pairs),
        ]:
            a, info = run_peer("mmc", xtr, ytr, check=False, **pairs)
            if a is None:  # metric-learn raised: say what, and go on
                print(f"metric-learn {name} failed: {info['error']}")
                continue
            name = f"metric-learn {info['version']} {name}"
            rows.append((name, a, info["seconds"], f"n_iter_ {info['n_iter']}"))
            reference = a if pairs else reference
    print(
        f"pairs: {len(drawn.similar)} similar + {len(drawn.dissimilar)} dissimilar drawn from "
        f"seed 0 ('drawn'); every pair of the training half: {len(every[0])} + "
        f"{len(every[1])} ('all'). objective: g(A) / sqrt(f(A)). dA: ||A' - A'_ml||_F / "
        "||A'_ml||_F, A' = A / f_drawn(A), against metric-learn's MMC on the drawn pairs."
    )
    head = f"| {'learner':<46} | {'obj drawn':>9} | {'obj all':>8} | {'rank-1':>6} | "
    head += f"{'mAP':>6} | {'fit s':>6} | {'dA':>6} | stopped |"
    print_head(head)

    def normalised(a):
        return a / mmc.objective(a, xtr, drawn.similar, drawn.dissimilar)["similar"]

    for name, a, seconds, stopped in rows:
        on_drawn = mmc.objective(a, xtr, drawn.similar, drawn.dissimilar)["objective"]
        on_all = mmc.objective(a, xtr, *every)["objective"]
        r1, ap = _mmc_retrieval(a, xte, yte)
        da = "-"
        if reference is not None:
            ref = normalised(reference)
            da = f"{np.linalg.norm(normalised(a) - ref) / np.linalg.norm(ref):6.3f}"
        print(
            f"| {name:<46} | {on_drawn:9.2f} | {on_all:8.1f} | {r1:6.1f} | {ap:6.1f} | "
            f"{seconds:6.1f} | {da:>6} | {stopped} |"
        )


# --------------------------------------------------------------------------------------
# NCA


def nca_table(xtr, xte, ytr, yte):
    """warca_jax's NCA (its defaults) against metric-learn's NCA on scikit-learn's digits.

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
    """
    print_digits(xtr, ytr, yte)
    rows = [("Euclidean (L = I)", np.eye(xtr.shape[1], dtype=np.float32), 0.0, "-")]
    (metric, hist), seconds = timed(nca.fit, xtr, ytr, get_config("nca").method)
    rows.append(("warca_jax NCA, defaults", metric.projection, seconds, hist[-1]["stopped"]))
    reference = None
    if _PYTHON.value:
        lmap, info = run_peer("nca", xtr, ytr)
        name = f"metric-learn {info['version']} NCA()"
        rows.append((name, lmap, info["seconds"], f"n_iter_ {info['n_iter']}"))
        reference = lmap.T.astype(np.float64) @ lmap
    print(
        "objective: warca_jax.methods.nca.objective on the training half (expected "
        "leave-one-out accuracy f / N; metric-learn's loss is N times it). Retrieval: test "
        "half, each image a query against the other test images. dM: ||M - M_ml||_F / "
        "||M_ml||_F."
    )
    head = f"| {'learner':<30} | {'objective':>9} | {'rank-1':>6} | {'mAP':>6} | "
    head += f"{'fit s':>6} | {'dM':>6} | stopped |"
    print_head(head)
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


# --------------------------------------------------------------------------------------
# RCA


def _rca_rel_diff(w, ref):
    if ref is None:
        return "-"
    m, m_ref = w.T.astype(np.float64) @ w, ref.T @ ref
    if not np.all(np.isfinite(m_ref)):
        return "ref NaN"
    return f"{np.linalg.norm(m - m_ref) / np.linalg.norm(m_ref):.2e}"


def _rca_block(title, xtr, ytr, *, n_chunks, chunk_size):
    """Rows of the table for one version of the data and one chunklet setting."""
    d = xtr.shape[1]
    chunks = constraints.chunklets(ytr, n_chunks, chunk_size, np.random.default_rng(0))
    title = f"{title}, {n_chunks}x{chunk_size}"
    rows = []
    kw = dict(n_chunks=n_chunks, chunk_size=chunk_size)
    for dim in (0, 20):
        ref = None
        if _PYTHON.value:
            opts = dict(supervised=False, dim=dim or None, **kw)
            ref, info = run_peer("rca", xtr, ytr, opts, chunks=chunks)
        for reg in (1e-3, 1e-9):
            cfg = defaults.overridden(get_config("rca").method, dim=dim, reg=reg, **kw)
            (metric, _), seconds = timed(rca.fit, xtr, ytr, cfg, seed=0)
            name = f"{title}: warca_jax RCA dim={dim or d} reg={reg:g}"
            rows.append((name, metric.projection, seconds, ref))
        if _PYTHON.value:
            name = f"{title}: metric-learn {info['version']} RCA dim={dim or d}, same chunklets"
            rows.append((name, ref, info["seconds"], None))
    if _PYTHON.value:
        w, info = run_peer("rca", xtr, ytr, dict(supervised=True, dim=None, **kw))
        name = f"{title}: metric-learn RCA_Supervised(random_state=0)"
        rows.append((name, w, info["seconds"], None))
    return rows


def rca_table(xtr, xte, ytr, yte):
    """warca_jax's RCA against metric-learn's RCA on scikit-learn's digits.

    Three of the 64
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
    """
    keep = np.ptp(xtr, axis=0) > 0
    ptr, pte = _pca(xtr, xte)
    print(
        f"digits: {len(ytr)} train / {len(yte)} test images, {xtr.shape[1]}-d standardised "
        f"({int((~keep).sum())} pixels constant on the training half); rel. diff: "
        "||M - M_ml||_F / ||M_ml||_F against metric-learn's RCA on the same chunklets."
    )
    rows = [("64-d: Euclidean", np.eye(xtr.shape[1], dtype=np.float32), 0.0, None)]
    rows += _rca_block("64-d", xtr, ytr, n_chunks=100, chunk_size=2)
    rows += _rca_block(f"PCA {PCA_DIM}-d", ptr, ytr, n_chunks=100, chunk_size=2)
    head = f"| {'learner':<62} | {'rank-1':>6} | {'mAP':>6} | {'max eig M':>9} | "
    head += f"{'rel. diff M':>11} | {'fit s':>6} |"
    print_head(head)
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
        rel = _rca_rel_diff(w, ref)
        print(f"| {name:<62} | {r1} | {ap} | {top} | {rel:>11} | {seconds:6.2f} |")


# --------------------------------------------------------------------------------------
# SCML


def scml_table(xtr, xte, ytr, yte):
    """warca_jax's SCML against metric-learn's SCML on scikit-learn's digits.

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
    """
    cfg = get_config("scml").method
    triplets = constraints.knn_triplets(xtr, ytr, k_same=cfg.k_genuine, k_other=cfg.k_impostor)
    rows = [("Euclidean", np.eye(xtr.shape[1], dtype=np.float32), 0.0, "")]
    (metric, hist), seconds = timed(scml.fit, xtr, ytr, cfg, seed=0)
    rows.append(("warca_jax SCML, defaults", metric.projection, seconds, ""))
    if _PYTHON.value:
        basis = scml.lda_basis(
            xtr,
            ytr,
            n_basis=int(cfg.n_basis),
            kmeans_iters=int(cfg.kmeans_iters),
            key=jax.random.split(jax.random.PRNGKey(0))[0],  # fit's basis key for seed 0
        )
        for supervised in (True, False):
            arrays = {} if supervised else {"triplets": triplets, "basis": np.asarray(basis)}
            w, info = run_peer("scml", xtr, ytr, {"supervised": supervised}, **arrays)
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
    print_head(head)
    for name, w, seconds, _ in rows:
        obj = scml.objective(w, xtr, triplets, beta=cfg.beta)
        r1, ap = retrieval(w, xte, yte)
        rank = np.linalg.matrix_rank(w.astype(np.float64))
        print(
            f"| {name:<52} | {obj['loss']:9.4f} | {obj['hinge']:8.4f} | "
            f"{obj['violated_frac']:8.4f} | {r1:6.1f} | {ap:6.1f} | {rank:6d} | {seconds:6.1f} |"
        )


# --------------------------------------------------------------------------------------
# SDML


def _sdml_peer(xtr, ytr, opts, pairs=None):
    """metric-learn's SDML: (M, seconds, version) or (None, its error, version)."""
    arrays = {} if pairs is None else {"pairs": pairs}
    comps, info = run_peer("sdml", xtr, ytr, opts, **arrays)
    if comps is None:
        return None, info["error"], info["version"]
    return comps.T @ comps, info["seconds"], info["version"]


def _sdml_fit(xtr, ytr, **overrides):
    cfg = defaults.overridden(get_config("sdml").method, **overrides)
    (metric, hist), seconds = timed(sdml.fit, xtr, ytr, cfg)
    return metric.mahalanobis_matrix().astype(np.float64), seconds, hist


def _sdml_feasible_balance(xtr, ytr) -> float:
    """Half the largest balance_param for which metric-learn's P (the sum) is definite, as
    warca_jax's refusal of balance_param 0.5 names it."""
    cfg = get_config("sdml", "metric_learn").method
    try:
        sdml.fit(xtr, ytr, cfg)
    except ValueError as e:
        print(f"warca_jax SDML, metric_learn variant (sum, balance_param 0.5): refused: {e}")
        return 0.5 * float(str(e).split(" below ")[1].split(",")[0])
    return float(cfg.balance_param)


def sdml_table(xtr, xte, ytr, yte):
    """warca_jax's SDML against metric-learn's SDML and scikit-learn's graphical lasso on digits.

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
    """
    print_digits(xtr, ytr, yte)
    eta = _sdml_feasible_balance(xtr, ytr)
    alpha = float(get_config("sdml").method.sparsity_param)
    p_norm = sdml.lasso_input(xtr, ytr, get_config("sdml").method, np.random.default_rng(0))
    sum_cfg = defaults.overridden(get_config("sdml", "metric_learn").method, balance_param=eta)
    p_sum = sdml.lasso_input(xtr, ytr, sum_cfg, np.random.default_rng(0))
    rows = [("Euclidean (M = I)", np.eye(xtr.shape[1]), 0.0, "-", None)]
    m, sec, hist = _sdml_fit(xtr, ytr)
    rows.append(("warca_jax SDML, defaults (P_norm)", m, sec, hist[-1]["stopped"], None))
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, ref = graphical_lasso(p_norm, alpha)
    rows.append(("sklearn graphical_lasso(P_norm)", ref, time.perf_counter() - t, "-", None))
    rows[1] = rows[1][:4] + (ref,)
    m, sec, hist = _sdml_fit(xtr, ytr, loss_matrix="sum", balance_param=eta)
    rows.append((f"warca_jax SDML, P_sum (eta {eta:.3g})", m, sec, hist[-1]["stopped"], None))
    if _PYTHON.value:
        _, err, version = _sdml_peer(xtr, ytr, {"shim": False, "balance": None})
        print(f"metric-learn {version} SDML_Supervised(), defaults: {err}")
        _, err, _ = _sdml_peer(xtr, ytr, {"shim": True, "balance": None})
        print(f"metric-learn {version} SDML_Supervised(), defaults, shim: {err}")
        opts = {"shim": True, "balance": eta}
        m, sec, _ = _sdml_peer(xtr, ytr, opts)
        rows.append((f"metric-learn SDML_Supervised(eta {eta:.3g}), shim", m, sec, "-", None))
        pairs = constraints.label_pairs(ytr, 20 * 10**2, np.random.default_rng(0))
        idx = np.concatenate([pairs.similar, pairs.dissimilar])
        diff = (xtr[idx[:, 0]] - xtr[idx[:, 1]]).astype(np.float64)
        opts["n_similar"] = len(pairs.similar)
        m, sec, _ = _sdml_peer(xtr, ytr, opts, np.stack([diff, 0 * diff], axis=1))
        rows.append(("metric-learn SDML on P_sum's pairs, shim", m, sec, "-", None))
        rows[3] = rows[3][:4] + (m,)
    print(f"objective f on P_norm and on P_sum (alpha {alpha:g}); retrieval on the test half.")
    head = f"| {'learner':<44} | {'f(P_norm)':>9} | {'f(P_sum)':>9} | {'zeros':>5} | "
    head += f"{'rank-1':>6} | {'mAP':>6} | {'fit s':>6} | {'rel diff':>8} | stopped |"
    print_head(head)
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


TABLES = {
    "itml": itml_table,
    "lmnn": lmnn_table,
    "lsml": lsml_table,
    "mmc": mmc_table,
    "nca": nca_table,
    "rca": rca_table,
    "scml": scml_table,
    "sdml": sdml_table,
}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    TABLES[_LEARNER.value](*load())


if __name__ == "__main__":
    app.run(main)
