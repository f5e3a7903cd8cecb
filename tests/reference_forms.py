"""Dense reference forms of WARCA's equations, to check ``warca_jax.maths.losses`` against.

The training step never forms these matrices: it uses the closed forms of eq. 20-21
and the three-column scatter of eq. 23-24 (``losses.hinge_grad``,
``losses.kernel_hinge_precond_grad``) and the embeddings K A^T in place of K. Here each
equation is written as the paper writes it, with dense [N, N] matrices, in loops over
triplets, for small problems in float64.
"""

from __future__ import annotations

import jax.numpy as jnp


def _inv(d):
    return jnp.where(d > 0, 1.0 / jnp.where(d > 0, d, 1.0), 0.0)


def outer_product_g(u, v, dij, dik):
    """G_ijk = u u^T / d_ij - v v^T / d_ik for one triplet (eq. 21). u, v: [n] -> [n, n]."""
    return jnp.outer(u, u) * _inv(dij) - jnp.outer(v, v) * _inv(dik)


def sparse_e(i, j, k, dij, dik, n):
    """E_ijk = (e_i - e_j)(e_i - e_j)^T / d_ij - (e_i - e_k)(e_i - e_k)^T / d_ik (eq. 24)."""
    eye = jnp.eye(n, dtype=jnp.result_type(dij))
    return outer_product_g(eye[i] - eye[j], eye[i] - eye[k], dij, dik)


def hinge_loss(w, u, v, weights, margin):
    """mean_b L_b [gamma + ||W u_b|| - ||W v_b||]_+ (eq. 12's sampled term; eq. 18 with
    kernel columns), by ``jnp.linalg.norm``."""
    dij = jnp.linalg.norm(u @ w.T, axis=1)
    dik = jnp.linalg.norm(v @ w.T, axis=1)
    return jnp.mean(weights * jnp.maximum(margin + dij - dik, 0.0))


def _active(w, u, v, weights, margin):
    """(c_b = L_b 1[hinge_b > 0] / B, d_ij, d_ik)."""
    dij = jnp.linalg.norm(u @ w.T, axis=1)
    dik = jnp.linalg.norm(v @ w.T, axis=1)
    return weights * (margin + dij - dik > 0) / len(u), dij, dik


def hinge_grad(w, u, v, weights, margin):
    """sum_b c_b W G_ijk with G of eq. 21 formed densely (eq. 20's hinge term, factor 1)."""
    c, dij, dik = _active(w, u, v, weights, margin)
    return sum(c[b] * w @ outer_product_g(u[b], v[b], dij[b], dik[b]) for b in range(len(u)))


def kernel_hinge_precond_grad(a, gram, i, j, k, weights, margin):
    """sum_b c_b A K E_ijk with E of eq. 24 formed densely (eq. 23's hinge term)."""
    u, v = gram[i] - gram[j], gram[i] - gram[k]
    c, dij, dik = _active(a, u, v, weights, margin)
    n = gram.shape[0]
    return sum(
        c[b] * a @ gram @ sparse_e(i[b], j[b], k[b], dij[b], dik[b], n) for b in range(len(i))
    )


def kernel_aon_penalty(a, gram):
    """1/2 ||A K A^T - I||_F^2 with K itself (eq. 18)."""
    r = a @ gram @ a.T - jnp.eye(a.shape[0], dtype=a.dtype)
    return 0.5 * jnp.sum(r * r)


def kernel_aon_penalty_grad(a, gram):
    """2 (A K A^T - I) A K (eq. 20's first term)."""
    return 2.0 * (a @ gram @ a.T - jnp.eye(a.shape[0], dtype=a.dtype)) @ a @ gram


def preconditioned_sgd_step(a, gram, i, j, k, weights, *, margin, lam, eta):
    """Eq. 25: A <- (I - 2 lambda eta (A K A^T - I)) A - eta sum_b c_b A K E_ijk.

    The hinge term with factor 1, not the paper's 2 (F_A is a norm; see losses' note).
    """
    eye = jnp.eye(a.shape[0], dtype=a.dtype)
    shrink = eye - 2.0 * lam * eta * (a @ gram @ a.T - eye)
    return shrink @ a - eta * kernel_hinge_precond_grad(a, gram, i, j, k, weights, margin)
