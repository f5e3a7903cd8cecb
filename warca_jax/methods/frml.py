"""FRML: WARP loss on a fixed-rank Mahalanobis metric (Lim & Lanckriet, ICML 2014).

The metric is M = U diag(s) U^T, rank r = ``dim`` (U: [D, r] orthonormal,
s >= 0), and the distance the squared Mahalanobis distance
d_M(x, y) = (x - y)^T M (x - y). Each step draws a minibatch of same-label
pairs (i, j) and a violator k per pair exactly as WARCA does
(``warca_jax.maths.sampling``: uniform pairs, k uniform among the negatives with
gamma + d_M(i, j) - d_M(i, k) > 0, rank_ij counted or WSABIE-estimated), and
minimises

    f(M) = 1/B sum_b L(rank_b) [gamma + <M, u u^T - v v^T>]_+ + lam/2 ||M||_F^2

(u = x_i - x_j, v = x_i - x_k; ``lam = 0`` drops the L2 term) by
Riemannian SGD on the manifold of rank-r PSD matrices, the update the WARCA
paper (sections 2 and 3.2) contrasts with its AON penalty:

1. Euclidean gradient Z = 1/B sum_b c_b (u u^T - v v^T) + lam M, with
   c_b = L(rank_b) 1[hinge_b > 0]; it is kept as its factors (the minibatch's
   differences), never as a D x D matrix: only Z U is formed, O(B D r).
2. Riemannian gradient: Z projected on the tangent space at M,
   xi = P_U Z P_U + P_U^perp Z P_U + P_U Z P_U^perp (P_U = U U^T).
3. Retraction: M <- the best rank-r PSD approximation of M - eta xi (top r
   eigenpairs, negative eigenvalues clipped). M - eta xi lives in the span of
   [U, Q] with Q R = qr(P_U^perp Z U), so the eigendecomposition is that of a
   2r x 2r core matrix: [[diag(s) - eta U^T Z U, -eta R^T], [-eta R, 0]].

This is the embedded-manifold retraction (Vandereycken; Shalit et al.'s
LORETA for the non-symmetric case) with a constant step size eta; every step
keeps the minibatch's differences to form Z U (the memory the WARCA paper
points out). The learned metric is returned as W = diag(sqrt(s)) U^T: [r, D].

FRML's constant step is in the units of the squared pair distances, which differ by
orders of magnitude between descriptors, so one step cannot suit all of them: the protocol
cross-validates it (configs/protocol.py, ``cv.grids``; lam at its default). Each step
forms Z U only and a 2r x 2r eigendecomposition, never a D x D matrix. Dividing the
features by their root mean squared pair distance, with the step kept, under-trained the
synthetic test problem (tests/methods/test_frml.py), which is why the default keeps the raw scale
and leaves the step to cross-validation; the module applies no PCA before FRML (the paper
applies PCA only for SVMML and KISSME). Measurements, with their commands:
docs/methods.md#frml.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from warca_jax.maths import linalg, losses, sampling
from warca_jax.methods import Method, checks, learner_loop
from warca_jax.metric import Metric


class FrmlState(NamedTuple):
    """M = U diag(s) U^T and the step counter."""

    u: jax.Array  # [D, r] orthonormal columns
    s: jax.Array  # [r] non-negative
    step: jax.Array


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an FRML config that cannot run on this data."""
    d = data.x.shape[1]
    checks.check_number(cfg, "dim", integer=True)
    checks.check_range(cfg.dim, 1, d, what="rank dim", note="input dimensions")
    checks.check_numbers(cfg, ("batch_size", "num_iters", "log_every"), low=1, integer=True)
    checks.check_number(cfg, "candidate_pool", low=0, integer=True, note="; 0: all")
    checks.check_numbers(cfg, ("margin", "learning_rate"), low=0, low_open=True)
    checks.check_number(cfg, "lam", low=0)
    checks.check_choice(cfg, "sampler", sampling.SAMPLERS)
    checks.check_choice(cfg, "weighting", losses.WEIGHTINGS)
    checks.check_bool(cfg, "span")


