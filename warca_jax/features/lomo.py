"""LOMO: Local Maximal Occurrence features (Liao et al., CVPR 2015).

For each image, at 3 scales (the image, then twice 2 x 2 average pooled):

* colour: HSV (after an optional Retinex, below) quantised to 8 x 8 x 8 = 512 joint
  bins, code = 64 v + 8 s + h;
* texture: SILTP codes with tau = 0.3 and 4 neighbours (right, up, left, down; 3^4 = 81
  bins) at radius 3 and at radius 5, on the grey image;
* histograms over 10 x 10 windows with stride 5; within each horizontal row of windows,
  the maximum of each bin over the windows of the row.

For 128 x 48 images the scales have 24, 11 and 5 rows of windows (40 rows) and the
descriptor has 40 x (512 + 81 + 81) = 26,960 dims, laid out as in the original code::

    [0, 20480)        colour: scale 1 rows 0..23, scale 2 rows 0..10, scale 3 rows 0..4,
                      512 bins per row (row r of the concatenated 40 at 512 r)
    [20480, 23720)    SILTP radius 3: the same 40 rows x 81 bins
    [23720, 26960)    SILTP radius 5: the same 40 rows x 81 bins

then ``log(x + 1)``, and each of the three parts divided by its L2 norm: the colour
part, and each SILTP radius on its own, as ``PyramidMaxSILTPHist`` of the original
normalises once per radius (so the whole vector has norm sqrt(3)).

Following the original MATLAB code: the grey image for SILTP is rgb2gray rounded to
8 bits (0.2989 R + 0.5870 G + 0.1140 B) / 255 of the input, not of a Retinex output;
SILTP borders replicate the edge pixels; at the coarser scales the grey image is 2 x 2
mean pooled, while the colour pyramid pools the quantised H, S and V bin indices with
floor(mean) (``ColorPooling``). An odd last row or column is dropped before pooling.

With ``arithmetic="float64"`` the HSV bins and SILTP codes are the original's to the bit
(its HSV conversion in double precision, MATLAB's order of operations): checked against
Liao et al.'s released MATLAB code run in GNU Octave, every element of 60 VIPeR images'
descriptors agrees to float32 rounding (benchmarks/RESULTS.md, "LOMO against the original,
step by step"). The default, float32 in JAX, moves a pixel on a bin edge by one hue or
saturation bin, or a tied neighbour by one SILTP digit; rank-1 does not see it (the same
section).

The Retinex (``retinex``, default "none"; "liao" is the original's, reproduced to the
pixel) feeds only the HSV histogram; SILTP reads the grey level of the input (above). The
Retinex readings and their steps: ``warca_jax.features.retinex``.

How each reading does with XQDA on VIPeR and CUHK01: docs/methods.md#xqda-and-lomo.

Windows of 10 with stride 5 are unions of 2 x 2 cells of 5 x 5 pixels, so each bin is
counted once per cell (one scatter-add) and the window counts are sums of 4 cells.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from warca_jax.features.color_lbp import bin_counts, rgb_to_hsv
from warca_jax.features.retinex import RETINEX, liao_retinex, msrcp, msrcr

_STEP = 5  # window stride; windows are 2 x 2 cells of _STEP x _STEP pixels (10 x 10)


def _pool_sizes(height: int, width: int, num_scales: int) -> list[tuple[int, int]]:
    sizes = [(height, width)]
    for _ in range(num_scales - 1):
        sizes.append((sizes[-1][0] // 2, sizes[-1][1] // 2))
    return sizes


def lomo_dim(
    *,
    height: int = 128,
    width: int = 48,
    num_scales: int = 3,
    hsv_bins: tuple[int, int, int] = (8, 8, 8),
    radii: tuple[int, ...] = (3, 5),
) -> int:
    """Length of the LOMO vector: rows of windows x (colour bins + 81 per radius)."""
    rows = sum(h // _STEP - 1 for h, _ in _pool_sizes(height, width, num_scales))
    return rows * (math.prod(hsv_bins) + 81 * len(radii))


def siltp_codes(grey: jax.Array, *, tau: float, radius: int) -> jax.Array:
    """Scale invariant local ternary patterns with 4 neighbours, borders replicated.

    Digit k (neighbour right, up, left, down at ``radius``) is 1 when the neighbour
    is below (1 - tau) x centre, 2 when above (1 + tau) x centre, else 0.

    Args:
      grey: [..., H, W] grey image: a NumPy array is compared in its own precision, NumPy,
        a JAX array in JAX's.

    Returns:
      [..., H, W] int32 codes sum_k digit_k 3^k in [0, 81).
    """
    xp = np if isinstance(grey, np.ndarray) else jnp  # NumPy keeps float64 (``arithmetic``)
    h, w = grey.shape[-2:]
    r = radius
    g = xp.pad(grey, [(0, 0)] * (grey.ndim - 2) + [(r, r), (r, r)], mode="edge")
    lo, hi = (1 - tau) * grey, (1 + tau) * grey
    code = xp.zeros(grey.shape, xp.int32)
    for k, (dy, dx) in enumerate(((0, r), (-r, 0), (0, -r), (r, 0))):
        nb = g[..., r + dy : r + dy + h, r + dx : r + dx + w]
        digit = (nb < lo).astype(xp.int32) + 2 * (nb > hi).astype(xp.int32)
        code = code + digit * 3**k
    return code


def window_max_histograms(codes: jax.Array, num_bins: int) -> jax.Array:
    """Histograms of 10 x 10 windows (stride 5), maxed over each row of windows.

    Args:
      codes: [n, H, W] int32 in [0, num_bins), H and W at least 10.

    Returns:
      [n, H // 5 - 1, num_bins] float32 counts.
    """
    n, h, w = codes.shape
    cr, cc = h // _STEP, w // _STEP
    rows = np.arange(cr * _STEP) // _STEP
    cols = np.arange(cc * _STEP) // _STEP
    cell = (rows[:, None] * cc + cols[None, :]) * num_bins
    index = codes[:, : cr * _STEP, : cc * _STEP] + jnp.asarray(cell, jnp.int32)
    cells = bin_counts(index.reshape(n, -1), cr * cc * num_bins).reshape(n, cr, cc, num_bins)
    windows = cells[:, :-1, :-1] + cells[:, 1:, :-1] + cells[:, :-1, 1:] + cells[:, 1:, 1:]
    return jnp.max(windows, axis=2)


def _pool(x: jax.Array) -> jax.Array:
    """2 x 2 sum over the last two axes of [n, H, W], an odd last row or column dropped."""
    n, h, w = x.shape
    x = x[:, : h // 2 * 2, : w // 2 * 2]
    return x.reshape(n, h // 2, 2, w // 2, 2).sum(axis=(2, 4))


ARITHMETIC = ("float32", "float64")  # the bins and SILTP tests: in JAX, or as the original
# MATLAB's rgb2gray weights, the first row of the inverse of the NTSC (YIQ) matrix
_GREY = (0.298936021293775, 0.587043074451121, 0.114020904255103)


def hsv_bins_float64(rgb: np.ndarray, hsv_bins: tuple[int, int, int]) -> np.ndarray:
    """H, S and V bin indices in float64 with the operations of MATLAB's ``rgb2hsv``.

    A float32 hue or saturation lands a hair under a bin edge where the exact value sits on
    it (h = 1/4 as 0.2499999), which moves such a pixel to the next hue bin;
    MATLAB's order of operations in double precision is the original's result: v = max,
    delta = v - min, the hue (g - b) / delta, 2 + (b - r) / delta or 4 + (r - g) / delta
    (the later of the three where several channels reach the max), over 6, plus 1 where
    negative, 0 where delta = 0; s = delta / v (0 where v = 0).

    Args:
      rgb: [..., 3] RGB in [0, 1], converted to float64.
      hsv_bins: bins of H, S and V.

    Returns:
      [..., 3] int32 indices min(floor(c * bins), bins - 1).
    """
    x = np.asarray(rgb, np.float64)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    v = np.maximum(np.maximum(r, g), b)
    delta = v - np.minimum(np.minimum(r, g), b)
    flat = delta == 0
    d = delta + flat  # 1 where flat: no division by 0; the hue is zeroed below
    h = np.where(r == v, (g - b) / d, 0.0)
    h = np.where(g == v, 2 + (b - r) / d, h)
    h = np.where(b == v, 4 + (r - g) / d, h)
    h = h / 6
    h = np.where(h < 0, h + 1, h)
    h = np.where(flat, 0.0, h)
    s = np.where(v > 0, np.where(flat, 0.0, delta) / np.where(v > 0, v, 1.0), 0.0)
    out = [
        np.minimum(np.floor(c * n), n - 1).astype(np.int32)
        for c, n in zip((h, s, v), hsv_bins, strict=True)
    ]
    return np.stack(out, axis=-1)


def grey_float64(images: np.ndarray) -> np.ndarray:
    """[n, H, W] grey levels in [0, 1], float64: MATLAB's ``rgb2gray`` of 8-bit RGB (its
    weights, rounded half up to 8 bits) over 255, as the original's SILTP reads them."""
    x = np.asarray(images, np.float64)
    level = _GREY[0] * x[..., 0] + _GREY[1] * x[..., 1] + _GREY[2] * x[..., 2]
    return np.floor(level + 0.5) / 255.0


