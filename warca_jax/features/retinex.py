"""The Retinex of LOMO, the colour preprocessing before its HSV histograms.

``lomo(retinex=...)``, default "none". The original preprocesses the colour channels with
a multi-scale Retinex (sigmas 5 and 20) whose source was never released (its package
ships compiled MEX files only). "liao" (``liao_retinex``) is that Retinex read from the
released binary and checked against its outputs pixel for pixel (tests/features/test_retinex.py;
each step and the test that pins it: docs/datasets.md#lomos-retinex): GIMP's MSRCR with
changes, per 8-bit RGB image, in double precision,

1. I = RGB + 10;
2. R_c = sum over the sigmas of 1/2 log(I_c / max(G_sigma * I_c, 1e-6) + 1), G_sigma GIMP's
   recursive Gaussian (``recursive_gaussian``: Young - van Vliet, rows then columns, edges
   replicated, its output 3 pixels on, as GIMP's backward pass reads its input 3 entries
   early);
3. R = clip(255 (R - lo) / (hi - lo) - 10, 0, 255), lo and hi the values at indices
   floor(0.025 n) and floor(0.975 n) of the n sorted values of R (``liao_stretch``);
4. R_c = clip(R_c CR_c / mean(CR), 0, 255), CR_c = log(3 I_c / (I_r + I_g + I_b) + 1)
   (``liao_colour_restoration``);
5. max(R, RGB) truncated to 8 bits (``keep_brighter``): no pixel darker than the input.

The Retinex feeds only the HSV histogram; SILTP reads the grey level of the input (``lomo``).
The project's earlier readings stay options:

* "none": the input itself;
* "msrcr" (``msrcr``): MSRCR on I = RGB + 1 (0-255 scale),
  msr = mean over sigmas of log I - log(G_sigma * I), with a Gaussian truncated at 3 sigma
  and replicated borders, colour restoration log(125 I) - log(sum_c I); the product is
  stretched linearly to [0, 1] between its 1% and 99% quantiles over all pixels and
  channels of the image, and clipped;
* "msrcp" (``msrcp``): the Retinex of the intensity, each pixel's chromaticity kept.

How each reading does with XQDA on VIPeR and CUHK01: docs/methods.md#xqda-and-lomo.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np


def _blur_matrix(n: int, sigma: float) -> np.ndarray:
    """[n, n] Gaussian smoothing along one axis, truncated at 3 sigma, borders replicated."""
    r = int(math.ceil(3 * sigma))
    taps = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
    taps /= taps.sum()
    m = np.zeros((n, n))
    for i in range(n):
        np.add.at(m[i], np.clip(np.arange(i - r, i + r + 1), 0, n - 1), taps)
    return m.astype(np.float32)


def tail_quantiles(v: jax.Array, q: float) -> tuple[jax.Array, jax.Array]:
    """The q and 1 - q quantiles of each row (linear interpolation, as ``jnp.quantile``).

    Uses top-k of the two tails: much faster on CPU than sorting whole rows.

    Args:
      v: [n, m] values.
      q: tail fraction in [0, 0.5].

    Returns:
      ([n] q-quantiles, [n] (1 - q)-quantiles).
    """
    m = v.shape[1]

    def lower(x: jax.Array, p: float) -> jax.Array:  # the p-quantile, p <= 0.5, from below
        pos = p * (m - 1)
        i = int(math.floor(pos))
        smallest = -jax.lax.top_k(-x, min(i + 2, m))[0]  # ascending: sorted[0..i+1]
        upper = smallest[:, min(i + 1, m - 1)]
        return smallest[:, i] + (pos - i) * (upper - smallest[:, i])

    lo = lower(v, q)
    # The (1 - q)-quantile of v is minus the q-quantile of -v.
    hi = -lower(-v, q)
    return lo, hi


def _multiscale_retinex(x: jax.Array, sigmas: tuple[float, ...]) -> jax.Array:
    """mean over sigmas of log x - log(G_sigma * x), x: [n, H, W, ...] positive."""
    _, h, w = x.shape[:3]
    out = 0.0
    for s in sigmas:
        bh, bw = jnp.asarray(_blur_matrix(h, s)), jnp.asarray(_blur_matrix(w, s))
        blurred = jnp.einsum("ij,njk...,lk->nil...", bh, x, bw)
        out = out + (jnp.log(x) - jnp.log(blurred)) / len(sigmas)
    return out


def msrcr(images: jax.Array, *, sigmas: tuple[float, ...] = (5.0, 20.0)) -> jax.Array:
    """Multi-scale Retinex with colour restoration, stretched to [0, 1].

    Args:
      images: [n, H, W, 3] RGB on the 0-255 scale.
      sigmas: Gaussian surround scales in pixels.

    Returns:
      [n, H, W, 3] float32 in [0, 1].
    """
    x = images.astype(jnp.float32) + 1.0
    restore = jnp.log(125.0 * x) - jnp.log(jnp.sum(x, axis=-1, keepdims=True))
    return _stretch(_multiscale_retinex(x, sigmas) * restore)


def _stretch(v: jax.Array) -> jax.Array:
    """Each image of v [n, ...] stretched linearly from its 1% and 99% quantiles to [0, 1]."""
    lo, hi = tail_quantiles(v.reshape(v.shape[0], -1), 0.01)
    shape = (-1,) + (1,) * (v.ndim - 1)
    span = jnp.maximum(hi - lo, 1e-6).reshape(shape)
    return jnp.clip((v - lo.reshape(shape)) / span, 0.0, 1.0)


def msrcp(images: jax.Array, *, sigmas: tuple[float, ...] = (5.0, 20.0)) -> jax.Array:
    """Multi-scale Retinex with chromaticity preservation (Petro, Sbert and Morel, IPOL 2014).

    The multi-scale Retinex of the intensity I = mean(R, G, B) + 1 (0-255 scale), stretched
    linearly between its 1% and 99% quantiles to [1, 255]; each pixel's RGB is then scaled by
    min(256 / max(RGB + 1), stretched / I), so that its hue and saturation are kept.
    Arguments and result as ``msrcr``'s.
    """
    x = images.astype(jnp.float32) + 1.0
    intensity = jnp.mean(x, axis=-1)
    stretched = 1.0 + 254.0 * _stretch(_multiscale_retinex(intensity, sigmas))
    gain = jnp.minimum(256.0 / jnp.max(x, axis=-1), stretched / intensity)
    return jnp.clip(gain[..., None] * x / 256.0, 0.0, 1.0)


def _young_van_vliet(sigma: float) -> tuple[float, float, float, float, float]:
    """(B, b0, b1, b2, b3) of Young and van Vliet's third-order recursive Gaussian (1995).

    As GIMP's retinex plug-in computes them: q from sigma by the paper's eq. 11b, in single
    precision (GIMP's ``gfloat``), then b0..b3 (eq. 8c) and the normalisation B =
    1 - (b1 + b2 + b3) / b0 (eq. 10) in double precision: the filter's gain is 1, so a
    constant passes unchanged (to rounding).
    """
    if sigma >= 2.5:
        q = 0.98711 * sigma - 0.96330
    elif sigma >= 0.5:
        q = 3.97156 - 4.14554 * float(np.float32(math.sqrt(1.0 - 0.26891 * sigma)))
    else:
        q = 0.1147705018520355224609375
    q = np.float32(q)
    q2 = q * q  # float32 products, as GIMP's
    q3 = q * q2
    q, q2, q3 = float(q), float(q2), float(q3)
    b0 = 1.57825 + 2.44413 * q + 1.4281 * q2 + 0.422205 * q3
    b1 = 2.44413 * q + 2.85619 * q2 + 1.26661 * q3
    b2 = -(1.4281 * q2 + 1.26661 * q3)
    b3 = 0.422205 * q3
    return 1.0 - (b1 + b2 + b3) / b0, b0, b1, b2, b3


def recursive_gaussian(x: np.ndarray, sigma: float, axis: int, *, shift: int = 3) -> np.ndarray:
    """GIMP's recursive Gaussian along one axis, in float64, as Liao et al.'s Retinex has it.

    A causal pass w[i] = B x[i] + (b1 w[i-1] + b2 w[i-2] + b3 w[i-3]) / b0 over the
    signal, its three entries before the first set to x[0] (the edge replicated); then an
    anti-causal pass of the same recursion from the last entry back, its three entries
    past the end set to the causal pass's last value. GIMP keeps the causal pass in an
    array offset by 3 (its 3 edge entries first) and its backward pass reads that array at
    the output's own index, so output i filters causal entry i - ``shift`` (the first
    entries read the edge value x[0]) and the last ``shift`` causal entries reach the output
    only through that starting value: the blur is the Gaussian centred ``shift`` pixels on
    (an impulse at p peaks at p + 3). Liao et al.'s binary keeps the quirk (``shift=3``);
    ``shift=0`` is the filter as the paper states it. Young and van Vliet's recursion
    approximates the Gaussian (its impulse response is a little wider than ``sigma``).

    Args:
      x: values, any shape.
      sigma: the Gaussian's scale in pixels.
      axis: the axis filtered.
      shift: 0 to 3, the entries the backward pass reads early.

    Returns:
      float64, x's shape.
    """
    if shift not in (0, 1, 2, 3):
        raise ValueError(f"shift must be 0, 1, 2 or 3, got {shift!r}")
    big_b, b0, b1, b2, b3 = _young_van_vliet(sigma)
    v = np.moveaxis(np.asarray(x, np.float64), axis, 0)
    n = v.shape[0]
    causal = np.empty((n + 3, *v.shape[1:]))  # entry i + 3 is the pass at pixel i
    causal[:3] = v[0]
    for i in range(n):
        ahead = b1 * causal[i + 2] + b2 * causal[i + 1] + b3 * causal[i]
        causal[i + 3] = big_b * v[i] + ahead / b0
    out = np.empty((n + 3, *v.shape[1:]))  # entry i is the output at pixel i
    out[n:] = causal[n + 2]
    for i in range(n - 1, -1, -1):
        back = b1 * out[i + 1] + b2 * out[i + 2] + b3 * out[i + 3]
        out[i] = big_b * causal[i + 3 - shift] + back / b0
    return np.moveaxis(out[:n], 0, axis)


def liao_msr(intensity: np.ndarray, sigmas: tuple[float, ...] = (5.0, 20.0)) -> np.ndarray:
    """Step 2: sum over sigmas of log(I / max(G_sigma * I, 1e-6) + 1) / len(sigmas).

    G_sigma is ``recursive_gaussian`` along the rows, then along the columns.

    Args:
      intensity: [n, H, W, C] I = RGB + 10 (step 1), float64.
      sigmas: the surround scales, equally weighted.

    Returns:
      [n, H, W, C] float64.
    """
    out = np.zeros(intensity.shape)
    for sigma in sigmas:
        blurred = recursive_gaussian(recursive_gaussian(intensity, sigma, 2), sigma, 1)
        out = out + np.log(intensity / np.maximum(blurred, 1e-6) + 1.0) * (1.0 / len(sigmas))
    return out


# A spread of step 2's values (logs of order 1) below this is rounding noise: a flat image.
_FLAT = 1e-9


def liao_stretch(r: np.ndarray) -> np.ndarray:
    """Step 3: each image stretched to clip(255 (r - lo) / (hi - lo) - 10, 0, 255).

    lo and hi are the values at indices floor(0.025 m) and floor(0.975 m) of the image's m
    values (all pixels and channels together) sorted ascending: order statistics, not
    interpolated quantiles. A flat image stretches to 0, so that step 5 returns it
    unchanged: hi - lo under ``_FLAT`` is rounding noise (the blur of a constant is that
    constant only to the last bits), which the stretch would otherwise blow up to 0..255.

    Args:
      r: [n, ...] float64, one image per row.

    Returns:
      r's shape, float64 in [0, 255].
    """
    values = r.reshape(len(r), -1)
    m = values.shape[1]
    i_lo, i_hi = m // 40, 39 * m // 40  # floor(0.025 m), floor(0.975 m), exactly
    ordered = np.partition(values, (i_lo, i_hi), axis=1)
    shape = (-1,) + (1,) * (r.ndim - 1)
    lo, hi = ordered[:, i_lo].reshape(shape), ordered[:, i_hi].reshape(shape)
    span = hi - lo
    flat = span < _FLAT
    scaled = 255.0 * (r - lo) / np.where(flat, 1.0, span) - 10.0
    return np.clip(np.where(flat, 0.0, scaled), 0.0, 255.0)


def liao_colour_restoration(r: np.ndarray, intensity: np.ndarray) -> np.ndarray:
    """Step 4: clip(r_c CR_c / mean(CR), 0, 255), CR_c = log(3 I_c / sum_c I_c + 1).

    The mean is over each image's pixels and channels, so the restoration scales the
    channels against each other without changing the image's overall level.

    Args:
      r: [n, H, W, 3] the stretched Retinex (step 3).
      intensity: [n, H, W, 3] I = RGB + 10 (step 1).

    Returns:
      [n, H, W, 3] float64 in [0, 255].
    """
    cr = np.log(3.0 * intensity / np.sum(intensity, axis=-1, keepdims=True) + 1.0)
    return np.clip(r * cr / np.mean(cr, axis=(1, 2, 3), keepdims=True), 0.0, 255.0)


def keep_brighter(r: np.ndarray, rgb: np.ndarray) -> np.ndarray:
    """Step 5: max(r, rgb) truncated (not rounded) to 8 bits: no pixel darker than rgb.

    Args:
      r: the restored Retinex (step 4), in [0, 255].
      rgb: the input, r's shape, integers in [0, 255].

    Returns:
      uint8, r's shape.
    """
    return np.floor(np.clip(np.maximum(r, rgb), 0.0, 255.0)).astype(np.uint8)


def liao_retinex(images: np.ndarray, *, sigmas: tuple[float, ...] = (5.0, 20.0)) -> np.ndarray:
    """Liao et al.'s Retinex (the module docstring's five steps), in NumPy float64.

    Args:
      images: [n, H, W, 3] RGB on the 0-255 scale; non-integer values are rounded to 8 bits
        first (the original reads 8-bit images).
      sigmas: the surround scales of step 2.

    Returns:
      [n, H, W, 3] uint8.
    """
    rgb = np.clip(np.round(np.asarray(images, np.float64)), 0.0, 255.0)
    if rgb.ndim != 4 or rgb.shape[-1] != 3:
        raise ValueError(f"expected images of shape [n, H, W, 3], got {rgb.shape}")
    intensity = rgb + 10.0
    r = liao_stretch(liao_msr(intensity, sigmas))
    return keep_brighter(liao_colour_restoration(r, intensity), rgb)


RETINEX = ("liao", "none", "msrcr", "msrcp")  # the ``retinex`` options of ``lomo``