# FRML's margin is in the units of the (squared) distances, so features too small or too
# large for float32 training are refused, not rescaled.
validate = checks.validator(
    "FRML", check_config, scale_free=False, scale_note=" (FRML's margin is in the features' units)"
)


def euclidean_grad_times_u(state: FrmlState, u, v, coef, *, lam) -> jax.Array:
    """Z U: [D, r] with Z = sum_b coef_b (u_b u_b^T - v_b v_b^T) + lam M, never forming Z.

    ``coef`` already holds L(rank_b) 1[hinge_b > 0] / B.
    """
    zu = u.T @ (coef[:, None] * (u @ state.u)) - v.T @ (coef[:, None] * (v @ state.u))
    return zu + lam * state.u * state.s[None, :]


def retract(state: FrmlState, zu: jax.Array, *, lr) -> FrmlState:
    """One Riemannian step M <- R_M(-lr P_M(Z)) given Z U (see the module docstring)."""
    uu, r = state.u, state.s.shape[0]
    a = uu.T @ zu
    a = 0.5 * (a + a.T)
    q, rr = jnp.linalg.qr(zu - uu @ a)
    core = jnp.block([[jnp.diag(state.s) - lr * a, -lr * rr.T], [-lr * rr, jnp.zeros((r, r))]])
    w, vec = jnp.linalg.eigh(0.5 * (core + core.T))
    w, vec = w[::-1][:r], vec[:, ::-1][:, :r]  # top r, largest first
    new_u = jnp.concatenate([uu, q], axis=1) @ vec
    return FrmlState(new_u, jnp.maximum(w, 0.0), state.step + 1)


def _num_bits(cfg, n: int) -> int:
    pool = cfg.candidate_pool if 0 < cfg.candidate_pool < n else 0
    return 5 * cfg.batch_size + pool


def _step_fn(cfg) -> Callable:
    """The un-jitted ``step(state, x, table, bits) -> (state, metrics)``."""
    margin, b, lr = float(cfg.margin), cfg.batch_size, float(cfg.learning_rate)
    lam = float(cfg.lam)

    def step(state: FrmlState, x, table: sampling.PairTable, bits):
        n = x.shape[0]
        pool = _num_bits(cfg, n) - 5 * b
        i, j = sampling.sample_pairs(bits[: 3 * b].reshape(3, b), table)
        unif = sampling.to_uniform(bits[3 * b : 5 * b]).reshape(2, b)
        cand = sampling.to_indices(bits[5 * b :], n) if pool else jnp.arange(n)
        w = state.u.T * jnp.sqrt(state.s)[:, None]  # [r, D], W^T W = M
        ea, ep, ec = x[i] @ w.T, x[j] @ w.T, x[cand] @ w.T
        d_ij = jnp.sum((ea - ep) ** 2, axis=1)
        d_ik = losses.candidate_distances(ea, ec) ** 2
        viol = sampling.find_violators(
            unif,
            d_ij,
            d_ik,
            table.labels[cand][None, :] != table.labels[i][:, None],
            table.num_negatives[i],
            margin=margin,
            sampler=cfg.sampler,
            max_tries=0,
        )
        k = cand[viol.index]
        weights = jnp.where(viol.found, losses.rank_weight(viol.rank, weighting=cfg.weighting), 0)
        u, v = x[i] - x[j], x[i] - x[k]
        hinge = jnp.maximum(margin + d_ij - jnp.sum((ea - ec[viol.index]) ** 2, axis=1), 0.0)
        coef = jax.lax.stop_gradient(weights * (hinge > 0) / b)
        new = retract(state, euclidean_grad_times_u(state, u, v, coef, lam=lam), lr=lr)
        hinge_loss = jnp.mean(weights * hinge)
        metrics = {
            "loss": hinge_loss + 0.5 * lam * jnp.sum(state.s**2),
            "hinge": hinge_loss,
            "mean_rank": jnp.mean(viol.rank),
            "violated_frac": jnp.mean(viol.found),  # found & hinge > 0 up to rounding
        }
        return new, metrics

    return step


