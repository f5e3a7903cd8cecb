"""WARCA's equations (paper section 3): the objective, its penalties and closed-form gradients.

Each equation the training step evaluates is one function here, named after what it
computes, its docstring citing the paper; ``warca_jax.methods.warca.step`` calls them and
nothing else re-derives them. The dense forms they are checked against (G_ijk of eq. 21
formed as a matrix, E_ijk of eq. 24, the penalty through A K A^T with K itself, the
eq. 25 step) live in tests/reference_forms.py; tests/test_losses.py compares these
functions with them and with ``jax.grad``.

=============================  ===========================================
paper                          function
=============================  ===========================================
eq. 5, 17, 22 (d_ij, d_ik)     ``distance``
eq. 8 (L(rank))                ``rank_weight``
eq. 10 (AON penalty)           ``aon_penalty`` (its gradient ``aon_penalty_grad``)
eq. 12 / 13 (hinge, xi_ijk)    ``triplet_hinge``; sampled term ``sampled_hinge``;
                               as a function of W (for autodiff) ``warca_hinge_loss``
eq. 12 / 18 (objective)        ``objective``
eq. 18 (kernel penalty)        ``kernel_aon_penalty``
eq. 20, first term             ``kernel_aon_penalty_grad`` (primal: ``aon_penalty_grad``)
eq. 20-22, hinge term          ``hinge_grad`` (outer-product form, primal and kernel)
eq. 23, first term             ``kernel_aon_penalty_precond_grad``
eq. 23-24, hinge term          ``kernel_hinge_precond_grad`` (the nine entries of E_ijk)
eq. 20 / 23, the sum           ``optim.add_penalty_grad`` (hinge part + lambda R')
eq. 25 (the update)            Adam on that sum (``optim.make_optimizer``)
=============================  ===========================================

Every function is a pure function of arrays; options are keyword-only. Ranks, sampled
violators and rank weights are inputs: ``warca_jax.sampling`` computes them, and they
are constants to the gradient.

Notation (paper Table 1): a sampled triplet is (i, j, k) with y_i = y_j and
y_k != y_i; ``u = x_i - x_j``, ``v = x_i - x_k`` (kernel form: ``kappa_i - kappa_j``,
``kappa_i - kappa_k``); ``pu = W u``, ``pv = W v`` (kernel form: ``A u``, rows of the
embeddings K A^T); ``d_ij = ||pu||``, ``d_ik = ||pv||``; the hinge is
``[gamma + d_ij - d_ik]_+`` and each triplet carries the weight ``L(rank_ij)`` (eq. 8).
The kernel form passes the embeddings K A^T: [N, D'] of the training points where the
paper writes K, so that A K A^T costs D'^2 N, not D' N^2.

Note on eq. 20: the paper writes the hinge part of the kernel gradient as
``2 L(rank) A 1[.] G_ijk``. With F_A = ||A (kappa_i - kappa_j)|| (a norm, not
its square) the derivative of F_A is ``A (k_i - k_j)(k_i - k_j)^T / d_ij``,
so the factor is 1, not 2; the functions here use the exact derivative and the
tests check it against ``jax.grad``.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

WEIGHTINGS = ("harmonic", "uniform")
PENALTIES = ("aon", "frobenius", "none")


def rank_weight(rank: jax.Array, *, weighting: str = "harmonic") -> jax.Array:
    """L(r) = sum_{s <= r} alpha_s (eq. 8).

    Args:
      rank: [...] non-negative (possibly fractional) ranks.
      weighting: ``harmonic`` (alpha_s = 1/s, so L(r) = H_r, computed as
        digamma(r + 1) + Euler's gamma, which interpolates fractional ranks) or
        ``uniform`` (alpha_s = 1, so L(r) = r).

    Returns:
      [...] weights, L(0) = 0.
    """
    rank = jnp.maximum(jnp.asarray(rank, jnp.result_type(float)), 0.0)
    if weighting == "harmonic":
        return jax.scipy.special.digamma(rank + 1.0) + jnp.euler_gamma
    if weighting == "uniform":
        return rank
    raise ValueError(f"unknown rank weighting {weighting!r}; expected one of {WEIGHTINGS}")


def distance(diff: jax.Array, axis: int = -1) -> jax.Array:
    """d = ||W (x_i - x_j)|| (eq. 5), ||A (kappa_i - kappa_j)|| (eq. 17, 22) of projected
    differences ``diff``; its gradient at 0 is 0 instead of NaN."""
    sq = jnp.sum(diff * diff, axis=axis)
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def _safe_inv(d: jax.Array) -> jax.Array:
    return jnp.where(d > 0, 1.0 / jnp.where(d > 0, d, 1.0), 0.0)


# ----------------------------------------------------------------------------
# Penalties on W: [D', D] (primal form).


def aon_penalty(w: jax.Array) -> jax.Array:
    """Approximately orthonormal penalty 1/2 ||W W^T - I||_F^2 (eq. 10)."""
    r = w @ w.T - jnp.eye(w.shape[0], dtype=w.dtype)
    return 0.5 * jnp.sum(r * r)


def aon_penalty_grad(w: jax.Array) -> jax.Array:
    """Gradient of ``aon_penalty``: 2 (W W^T - I) W (the primal form of eq. 20's first term)."""
    return 2.0 * (w @ w.T - jnp.eye(w.shape[0], dtype=w.dtype)) @ w


def frobenius_penalty(w: jax.Array) -> jax.Array:
    """Frobenius penalty 1/2 ||W||_F^2 (the paper's section 4.4 comparison)."""
    return 0.5 * jnp.sum(w * w)


def frobenius_penalty_grad(w: jax.Array) -> jax.Array:
    """Gradient of ``frobenius_penalty``: W."""
    return w


def penalty(w: jax.Array, *, kind: str) -> jax.Array:
    """The penalty named ``kind`` (one of ``PENALTIES``) at ``w``."""
    if kind == "aon":
        return aon_penalty(w)
    if kind == "frobenius":
        return frobenius_penalty(w)
    if kind == "none":
        return jnp.zeros((), w.dtype)
    raise ValueError(f"unknown penalty {kind!r}; expected one of {PENALTIES}")


def penalty_grad(w: jax.Array, *, kind: str) -> jax.Array:
    """Closed-form gradient of ``penalty(w, kind=kind)``."""
    if kind == "aon":
        return aon_penalty_grad(w)
    if kind == "frobenius":
        return frobenius_penalty_grad(w)
    if kind == "none":
        return jnp.zeros_like(w)
    raise ValueError(f"unknown penalty {kind!r}; expected one of {PENALTIES}")


# ----------------------------------------------------------------------------
# Penalties on A: [D', N] (kernel form), given the embeddings E = K A^T: [N, D'].


def kernel_aon_penalty(a: jax.Array, emb: jax.Array) -> jax.Array:
    """1/2 ||A K A^T - I||_F^2, the penalty of eq. 18, with A K A^T = A E."""
    r = a @ emb - jnp.eye(a.shape[0], dtype=a.dtype)
    return 0.5 * jnp.sum(r * r)


def kernel_aon_penalty_grad(a: jax.Array, emb: jax.Array) -> jax.Array:
    """Its gradient 2 (A K A^T - I) A K (eq. 20, first term; K symmetric, A K = E^T)."""
    eye = jnp.eye(a.shape[0], dtype=a.dtype)
    return 2.0 * (a @ emb - eye) @ emb.T


def kernel_aon_penalty_precond_grad(a: jax.Array, emb: jax.Array) -> jax.Array:
    """The gradient times K^-1: 2 (A K A^T - I) A (eq. 23, first term)."""
    return 2.0 * (a @ emb - jnp.eye(a.shape[0], dtype=a.dtype)) @ a


def kernel_penalty(a: jax.Array, emb: jax.Array, *, kind: str) -> jax.Array:
    """The penalty named ``kind`` of the kernel form (Frobenius: 1/2 tr(A K A^T))."""
    if kind == "aon":
        return kernel_aon_penalty(a, emb)
    if kind == "frobenius":
        return 0.5 * jnp.sum(a * emb.T)
    return penalty(a, kind=kind)


def kernel_penalty_grad(
    a: jax.Array, emb: jax.Array, *, kind: str, preconditioned: bool
) -> jax.Array:
    """Gradient of ``kernel_penalty`` (eq. 20), or the gradient times K^-1 (eq. 23)."""
    if kind == "aon":
        if preconditioned:
            return kernel_aon_penalty_precond_grad(a, emb)
        return kernel_aon_penalty_grad(a, emb)
    if kind == "frobenius":  # A K, or A K K^-1 = A
        return a if preconditioned else emb.T
    return penalty_grad(a, kind=kind)


# ----------------------------------------------------------------------------
# The WARP hinge and the objective (eq. 12, kernel form eq. 18).


def triplet_hinge(
    pu: jax.Array, pv: jax.Array, *, margin: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The hinge [gamma + xi_ijk]_+ of eq. 12, xi_ijk = d_ij - d_ik (eq. 13).

    Args:
      pu: [B, D'] projected positive differences W (x_i - x_j).
      pv: [B, D'] projected negative differences W (x_i - x_k).
      margin: gamma.

    Returns:
      (hinge [B], d_ij [B], d_ik [B]).
    """
    dij = distance(pu)
    dik = distance(pv)
    return jnp.maximum(margin + dij - dik, 0.0), dij, dik


def sampled_hinge(hinge: jax.Array, weights: jax.Array) -> jax.Array:
    """The sampled WARP term of eq. 12 / 18: mean_b L(rank_b) [gamma + xi_b]_+.

    With k drawn uniformly among the rank_ij violators of (i, j), L(rank) [.]_+ is an
    unbiased estimate of the pair's inner sum L(rank) sum_k [.]_+ / rank (section 3.3).
    """
    return jnp.mean(weights * hinge)


def objective(
    hinge: jax.Array, weights: jax.Array, penalty_value: jax.Array, *, lam: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The loss of eq. 12 (kernel form eq. 18) on a minibatch of sampled triplets.

    lambda R + mean_b L(rank_b) [gamma + xi_b]_+, with R = 1/2 ||W W^T - I||^2
    (``penalty_value``; eq. 12 writes lambda / 2 ||.||^2).

    Returns:
      (the objective, its hinge term).
    """
    hinge_loss = sampled_hinge(hinge, weights)
    return hinge_loss + lam * penalty_value, hinge_loss


def warca_hinge_loss(
    w: jax.Array, u: jax.Array, v: jax.Array, weights: jax.Array, *, margin: float
) -> jax.Array:
    """The sampled hinge term of eq. 12 as a function of W (eq. 18 with kernel columns).

    The training step's ``gradient="autodiff"`` differentiates it with ``jax.grad``.

    Args:
      w: [D', D] linear map (kernel form: A, [D', N]).
      u: [B, D] positive differences x_i - x_j (kappa_i - kappa_j).
      v: [B, D] negative differences x_i - x_k (k a sampled violator).
      weights: [B] rank weights L(rank_ij); 0 for pairs without a violator.
      margin: gamma.

    Returns:
      Scalar loss.
    """
    hinge, _, _ = triplet_hinge(u @ w.T, v @ w.T, margin=margin)
    return sampled_hinge(hinge, weights)


# ----------------------------------------------------------------------------
# Closed-form gradients of the hinge term.


def _hinge_coefficients(
    pu: jax.Array, pv: jax.Array, weights: jax.Array, *, margin: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(cu, cv, hinge): cu = c pu / d_ij, cv = c pv / d_ik, c = L(rank) 1[hinge > 0] / B."""
    hinge, dij, dik = triplet_hinge(pu, pv, margin=margin)
    c = weights * (hinge > 0) / pu.shape[0]
    cu = pu * (c * _safe_inv(dij))[:, None]
    cv = pv * (c * _safe_inv(dik))[:, None]
    return cu, cv, hinge


def hinge_grad(
    pu: jax.Array,
    pv: jax.Array,
    u: jax.Array,
    v: jax.Array,
    weights: jax.Array,
    *,
    margin: float,
) -> tuple[jax.Array, jax.Array]:
    """Gradient of ``sampled_hinge`` in W (or A): mean_b L_b 1[.] W G_ijk (eq. 20-22).

    For one active triplet d||W u||/dW = W u u^T / ||W u||, so the gradient is W G_ijk
    with G_ijk = u u^T / d_ij - v v^T / d_ik (eq. 21; d of eq. 22): the outer-product
    form (W u) u^T / d_ij - (W v) v^T / d_ik, assembled as two [D', B] x [B, D] products
    without forming G. The same function serves the kernel form with u, v kernel
    columns and pu, pv rows of K A^T.

    Args:
      pu, pv: [B, D'] projected differences W u, W v.
      u, v: [B, D] the differences themselves.
      weights: [B] rank weights.
      margin: gamma.

    Returns:
      ([D', D] gradient, [B] hinge values).
    """
    chex.assert_equal_shape([pu, pv])
    chex.assert_equal_shape([u, v])
    chex.assert_shape(weights, (pu.shape[0],))
    cu, cv, hinge = _hinge_coefficients(pu, pv, weights, margin=margin)
    return cu.T @ u - cv.T @ v, hinge


def kernel_hinge_precond_grad(
    emb: jax.Array,
    i: jax.Array,
    j: jax.Array,
    k: jax.Array,
    weights: jax.Array,
    *,
    margin: float,
    n: int,
) -> tuple[jax.Array, jax.Array]:
    """Preconditioned hinge gradient mean_b L_b 1[.] A K E_ijk (eq. 23-24).

    A K E_ijk touches only columns i, j and k (E_ijk has nine non-zeros, eq. 24): with
    p_l = A kappa_l (row l of ``emb``),
    A K E_ijk = (p_i - p_j)(e_i - e_j)^T / d_ij - (p_i - p_k)(e_i - e_k)^T / d_ik.
    The gradient is therefore a scatter-add of 3 columns per triplet into a [D', N]
    zero matrix, O(B D') work.

    Args:
      emb: [N, D'] embeddings K A^T of the training points (rows beyond n: padding).
      i, j, k: [B] int indices of the triplets.
      weights: [B] rank weights.
      margin: gamma.
      n: number of training points N.

    Returns:
      ([D', N] preconditioned gradient, [B] hinge values).
    """
    chex.assert_equal_shape([i, j, k, weights])
    pu = emb[i] - emb[j]
    pv = emb[i] - emb[k]
    cu, cv, hinge = _hinge_coefficients(pu, pv, weights, margin=margin)
    idx = jnp.concatenate([i, j, k])
    vals = jnp.concatenate([cu - cv, -cu, cv])
    grad_t = jnp.zeros((n, emb.shape[1]), emb.dtype).at[idx].add(vals)
    return grad_t.T, hinge