def pool_mean_float64(grey: np.ndarray) -> np.ndarray:
    """2 x 2 mean of [n, H, W] in float64, an odd last row or column dropped, the four
    summed in MATLAB's column-major order (top left, bottom left, top right, bottom right)
    so that SILTP's tests on the coarser scales see the original's values to the bit."""
    n, h, w = grey.shape
    x = grey[:, : h // 2 * 2, : w // 2 * 2]
    tl, bl, tr, br = x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]
    return (((tl + bl) + tr) + br) / 4


def _siltp_pyramid_float64(images, *, tau, radii, num_scales) -> tuple:
    """SILTP codes of every scale and radius, in float64: ((scale 1's per radius), ...)."""
    grey, out = grey_float64(images), []
    for scale in range(num_scales):
        if scale:
            grey = pool_mean_float64(grey)
        out.append(tuple(siltp_codes(grey, tau=tau, radius=r) for r in radii))
    return tuple(out)


def lomo_min_size(*, radii: tuple[int, ...] = (3, 5)) -> tuple[int, int]:
    """The smallest image (height, width) the descriptor describes: 11 x 11 by default.

    A window is 2 x 2 cells of the stride (10 x 10 pixels) and the SILTP neighbours of the
    largest radius r are 2 r + 1 pixels apart; an image smaller than both in either
    direction has no window, or no SILTP code, that lies on pixels of its own (it is only
    stretched to 128 x 48).
    """
    side = max(2 * _STEP, 2 * max(radii, default=0) + 1)
    return side, side


