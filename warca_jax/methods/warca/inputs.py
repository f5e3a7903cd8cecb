"""The inputs of WARCA's training program: scaled features or the centred kernel matrix,
the initial parameters, and their placement on the devices' mesh."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from warca_jax.maths import device_mesh, linalg, sampling

# A mean squared distance below this fraction of the mean squared norm (of the mean kernel
# diagonal) is rounding, not spread: float64 sums of float32 features, float32 kernels.
_MSD_RELATIVE_FLOOR = 2.0**-44
_KERNEL_MSD_RELATIVE_FLOOR = 2.0**-20


def init_params(
    key: jax.Array,
    *,
    dim: int,
    d: int,
    gram: jax.Array | None = None,
    x=None,
    init: str = "random",
) -> jax.Array:
    """The initial W (orthonormal rows) or A (kernel form, W W^T = A K A^T).

    ``init="random"``: random orthonormal rows of W, or a Gaussian A scaled so that
    tr(A K A^T) = D'. ``init="pca"``: the training data's top D' principal axes, so that
    W W^T = I and the directions the hinge never moves carry the data's largest variance
    instead of a random projection of it: the top eigenvectors of the centred ``gram``
    (A = Lambda^-1/2 U^T), or of the covariance of ``x`` (primal form; ``x`` may be a
    memory map, read in blocks). Axes beyond the data's rank are random rows.
    """
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; expected one of {INITS}")
    if gram is not None:
        if init == "pca":
            return _kernel_pca_init(key, gram, dim)
        a = jax.random.normal(key, (dim, gram.shape[0]), jnp.float32)
        norm = jnp.sum(a * (gram @ a.T).T) / dim
        return a / jnp.sqrt(jnp.maximum(norm, 1e-30))
    if init == "pca":
        if x is None:
            raise ValueError("init='pca' in the primal form needs the training features x")
        return _primal_pca_init(key, x, dim)
    return linalg.random_orthonormal_rows(key, dim=dim, d=d)


INITS = ("pca", "random")
# eigenvalues below this share of the largest are the data's null space, not its axes
_PCA_RELATIVE_FLOOR = 1e-6


def _kernel_pca_init(key, gram, dim):
    """A = Lambda^-1/2 U^T on the top D' eigenpairs of the centred kernel matrix, so that
    W = A Phi(X) has orthonormal rows: the kernel principal axes. Beyond the rank of K
    (D' larger than it), the rows are random, of unit norm, as ``init='random'``'s."""
    g = np.asarray(gram, np.float64)
    w, u = _top_eigenpairs(key, g, dim)
    k = int(min(dim, np.sum(w > _PCA_RELATIVE_FLOOR * max(w[0], 0.0))))
    a = u[:, :k] / np.sqrt(w[:k])
    if k < dim:
        extra = np.asarray(jax.random.normal(key, (g.shape[0], dim - k)), np.float64)
        extra /= np.sqrt(np.maximum(np.sum(extra * (g @ extra), 0), 1e-30))
        a = np.concatenate([a, extra], axis=1)
    return jnp.asarray(a.T, jnp.float32)


def _top_eigenpairs(key, g, k, *, exact_up_to: int = 4096, power_steps: int = 6):
    """The top ``k`` eigenpairs of the symmetric PSD ``g``, largest first (eigenvalues may
    be fewer than k, the rest near 0). Exact (``eigh``) up to ``exact_up_to`` rows; beyond,
    subspace iteration from a random [N, k + 10] block (``power_steps`` products with g),
    O(N^2 k) instead of eigh's O(N^3): it is only a starting point."""
    n = g.shape[0]
    if n <= exact_up_to:
        w, u = np.linalg.eigh(g)
        return w[::-1], u[:, ::-1]
    q = np.asarray(jax.random.normal(key, (n, min(n, k + 10))), np.float64)
    for _ in range(power_steps):
        q, _ = np.linalg.qr(g @ q)
    w, v = np.linalg.eigh(q.T @ g @ q)
    return w[::-1], (q @ v)[:, ::-1]


def _primal_pca_init(key, x, dim, *, block_size: int = 65536):
    """W's rows the top D' principal axes of x, in float64 (axes do not depend on the
    input's scale): from the D x D covariance accumulated ``block_size`` rows at a time (a
    memory map is never copied whole), or ``linalg.pca`` when N < D (the N x N Gram
    matrix route for wide data), completed by random orthonormal rows beyond the rank."""
    n, d = x.shape
    if d > n:
        _, comps = linalg.pca(x, variance=1.0, max_dim=dim)
        axes = np.asarray(comps, np.float64).T  # [D, k], orthonormal columns
        if axes.shape[1] < dim:
            g = np.asarray(jax.random.normal(key, (d, dim - axes.shape[1])), np.float64)
            q, _ = np.linalg.qr(g - axes @ (axes.T @ g))
            axes = np.concatenate([axes, q], axis=1)
        return jnp.asarray(axes.T, jnp.float32)
    mean = np.zeros(d, np.float64)
    for b0 in range(0, n, block_size):
        mean += np.asarray(x[b0 : b0 + block_size], np.float64).sum(0)
    mean /= n
    cov = np.zeros((d, d), np.float64)
    for b0 in range(0, n, block_size):
        xb = np.asarray(x[b0 : b0 + block_size], np.float64) - mean
        cov += xb.T @ xb
    _, v = np.linalg.eigh(cov)
    return jnp.asarray(v[:, ::-1][:, :dim].T, jnp.float32)


def _moments(x, *, block_size: int = 65536) -> tuple[float, float]:
    """(mean squared distance, mean squared norm) of the rows of x; see ``mean_sq_dist``."""
    n = x.shape[0]
    s1 = np.zeros(x.shape[1], np.float64)
    s2 = 0.0
    for b0 in range(0, n, block_size):
        xb = np.asarray(x[b0 : b0 + block_size], np.float64)
        s1 += xb.sum(0)
        s2 += float(np.sum(xb * xb))
    m = s1 / n
    return max(2.0 * (s2 / n - float(m @ m)), 0.0), s2 / n


def mean_sq_dist(x, *, block_size: int = 65536) -> float:
    """Mean squared Euclidean distance between two training points, 2 (E||x||^2 - ||E x||^2).

    Over all ordered pairs (i, j), i = j included; in float64, ``block_size`` rows at a
    time, so a memory-mapped ``x`` is read once and never copied whole.
    """
    return _moments(x, block_size=block_size)[0]


def normalized_gram(gram: jax.Array, *, normalize: str) -> tuple[jax.Array, float]:
    """The centred training kernel matrix H K H, scaled; and the scale.

    K is the kernel matrix of eq. 17 (K = X^T X in the kernel's feature space; its columns
    are the kappa_i), from ``kernels.gram_matrix``.

    Centring (H = I - 11^T / N) is the exact reparameterisation A -> A H: distances
    between embeddings do not change, and the constant direction, whose eigenvalue of
    about N mean(K) made Adam on the plain gradient diverge, is removed. With
    ``normalize="msd"`` the matrix is also divided by the mean squared feature-space
    distance between training points, 2 (mean diag K - mean K), so that it is 1.

    Raises:
      ValueError: every training point has the same feature-space image (zero distance,
        or one within float32's rounding of the kernel values).
    """
    row = jnp.mean(gram, axis=0)
    mean_diag = float(jnp.mean(jnp.diagonal(gram)))
    msd = 2.0 * (mean_diag - float(jnp.mean(row)))
    # checked whatever ``normalize``: a matrix that puts every point at one place (e.g. the
    # chi2 or linear kernel of all-zero features, K = 0) has nothing to learn from, and
    # without the check the initial A would be divided by ~0
    if not msd > _KERNEL_MSD_RELATIVE_FLOOR * abs(mean_diag):
        what = (
            "is all zeros (e.g. all-zero features under the chi2 or linear kernel)"
            if not np.any(np.asarray(gram))
            else f"puts every training point at the same place (mean squared feature-space "
            f"distance {msd:.3g}, 0 up to float32 rounding of kernel values of size "
            f"{abs(mean_diag):.3g})"
        )
        raise ValueError(
            f"the training kernel matrix {what}: nothing to learn from; check the features "
            "and kernel_gamma"
        )
    scale = 1.0 / msd if normalize == "msd" else 1.0
    centred = (gram - row[None, :] - row[:, None] + jnp.mean(row)) * scale
    return centred, scale


def feature_scale(x, *, normalize: str) -> float:
    """The factor that gives training features a mean squared distance of 1 (``msd``), or 1."""
    if normalize != "msd":
        return 1.0
    msd, energy = _moments(x)
    if not np.isfinite(msd) or not msd > _MSD_RELATIVE_FLOOR * energy:
        raise ValueError(
            f"the training features have mean squared distance {msd:.3g} between points "
            f"(mean squared norm {energy:.3g}): every training sample is the same vector, up "
            "to float32 rounding; nothing to learn from"
        )
    return float(1.0 / np.sqrt(msd))


def place(mesh, feats, params, scale: float = 1.0):
    """Puts the features (split by rows, padded to the mesh, times ``scale``) and params
    on the mesh.

    Each device's rows are read from ``feats`` (a NumPy array, a memory map or the kernel
    matrix) by ``jax.make_array_from_callback``, so no second host copy of the whole
    features is made and, over several hosts, each host fills its own devices from its
    copy; the scale is applied block by block, in float64 before the cast to float32.
    """
    n = feats.shape[0]
    # On several devices, whole blocks of the violator selection on each, so that the
    # [B, N] search stays split by candidate (unaligned blocks make XLA gather the rows).
    block = sampling.SELECT_WIDTH if mesh.devices.size > 1 else 1
    rows = device_mesh.pad_to_multiple(n, mesh, block=block)
    shape = (rows, *feats.shape[1:])

    def scaled(a):
        a = np.asarray(a)
        return a if scale == 1.0 else (a.astype(np.float64) * scale).astype(np.float32)

    def block(index):
        start, stop, _ = index[0].indices(rows)
        take = max(0, min(stop, n) - start)
        if take == stop - start:  # no padding rows: the slice itself
            return scaled(feats[start:stop])[(slice(None), *index[1:])]
        out = np.zeros((stop - start, *feats.shape[1:]), np.float32)
        out[:take] = scaled(feats[start : start + take])
        return out[(slice(None), *index[1:])]

    feats = jax.make_array_from_callback(shape, device_mesh.rows(mesh), block)
    return feats, jax.device_put(params, device_mesh.replicated(mesh))