def make_train_chunk(frozen_cfg: tuple) -> Callable:
    """Jitted ``chunk(state, x, table, key, length)``: ``length`` steps in one ``lax.scan``.

    Built once per config through ``learner_loop.compiled``.
    """
    cfg = types.SimpleNamespace(**dict(frozen_cfg))
    step = _step_fn(cfg)

    def chunk(state, x, table, key, length):
        size = _num_bits(cfg, x.shape[0])
        steps = state.step + jnp.arange(length, dtype=state.step.dtype)
        bits = jax.vmap(lambda t: sampling.step_bits(key, t, size))(steps)
        return learner_loop.scan_steps(lambda st, bt: step(st, x, table, bt), state, bits)

    return jax.jit(chunk, static_argnums=4)


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None):
    """Learns an FRML metric (arguments and errors: ``warca_jax.methods``).

    ``seed`` draws the initial U and the samples; a history row every ``log_every`` steps.

    Returns:
      (linear Metric with W = diag(sqrt(s)) U^T: [dim, D], history rows: step,
      loss, hinge, mean_rank, violated_frac, seconds).
    """
    x, y, _ = validate(features, labels, cfg)
    loop = learner_loop.Loop.start("FRML", features, log_fn, progress, callback)
    input_dim = x.shape[1]
    span = linalg.training_span(x, min_dim=cfg.dim) if cfg.span else None
    if span is not None:  # the loss sees only differences of training points
        x = span.coords(x)
    table = sampling.make_pair_table(y)
    key_init, key_train = jax.random.split(jax.random.PRNGKey(seed))
    q, _ = jnp.linalg.qr(jax.random.normal(key_init, (x.shape[1], cfg.dim), jnp.float32))
    state = FrmlState(q, jnp.ones((cfg.dim,), jnp.float32), jnp.zeros((), jnp.int32))
    chunk = learner_loop.compiled(make_train_chunk, tuple(sorted(cfg.items())))
    xj = jnp.asarray(x)

    def advance(done, length):
        nonlocal state
        state, metrics = chunk(state, xj, table, key_train, length)
        return metrics

    def make_metric(state) -> Metric:
        w = np.asarray(state.u.T * jnp.sqrt(state.s)[:, None])
        w = w if span is None else span.lift(w)
        return Metric(kind="linear", input_dim=input_dim, projection=w, name="frml")

    hint = f"lower learning_rate (now {cfg.learning_rate:g})"
    return loop.fit(
        advance, lambda: make_metric(state), num_iters=cfg.num_iters, chunk=cfg.log_every, hint=hint
    )


VARIANTS = ("default", "small")  # small: a fast run, for the tests


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``frml``: what configs/frml.py starts from."""
    m = checks.new_config("frml", variant, VARIANTS)
    m.dim = 40  # rank r of M = U diag(s) U^T (the output dimension of W).
    m.lam = 1e-2  # weight of the L2 regulariser lam/2 ||M||_F^2 (0: none).
    m.margin = 1.0  # gamma of the hinge, in squared Mahalanobis distance.
    m.weighting = "harmonic"  # WARP rank weighting L(r): 'harmonic' or 'uniform'.
    m.sampler = "exact"  # violator rank: 'exact' count or 'wsabie' estimate.
    m.candidate_pool = 0  # random candidates shared by a step (0: all training points).
    m.batch_size = 256  # pairs per minibatch.
    m.num_iters = 500  # Riemannian SGD steps.
    m.learning_rate = 3e-3  # constant step size eta (scale with 1 / ||x_i - x_j||^2).
    m.log_every = 100  # steps between history rows.
    # with no more training images than features (N <= D), M on the k <= N - 1 coordinates
    # of the span of the centred training features (``linalg.Span``): every difference
    # the loss sees lies there, a step costs about k / D of the full form's, and M has no
    # part outside the span (the full form keeps one from its random start); used when k >= dim.
    m.span = True
    if variant == "small":  # rank 16, 200 steps of 128 pairs
        m.dim = 16
        m.batch_size = 128
        m.num_iters = 200
        m.log_every = 50
    return m


METHODS = {"frml": Method(fit, validate, default_config, VARIANTS)}
