"""MLAPG: logistic metric learning by accelerated proximal gradient (Liao & Li, ICCV 2015).

Liao & Li, "Efficient PSD constrained asymmetric metric learning for person
re-identification", ICCV 2015. A Mahalanobis M >= 0 minimises

  F(M) = sum_{i != j} w_ij log(1 + exp(y_ij (d_M(x_i, x_j) - mu))),
  d_M(x_i, x_j) = (x_i - x_j)^T M (x_i - x_j),

with y_ij = +1 for same-label pairs and -1 otherwise, and the asymmetric weights
w_ij = 1 / #positive pairs or 1 / #negative pairs, so both sets weigh the same.
mu is the mean pair distance at M = I (as the authors' code sets it).

The gradient over all N^2 pairs is sum_ij t_ij (x_i - x_j)(x_i - x_j)^T
= 2 X^T (diag(T 1) - T) X with t_ij = w_ij y_ij sigma(y_ij (d_ij - mu)): [N, N] and
[D, D] work, no [pairs, D] differences. Each iteration (their APG algorithm) takes a
Nesterov extrapolation V, a step M = Proj_PSD(V - grad F(V) / L) (eigendecomposition),
and backtracks L <- gamma L until F(M) <= F(V) + <grad, M - V> + L/2 ||M - V||^2; it
stops when the relative change of F is below ``tol``.

Features are PCA-reduced to ``pca_dim`` first when D is larger (and to at most the span
of the training images when D exceeds their number, as the original's QR step; a
``pca_dim`` above N keeps that whole span, ``configs/mlapg.py:lomo``), and rescaled so that
the mean squared pair distance is 1 (mu = 1), which makes the initial step 1/L
independent of the data's units; both are folded back into the returned W.

``pca_dim`` sets much of the result on wide descriptors. On CUHK01 (the 2,580-d colour +
LBP descriptor, D' = 40, first 3 splits; benchmarks/bench_viper_sweep.py --cuhk01) it gives
rank-1 19.48 / 25.95 at 40 / 100 dimensions, and 31.58 at the default 256 (the protocol's
10 splits). The WARCA paper's 22.92 lies between 40 and 100, a choice it does not state:
this, not the learner, is the 8.7 by which the protocol's MLAPG column exceeds it.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from warca_jax import learner_loop, linalg
from warca_jax.methods import Method, checks
from warca_jax.metric import Metric


class APGState(NamedTuple):
    """M_t, M_{t-1}, the momentum scalar alpha_t, the Lipschitz estimate L and F(M_t)."""

    m: jax.Array
    m_prev: jax.Array
    alpha: jax.Array
    lipschitz: jax.Array
    loss: jax.Array


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an MLAPG config that cannot run on this data."""
    d = data.x.shape[1]
    checks.check_number(cfg, "pca_dim", low=0, integer=True, note="; 0: no PCA")
    checks.check_number(cfg, "dim", low=0, integer=True, note="; 0: the full rank of M")
    reduced = min(d, cfg.pca_dim) if cfg.pca_dim else d
    if cfg.dim > reduced:
        raise ValueError(
            f"output dim must be at most {reduced} (input dims after PCA), got {cfg.dim}"
        )
    checks.check_numbers(cfg, ("max_iters", "log_every", "max_backtracks"), low=1, integer=True)
    checks.check_number(cfg, "init_step", low=0, low_open=True, note="; 1 / initial L")
    checks.check_number(cfg, "backtrack_factor", low=1, low_open=True)
    checks.check_number(cfg, "tol", low=0)


# MLAPG rescales the features itself: its result does not depend on their scale.
validate = checks.validator("MLAPG", check_config)


