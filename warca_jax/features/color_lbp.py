"""Colour histograms and uniform LBP over horizontal stripes: the WARCA paper's 2,580-d descriptor.

WARCA (section 4.2) uses the features of Xiong et al. (2014): each 128 x 48 image
is cut into 6 non-overlapping horizontal stripes, and every stripe gets

* a 16-bin histogram of each of 8 colour channels R, G, B, Y, U, V, H, S
  (YUV and the hue and saturation of HSV; HSV's value is left out): 128 bins;
* a uniform LBP histogram with 8 neighbours at radius 1 (58 uniform patterns + 1
  bin for all others = 59 bins) and one with 16 neighbours at radius 2
  (242 + 1 = 243 bins), on the grey image: 302 bins.

Layout of the default 2,580-d vector (stripe-major; 430 bins per stripe)::

    stripe s in 0..5 starts at 430 s
      + 16 c      channel c of (R, G, B, Y, U, V, H, S), c in 0..7, 16 bins each  [0, 128)
      + 128       LBP 8 neighbours, radius 1: 59 bins                           [128, 187)
      + 187       LBP 16 neighbours, radius 2: 243 bins                         [187, 430)

Rows go to stripes by ``stripe = floor(row * 6 / height)``: for height 128 the
stripes have 22, 21, 21, 22, 21, 21 rows, and rows 0-63 are exactly stripes 0-2.

Normalisation: every histogram (each channel's 16 bins, each LBP histogram) counts
each pixel of its stripe once and is divided by the stripe's pixel count, so each
block sums to 1 within its stripe (L1).

Two variants of the MATLAB code these features were first computed with (Mignon & Jurie's
PCCA, Xiong et al.'s kernel methods) are options; neither is the default, because neither
is better on VIPeR's validation people (docs/datasets.md#image-descriptors; measured by
``bench_viper_descriptors.py``, since retired, at commit 720bdf1):

* ``binning="centred"``: MATLAB's ``hist(v, centres)`` with centres 0, 1/16, ..., 15/16,
  i.e. ``bin = clip(floor(16 v + 1/2), 0, 15)``: the first and last bins are half as
  wide as the others. The default ``"floor"`` gives 16 equal bins.
* ``lbp_pixels="interior"``: MATLAB's ``lbp`` run on each stripe's crop, which codes only
  the pixels whose whole circle of neighbours lies inside the crop (those at least
  ceil(radius) from the stripe's edges); each LBP histogram is divided by the number of
  pixels it coded. The default ``"all"`` codes every pixel, the image border replicated.

Colour channels are computed from RGB scaled to [0, 1] and mapped onto [0, 1]
before binning with ``bin = clip(floor(16 v), 0, 15)``: R, G, B as they are;
Y = 0.299 R + 0.587 G + 0.114 B (BT.601); U, V (analogue YUV), I, Q (YIQ) are
mapped from their exact range [sum of negative, sum of positive coefficients];
Cb, Cr are full-range JPEG YCbCr; H (hue / 360), S, V_hsv of HSV; L / 100 and a, b
of CIELab (sRGB, D65) over the sRGB gamut's range a in [-86.2, 98.3],
b in [-107.9, 94.5]. ``EXTENDED_CHANNELS`` (RGB + HSV + YCbCr + Lab + YIQ, the
luma Y once: 14 channels) gives (14 x 16 + 302) x 6 = 3,156 dims.

LBP (Ojala et al. 2002): neighbour p of P sits at (row, col) offset
(-r sin(2 pi p / P), r cos(2 pi p / P)) and is bilinearly interpolated (as
``a + f (b - a)``, so a flat area gives exactly the centre's value); bit p is
``neighbour >= centre`` and the code is sum_p bit_p 2^p. Borders are replicated.
Uniform codes (at most 2 circular 0/1 transitions) are numbered 0..U-1 in
increasing code order, all others get bin U. A flat area is the all-ones code,
the last uniform bin (57 for P = 8, 241 for P = 16).

Input images are [n, H, W, 3] RGB on the 0-255 scale, uint8 or float.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

DEFAULT_CHANNELS = ("R", "G", "B", "Y", "U", "V", "H", "S")
# RGB + HSV + YCbCr + Lab + YIQ, with the luma Y (shared by YCbCr and YIQ) once.
EXTENDED_CHANNELS = ("R", "G", "B", "H", "S", "V_hsv", "Y", "Cb", "Cr", "L", "a", "b", "I", "Q")
DEFAULT_LBP = ((8, 1.0), (16, 2.0))
BINNINGS = ("floor", "centred")  # colour bins (module docstring)
LBP_PIXELS = ("all", "interior")  # pixels each LBP histogram counts (module docstring)

# Rows of linear colour transforms on RGB in [0, 1]; (name -> coefficients).
_LINEAR = {
    "Y": (0.299, 0.587, 0.114),
    "U": (-0.14713, -0.28886, 0.436),
    "V": (0.615, -0.51499, -0.10001),
    "I": (0.596, -0.274, -0.322),
    "Q": (0.211, -0.523, 0.312),
    "Cb": (-0.168736, -0.331264, 0.5),
    "Cr": (0.5, -0.418688, -0.081312),
}
_LAB_RANGE = {"L": (0.0, 100.0), "a": (-86.2, 98.3), "b": (-107.9, 94.5)}
CHANNELS = ("R", "G", "B", *_LINEAR, "H", "S", "V_hsv", "L", "a", "b")


def rgb_to_hsv(rgb: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Hue in [0, 1) (hue angle / 360), saturation and value of RGB in [0, 1]: [..., 3]."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    mx = jnp.max(rgb, axis=-1)
    delta = mx - jnp.min(rgb, axis=-1)
    safe = jnp.where(delta > 0, delta, 1.0)
    h = jnp.where(
        mx == r,
        jnp.mod((g - b) / safe, 6.0),
        jnp.where(mx == g, (b - r) / safe + 2, (r - g) / safe + 4),
    )
    h = jnp.where(delta > 0, h / 6.0, 0.0)
    s = jnp.where(mx > 0, delta / jnp.where(mx > 0, mx, 1.0), 0.0)
    return h, s, mx


def rgb_to_lab(rgb: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """CIE L*a*b* (D65 white) of sRGB in [0, 1], [..., 3]: L in [0, 100], a and b about
    [-86, 98] and [-108, 95] (``_LAB_RANGE``); the one conversion both descriptors use."""
    lin = jnp.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    m = jnp.asarray(
        [[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]],
        rgb.dtype,
    )
    xyz = lin @ m.T / jnp.asarray([0.95047, 1.0, 1.08883], rgb.dtype)
    eps = (6 / 29) ** 3
    f = jnp.where(xyz > eps, jnp.cbrt(jnp.maximum(xyz, eps)), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    fx, fy, fz = f[..., 0], f[..., 1], f[..., 2]
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def colour_channels(rgb: jax.Array, channels: tuple[str, ...]) -> jax.Array:
    """Colour channels mapped onto [0, 1].

    Args:
      rgb: [..., 3] RGB in [0, 1].
      channels: names from ``CHANNELS``.

    Returns:
      [..., len(channels)] float32, each channel in [0, 1].
    """
    out, cache = [], {}
    for name in channels:
        if name in ("R", "G", "B"):
            v = rgb[..., "RGB".index(name)]
        elif name in _LINEAR:
            w = np.array(_LINEAR[name])
            lo, hi = w[w < 0].sum(), w[w > 0].sum()
            if name in ("Y", "Cb", "Cr"):
                lo, hi = (0.0, 1.0) if name == "Y" else (-0.5, 0.5)
            # Elementwise, not a matmul: XLA fuses it with the binning.
            v = (w[0] * rgb[..., 0] + w[1] * rgb[..., 1] + w[2] * rgb[..., 2] - lo) / (hi - lo)
        elif name in ("H", "S", "V_hsv"):
            if "hsv" not in cache:
                cache["hsv"] = rgb_to_hsv(rgb)
            v = cache["hsv"][("H", "S", "V_hsv").index(name)]
        elif name in _LAB_RANGE:
            if "lab" not in cache:
                cache["lab"] = rgb_to_lab(rgb)
            lo, hi = _LAB_RANGE[name]
            v = (cache["lab"]["Lab".index(name)] - lo) / (hi - lo)
        else:
            raise ValueError(f"unknown colour channel {name!r}; expected one of {CHANNELS}")
        out.append(jnp.clip(v, 0.0, 1.0))
    return jnp.stack(out, axis=-1)


@functools.cache
def uniform_lbp_table(points: int) -> np.ndarray:
    """Maps each P-bit LBP code to its uniform-pattern bin: [2^P] int32.

    Uniform codes (at most two circular 0/1 transitions; P (P - 1) + 2 of them)
    get 0..U-1 in increasing code order; every other code gets U.
    """
    codes = np.arange(2**points, dtype=np.int64)
    rotated = ((codes << 1) | (codes >> (points - 1))) & (2**points - 1)
    diff = codes ^ rotated
    transitions = sum((diff >> k) & 1 for k in range(points))
    uniform = transitions <= 2
    table = np.full(2**points, int(uniform.sum()), np.int32)
    table[uniform] = np.arange(int(uniform.sum()), dtype=np.int32)
    table.flags.writeable = False  # shared by the cache
    return table


def lbp_num_bins(points: int) -> int:
    return points * (points - 1) + 3


def lbp_codes(grey: jax.Array, *, points: int, radius: float) -> jax.Array:
    """Raw LBP codes with bilinearly interpolated circular neighbours.

    Args:
      grey: [..., H, W] float grey image.
      points: number of neighbours P (at most 30).
      radius: radius in pixels.

    Returns:
      [..., H, W] int32 codes sum_p [neighbour_p >= centre] 2^p.
    """
    pad = int(math.ceil(radius)) + 1
    h, w = grey.shape[-2:]
    widths = [(0, 0)] * (grey.ndim - 2) + [(pad, pad), (pad, pad)]
    g = jnp.pad(grey, widths, mode="edge")

    def shifted(dy: int, dx: int) -> jax.Array:
        return g[..., pad + dy : pad + dy + h, pad + dx : pad + dx + w]

    code = jnp.zeros(grey.shape, jnp.int32)
    for p in range(points):
        # Rounded so that neighbours on the axes fall exactly on pixels.
        dy = round(-radius * math.sin(2 * math.pi * p / points), 9)
        dx = round(radius * math.cos(2 * math.pi * p / points), 9)
        y0, x0 = math.floor(dy), math.floor(dx)
        fy, fx = dy - y0, dx - x0
        a = shifted(y0, x0)
        if fx:
            a = a + fx * (shifted(y0, x0 + 1) - a)
        if fy:
            c = shifted(y0 + 1, x0)
            if fx:
                c = c + fx * (shifted(y0 + 1, x0 + 1) - c)
            a = a + fy * (c - a)
        code = code | ((a >= grey).astype(jnp.int32) << p)
    return code


def stripe_of_row(height: int, stripes: int) -> np.ndarray:
    """Stripe index of each row, floor(row * stripes / height): [height] int32."""
    return (np.arange(height) * stripes // height).astype(np.int32)


def bin_counts(index: jax.Array, length: int) -> jax.Array:
    """Histogram of flat bin indices, batched by scatter-add.

    Measured on a 2-core CPU for the 2,580-d descriptor (256 images of 128 x 48):
    one flat scatter-add ~590 images/s under load; a [n, pixels, bins] one-hot
    reduced per stripe 120 images/s, the same in chunks of 16 images 200 images/s.

    Args:
      index: [n, m] int32 bin indices in [0, length).
      length: number of bins.

    Returns:
      [n, length] float32 counts.
    """
    n = index.shape[0]
    # One flat 1-d scatter is faster on CPU than a 2-d (row, bin) scatter.
    flat = (index + jnp.arange(n, dtype=jnp.int32)[:, None] * length).reshape(-1)
    out = jnp.zeros(n * length, jnp.float32).at[flat].add(1.0, mode="promise_in_bounds")
    return out.reshape(n, length)


def color_lbp_dim(
    *,
    channels: tuple[str, ...] = DEFAULT_CHANNELS,
    bins: int = 16,
    stripes: int = 6,
    lbp: tuple[tuple[int, float], ...] = DEFAULT_LBP,
) -> int:
    """Length of the descriptor: stripes x (channels x bins + LBP bins)."""
    return stripes * (len(channels) * bins + sum(lbp_num_bins(p) for p, _ in lbp))


def color_lbp_min_size(
    *, stripes: int = 6, lbp: tuple[tuple[int, float], ...] = DEFAULT_LBP
) -> tuple[int, int]:
    """The smallest image (height, width) the descriptor describes: 6 x 5 by default.

    Every stripe needs a row of its own (``stripes`` rows), and the circle of the largest
    LBP radius r needs 2 ceil(r) + 1 pixels across, in both directions, to reach pixels of
    the image rather than its replicated border. A smaller image is only stretched to
    128 x 48: a 1 x 1 image gives one flat descriptor whatever its colour.
    """
    across = 2 * max((math.ceil(r) for _, r in lbp), default=0) + 1
    return max(stripes, across), across


def color_lbp(
    images: jax.typing.ArrayLike,
    *,
    channels: tuple[str, ...] = DEFAULT_CHANNELS,
    bins: int = 16,
    stripes: int = 6,
    lbp: tuple[tuple[int, float], ...] = DEFAULT_LBP,
    binning: str = "floor",
    lbp_pixels: str = "all",
) -> jax.Array:
    """Stripe colour histograms and uniform LBP histograms (WARCA section 4.2).

    Args:
      images: [n, H, W, 3] RGB on the 0-255 scale, uint8 or float.
      channels: colour channel names from ``CHANNELS``, in output order.
      bins: histogram bins per colour channel.
      stripes: number of horizontal stripes.
      lbp: (neighbours, radius) of each uniform LBP histogram.
      binning: colour bins, one of ``BINNINGS`` (module docstring).
      lbp_pixels: the pixels each LBP histogram counts, one of ``LBP_PIXELS``.

    Returns:
      [n, color_lbp_dim(...)] float32 (2,580 with the defaults), laid out as in the
      module docstring; every histogram sums to 1 within its stripe.

    Raises:
      ValueError: an unknown binning or LBP pixel rule, or, with ``"interior"``, a stripe
        too thin or narrow to hold a pixel at ceil(radius) from its edges.
    """
    if binning not in BINNINGS:
        raise ValueError(f"color_lbp: unknown binning {binning!r}; expected one of {BINNINGS}")
    if lbp_pixels not in LBP_PIXELS:
        raise ValueError(
            f"color_lbp: unknown lbp_pixels {lbp_pixels!r}; expected one of {LBP_PIXELS}"
        )
    return _color_lbp(
        images, channels=tuple(channels), bins=bins, stripes=stripes, lbp=tuple(lbp),
        binning=binning, lbp_pixels=lbp_pixels,
    )  # fmt: skip


def _interior_masks(h: int, w: int, stripes: int, lbp) -> list[np.ndarray]:
    """Per LBP histogram, the [h, w] mask of the pixels ``lbp_pixels="interior"`` counts
    (computed once per traced image shape, in NumPy)."""
    stripe = stripe_of_row(h, stripes)
    masks = []
    for _, radius in lbp:
        k = int(math.ceil(radius))
        mask = np.zeros((h, w), bool)
        for s in range(stripes):
            rows = np.flatnonzero(stripe == s)
            if len(rows) <= 2 * k or w <= 2 * k:
                raise ValueError(
                    f"color_lbp: lbp_pixels='interior' needs stripes of more than {2 * k} rows "
                    f"and columns for radius {radius}; stripe {s} of a {h} x {w} image has "
                    f"{len(rows)} x {w}"
                )
            mask[rows[k:-k], k : w - k] = True
        masks.append(mask)
    return masks


@functools.partial(
    jax.jit, static_argnames=("channels", "bins", "stripes", "lbp", "binning", "lbp_pixels")
)
def _color_lbp(images, *, channels, bins, stripes, lbp, binning, lbp_pixels) -> jax.Array:
    """`color_lbp` once its options are checked."""
    x = jnp.asarray(images).astype(jnp.float32)
    n, h, w, _ = x.shape
    rgb = jnp.clip(x / 255.0, 0.0, 1.0)
    grey = 0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2]

    blocks, sizes = [], []
    vals = colour_channels(rgb, tuple(channels))  # [n, h, w, c]
    shift = 0.5 if binning == "centred" else 0.0
    blocks.append(jnp.clip(jnp.floor(vals * bins + shift), 0, bins - 1).astype(jnp.int32))
    sizes += [bins] * len(channels)
    for points, radius in lbp:
        codes = lbp_codes(grey, points=points, radius=radius)
        blocks.append(jnp.asarray(uniform_lbp_table(points))[codes][..., None])
        sizes.append(lbp_num_bins(points))
    bin_idx = jnp.concatenate(blocks, axis=-1)  # [n, h, w, num_hists]

    per_stripe = sum(sizes)
    length = stripes * per_stripe
    stripe = stripe_of_row(h, stripes)
    block_start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    offset = stripe[:, None, None] * per_stripe + block_start[None, None, :]  # [h, 1, hists]
    index = bin_idx + jnp.asarray(offset)
    # Pixels counted per (stripe, histogram): all of the stripe's unless a mask says less.
    pixels = np.repeat(np.bincount(stripe, minlength=stripes)[:, None] * w, len(sizes), axis=1)
    interior = lbp_pixels == "interior"
    if interior:
        keep = np.ones((h, w, len(sizes)), bool)
        for i, mask in enumerate(_interior_masks(h, w, stripes, lbp)):
            keep[..., len(channels) + i] = mask
            pixels[:, len(channels) + i] = np.bincount(
                stripe, weights=np.sum(mask, axis=1), minlength=stripes
            )
        index = jnp.where(jnp.asarray(keep), index, length)  # one discarded bin at the end
    counts = bin_counts(index.reshape(n, -1), length + interior)[:, :length]
    divisor = np.repeat(pixels.reshape(-1), np.tile(sizes, stripes))
    return counts / jnp.asarray(divisor, jnp.float32)
