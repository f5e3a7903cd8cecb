"""Pairwise distances between feature rows, computed jitted in row blocks.

``euclidean`` is sqrt(max(||x||^2 + ||y||^2 - 2 x.y, 0)) and ``sqeuclidean``
the clamped square; ``cosine`` is 1 - cos with zero vectors at distance 1
from all; ``manhattan`` is L1; ``chi2`` is sum (x - y)^2 / (x + y) with 0/0
terms counted as 0 (non-negative inputs only). The evaluation ranks galleries
with them and the kernels of ``warca_jax.maths.kernels`` are built on them.

Scale: ``||x||^2 + ||y||^2 - 2 x.y`` overflows float32 for features around 1e19 and
underflows to ties around 1e-19 (and XLA on a CPU flushes subnormals to zero). Every
distance here is homogeneous, ``d(c x, c y) = c**p d(x, y)`` for c > 0 with p =
``DEGREE[distance]`` (euclidean, manhattan, chi2: 1; sqeuclidean: 2; cosine: 0), so the
features are first divided by one common power of two ``2**shift`` (``scaled_features``)
when their largest magnitude is outside ``[2**-20, 2**20]``: exact, and a no-op (bit for
bit) at ordinary scales. Rankings are computed on the rescaled features; the distances
``pairwise_distances`` returns are multiplied back by ``2**(p * shift)``, exactly, and a
matrix that float32 cannot hold is refused with a ValueError instead of inf or zeros.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from warca_jax.data.dataset_arrays import feature_matrix

DISTANCES = ("euclidean", "sqeuclidean", "cosine", "manhattan", "chi2")
# p of each distance in d(c x, c y) = c**p d(x, y), c > 0: a common positive rescaling of
# query and gallery scales every distance by one factor and so changes no ranking.
DEGREE = {"euclidean": 1, "sqeuclidean": 2, "cosine": 0, "manhattan": 1, "chi2": 1}
# Features whose largest magnitude lies in this range are used as they are (bit for bit);
# outside it they are rescaled by a power of two (exact) to a largest magnitude near 1.
SAFE_MAGNITUDE = (2.0**-20, 2.0**20)

# Bound on b * m * d for the metrics that need a [b, m, d] intermediate.
# The elementwise distances (manhattan, chi2) build [b, c, d] intermediates; b rows of x
# against c rows of y at a time, with b * c * d below this budget, which keeps the
# intermediate in cache (much faster than 64M-element blocks on a CPU).
_CHUNK_ELEMENTS = 2**21
_MIN_CHUNK = 64  # rows of y per [b, c, d] intermediate, at least


def block_distances(
    x: jax.Array, y: jax.Array, xx: jax.Array, yy: jax.Array, *, distance: str
) -> jax.Array:
    """Distances between a row block and the gallery.

    Args:
      x: [b, d]. y: [m, d].
      xx: [b] and yy: [m] squared norms, computed by a separate call: inside this fusion
        XLA would recompute the row reduction for every output element.
      distance: one of ``DISTANCES``.

    Returns:
      [b, m] distances.
    """
    hi = jax.lax.Precision.HIGHEST
    if distance in ("euclidean", "sqeuclidean"):
        sq = jnp.maximum(xx[:, None] + yy[None, :] - 2.0 * jnp.dot(x, y.T, precision=hi), 0.0)
        return jnp.sqrt(sq) if distance == "euclidean" else sq
    if distance == "cosine":
        nx, ny = jnp.sqrt(xx), jnp.sqrt(yy)
        inv_x = jnp.where(nx > 0, 1.0 / jnp.where(nx > 0, nx, 1.0), 0.0)  # zero rows: cos 0
        inv_y = jnp.where(ny > 0, 1.0 / jnp.where(ny > 0, ny, 1.0), 0.0)
        return 1.0 - jnp.dot(x, y.T, precision=hi) * inv_x[:, None] * inv_y[None, :]
    b, d = x.shape
    m = y.shape[0]
    c = max(1, min(m, _CHUNK_ELEMENTS // max(1, b * d)))
    if c == m:
        return _elementwise(x, y, distance)
    nc = -(-m // c)
    chunks = jnp.pad(y, ((0, nc * c - m), (0, 0))).reshape(nc, c, d)
    out = jax.lax.map(lambda yc: _elementwise(x, yc, distance), chunks)  # [nc, b, c]
    return out.transpose(1, 0, 2).reshape(b, nc * c)[:, :m]


def _elementwise(x: jax.Array, y: jax.Array, distance: str) -> jax.Array:
    diff = x[:, None, :] - y[None, :, :]
    if distance == "manhattan":
        return jnp.sum(jnp.abs(diff), axis=-1)
    s = x[:, None, :] + y[None, :, :]
    return jnp.sum(jnp.where(s > 0, diff * diff / jnp.where(s > 0, s, 1.0), 0.0), axis=-1)


sq_norms = jax.jit(lambda a: jnp.sum(a * a, axis=1))
distances_jit = jax.jit(block_distances, static_argnames="distance")


def row_block(block_size: int, m: int, d: int, distance: str) -> int:
    """Rows of x per jitted call: ``block_size``, or for the elementwise metrics as many as
    leave room for ``_MIN_CHUNK`` rows of y in a cache-sized [b, c, d] intermediate.

    The y side is walked inside the call (``block_distances``); sizing the row block by
    all m rows of y instead made it one row per call at m = 4,800, d = 256, and the Python
    dispatches dominated (the timing: docs/methods.md#warca-against-the-authors-c-release).
    """
    del m
    if distance in ("manhattan", "chi2"):
        return max(1, min(block_size, _CHUNK_ELEMENTS // max(1, d * _MIN_CHUNK)))
    return block_size


def finite_range(
    a: np.ndarray, subject: str, expected: str = "finite values"
) -> tuple[float, float]:
    """(min, max) of a 2-D array as floats (0, 0 when empty); ValueError on any NaN or inf.

    The message reads "<subject> <n> NaN or inf values (first at ...); expected
    <expected>", e.g. subject "query features hold" or "dist holds".

    Two reductions and no temporary: NaN propagates through min and max, and an inf is one
    of them. Only a bad array pays for locating its first non-finite value.
    """
    if a.size == 0:
        return 0.0, 0.0
    lo, hi = float(a.min()), float(a.max())
    if math.isfinite(lo) and math.isfinite(hi):
        return lo, hi
    bad = ~np.isfinite(a)
    row = int(np.flatnonzero(bad.any(axis=1))[0])
    col = int(np.flatnonzero(bad[row])[0])
    raise ValueError(
        f"{subject} {int(bad.sum())} NaN or inf values (first at row {row}, "
        f"column {col}: {a[row, col]}); expected {expected}"
    )


def scale_shift(magnitude: float) -> int:
    """The power of two ``shift`` that ``scaled_features`` divides by (0: none).

    0 for a largest magnitude of 0 or within ``SAFE_MAGNITUDE``, else round(log2(magnitude)),
    which brings the largest magnitude to [2**-0.5, 2**0.5].
    """
    lo, hi = SAFE_MAGNITUDE
    if magnitude == 0 or lo <= magnitude <= hi:
        return 0
    return round(math.log2(magnitude))


def _to_float32(a: np.ndarray, shift: int) -> np.ndarray:
    """a * 2**-shift as float32: exact (ldexp) up to float32 rounding of the result."""
    if shift == 0:
        return np.asarray(a, dtype=np.float32)
    wide = a if a.dtype in (np.float32, np.float64) else a.astype(np.float64)
    return np.ldexp(wide, -shift).astype(np.float32, copy=False)


def scaled_features(
    x, y, distance: str, block_size: int, *, names: tuple[str, str] = ("query", "gallery")
) -> tuple[np.ndarray, np.ndarray, int]:
    """Checks two feature matrices and divides both by one power of two ``2**shift``.

    The shift (``scale_shift`` of the largest magnitude over both) is 0 at ordinary
    scales, so the arrays are then the plain float32 casts. Rankings under any of
    ``DISTANCES`` are the same for the rescaled features (``DEGREE``); the distances are
    ``2**(DEGREE[distance] * shift)`` times those of the rescaled features.

    Args:
      x: [n, d] and y: [m, d] real features, any float or int dtype (float64 values beyond
        float32's range are fine). distance: one of ``DISTANCES``. block_size: positive int.
      names: how the error messages call x and y.

    Returns:
      (x, y) float32 divided by 2**shift, and shift.

    Raises:
      ValueError: unknown distance, bad block_size, not 2-D real arrays, NaN or inf (the
        count and the first place named), different dims, negative values for chi2.
    """
    if distance not in DISTANCES:
        raise ValueError(f"unknown distance {distance!r}; expected one of {DISTANCES}")
    if (
        isinstance(block_size, bool)
        or not isinstance(block_size, int | np.integer)
        or block_size < 1
    ):
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    x = feature_matrix(x, f"{names[0]} features", allow_empty=True)
    y = feature_matrix(y, f"{names[1]} features", allow_empty=True)
    (x_lo, x_hi), (y_lo, y_hi) = (
        finite_range(x, f"{names[0]} features hold"),
        finite_range(y, f"{names[1]} features hold"),
    )
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"{names[0]} and {names[1]} feature dims differ: {x.shape[1]} vs {y.shape[1]} "
            f"(shapes {x.shape} and {y.shape})"
        )
    if distance == "chi2" and min(x_lo, y_lo) < 0:
        which = names[0] if x_lo < 0 else names[1]
        raise ValueError(
            f"chi2 distance requires non-negative features; got negative values "
            f"({which} features: min {min(x_lo, y_lo):.4g})"
        )
    shift = scale_shift(max(-x_lo, x_hi, -y_lo, y_hi))
    return _to_float32(x, shift), _to_float32(y, shift), shift


def check_features(x, y, distance: str, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``scaled_features`` without the rescaling: the checked float32 arrays.

    Raises ValueError also where float32 cannot hold the features.
    """
    x, y, shift = scaled_features(x, y, distance, block_size)
    if shift == 0:
        return x, y
    with np.errstate(over="ignore"):
        x, y = np.ldexp(x, shift), np.ldexp(y, shift)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"features of magnitude ~2**{shift} are beyond float32's range")
    return x, y


def pad_rows(a: np.ndarray, rows: int) -> np.ndarray:
    if a.shape[0] == rows:
        return a
    return np.pad(a, [(0, rows - a.shape[0])] + [(0, 0)] * (a.ndim - 1))


def pairwise_distances(
    x: jax.typing.ArrayLike,
    y: jax.typing.ArrayLike,
    *,
    distance: str = "euclidean",
    block_size: int = 1024,
) -> jax.Array:
    """Pairwise distances, computed jitted in row blocks of ``x``.

    ``euclidean`` is ``sqrt(max(||x||^2 + ||y||^2 - 2 x.y, 0))`` and ``sqeuclidean`` the
    clamped square; ``cosine`` is ``1 - cos`` with zero vectors at distance 1 from all;
    ``manhattan`` is L1; ``chi2`` is ``sum (x - y)^2 / (x + y)`` with ``0/0`` terms as 0
    (non-negative inputs only). For ``manhattan``/``chi2`` the block is shrunk so that the
    ``[b, c, d]`` intermediate stays below 2M elements (cache-sized).

    Correct at any finite scale: features whose largest magnitude is outside
    ``SAFE_MAGNITUDE`` are computed on after an exact power-of-two rescaling and the
    distances multiplied back (module docstring).

    Args:
      x: [n, d] features.
      y: [m, d] features.
      distance: one of ``DISTANCES``.
      block_size: rows of ``x`` per jitted call (the last block is padded).

    Returns:
      [n, m] float32 distances.

    Raises:
      ValueError: bad input (``scaled_features``), or distances float32 cannot hold: the
        largest above its range (e.g. sqeuclidean of features ~1e20) or all of them below
        its normal range (they would be zeros). Rankings are unaffected by the scale:
        ``warca_jax.evaluation`` ranks rescaled features.
    """
    x, y, shift = scaled_features(x, y, distance, block_size, names=("x", "y"))
    dist = blocked_distances(x, y, distance=distance, block_size=block_size)
    return unscale_distances(dist, DEGREE[distance] * shift, distance)


def blocked_distances(x: np.ndarray, y: np.ndarray, *, distance: str, block_size: int) -> jax.Array:
    """``pairwise_distances`` of checked float32 arrays as they are (no checks, no scaling)."""
    b = row_block(block_size, y.shape[0], y.shape[1], distance)
    b = min(b, max(x.shape[0], 1))
    yj = jnp.asarray(y)
    yy = sq_norms(yj)
    out = []
    for i in range(0, x.shape[0], b):
        xb = jnp.asarray(pad_rows(x[i : i + b], b))
        out.append(distances_jit(xb, yj, sq_norms(xb), yy, distance=distance)[: x.shape[0] - i])
    return jnp.concatenate(out) if out else jnp.zeros((0, y.shape[0]), jnp.float32)


def unscale_distances(dist: jax.Array, exponent: int, distance: str) -> jax.Array:
    """dist * 2**exponent, exactly, on the host (no flush of subnormal results to zero).

    Raises ValueError where float32 cannot hold the result: the largest distance above
    float32's range, or every nonzero distance below its normal range.
    """
    if exponent == 0 or dist.size == 0:
        return dist
    host = np.asarray(dist)
    top = float(np.max(np.abs(host)))
    if top == 0:
        return dist
    power = math.frexp(top)[1] + exponent  # |d| < 2**power
    digits = (math.log2(top) + exponent) * math.log10(2)
    if power > 128:
        raise ValueError(
            f"{distance} distances of these features reach ~1e{digits:.0f}, beyond float32's "
            f"range (3.4e38); divide the features by a common factor (no ranking changes: "
            f"warca_jax.evaluation rescales them on its own)"
        )
    if power < -125:
        raise ValueError(
            f"{distance} distances of these features are all below ~1e{digits:.0f}, under "
            f"float32's normal range (1.2e-38): they would be zeros or lose precision; "
            f"multiply the features by a common factor (no ranking changes: "
            f"warca_jax.evaluation rescales them on its own)"
        )
    return jnp.asarray(np.ldexp(host, exponent).astype(np.float32, copy=False))
