"""SCML: sparse compositional metric learning (Shi, Bellet & Sha, AAAI 2014).

The metric is a sparse non-negative combination of K rank-one bases b_i (unit rows of
B: [K, D]): M = sum_i w_i b_i b_i^T = B^T diag(w) B, w >= 0. With triplets (a, p, n)
(``constraints.knn_triplets``: p one of a's ``k_genuine`` nearest same-label points, n
one of its ``k_impostor`` nearest other-label points, every combination, as
metric-learn's ``SCML_Supervised``) and z_t = (B x_a - B x_p)^2 - (B x_a - B x_n)^2 in
[K] (elementwise squares: d_M(a, p) - d_M(a, n) = <w, z_t>), SCML minimises (paper,
eq. 3, the global-metric form)

    F(w) = 1/T sum_t [1 + <w, z_t>]_+ + beta ||w||_1,   w >= 0.

Updates (paper, section 4: stochastic composite optimisation by regularised dual
averaging with AdaGrad; metric-learn's defaults): at step t = 1, 2, ... a minibatch of
``batch_size`` triplets drawn uniformly (``fold_in(key, t)``) gives the subgradient of
the hinge g_t = 1/batch sum_{active} z_t; with the running mean gbar_t of the g's and
the AdaGrad scale H_t = delta + sqrt(sum_{s<=t} g_s^2) (elementwise, delta = 1e-3),

    w_{t+1} = argmin_{w >= 0} <gbar_t + beta, w> + gamma / (2 t) <w, H_t w>
            = (t / (gamma H_t)) * max(-(gbar_t + beta), 0).

Every ``output_iter`` steps F is evaluated on all triplets (one history row) and the best
w so far is kept; the fit returns the best (as metric-learn does). It stops after
``max_iter`` steps, or earlier when ``tol`` > 0 and the best F improved by at most
``tol`` (relative) over the last ``output_iter`` steps; the last row's ``stopped`` says
which.

Basis ('lda', metric-learn's default for SCML_Supervised): k-means of the training
features into ceil(K / (2 r)) clusters (``warca_jax.methods.kmeans``, k-means++ from the
seed, ``kmeans_iters`` Lloyd iterations; metric-learn keeps the best of 10 sklearn
runs), r = min(#classes - 1, D); around each centre, at two scales s (10 and 20
neighbours for D <= 50, else 20 and 50), the min(n_c, s) nearest points of every class
c form a local set whose LDA directions (top r generalized eigenvectors of
S_b v = lambda S_w v with lambda > 0, normalised to unit length) are bases;
K = min(20 D, 2 N r - 1) by default (``n_basis`` = 0), as metric-learn. Where S_w is
singular (a local set with fewer than D + #classes points, e.g. two images a person) the
LDA is that of metric-learn, scikit-learn's SVD solver (``local_lda``): only directions
with within-class variance are candidates. (A ridge on S_w instead would put its top
directions in S_w's null space, where every training class collapses to a point.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from warca_jax.maths import clustering, linalg
from warca_jax.methods import Method, checks, constraints, learner_loop, model_checks
from warca_jax.metric import Metric

DELTA = 1e-3  # AdaGrad's slack in H_t (metric-learn's constant)
LDA_TOL = 1e-4  # scikit-learn LDA's default tol: rank cut of the local LDA's SVDs
_BLOCK = 4096  # triplets per block of the full objective


class ScmlState(NamedTuple):
    """Weights w, running mean gbar of the subgradients, AdaGrad's sqrt(sum g^2), step."""

    w: jax.Array
    avg_grad: jax.Array
    ada: jax.Array
    step: jax.Array


