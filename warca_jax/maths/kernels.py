"""Kernel functions k(X, Y), computed in row blocks so memory stays bounded.

Every kernel maps ``x: [n, d]`` and ``y: [m, d]`` to ``[n, m]``. They are
built on ``warca_jax.maths.distances``, which processes rows of ``x`` in jitted
blocks (the chi2 and L1 distances need a ``[b, m, d]`` intermediate, kept
below a fixed budget).

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

import jax
import jax.numpy as jnp
import numpy as np

from warca_jax.maths import distances

KERNELS = ("linear", "rbf", "chi2", "chi2_rbf", "laplacian")
_NEEDS_GAMMA = ("rbf", "chi2_rbf", "laplacian")
_NON_NEGATIVE = ("chi2", "chi2_rbf")
# The distance each kernel is built on.
_DISTANCE = {"rbf": "sqeuclidean", "chi2": "chi2", "chi2_rbf": "chi2", "laplacian": "manhattan"}
# p in d(c x, c y) = c^p d(x, y) of the distance in each bandwidth kernel's exponent.
_DEGREE = {"rbf": 2, "chi2_rbf": 1, "laplacian": 1}


def needs_gamma(kernel: str) -> bool:
    return kernel in _NEEDS_GAMMA


def centred(x: jax.typing.ArrayLike, y: jax.typing.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """x and y, float32, minus the mean row of y: the same ||x - y||^2, which the distances
    compute as ||x||^2 + ||y||^2 - 2 x.y, without that sum's cancellation in float32 when
    the features lie far from the origin compared with their spread (near pairs of points
    around 100 would come out at distance 0, their kernel rows equal). The shift is y's
    alone, so every block of queries against the same y (a kernel metric's support) is
    shifted alike."""
    y = np.asarray(y, np.float32)
    shift = y.astype(np.float64).mean(axis=0) if len(y) else np.zeros(y.shape[1])
    shift = shift.astype(np.float32)
    return np.asarray(x, np.float32) - shift, y - shift


def _rbf_ready(x, y, kernel: str):
    """(x, y) as the kernel's distance takes them: ``centred`` for the rbf kernel."""
    return centred(x, y) if _DISTANCE.get(kernel) == "sqeuclidean" else (x, y)


def gamma_for_scaled(kernel: str, gamma: float, factor: float) -> float:
    """The bandwidth that gives features times ``factor`` the kernel values of ``gamma``.

    k'(c x, c y) = k(x, y) with gamma' = gamma / c^p, p the degree of the kernel's
    distance (2 for rbf, 1 for chi2_rbf and laplacian). ``gamma <= 0`` (chosen from the
    data) and kernels without a bandwidth are returned as they are.
    """
    if not needs_gamma(kernel) or gamma <= 0 or factor == 1.0:
        return gamma
    return float(gamma / factor ** _DEGREE[kernel])


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


def kernel_matrix(
    x: jax.typing.ArrayLike, y: jax.typing.ArrayLike, *, kernel: str, gamma: float = 1.0
) -> jax.Array:
    """k(x, y) for all pairs of rows, in row blocks of ``x``.

    For WARCA's kernel form, k(X, x) is X^T x of eq. 15-16 in the kernel's feature space:
    a kernel ``Metric`` embeds x as A k(X, x).

    Args:
      x: [n, d] features.
      y: [m, d] features.
      kernel: one of ``KERNELS``.
      gamma: bandwidth of the rbf, chi2_rbf and laplacian kernels.

    Returns:
      [n, m] kernel values, float32.
    """
    check_kernel_input(x, kernel)
    if kernel == "linear":
        return jnp.asarray(x, jnp.float32) @ jnp.asarray(y, jnp.float32).T
    dist = distances.pairwise_distances(*_rbf_ready(x, y, kernel), distance=_DISTANCE[kernel])
    if kernel == "chi2":
        sx = jnp.sum(jnp.asarray(x, jnp.float32), 1)[:, None]
        sy = jnp.sum(jnp.asarray(y, jnp.float32), 1)[None, :]
        return 0.5 * (sx + sy - dist)
    return jnp.exp(-gamma * dist)


def kernel_diagonal(x: jax.typing.ArrayLike, *, kernel: str, gamma: float = 1.0) -> jax.Array:
    """k(x_i, x_i) for every row: [n]."""
    check_kernel_input(x, kernel)
    x = jnp.asarray(x, jnp.float32)
    if kernel == "linear":
        return jnp.sum(x * x, axis=1)
    if kernel == "chi2":
        return jnp.sum(x, axis=1)  # sum 2 x^2 / 2x, with 0/0 terms skipped
    return jnp.ones(x.shape[0], jnp.float32)


def _gamma_from(dist: jax.Array, kernel: str) -> float:
    n = dist.shape[0]
    mean = float(jnp.sum(dist)) / max(1, n * (n - 1))
    if not np.isfinite(mean) or mean <= 0:
        raise ValueError(
            f"cannot choose a bandwidth for the {kernel} kernel: the training features are "
            "all identical (mean pairwise distance 0); give kernel_gamma explicitly"
        )
    return 1.0 / mean


def default_gamma(x: np.ndarray, kernel: str) -> float:
    """1 / mean pairwise distance of the kernel's own distance over the rows of x.

    The distance is ||x - y||^2 for rbf, chi2 for chi2_rbf and ||x - y||_1 for
    laplacian, so that gamma * distance is of order one. Returns 1.0 for kernels
    without a bandwidth.
    """
    if not needs_gamma(kernel):
        return 1.0
    x, y = _rbf_ready(x, x, kernel)
    return _gamma_from(distances.pairwise_distances(x, y, distance=_DISTANCE[kernel]), kernel)


def gram_matrix(x: np.ndarray, *, kernel: str, gamma: float = 0.0) -> tuple[jax.Array, float]:
    """The training kernel matrix K = k(x, x) and the bandwidth used.

    K is WARCA's K = X^T X (eq. 17) in the kernel's feature space: column i is kappa_i.

    With ``gamma <= 0`` the bandwidth is ``default_gamma(x, kernel)``, taken from
    the same distance matrix as K, so the N x N distances are computed once.

    Returns:
      ([N, N] float32 K, gamma).
    """
    check_kernel_input(x, kernel)
    if not needs_gamma(kernel):
        return kernel_matrix(x, x, kernel=kernel), 1.0
    dist = distances.pairwise_distances(*_rbf_ready(x, x, kernel), distance=_DISTANCE[kernel])
    if gamma <= 0:
        gamma = _gamma_from(dist, kernel)
    return jnp.exp(-gamma * dist), float(gamma)
