"""Small linear-algebra pieces the closed-form learners share (PCA, PSD, scatter).

One-off decompositions of D x D matrices in NumPy (float64), run once per fit,
never inside a training loop: JAX has no advantage for a single eigendecomposition.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


def pca(x: np.ndarray, *, variance: float = 0.95, max_dim: int | None = None):
    """Principal components keeping ``variance`` of the total variance.

    Args:
      x: [N, D] training features.
      variance: fraction of variance to keep, in (0, 1].
      max_dim: optional cap on the number of components.

    Returns:
      (mean [D], components [k, D] with orthonormal rows), so that the reduced
      features are (x - mean) @ components.T.
    """
    if not 0 < variance <= 1:
        raise ValueError(f"variance must be in (0, 1], got {variance}")
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=0)
    xc = x - mean
    n, d = xc.shape
    if d >= max(8 * n, 10_000):  # very wide (LOMO): through the [N, N] Gram matrix
        # (narrower data keep the SVD, so their components, signs included, are unchanged)
        energy, vt = _gram_directions(xc)
    else:  # economy SVD: the right singular vectors are the principal directions
        _, s, vt = np.linalg.svd(xc, full_matrices=False)
        energy = s**2
    total = energy.sum()
    if total <= 0:
        raise ValueError("PCA of constant features: all training rows are identical")
    k = int(np.searchsorted(np.cumsum(energy) / total, variance - 1e-12) + 1)
    k = min(k, len(energy)) if max_dim is None else min(k, len(energy), max_dim)
    return mean.astype(np.float32), vt[:k].astype(np.float32)


def gram_eigenpairs(xc: np.ndarray, rtol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues [k] descending, eigenvectors [N, k]) of the [N, N] Gram matrix of the
    centred rows ``xc``, those below ``rtol`` times the largest left out (none for constant
    rows): the squared singular values and left singular vectors of ``xc``."""
    w, u = np.linalg.eigh(xc @ xc.T)
    keep = w > rtol * max(w.max(), 0.0)
    return w[keep][::-1], u[:, keep][:, ::-1]