def pair_weights(labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Signs y_ij and asymmetric weights w_ij over ordered pairs i != j: [N, N] each."""
    n = labels.shape[0]
    same = labels[:, None] == labels[None, :]
    off = ~jnp.eye(n, dtype=bool)
    pos, neg = same & off, ~same
    w = jnp.where(pos, 1.0 / jnp.maximum(jnp.sum(pos), 1), 0.0)
    w = jnp.where(neg, 1.0 / jnp.maximum(jnp.sum(neg), 1), w)
    return jnp.where(same, 1.0, -1.0), w


def _pair_distances(m, x):
    q = x @ m
    sq = jnp.sum(q * x, axis=1)
    return sq[:, None] + sq[None, :] - q @ x.T - x @ q.T


def mlapg_loss(m, x, sign, weight, *, mu: float) -> jax.Array:
    """F(M) of Liao & Li for M: [D, D], x: [N, D], sign and weight: [N, N]."""
    return jnp.sum(weight * jax.nn.softplus(sign * (_pair_distances(m, x) - mu)))


def mlapg_loss_and_grad(m, x, sign, weight, *, mu: float):
    """F(M) and its gradient 2 X^T (diag(T 1) - T) X, T = w y sigma(y (d - mu))."""
    z = sign * (_pair_distances(m, x) - mu)
    loss = jnp.sum(weight * jax.nn.softplus(z))
    t = weight * sign * jax.nn.sigmoid(z)
    t = (t + t.T) / 2  # symmetric by construction; this keeps the algebra exact in float32
    return loss, 2.0 * (x.T * jnp.sum(t, axis=1)) @ x - 2.0 * x.T @ t @ x


def psd_project(m: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Nearest PSD matrix in Frobenius norm and its rank (negative eigenvalues clipped)."""
    w, v = jnp.linalg.eigh((m + m.T) / 2)
    w = jnp.maximum(w, 0.0)
    return (v * w) @ v.T, jnp.sum(w > 0)


def make_step(mu: float, factor: float, max_backtracks: int):
    """Jitted ``step(state, (x, sign, weight)) -> (state, metrics)``: one APG iteration.

    The step skeleton of every learner (``learner_loop.scan_steps``); MLAPG runs it one call
    at a time (``fit``) since it stops on a tolerance. Built once per setting through
    ``learner_loop.compiled``.
    """

    def step(state: APGState, batch):
        x, sign, weight = batch
        alpha = (1.0 + jnp.sqrt(1.0 + 4.0 * state.alpha**2)) / 2.0
        v = state.m + (state.alpha - 1.0) / alpha * (state.m - state.m_prev)
        f_v, grad = mlapg_loss_and_grad(v, x, sign, weight, mu=mu)

        def attempt(lip):
            m_new, rank = psd_project(v - grad / lip)
            f_new = mlapg_loss(m_new, x, sign, weight, mu=mu)
            diff = m_new - v
            ok = f_new <= f_v + jnp.sum(diff * grad) + lip / 2.0 * jnp.sum(diff * diff)
            return m_new, rank, f_new, ok

        def body(carry):
            lip, _, _, _, _, tries = carry
            lip = lip * factor
            return (lip, *attempt(lip), tries + 1)

        def cond(carry):
            return ~carry[4] & (carry[5] < max_backtracks)

        init = (state.lipschitz, *attempt(state.lipschitz), jnp.zeros((), jnp.int32))
        lip, m_new, rank, f_new, _, _ = jax.lax.while_loop(cond, body, init)
        metrics = {"loss": f_new, "rank": rank, "step_size": 1.0 / lip}
        return APGState(m_new, state.m, alpha, lip, f_new), metrics

    return jax.jit(step)


def prepared_features(x: np.ndarray, pca_dim: int):
    """PCA to ``pca_dim`` (0: none), centred and scaled to unit mean squared pair distance.

    Returns:
      (features [N, d] float32 as a jax array, PCA mean [D], PCA components [d, D], scale):
      the features are (x - mean) C^T, centred, divided by sqrt(scale).
    """
    mean, comps = np.zeros(x.shape[1], np.float32), np.eye(x.shape[1], dtype=np.float32)
    if pca_dim and x.shape[1] > min(pca_dim, x.shape[0]):  # wide data: at most its span
        mean, comps = linalg.pca(x, variance=1.0, max_dim=pca_dim)
    xr = (x - mean) @ comps.T
    # Rescale to unit mean squared pair distance: d = 2 (mean ||x||^2 - ||mean x||^2).
    xr = xr - xr.mean(axis=0)
    scale = 2.0 * float(np.mean(np.sum(xr.astype(np.float64) ** 2, axis=1))) * len(x) / (len(x) - 1)
    if not scale > 0:
        raise ValueError("MLAPG needs features that are not all identical")
    return jnp.asarray(xr / np.sqrt(scale), jnp.float32), mean, comps, scale


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None):
    """Learns an MLAPG metric (arguments and errors: ``warca_jax.methods``).

    Deterministic: ``seed`` is unused. A history row (step, loss, rank, seconds)
    every ``log_every`` iterations and at the last one.

    Returns:
      (metric, history): kind "linear", W: [rank or dim, D] with W^T W the learned M.
    """
    del seed
    x, y, feature_scale = validate(features, labels, cfg)
    feats, mean, comps, scale = prepared_features(x, int(cfg.pca_dim))
    sign, weight = pair_weights(jnp.asarray(np.unique(y, return_inverse=True)[1]))
    d = feats.shape[1]
    eye = jnp.eye(d, dtype=jnp.float32)
    # At M = I the mean pair distance is 1 by the rescaling, the authors' mu.
    mu = 1.0
    step = learner_loop.compiled(
        make_step, mu, float(cfg.backtrack_factor), int(cfg.max_backtracks)
    )
    f0 = mlapg_loss(eye, feats, sign, weight, mu=mu)
    state = APGState(eye, eye, jnp.zeros((), jnp.float32), jnp.float32(1.0 / cfg.init_step), f0)
    loop = learner_loop.Loop.start("MLAPG", features, log_fn, progress, callback)
    prev = float(f0)
    hint = f"lower init_step (now {cfg.init_step:g}) or check the training data"

    def advance(done, length):
        # One jitted iteration per call: a chunk ends early when F converged (the relative
        # change below tol: training is over) or is not finite (``run_in_chunks`` refuses
        # it at the step it happened).
        nonlocal state, prev
        for it in range(1, length + 1):
            state, metrics = step(state, (feats, sign, weight))
            loss = float(metrics["loss"])
            converged = abs(loss - prev) <= cfg.tol * abs(prev)
            prev = loss
            if converged or not np.isfinite(loss) or it == length:
                # (the step size 1 / L is not logged: it is init_step until the line
                # search backtracks, which it did in no run measured, a constant column)
                row = {"loss": loss, "rank": int(metrics["rank"])}
                return learner_loop.Chunk(row, it, stop=converged)

    def make_metric(m) -> Metric:
        w = linalg.psd_factor(np.asarray(m), dim=cfg.dim or None)
        # Fold the rescaling and PCA back: ||W (z - z')|| with z = (x - mean) C^T / sqrt(scale).
        proj = (w.astype(np.float64) / np.sqrt(scale)) @ comps.astype(np.float64)
        return Metric(
            kind="linear",
            input_dim=x.shape[1],
            projection=proj.astype(np.float32),
            name="mlapg",
            feature_scale=feature_scale,
        )

    return loop.fit(
        advance,
        lambda: make_metric(state.m),
        num_iters=cfg.max_iters,
        chunk=cfg.log_every,
        # a loss far above F(I) is a divergence
        reference_loss=float(f0),
        hint=hint,
    )


