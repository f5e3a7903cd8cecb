"""Covariances shared by the learners.

``pair_covariances`` (XQDA, KISSME and the Mahalanobis baseline): Sigma_I (same-identity
pairs) and Sigma_E (different-identity pairs) of the differences x_i - x_j over every
ordered pair i != j, computed without enumerating the O(N^2) pairs (XQDA's eq. 19-20):
X^T X, per-class sums and counts are enough.

``invertible_covariance`` (the "covariance" prior of ITML and SDML): the features'
covariance, refused when it is singular.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np


@functools.partial(jax.jit, static_argnames="num_classes")
def _pair_sums(x: jax.Array, classes: jax.Array, *, num_classes: int):
    """Sums of (x_i - x_j)(x_i - x_j)^T over same-class and over all ordered pairs."""
    hi = jax.lax.Precision.HIGHEST
    x = x - jnp.mean(x, axis=0)  # differences are shift-invariant; centring avoids cancellation
    n = x.shape[0]
    class_sums = jax.ops.segment_sum(x, classes, num_segments=num_classes)  # [C, D]
    counts = jax.ops.segment_sum(jnp.ones((n,), x.dtype), classes, num_segments=num_classes)
    # sum_{i,j in c} (x_i - x_j)(x_i - x_j)^T = 2 sum_{i in c} n_c x_i x_i^T - 2 S_c S_c^T
    weighted = x * counts[classes][:, None]
    intra = 2.0 * (
        jnp.dot(weighted.T, x, precision=hi) - jnp.dot(class_sums.T, class_sums, precision=hi)
    )
    total_sum = jnp.sum(x, axis=0)
    every = 2.0 * (n * jnp.dot(x.T, x, precision=hi) - jnp.outer(total_sum, total_sum))
    return intra, every, jnp.sum(counts * counts)


def pair_covariances(
    x: np.ndarray, labels: np.ndarray, cams: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Intra- and extra-personal covariances of pair differences, without enumerating pairs.

    Sigma_I = mean over ordered pairs i != j with y_i == y_j of (x_i - x_j)(x_i - x_j)^T,
    Sigma_E = the same mean over pairs with y_i != y_j (XQDA eq. 19-20, single view).
    With ``cams``, only pairs of two cameras count (XQDA's two views, generalised to any
    number of cameras): the sums over every pair less those over each camera's pairs.

    Args:
      x: [N, D] features (float32 or, under ``jax.enable_x64``, float64).
      labels: [N] identity labels; at least one identity with two images and two identities.
      cams: optional [N] camera ids; the training data must then hold a same-identity and a
        different-identity pair across cameras.

    Returns:
      (Sigma_I [D, D], Sigma_E [D, D]) as float64 NumPy arrays.
    """
    _, classes = np.unique(np.asarray(labels), return_inverse=True)
    classes = classes.astype(np.int32)
    groups = [np.arange(x.shape[0])]
    if cams is not None:
        cams = np.asarray(cams)
        groups += [np.flatnonzero(cams == c) for c in np.unique(cams)]
    sums = []
    for g in groups:  # every pair, then each camera's pairs (subtracted)
        sub, cls = np.asarray(x)[g], classes[g]
        _, cls = np.unique(cls, return_inverse=True)
        intra, every, sq = _pair_sums(
            jnp.asarray(sub), jnp.asarray(cls.astype(np.int32)), num_classes=int(cls.max()) + 1
        )
        n = len(g)
        sums.append((np.asarray(intra, np.float64), np.asarray(every, np.float64), float(sq) - n,
                     n * n - float(sq)))  # fmt: skip
    intra, every, n_intra, n_extra = sums[0]
    for c_intra, c_every, c_n_intra, c_n_extra in sums[1:]:
        intra, every = intra - c_intra, every - c_every
        n_intra, n_extra = n_intra - c_n_intra, n_extra - c_n_extra
    if n_intra <= 0 or n_extra <= 0:
        across = " across cameras" if cams is not None else ""
        raise ValueError(
            f"need a same-identity and a different-identity pair{across} for pair covariances"
        )
    return intra / n_intra, (every - intra) / n_extra


def invertible_covariance(x: np.ndarray) -> np.ndarray:
    """[D, D] float64 covariance of the features ``x`` [N, D], when it is invertible.

    Raises:
      ValueError: its eigenvalues spread over more than 1e10 (a prior must be definite).
    """
    cov = np.atleast_2d(np.cov(np.asarray(x, np.float64), rowvar=False))
    w = np.linalg.eigvalsh(cov)
    if not w.min() > 1e-10 * max(w.max(), 1e-300):
        raise ValueError(
            "method.prior 'covariance' needs an invertible covariance of the training features; "
            f"its eigenvalues range over [{w.min():.3g}, {w.max():.3g}] ({x.shape[0]} samples, "
            f"{x.shape[1]} dimensions): use prior 'identity' or reduce the dimension (PCA)"
        )
    return cov
