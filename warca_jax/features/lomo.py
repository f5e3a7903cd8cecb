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
      grey: [..., H, W] grey image.

    Returns:
      [..., H, W] int32 codes sum_k digit_k 3^k in [0, 81).
    """
    h, w = grey.shape[-2:]
    r = radius
    g = jnp.pad(grey, [(0, 0)] * (grey.ndim - 2) + [(r, r), (r, r)], mode="edge")
    lo, hi = (1 - tau) * grey, (1 + tau) * grey
    code = jnp.zeros(grey.shape, jnp.int32)
    for k, (dy, dx) in enumerate(((0, r), (-r, 0), (0, -r), (r, 0))):
        nb = g[..., r + dy : r + dy + h, r + dx : r + dx + w]
        digit = (nb < lo).astype(jnp.int32) + 2 * (nb > hi).astype(jnp.int32)
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
    colour = None
    if retinex == "liao":
        colour = liao_retinex(np.asarray(images), sigmas=sigmas)
    return _lomo(
        images,
        colour,
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
    colour histogram of "liao" is that of "none" on the Retinex's output."""
    x = jnp.asarray(images).astype(jnp.float32)
    n = x.shape[0]
    if colour_rgb is not None:
        rgb = jnp.clip(jnp.asarray(colour_rgb).astype(jnp.float32) / 255.0, 0.0, 1.0)
    elif retinex == "msrcr":
        rgb = msrcr(x, sigmas=sigmas)
    elif retinex == "msrcp":
        rgb = msrcp(x, sigmas=sigmas)
    else:
        rgb = jnp.clip(x / 255.0, 0.0, 1.0)
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
            silt = siltp_codes(grey, tau=tau, radius=r)
            texture[i].append(window_max_histograms(silt, 81).reshape(n, -1))
    parts = [jnp.concatenate(colour, axis=1)] + [jnp.concatenate(t, axis=1) for t in texture]
    if normalize:
        parts = [jnp.log1p(p) for p in parts]
        parts = [p / jnp.maximum(jnp.linalg.norm(p, axis=1, keepdims=True), 1e-12) for p in parts]
    return jnp.concatenate(parts, axis=1)