VARIANTS = ("default", "small", "large")  # small: 50 iterations; large: also 64 PCA dims


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``mlapg``: what configs/mlapg.py starts from."""
    m = checks.new_config("mlapg", variant, VARIANTS)
    m.pca_dim = 256  # PCA to this many dims first when D is larger (0: never); M is
    #                  [D, D] and every iteration eigendecomposes it.
    m.dim = 0  # keep the top dim directions of M in W (0: all of its rank).
    m.max_iters = 300  # APG iterations at most (the authors' code: 300).
    m.tol = 1e-4  # stop when |F_t - F_t-1| <= tol |F_t-1| (the authors' code: 1e-4).
    m.init_step = 256.0  # initial step 1 / L on unit-scale features (authors: 2^8).
    m.backtrack_factor = 2.0  # L <- factor * L while the step fails the bound (gamma).
    m.max_backtracks = 50  # backtracking tries per iteration at most.
    m.log_every = 10  # iterations between lines of metrics.jsonl.
    if variant == "small":
        m.max_iters = 50
    elif variant == "large":  # every iteration touches all N^2 pairs on pca_dim dims.
        m.pca_dim = 64
        m.max_iters = 50
    return m


METHODS = {"mlapg": Method(fit, validate, default_config, VARIANTS, takes_callback=True)}
