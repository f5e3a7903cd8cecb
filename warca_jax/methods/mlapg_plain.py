"""MLAPG's iteration in its plain form: F(M), its gradient, the PSD projection, one APG step.

The textbook arrangement of Liao & Li's accelerated proximal gradient (``mlapg``'s
docstring): M as a dense [D, D] matrix, its projection by a full eigendecomposition, F
and its gradient over the [N, N] pairs, all jitted. ``mlapg.ReducedAPG``, which
``mlapg.fit`` runs, takes the same iterations in a cheaper arrangement; the tests hold it
to this one.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class APGState(NamedTuple):
    """M_t, M_{t-1}, the momentum scalar alpha_t, the Lipschitz estimate L and F(M_t)."""

    m: jax.Array
    m_prev: jax.Array
    alpha: jax.Array
    lipschitz: jax.Array
    loss: jax.Array


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

    The step skeleton of every learner (``learner_loop.scan_steps``), in its plain form: the
    reference for ``ReducedAPG``, which ``fit`` runs (the same iteration, cheaper for a
    large M).
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
