"""WARCA losses, penalties and their closed-form gradients (paper section 3).

Every function here is a pure function of arrays; options are keyword-only.
Ranks, sampled violators and rank weights are inputs: they are computed by
``warca_jax.sampling`` and are constants to the gradient.

Notation (paper Table 1): a sampled triplet is (i, j, k) with y_i = y_j and
y_k != y_i; ``u = x_i - x_j``, ``v = x_i - x_k``; ``d_ij = ||W u||``,
``d_ik = ||W v||``; the hinge is ``[gamma + d_ij - d_ik]_+`` and each triplet
carries the weight ``L(rank_ij)`` (eq. 8).

Note on eq. 20: the paper writes the hinge part of the kernel gradient as
``2 L(rank) A 1[.] G_ijk``. With F_A = ||A (kappa_i - kappa_j)|| (a norm, not
its square) the derivative of F_A is ``A (k_i - k_j)(k_i - k_j)^T / d_ij``,
so the factor is 1, not 2; the functions here use the exact derivative and the
tests check it against ``jax.grad``.
"""

from __future__ import annotations

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


def safe_norm(x: jax.Array, axis: int = -1) -> jax.Array:
    """Euclidean norm whose gradient at 0 is 0 instead of NaN."""
    sq = jnp.sum(x * x, axis=axis)
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def _safe_inv(d: jax.Array) -> jax.Array:
    return jnp.where(d > 0, 1.0 / jnp.where(d > 0, d, 1.0), 0.0)


# ----------------------------------------------------------------------------
# Penalties on W: [D', D] (or on A with a Gram matrix, below).


def aon_penalty(w: jax.Array) -> jax.Array:
    """Approximately orthonormal penalty 1/2 ||W W^T - I||_F^2 (eq. 10)."""
    r = w @ w.T - jnp.eye(w.shape[0], dtype=w.dtype)
    return 0.5 * jnp.sum(r * r)


def aon_penalty_grad(w: jax.Array) -> jax.Array:
    """Gradient of ``aon_penalty``: 2 (W W^T - I) W."""
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


def kernel_aon_penalty(a: jax.Array, gram: jax.Array) -> jax.Array:
    """1/2 ||A K A^T - I||_F^2 (eq. 18). a: [D', N], gram: [N, N]."""
    r = a @ gram @ a.T - jnp.eye(a.shape[0], dtype=a.dtype)
    return 0.5 * jnp.sum(r * r)


def kernel_aon_penalty_grad(a: jax.Array, gram: jax.Array) -> jax.Array:
    """Gradient of ``kernel_aon_penalty``: 2 (A K A^T - I) A K (eq. 20, K symmetric)."""
    ak = a @ gram
    return 2.0 * (ak @ a.T - jnp.eye(a.shape[0], dtype=a.dtype)) @ ak


def kernel_aon_penalty_precond_grad(a: jax.Array, ak_t: jax.Array) -> jax.Array:
    """Preconditioned gradient 2 (A K A^T - I) A (eq. 23), i.e. the gradient times K^-1.

    Args:
      a: [D', N].
      ak_t: [N, D'] = K A^T, the embeddings of the training points, so that
        A K A^T = a @ ak_t costs D'^2 N, not D' N^2.
    """
    return 2.0 * (a @ ak_t - jnp.eye(a.shape[0], dtype=a.dtype)) @ a


# ----------------------------------------------------------------------------
# The WARP hinge of eq. 12, primal form.