def default_n_basis(n: int, d: int, num_classes: int) -> int:
    """metric-learn's default K = min(20 D, 2 N r - 1), r = min(#classes - 1, D)."""
    return min(20 * d, 2 * n * min(num_classes - 1, d) - 1)


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an SCML config that cannot run on this data."""
    (n, d), classes = data.x.shape, np.unique(data.y).shape[0]
    checks.check_numbers(cfg, ("k_genuine", "k_impostor"), low=1, integer=True)
    most = 2 * n * min(classes - 1, d) - 1
    checks.check_number(cfg, "n_basis", low=0, high=most, integer=True, note="; 0: default")
    checks.check_numbers(cfg, ("beta",), low=0)
    checks.check_number(cfg, "gamma", low=0, low_open=True)
    checks.check_numbers(
        cfg, ("max_iter", "output_iter", "batch_size", "kmeans_iters"), low=1, integer=True
    )
    if cfg.output_iter > cfg.max_iter:
        raise ValueError(
            f"method.output_iter ({cfg.output_iter}) must be <= method.max_iter ({cfg.max_iter})"
        )
    checks.check_number(cfg, "tol", low=0, note="; 0: run max_iter steps")


# SCML's margin (1) is in the units of the squared distances, so features too small or too
# large for float32 training are refused, not rescaled.
validate = checks.validator(
    "SCML", check_config, scale_free=False, scale_note=" (SCML's margin is in the features' units)"
)


def local_lda(x: np.ndarray, y: np.ndarray, num: int) -> np.ndarray:
    """Up to ``num`` unit LDA directions [r', D] of the labelled points x (module
    docstring), as scikit-learn's SVD solver finds them (metric-learn's LDA).

    The class-centred points, each feature divided by its within-class spread, are
    whitened over the directions where their singular values exceed ``LDA_TOL`` (so a
    direction in which every class is constant is no candidate); the directions are the
    principal axes of the class means in that whitened space whose singular value exceeds
    ``LDA_TOL`` times the largest, mapped back to feature space.
    """
    x = np.asarray(x, np.float64)
    classes, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
    n, d = x.shape
    means = np.zeros((classes.shape[0], d))
    np.add.at(means, inverse, x)
    means /= counts[:, None]
    centred = x - means[inverse]
    spread = centred.std(axis=0)
    spread[spread == 0] = 1.0
    _, sv, right = np.linalg.svd(
        centred / spread / np.sqrt(max(n - classes.shape[0], 1)), full_matrices=False
    )
    keep = sv > LDA_TOL
    if not keep.any():
        return np.zeros((0, d))
    whiten = (right[keep] / spread).T / sv[keep]  # [D, rank]: unit within-class covariance
    weight = np.sqrt(counts / max(classes.shape[0] - 1, 1))
    grand = counts @ means / n
    _, sv_b, right_b = np.linalg.svd(
        (weight[:, None] * (means - grand)) @ whiten, full_matrices=False
    )
    rank = int(np.sum(sv_b > LDA_TOL * sv_b[0])) if sv_b.size and sv_b[0] > 0 else 0
    vecs = (whiten @ right_b[: min(rank, num)].T).T
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def lda_basis(x: np.ndarray, y: np.ndarray, *, n_basis: int, kmeans_iters: int, key: jax.Array):
    """The 'lda' basis B: [K', D] (K' <= n_basis; module docstring)."""
    n, d = x.shape
    classes = np.unique(y)
    r = min(classes.shape[0] - 1, d)
    n_basis = n_basis or default_n_basis(n, d, classes.shape[0])
    n_clusters = min(-(-n_basis // (2 * r)), n)
    centres, _ = clustering.kmeans(
        key, jnp.asarray(x), num_clusters=n_clusters, iterations=kmeans_iters
    )
    centres = np.asarray(centres, np.float64)
    x64 = np.asarray(x, np.float64)
    scales = (10, 20) if d <= 50 else (20, 50)
    # each class's points by distance to each centre, nearest first
    order = {}
    for c in classes:
        idx = np.flatnonzero(y == c)
        dist = ((centres[:, None, :] - x64[idx][None]) ** 2).sum(-1)
        order[c] = idx[np.argsort(dist, axis=1, kind="stable")]
    rows = []
    for s in scales:
        for k in range(n_clusters):
            local = np.concatenate([order[c][k, :s] for c in classes])
            rows.append(local_lda(x64[local], y[local], r))
    basis = np.concatenate(rows)[:n_basis]
    if basis.shape[0] == 0:
        raise ValueError("SCML: no local set has within-class variance (one point a class?)")
    return basis.astype(np.float32)


def triplet_terms(xb: jax.Array, triplets: jax.Array) -> jax.Array:
    """z_t = (B x_a - B x_p)^2 - (B x_a - B x_n)^2: [T, K], from xb = X B^T [N, K]."""
    a, p, q = xb[triplets[:, 0]], xb[triplets[:, 1]], xb[triplets[:, 2]]
    return (a - p) ** 2 - (a - q) ** 2


def hinge_loss(w: jax.Array, z: jax.Array) -> jax.Array:
    """mean_t [1 + <w, z_t>]_+ over the rows of z: [B, K] (the smooth part's minibatch)."""
    return jnp.mean(jnp.maximum(1.0 + z @ w, 0.0))


def hinge_grad(w: jax.Array, z: jax.Array) -> jax.Array:
    """Closed-form (sub)gradient of ``hinge_loss``: mean of z_t over active triplets."""
    active = (1.0 + z @ w) > 0
    return jnp.sum(jnp.where(active[:, None], z, 0.0), axis=0) / z.shape[0]


def rda_update(state: ScmlState, grad: jax.Array, *, beta: float, gamma: float) -> ScmlState:
    """One regularised dual averaging step with AdaGrad (module docstring)."""
    t = (state.step + 1).astype(grad.dtype)
    avg = state.avg_grad + (grad - state.avg_grad) / t
    ada = jnp.sqrt(state.ada**2 + grad**2)
    w = t / (gamma * (DELTA + ada)) * jnp.maximum(-(avg + beta), 0.0)
    return ScmlState(w, avg, ada, state.step + 1)


def full_objective(w: jax.Array, xb: jax.Array, triplets: jax.Array, beta) -> dict:
    """F(w) over all triplets, in blocks; with its hinge, l1 part and violated share."""
    t = triplets.shape[0]
    nb = -(-t // _BLOCK)
    padded = jnp.pad(triplets, ((0, nb * _BLOCK - t), (0, 0))).reshape(nb, _BLOCK, 3)
    valid = (jnp.arange(nb * _BLOCK) < t).reshape(nb, _BLOCK)

    def block(args):
        trip, ok = args
        slack = 1.0 + triplet_terms(xb, trip) @ w
        return jnp.sum(jnp.where(ok, jnp.maximum(slack, 0.0), 0.0)), jnp.sum(ok & (slack > 0))

    sums, counts = jax.lax.map(block, (padded, valid))
    hinge, l1 = jnp.sum(sums) / t, beta * jnp.sum(w)
    return {"loss": hinge + l1, "hinge": hinge, "l1": l1, "violated_frac": jnp.sum(counts) / t}


def objective(projection, x, triplets, *, beta: float) -> dict:
    """F of any linear map W ([D', D], M = W^T W) on triplets [T, 3] of x [N, D]:
    mean_t [1 + d_M(a, p) - d_M(a, n)]_+ + beta tr(M) (= beta ||w||_1 for unit bases), so
    that metrics learned on different bases compare; float32."""
    w = jnp.asarray(projection, jnp.float32)
    out = full_objective(
        jnp.ones((w.shape[0],)),
        jnp.asarray(x, jnp.float32) @ w.T,
        jnp.asarray(triplets, jnp.int32),
        0.0,
    )
    l1 = beta * float(jnp.sum(w * w))
    return {k: float(v) for k, v in out.items()} | {"loss": float(out["loss"]) + l1, "l1": l1}


def make_chunk(beta: float, gamma: float, batch_size: int) -> Callable:
    """Jitted ``chunk(state, xb, triplets, key, length)``: ``length`` RDA steps in a
    ``lax.scan``, then F on all triplets."""

    def step(state: ScmlState, xb, triplets, key):
        k = jax.random.fold_in(key, state.step)
        pick = jax.random.randint(k, (batch_size,), 0, triplets.shape[0])
        z = triplet_terms(xb, triplets[pick])
        return rda_update(state, hinge_grad(state.w, z), beta=beta, gamma=gamma), {}

    def chunk(state, xb, triplets, key, length):
        state, _ = learner_loop.scan_steps(
            lambda s, _: step(s, xb, triplets, key), state, length=length
        )
        metrics = full_objective(state.w, xb, triplets, beta)
        metrics["active_bases"] = jnp.sum(state.w > 0)
        return state, metrics

    return jax.jit(chunk, static_argnums=4)


def metric_from_weights(basis: np.ndarray, w: np.ndarray) -> Metric:
    """The linear Metric of M = B^T diag(w) B: W = sqrt(w_i) b_i over the active bases when
    fewer than D, else the [D, D] factor of M.

    Raises:
      model_checks.TrainingDivergedError: no basis has a positive weight.
    """
    active = w > 0
    if not active.any():
        raise model_checks.TrainingDivergedError(
            "SCML learned no basis with a positive weight (M = 0); raise max_iter or lower beta"
        )
    b = basis[active].astype(np.float64)
    proj = np.sqrt(w[active].astype(np.float64))[:, None] * b
    if proj.shape[0] >= basis.shape[1]:
        proj = linalg.psd_factor(proj.T @ proj)
    return Metric("linear", basis.shape[1], projection=proj.astype(np.float32), name="scml")


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None):
    """Learns an SCML metric (arguments and errors: ``warca_jax.methods``; a fit that ends
    with no active basis is a ``TrainingDivergedError`` too).

    ``seed`` draws the k-means of the basis and the minibatches; a history row every
    ``output_iter`` steps; the ``callback`` gets the best metric so far.

    Returns:
      (linear Metric of the best w, history rows: step, loss (F of the current w),
      best_loss, hinge, l1, violated_frac, active_bases, seconds; the last row's
      ``stopped`` says why training ended).
    """
    x, y, _ = validate(features, labels, cfg)
    loop = learner_loop.Loop.start("SCML", features, log_fn, progress, callback)
    key_basis, key_train = jax.random.split(jax.random.PRNGKey(seed))
    basis = lda_basis(
        x, y, n_basis=int(cfg.n_basis), kmeans_iters=int(cfg.kmeans_iters), key=key_basis
    )
    triplets = constraints.knn_triplets(
        x, y, k_same=int(cfg.k_genuine), k_other=int(cfg.k_impostor)
    )
    xb = jnp.asarray(x) @ jnp.asarray(basis).T
    trip = jnp.asarray(triplets, jnp.int32)
    k = basis.shape[0]
    zeros = jnp.zeros((k,), jnp.float32)
    state = ScmlState(zeros, zeros, zeros, jnp.int32(0))
    chunk = learner_loop.compiled(
        make_chunk, float(cfg.beta), float(cfg.gamma), int(cfg.batch_size)
    )
    best = {"loss": np.inf, "w": np.zeros(k, np.float32)}

    def advance(done, length):
        nonlocal state
        state, metrics = chunk(state, xb, trip, key_train, length)
        metrics = {key: float(v) for key, v in jax.device_get(metrics).items()}
        before = best["loss"]
        if metrics["loss"] < before:
            best.update(loss=metrics["loss"], w=np.asarray(state.w))
        metrics["best_loss"] = best["loss"]
        step = done + length
        gain = (before - best["loss"]) / max(abs(before), 1e-30) if np.isfinite(before) else None
        if cfg.tol > 0 and gain is not None and gain <= cfg.tol and step < cfg.max_iter:
            stopped = (
                f"converged: best objective improved by {gain:.3g} <= tol {cfg.tol:g} "
                f"over the last {length} steps, at step {step} of {cfg.max_iter}"
            )
            return learner_loop.Chunk(metrics, length, stop=True, stopped=stopped)
        if step >= cfg.max_iter:
            stopped = f"max_iter reached: {cfg.max_iter} steps (best objective {best['loss']:.6g})"
            return learner_loop.Chunk(metrics, length, stopped=stopped)
        return metrics

    def best_metric():
        return metric_from_weights(basis, best["w"])

    return loop.fit(
        advance,
        best_metric,
        num_iters=int(cfg.max_iter),
        chunk=int(cfg.output_iter),
        reference_loss=1.0,  # F(0) = 1
        hint=f"raise gamma (now {cfg.gamma:g})",
    )


VARIANTS = ("default", "small")  # small: 2,000 steps at most


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``scml``: what configs/scml.py starts from."""
    m = checks.new_config("scml", variant, VARIANTS)
    m.k_genuine = 3  # same-label nearest neighbours per anchor (metric-learn: 3).
    m.k_impostor = 10  # other-label nearest neighbours per anchor (metric-learn: 10).
    # rank-one bases of the 'lda' basis (0: metric-learn's default min(20 D, 2 N r - 1),
    # r = min(#classes - 1, D)); fewer when local LDAs have fewer directions.
    m.n_basis = 0
    m.kmeans_iters = 20  # Lloyd iterations of the basis's k-means (metric-learn:
    #                      scikit-learn's KMeans, best of n_init=10 runs).
    m.beta = 1e-5  # weight of ||w||_1 (metric-learn: beta=1e-5).
    m.gamma = 5e-3  # RDA-AdaGrad's gamma, the inverse step scale (metric-learn: 5e-3).
    m.max_iter = 10000  # stochastic steps (metric-learn's SCML_Supervised: 10000).
    m.output_iter = 500  # steps between evaluations of F on all triplets (one
    #                      history row; the best w is kept; metric-learn: 500).
    m.batch_size = 10  # triplets per step (metric-learn: 10).
    # stop early when the best F improved by at most tol (relative) over the last
    # output_iter steps (0: run max_iter steps, as metric-learn).
    m.tol = 0.0
    if variant == "small":
        m.max_iter = 2000
    return m


METHODS = {"scml": Method(fit, validate, default_config, VARIANTS)}
