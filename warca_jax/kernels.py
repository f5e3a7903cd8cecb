"""Kernel functions k(X, Y), computed in row blocks so memory stays bounded.

Every kernel is a pure function of two arrays ``x: [n, d]`` and ``y: [m, d]``
returning ``[n, m]``. The elementwise kernels (chi2 family, Laplacian) need an
``[b, m, d]`` intermediate; rows of ``x`` are processed ``b`` at a time with
``jax.lax.map`` so that ``b * m * d`` stays below a fixed budget.

Kernels (``g`` is ``gamma``):

* ``linear``:    x . y
* ``rbf``:       exp(-g ||x - y||^2)
* ``chi2``:      additive chi2 kernel sum_d 2 x_d y_d / (x_d + y_d)
                 = (sum x + sum y) / 2 - chi2(x, y) / 2, with
                 chi2(x, y) = sum_d (x_d - y_d)^2 / (x_d + y_d); for
                 L1-normalised histograms it equals 1 - chi2(x, y) / 2.
* ``chi2_rbf``:  exp(-g chi2(x, y))
* ``laplacian``: exp(-g ||x - y||_1)

In the chi2 family a term with x_d + y_d = 0 is 0/0 and is skipped (counts 0).
The chi2 family needs non-negative inputs; ``check_kernel_input`` says so before
any work is done.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

KERNELS = ("linear", "rbf", "chi2", "chi2_rbf", "laplacian")
_NEEDS_GAMMA = ("rbf", "chi2_rbf", "laplacian")
_NON_NEGATIVE = ("chi2", "chi2_rbf")
# Budget of elements for one [b, m, d] intermediate block.
_BLOCK_ELEMENTS = 1 << 25


def needs_gamma(kernel: str) -> bool:
    return kernel in _NEEDS_GAMMA


def check_kernel_input(x: np.ndarray, kernel: str) -> None:
    """Raises ValueError when ``x`` cannot be fed to ``kernel``."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {KERNELS}")
    if kernel in _NON_NEGATIVE:
        x = np.asarray(x)
        if np.any(x < 0):
            bad = int(np.sum(np.any(x < 0, axis=1)))
            raise ValueError(
                f"the {kernel} kernel needs non-negative features (histograms); "
                f"{bad} rows have negative entries (min {float(x.min()):.4g})"
            )


def _sqdist(x: jax.Array, y: jax.Array) -> jax.Array:
    xx = jnp.sum(x * x, axis=1)[:, None]
    yy = jnp.sum(y * y, axis=1)[None, :]
    return jnp.maximum(xx + yy - 2.0 * (x @ y.T), 0.0)


def _chi2_terms(xb: jax.Array, y: jax.Array) -> jax.Array:
    """chi2 distance of a row block: [b, d] x [m, d] -> [b, m]."""
    s = xb[:, None, :] + y[None, :, :]
    diff = xb[:, None, :] - y[None, :, :]
    safe = jnp.where(s > 0, s, 1.0)
    return jnp.sum(jnp.where(s > 0, diff * diff / safe, 0.0), axis=-1)


def _l1(xb: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.sum(jnp.abs(xb[:, None, :] - y[None, :, :]), axis=-1)


def _rowwise(fn, x: jax.Array, y: jax.Array) -> jax.Array:
    """Applies ``fn(x_block, y) -> [b, m]`` over row blocks of ``x``."""
    n, d = x.shape
    m = y.shape[0]
    b = int(max(1, min(n, _BLOCK_ELEMENTS // max(1, m * d))))
    nb = -(-n // b)
    pad = nb * b - n
    xp = jnp.pad(x, ((0, pad), (0, 0))).reshape(nb, b, d)
    out = jax.lax.map(lambda xb: fn(xb, y), xp)
    return out.reshape(nb * b, m)[:n]


def chi2_distance(x: jax.Array, y: jax.Array) -> jax.Array:
    """chi2(x, y) = sum (x - y)^2 / (x + y), 0/0 terms skipped. [n, d], [m, d] -> [n, m]."""
    return _rowwise(_chi2_terms, x, y)


def l1_distance(x: jax.Array, y: jax.Array) -> jax.Array:
    """||x - y||_1 in row blocks. [n, d], [m, d] -> [n, m]."""
    return _rowwise(_l1, x, y)


@functools.partial(jax.jit, static_argnames=("kernel",))
def kernel_matrix(x: jax.Array, y: jax.Array, *, kernel: str, gamma: float = 1.0) -> jax.Array:
    """k(x, y) for all pairs of rows.

    Args:
      x: [n, d] features.
      y: [m, d] features.
      kernel: one of ``KERNELS``.
      gamma: bandwidth of the rbf, chi2_rbf and laplacian kernels.

    Returns:
      [n, m] kernel values, float32.
    """
    x = jnp.asarray(x, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    if kernel == "linear":
        return x @ y.T
    if kernel == "rbf":
        return jnp.exp(-gamma * _sqdist(x, y))
    if kernel == "chi2":
        return 0.5 * (jnp.sum(x, 1)[:, None] + jnp.sum(y, 1)[None, :] - chi2_distance(x, y))
    if kernel == "chi2_rbf":
        return jnp.exp(-gamma * chi2_distance(x, y))
    if kernel == "laplacian":
        return jnp.exp(-gamma * l1_distance(x, y))
    raise ValueError(f"unknown kernel {kernel!r}; expected one of {KERNELS}")


def default_gamma(x: np.ndarray, kernel: str, *, max_rows: int = 1000, seed: int = 0) -> float:
    """1 / mean pairwise distance of the kernel's own distance, on a row subsample.

    The distance is ||x - y||^2 for rbf, chi2 for chi2_rbf and ||x - y||_1 for
    laplacian, so that gamma * distance is of order one. Returns 1.0 for kernels
    without a bandwidth.
    """
    if not needs_gamma(kernel):
        return 1.0
    x = np.asarray(x, np.float32)
    if x.shape[0] > max_rows:
        x = x[np.random.default_rng(seed).choice(x.shape[0], max_rows, replace=False)]
    xj = jnp.asarray(x)
    dist = {"rbf": _sqdist, "chi2_rbf": chi2_distance, "laplacian": l1_distance}[kernel](xj, xj)
    n = x.shape[0]
    mean = float(jnp.sum(dist)) / max(1, n * (n - 1))
    if not np.isfinite(mean) or mean <= 0:
        raise ValueError(
            f"cannot choose a bandwidth for the {kernel} kernel: the training features are "
            "all identical (mean pairwise distance 0); give kernel_gamma explicitly"
        )
    return 1.0 / mean