def _gram_directions(xc: np.ndarray, rtol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """(squared singular values [k] descending, right singular vectors [k, D]) of the
    centred rows ``xc`` [N, D] from the eigenvectors of their [N, N] Gram matrix: O(N^2 D)
    once, against an SVD's much larger constant when D >> N. Directions whose squared
    singular value is below ``rtol`` times the largest are left out; a QR step keeps the
    rest orthonormal (and each direction's sign)."""
    w, u = gram_eigenpairs(xc, rtol)
    if not len(w):
        raise ValueError("PCA of constant features: all training rows are identical")
    q, r = np.linalg.qr(((u.T @ xc) / np.sqrt(w)[:, None]).T)
    return w, (q * np.sign(np.diag(r))[None, :]).T


def span_basis(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean [D], basis [k, D] with orthonormal rows) of the span of the centred rows of x,
    for wide data (D much larger than N, e.g. LOMO's 26,960 dims on 632 images):
    ``_gram_directions``, the centring's own null direction left out."""
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=0)
    _, basis = _gram_directions(x - mean)
    return mean.astype(np.float32), basis.astype(np.float32)


class Span(NamedTuple):
    """The span of the centred rows of training features, for a linear learner with no more
    training images than features (N <= D) whose loss sees the data only through
    differences of training points: it trains on the k <= N - 1 coordinates ``coords``
    instead of D, and its [D', k] map is ``lift``ed to the [D', D] one, which has no part
    outside the span."""

    mean: np.ndarray  # [D]
    basis: np.ndarray  # [k, D], orthonormal rows

    def coords(self, x, dtype=np.float32) -> np.ndarray:
        """[N, k] coordinates of the rows of ``x`` (their centred projections), computed in
        float64 and returned as ``dtype``."""
        return ((np.asarray(x, np.float64) - self.mean) @ self.basis.T.astype(np.float64)).astype(
            dtype
        )

    def lift(self, projection, dtype=np.float32) -> np.ndarray:
        """The [D', D] map of a [D', k] map on ``coords``, computed in ``dtype``."""
        return np.asarray(projection, dtype) @ self.basis.astype(dtype, copy=False)


def training_span(x, *, min_dim: int) -> Span | None:
    """The ``Span`` of training features ``x`` [N, D] with N <= D, or None: more rows than
    columns (no saving), or a span of fewer than ``min_dim`` dimensions (a learner's D'
    orthonormal rows need D' of them)."""
    n, d = x.shape
    if n > d:
        return None
    mean, basis = span_basis(x)
    return Span(mean, basis) if basis.shape[0] >= min_dim else None


def initial_map(x: np.ndarray, dim: int) -> np.ndarray:
    """The starting map L [dim, D] of a learned projection (LMNN, NCA): the identity for a
    full-rank L (``dim`` 0 or D), the top ``dim`` principal directions otherwise, completed
    with fixed random directions when there are fewer samples than ``dim``."""
    d = x.shape[1]
    if dim in (0, d):
        return np.eye(d, dtype=np.float32)
    _, comps = pca(x, variance=1.0, max_dim=dim)
    if comps.shape[0] < dim:  # fewer samples than dim: complete with random directions
        extra = np.random.default_rng(0).standard_normal((dim - comps.shape[0], d))
        comps = np.concatenate([comps, extra.astype(np.float32) / np.sqrt(d)])
    return comps


def regularise(s: np.ndarray, *, eps: float = 1e-6, what: str = "matrix") -> np.ndarray:
    """s + r I with r = eps * trace(s) / D, warning when s was (near) singular.

    The ridge is always added, so that the result is invertible whatever the
    data; the warning tells the user when it mattered (condition number of s
    above 1 / eps).
    """
    s = np.asarray(s, np.float64)
    d = s.shape[0]
    scale = np.trace(s) / d if np.trace(s) > 0 else 1.0
    w = np.linalg.eigvalsh((s + s.T) / 2)
    if w[0] <= eps * max(w[-1], 1e-300):
        warnings.warn(
            f"{what} is singular or ill-conditioned (smallest/largest eigenvalue "
            f"{w[0]:.3g}/{w[-1]:.3g}); regularised with {eps:g} * trace / D on its diagonal",
            RuntimeWarning,
            stacklevel=2,
        )
    return s + eps * scale * np.eye(d)


def psd_project(m: np.ndarray) -> np.ndarray:
    """Nearest (Frobenius) positive semi-definite matrix: negative eigenvalues clipped to 0."""
    m = np.asarray(m, np.float64)
    w, v = np.linalg.eigh((m + m.T) / 2)
    return (v * np.maximum(w, 0.0)) @ v.T


def psd_factor(m: np.ndarray, *, dim: int | None = None) -> np.ndarray:
    """W with W^T W = m (m PSD): rows sqrt(lambda_i) v_i^T, largest first.

    Args:
      m: [D, D] symmetric PSD matrix (negative eigenvalues are clipped).
      dim: keep only the top ``dim`` eigen-directions (a low-rank metric).

    Returns:
      [k, D] float32.
    """
    m = np.asarray(m, np.float64)
    w, v = np.linalg.eigh((m + m.T) / 2)
    order = np.argsort(w)[::-1]
    w, v = np.maximum(w[order], 0.0), v[:, order]
    if dim is not None:
        w, v = w[:dim], v[:, :dim]
    return (np.sqrt(w)[:, None] * v.T).astype(np.float32)


def generalized_eigh(a: np.ndarray, b: np.ndarray, *, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``dim`` solutions of a v = lambda b v (b symmetric positive definite).

    Returns:
      (eigenvalues [dim] descending, eigenvectors [D, dim], b-orthonormal).
    """
    a = np.asarray((a + a.T) / 2, np.float64)
    b = np.asarray((b + b.T) / 2, np.float64)
    chol = np.linalg.cholesky(b)
    inv = np.linalg.inv(chol)
    c = inv @ a @ inv.T
    w, u = np.linalg.eigh((c + c.T) / 2)
    order = np.argsort(w)[::-1][:dim]
    return w[order], inv.T @ u[:, order]


def random_orthonormal_rows(key: jax.Array, *, dim: int, d: int) -> jax.Array:
    """[dim, d] float32 with orthonormal rows (dim <= d), from a Gaussian matrix's QR.

    The random start of WARCA's W and of the study's optimisers' L (``init='orthonormal'``).
    """
    q, _ = jnp.linalg.qr(jax.random.normal(key, (d, dim), jnp.float32))
    return q.T


def pair_curvature(feats, i, j, *, gram: bool, iters: int = 100) -> float:
    """lambda: the largest eigenvalue of the pairs' second moment (1/P) sum_p d_p d_p^T,
    d_p the difference of pair p's features (rows i_p and j_p), by power iteration from a
    fixed start: the largest eigenvalue of G C / P, G the Gram matrix of the features and C
    the pairs' Laplacian, computed on the [N] side. ``feats``: [N, D] features (G is never
    formed) or, with ``gram``, G itself (a kernel matrix: the moment in feature space).

    A gradient step on a loss of the pairs' squared distances ||L d_p||^2, with weights of
    size at most 1 / P, moves the embedding by -2 step G C' E (rPCCA's preconditioned kernel
    step the same): lambda bounds how far one step moves the distances, whatever the data's
    spectrum.
    """
    f = np.asarray(feats, np.float64)
    i, j = np.asarray(i), np.asarray(j)
    n, p = f.shape[0], len(i)

    def apply(v):
        d = v[i] - v[j]
        lv = np.bincount(i, d, n) - np.bincount(j, d, n)  # the pairs' Laplacian times v
        return (f @ lv if gram else f @ (f.T @ lv)) / p

    v = np.random.default_rng(0).standard_normal(n)
    lam = 0.0
    for _ in range(iters):
        w = apply(v)
        lam = float(np.linalg.norm(w))
        if not lam > 0:
            break
        v = w / lam
    return lam
