"""WARCA's penalties (paper eq. 10, 18) and their gradients (the first terms of eq. 20, 23).

The AON penalty 1/2 ||W W^T - I||^2 (eq. 10; the lambda / 2 of eq. 11-12) and the
Frobenius one 1/2 ||W||^2 in the primal form; in the kernel form the AON penalty of
W = A X^T, 1/2 ||A K A^T - I||^2 (eq. 18), computed from the embeddings K A^T: [N, D'] so
that it costs D'^2 N, its gradient (eq. 20) and its K^-1 preconditioned direction
(eq. 23). ``warca_jax.maths.losses``' equation table names them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

PENALTIES = ("aon", "frobenius", "none")


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


def _no_penalty(w: jax.Array) -> jax.Array:
    return jnp.zeros((), w.dtype)


# kind -> (the penalty, its closed-form gradient)
_FORMS = {
    "aon": (aon_penalty, aon_penalty_grad),
    "frobenius": (frobenius_penalty, frobenius_penalty_grad),
    "none": (_no_penalty, jnp.zeros_like),
}


def _form(kind: str):
    for name, form in _FORMS.items():
        if kind == name:
            return form
    raise ValueError(f"unknown penalty {kind!r}; expected one of {PENALTIES}")


def penalty(w: jax.Array, *, kind: str) -> jax.Array:
    """The penalty named ``kind`` (one of ``PENALTIES``) at ``w``."""
    return _form(kind)[0](w)


def penalty_grad(w: jax.Array, *, kind: str) -> jax.Array:
    """Closed-form gradient of ``penalty(w, kind=kind)``."""
    return _form(kind)[1](w)


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
