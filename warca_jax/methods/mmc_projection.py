"""MMC's projections of A onto C1 n C2 (``warca_jax.methods.mmc``, whose docstring sets
out the problem): C1 = {A : <W, A> <= 1}, a half-space (W = sum_S d d^T), C2 the PSD cone.

``project_alternating`` is the paper's (rounds of the projection onto C1, then onto C2),
``project_exact`` the nearest point of the intersection (a bisection on the multiplier
of C1); ``project`` runs the one ``PROJECTIONS`` names and makes the result exactly
feasible.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _psd(a: jax.Array) -> jax.Array:
    """The projection onto the PSD cone C2: negative eigenvalues set to 0."""
    evals, evecs = jnp.linalg.eigh((a + a.T) / 2.0)
    return (evecs * jnp.maximum(evals, 0.0)) @ evecs.T


def project_alternating(a: jax.Array, w: jax.Array, *, proj_tol: float, max_proj: int):
    """Alternating projections onto C1 = {<W, A> <= 1} and the PSD cone C2 (the paper's).

    Rounds of (C1, then C2) until <W, A> <= 1 + proj_tol or ``max_proj`` rounds.

    Returns:
      (A, rounds, satisfied): ``satisfied`` False when ``max_proj`` rounds did not reach
      the tolerance.
    """
    w_sq = jnp.vdot(w, w)

    def one_round(carry):
        a, rounds = carry
        return _psd(a - jnp.maximum(jnp.vdot(w, a) - 1.0, 0.0) / w_sq * w), rounds + 1

    def violated(carry):
        a, rounds = carry
        return (jnp.vdot(w, a) > 1.0 + proj_tol) & (rounds < max_proj)

    a, rounds = jax.lax.while_loop(violated, one_round, one_round((a, jnp.int32(0))))
    return a, rounds, jnp.vdot(w, a) <= 1.0 + proj_tol


def project_exact(a: jax.Array, w: jax.Array, *, proj_tol: float, max_proj: int):
    """The nearest (Frobenius) point of C1 n C2: PSD(A - lambda W) with lambda >= 0 the
    smallest that gives <W, PSD(A - lambda W)> <= 1 (the KKT conditions of the
    projection; <W, PSD(A - lambda W)> falls with lambda), found by bisection on lambda
    to a relative width of 1e-6, at most ``max_proj`` eigendecompositions.

    Returns:
      (A, eigendecompositions, satisfied), as ``project_alternating``.
    """
    del proj_tol  # the bisection ends on the feasible side

    def f_at(lam):
        return jnp.vdot(w, _psd(a - lam * w))

    f0 = f_at(0.0)
    # a first bracket [0, hi], hi the C1 step alone, doubled until feasible
    hi = jnp.maximum(jnp.maximum(jnp.vdot(w, a), f0) - 1.0, 0.0) / jnp.vdot(w, w)
    lo, hi, n = jax.lax.while_loop(
        lambda c: (f_at(c[1]) > 1.0) & (c[2] < max_proj),
        lambda c: (c[1], 2.0 * c[1], c[2] + 1),
        (0.0 * hi, hi, jnp.int32(1)),
    )

    def halve(carry):
        lo, hi, n = carry
        mid = (lo + hi) / 2.0
        above = f_at(mid) > 1.0
        return jnp.where(above, mid, lo), jnp.where(above, hi, mid), n + 1

    lo, hi, n = jax.lax.while_loop(
        lambda c: (c[1] - c[0] > 1e-6 * c[1]) & (c[2] < max_proj), halve, (lo, hi, n)
    )
    a = _psd(a - jnp.where(f0 > 1.0, hi, 0.0) * w)
    return a, n, jnp.vdot(w, a) <= 1.0 + 1e-4  # 1 at hi, up to float32 rounding


PROJECTIONS = {"alternating": project_alternating, "exact": project_exact}


def project(a: jax.Array, w: jax.Array, *, method: str, proj_tol: float, max_proj: int):
    """A projected into C1 n C2 by ``method`` (``PROJECTIONS``), then scaled by
    min(1, 1 / <W, A>) so that it is exactly in C1 (it stays PSD).

    Returns:
      (A, rounds, satisfied).
    """
    a, rounds, ok = PROJECTIONS[method](a, w, proj_tol=proj_tol, max_proj=max_proj)
    return a / jnp.maximum(jnp.vdot(w, a), 1.0), rounds, ok