def triplet_hinge(
    pu: jax.Array, pv: jax.Array, *, margin: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Hinge terms from projected differences.

    Args:
      pu: [B, D'] projected positive differences W (x_i - x_j).
      pv: [B, D'] projected negative differences W (x_i - x_k).
      margin: gamma.

    Returns:
      (hinge [B], d_ij [B], d_ik [B]) with hinge = [gamma + d_ij - d_ik]_+.
    """
    dij = safe_norm(pu)
    dik = safe_norm(pv)
    return jnp.maximum(margin + dij - dik, 0.0), dij, dik


def warca_hinge_loss(
    w: jax.Array, u: jax.Array, v: jax.Array, weights: jax.Array, *, margin: float
) -> jax.Array:
    """Sampled WARP part of eq. 12: mean_b L(rank_b) [gamma + ||W u_b|| - ||W v_b||]_+.

    Args:
      w: [D', D] linear map.
      u: [B, D] positive differences x_i - x_j.
      v: [B, D] negative differences x_i - x_k (k a sampled violator).
      weights: [B] rank weights L(rank_ij); 0 for pairs without a violator.
      margin: gamma.

    Returns:
      Scalar loss.
    """
    hinge, _, _ = triplet_hinge(u @ w.T, v @ w.T, margin=margin)
    return jnp.mean(weights * hinge)


def hinge_coefficients(
    pu: jax.Array, pv: jax.Array, weights: jax.Array, *, margin: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per-triplet factors of the closed-form gradient.

    Returns:
      (cu [B, D'], cv [B, D'], hinge [B]) where cu = c W u / d_ij and
      cv = c W v / d_ik with c = L(rank) 1[hinge > 0] / B, so that the gradient
      of the hinge part is cu^T u - cv^T v in the primal form.
    """
    hinge, dij, dik = triplet_hinge(pu, pv, margin=margin)
    c = weights * (hinge > 0) / pu.shape[0]
    cu = pu * (c * _safe_inv(dij))[:, None]
    cv = pv * (c * _safe_inv(dik))[:, None]
    return cu, cv, hinge


def warca_hinge_grad(
    w: jax.Array, u: jax.Array, v: jax.Array, weights: jax.Array, *, margin: float
) -> jax.Array:
    """Closed-form gradient of ``warca_hinge_loss`` with respect to W.

    For one active triplet d||W u||/dW = W u u^T / ||W u||, so the gradient is
    W G_ijk with G_ijk = u u^T / d_ij - v v^T / d_ik (eq. 21 in input space).
    It is assembled as two [D', B] x [B, D] products, never forming G.

    Returns:
      [D', D] gradient.
    """
    cu, cv, _ = hinge_coefficients(u @ w.T, v @ w.T, weights, margin=margin)
    return cu.T @ u - cv.T @ v


def outer_product_g(u: jax.Array, v: jax.Array, dij: jax.Array, dik: jax.Array) -> jax.Array:
    """G_ijk = u u^T / d_ij - v v^T / d_ik for one triplet (eq. 21). u, v: [n] -> [n, n]."""
    return jnp.outer(u, u) * _safe_inv(dij) - jnp.outer(v, v) * _safe_inv(dik)


def sparse_e(i: int, j: int, k: int, dij: jax.Array, dik: jax.Array, n: int) -> jax.Array:
    """E_ijk = (e_i - e_j)(e_i - e_j)^T / d_ij - (e_i - e_k)(e_i - e_k)^T / d_ik (eq. 24).

    Dense [n, n] for tests and illustration; training uses its non-zeros (the
    paper's nine, seven distinct as both terms touch (i, i)) through
    ``kernel_hinge_precond_grad``.
    """
    eye = jnp.eye(n, dtype=jnp.result_type(dij))
    return outer_product_g(eye[i] - eye[j], eye[i] - eye[k], dij, dik)


# ----------------------------------------------------------------------------
# Kernel form (eq. 15-25): W = A X^T, F_A(i, j) = ||A (kappa_i - kappa_j)||.


def kernel_warca_hinge_loss(
    a: jax.Array,
    kappa_i: jax.Array,
    kappa_j: jax.Array,
    kappa_k: jax.Array,
    weights: jax.Array,
    *,
    margin: float,
) -> jax.Array:
    """Sampled WARP part of eq. 18.

    Args:
      a: [D', N] kernel coefficients.
      kappa_i, kappa_j, kappa_k: [B, N] kernel columns of the triplet's points.
      weights: [B] rank weights.
      margin: gamma.

    Returns:
      Scalar loss.
    """
    return warca_hinge_loss(a, kappa_i - kappa_j, kappa_i - kappa_k, weights, margin=margin)


def kernel_warca_hinge_grad(
    a: jax.Array,
    kappa_i: jax.Array,
    kappa_j: jax.Array,
    kappa_k: jax.Array,
    weights: jax.Array,
    *,
    margin: float,
) -> jax.Array:
    """Closed-form gradient of ``kernel_warca_hinge_loss``: mean_b L_b 1[.] A G_ijk (eq. 20-21)."""
    return warca_hinge_grad(a, kappa_i - kappa_j, kappa_i - kappa_k, weights, margin=margin)


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

    A K E_ijk touches only columns i, j and k: with p_l = A kappa_l (row l of
    ``emb``), A K E_ijk = (p_i - p_j)(e_i - e_j)^T / d_ij - (p_i - p_k)(e_i - e_k)^T / d_ik.
    The gradient is therefore a scatter-add of 3 columns per triplet into a
    [D', N] zero matrix, O(B D') work.

    Args:
      emb: [N, D'] embeddings K A^T of the training points.
      i, j, k: [B] int indices of the triplets.
      weights: [B] rank weights.
      margin: gamma.
      n: number of training points N.

    Returns:
      ([D', N] preconditioned gradient, [B] hinge values).
    """
    pu = emb[i] - emb[j]
    pv = emb[i] - emb[k]
    cu, cv, hinge = hinge_coefficients(pu, pv, weights, margin=margin)
    idx = jnp.concatenate([i, j, k])
    vals = jnp.concatenate([cu - cv, -cu, cv])
    grad_t = jnp.zeros((n, emb.shape[1]), emb.dtype).at[idx].add(vals)
    return grad_t.T, hinge