def _check_size(height: int, width: int, num_scales: int, radii: tuple[int, ...]) -> None:
    h, w = _pool_sizes(height, width, num_scales)[-1]
    if h < 2 * _STEP or w < 2 * _STEP or w < 2 * max(radii) + 1:
        raise ValueError(
            f"images of {height} x {width} are too small for {num_scales} LOMO scales: the "
            f"last scale is {h} x {w}, expected at least 10 x {max(10, 2 * max(radii) + 1)}"
        )


def lomo(
    images: jax.typing.ArrayLike,
    *,
    sigmas: tuple[float, ...] = (5.0, 20.0),
    hsv_bins: tuple[int, int, int] = (8, 8, 8),
    tau: float = 0.3,
    radii: tuple[int, ...] = (3, 5),
    num_scales: int = 3,
    retinex: str = "none",
    arithmetic: str = "float32",
    normalize: bool = True,
) -> jax.Array:
    """LOMO descriptors of a batch of images.

    Args:
      images: [n, H, W, 3] RGB on the 0-255 scale, uint8 or float.
      sigmas: Retinex surround scales.
      hsv_bins: bins of H, S and V in the joint colour histogram.
      tau: SILTP tolerance.
      radii: SILTP radii, one 81-bin histogram each.
      num_scales: pyramid levels.
      retinex: the colour preprocessing before the HSV histograms, one of ``RETINEX``:
        "liao" (``liao_retinex``: the original's Retinex, computed in NumPy before the
        jitted descriptor, so this option takes concrete arrays, not tracers), "none" (the
        input itself), "msrcr" (``msrcr``: MSR with colour restoration, the module
        docstring's approximation), "msrcp" (``msrcp``: MSR of the intensity, chromaticity
        preserved).
      arithmetic: "float32" (the default): the HSV bins and the SILTP tests in JAX in
        float32, one bin or one SILTP digit off the original's on the pixels it rounds (a
        value on a bin edge, a neighbour at exactly (1 +- tau) x the centre); "float64":
        both computed in NumPy in float64 with the original's (MATLAB's) operations
        (``hsv_bins_float64``, ``grey_float64``, ``pool_mean_float64``): the original's
        descriptor to float32 rounding. The two give the same rank-1 within the spread on
        VIPeR and CUHK01 (docs/datasets.md), so the faster stays the default.
      normalize: False returns the max-pooled counts, before log and L2 normalisation.

    Returns:
      [n, lomo_dim(...)] float32 (26,960 for 128 x 48), laid out as in the module
      docstring.
    """
    if retinex not in RETINEX:
        raise ValueError(f"unknown retinex {retinex!r}; expected one of {RETINEX}")
    shape = np.shape(images)
    if len(shape) != 4 or shape[-1] != 3:
        raise ValueError(f"expected images of shape [n, H, W, 3], got {shape}")
    _check_size(shape[1], shape[2], num_scales, radii)
    if arithmetic not in ARITHMETIC:
        raise ValueError(f"unknown arithmetic {arithmetic!r}; expected one of {ARITHMETIC}")
    colour = bins = silt = None
    if retinex == "liao":
        colour = liao_retinex(np.asarray(images), sigmas=sigmas)
    if arithmetic == "float64":
        if colour is not None:
            rgb = colour / 255.0
        elif retinex == "none":
            rgb = np.clip(np.asarray(images, np.float64) / 255.0, 0.0, 1.0)
        else:
            fn = msrcr if retinex == "msrcr" else msrcp
            rgb = np.asarray(fn(jnp.asarray(images, jnp.float32), sigmas=sigmas), np.float64)
        bins = hsv_bins_float64(rgb, hsv_bins)
        silt = _siltp_pyramid_float64(images, tau=tau, radii=radii, num_scales=num_scales)
        colour = None
    return _lomo(
        images,
        colour,
        bins,
        silt,
        sigmas=sigmas,
        hsv_bins=hsv_bins,
        tau=tau,
        radii=radii,
        num_scales=num_scales,
        retinex=retinex,
        normalize=normalize,
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "sigmas",
        "hsv_bins",
        "tau",
        "radii",
        "num_scales",
        "retinex",
        "normalize",
    ),
)
def _lomo(
    images: jax.typing.ArrayLike,
    colour_rgb: jax.typing.ArrayLike | None,
    bins: jax.typing.ArrayLike | None,
    silt: tuple | None,
    *,
    sigmas: tuple[float, ...],
    hsv_bins: tuple[int, int, int],
    tau: float,
    radii: tuple[int, ...],
    num_scales: int,
    retinex: str,
    normalize: bool,
) -> jax.Array:
    """``lomo``, jitted; ``colour_rgb`` [n, H, W, 3] uint8 is the Retinex computed outside
    (for "liao"), else None. It is scaled to [0, 1] as "none" scales the input, so that the
    colour histogram of "liao" is that of "none" on the Retinex's output. ``bins`` ([n, H, W,
    3] int32 H, S, V indices) and ``silt`` (SILTP codes per scale, per radius), computed
    outside in float64 (``arithmetic="float64"``), replace their float32 computation."""
    x = jnp.asarray(images).astype(jnp.float32)
    n = x.shape[0]
    if bins is not None:
        q = [jnp.asarray(bins)[..., c] for c in range(3)]
    elif colour_rgb is not None:
        rgb = jnp.clip(jnp.asarray(colour_rgb).astype(jnp.float32) / 255.0, 0.0, 1.0)
    elif retinex == "msrcr":
        rgb = msrcr(x, sigmas=sigmas)
    elif retinex == "msrcp":
        rgb = msrcp(x, sigmas=sigmas)
    else:
        rgb = jnp.clip(x / 255.0, 0.0, 1.0)
    if bins is None:
        q = [
            jnp.minimum(jnp.floor(c * b), b - 1).astype(jnp.int32)
            for c, b in zip(rgb_to_hsv(rgb), hsv_bins, strict=True)
        ]
    grey = jnp.round(0.298936021 * x[..., 0] + 0.587043074 * x[..., 1] + 0.114020904 * x[..., 2])
    grey = grey / 255.0

    colour, texture = [], [[] for _ in radii]
    for scale in range(num_scales):
        if scale:
            q = [_pool(c) // 4 for c in q]  # floor of the mean of quantised indices
            grey = _pool(grey) / 4.0
        code = (q[2] * hsv_bins[1] + q[1]) * hsv_bins[0] + q[0]
        colour.append(window_max_histograms(code, math.prod(hsv_bins)).reshape(n, -1))
        for i, r in enumerate(radii):
            codes = siltp_codes(grey, tau=tau, radius=r) if silt is None else silt[scale][i]
            texture[i].append(window_max_histograms(jnp.asarray(codes), 81).reshape(n, -1))
    parts = [jnp.concatenate(colour, axis=1)] + [jnp.concatenate(t, axis=1) for t in texture]
    if normalize:
        parts = [jnp.log1p(p) for p in parts]
        parts = [p / jnp.maximum(jnp.linalg.norm(p, axis=1, keepdims=True), 1e-12) for p in parts]
    return jnp.concatenate(parts, axis=1)
