"""GOG: the hierarchical Gaussian descriptor (Matsukawa, Okabe, Suzuki and Sato, "Hierarchical
Gaussian Descriptor for Person Re-Identification", CVPR 2016).

Three levels, for images of 128 x 48:

* pixels: f = [y, M_0, M_90, M_180, M_270, colour], with y the row (1-based) over the
  height, M_theta the gradient magnitude of the luminance softly assigned to the two nearest
  of 4 orientation bins (linear in the angle), and the colour channels of one colour space
  (``COLOURS``: RGB, Lab, HSV, each in [0, 1], or nRnG: r / (r + g + b), g / (r + g + b)):
  d = 8 (or 7 for nRnG);
* patches: the k x k (k = 5) patches centred on every second row and column (step p = 2),
  cut at the image's border, each summarised by its mean mu and covariance Sigma (unbiased,
  plus epsilon max(tr Sigma, 0.01) I, epsilon = 0.001), embedded as the SPD matrix
  |Sigma|^(-1/(d+1)) [[Sigma + mu mu^T, mu], [mu^T, 1]] and flattened by the matrix
  logarithm and half-vectorisation (the upper triangle row by row, off-diagonal entries
  times sqrt 2): m = (d^2 + 3 d) / 2 + 1 dimensions (45 for d = 8);
* regions: G = 7 horizontal strips of 2 / 8 of the height, overlapping by half (16 rows of
  patches, step 8 at 128 x 48); in each, the patch vectors weighted by a Gaussian of their
  column's distance from the centre column (sigma = a quarter of the patch grid's width),
  their weighted mean and covariance (plus epsilon tr Sigma I) embedded and flattened the
  same way: (m^2 + 3 m) / 2 + 1 = 1,081 dimensions for d = 8. The regions are
  concatenated, top to bottom: 7,567 dimensions for one colour space of d = 8; the four
  fused (RGB, Lab, HSV, nRnG): 3 x 7,567 + 4,921 = 27,622.

The luminance of the gradients is the 8-bit Y of ITU-R BT.601 (16 + (65.481 R + 128.553 G +
24.966 B) / 255, rounded), minus 16, over 235; the gradients are central differences
([-1, 0, 1]) with zeros outside the image, their angle atan2(dx, dy) + pi.

The embedding's determinant is 1, so its logarithm is V diag(l - mean(l)) V^T, with
V diag(exp(l)) V^T the eigendecomposition of the unscaled [[Sigma + mu mu^T, mu], [mu^T,
1]] (whose determinant is |Sigma|): one symmetric eigendecomposition per Gaussian, in
float64 (the patch covariances can be near singular).

Checked element by element against the authors' released MATLAB code run in GNU Octave:
the unnormalised RGB, HSV and nRnG vectors are the release's to float32 rounding
(benchmarks/RESULTS.md, "GOG", has the images and the differences); Lab was not compared.
The release lays the regions out interleaved
(dimension by dimension); here they follow one another, a permutation no learner sees.

Normalisation: the paper's release removes the training set's mean from each colour space's
vectors, then divides each by its L2 norm. A descriptor sees one image at a time, so
``normalize=True`` (the default) divides each colour space's vector by its norm without
the mean removal; the release's step, with each split's training mean, is the data's
``normalize="center_l2"`` (``warca_jax.features.feature_norm``, per colour space of the fused form).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from warca_jax.features.color_lbp import rgb_to_hsv, rgb_to_lab

COLOURS = ("rgb", "lab", "hsv", "nrng")  # the fused form concatenates them in this order
_COLOUR_CHANNELS = {"rgb": 3, "lab": 3, "hsv": 3, "nrng": 2}
_BINS = 4  # gradient orientation bins of 90 degrees


def _colours(colour: str) -> tuple[str, ...]:
    if colour == "fused":
        return COLOURS
    if colour not in COLOURS:
        raise ValueError(f"unknown GOG colour {colour!r}; expected 'fused' or one of {COLOURS}")
    return (colour,)


def pixel_dim(colour: str) -> int:
    """d: 1 (y) + 4 (orientations) + the colour space's channels."""
    return 1 + _BINS + _COLOUR_CHANNELS[colour]


def gaussian_dim(d: int) -> int:
    """Length of a flattened embedded Gaussian of d dimensions: (d + 1) (d + 2) / 2."""
    return (d + 1) * (d + 2) // 2


def gog_dim(*, colour: str = "fused", regions: int = 7) -> int:
    """Length of the GOG vector: 7,567 for one colour space of d = 8, 27,622 fused."""
    return sum(regions * gaussian_dim(gaussian_dim(pixel_dim(c))) for c in _colours(colour))


def gog_min_size(*, step: int = 2, regions: int = 7) -> tuple[int, int]:
    """The smallest image (height, width): a region one row of patches high at least, so
    (regions + 1) rows of patches, and two columns of patches."""
    return step * (regions + 1), 2 * step


def orientation_bins(dx: jax.Array, dy: jax.Array) -> jax.Array:
    """Soft assignment of the angle atan2(dx, dy) + pi to 4 bins of 90 degrees.

    The angle at t bins (t in [0, 4]) gives weight 1 - frac(t) to bin floor(t) mod 4 and
    frac(t) to the next bin (mod 4).

    Returns:
      [..., 4] weights summing to 1.
    """
    t = (jnp.arctan2(dx, dy) + jnp.pi) * (_BINS / (2 * jnp.pi))
    low = jnp.floor(t)
    frac = t - low
    low = low.astype(jnp.int32) % _BINS
    one = jax.nn.one_hot(low, _BINS, dtype=t.dtype)
    nxt = jax.nn.one_hot((low + 1) % _BINS, _BINS, dtype=t.dtype)
    return one * (1 - frac)[..., None] + nxt * frac[..., None]


def gradient_features(grey: jax.Array) -> jax.Array:
    """[..., H, W] luminance -> [..., H, W, 4]: magnitude x ``orientation_bins``, the
    central differences with zeros outside the image."""
    pad = [(0, 0)] * (grey.ndim - 2) + [(1, 1), (1, 1)]
    g = jnp.pad(grey, pad)
    dx = g[..., 1:-1, 2:] - g[..., 1:-1, :-2]
    dy = g[..., :-2, 1:-1] - g[..., 2:, 1:-1]  # the row above minus the row below
    mag = jnp.sqrt(dx**2 + dy**2)
    return orientation_bins(dx, dy) * mag[..., None]


def _lab(rgb: jax.Array) -> jax.Array:
    """sRGB in [0, 1] -> [L / 100, (a + 50) / 100, (b + 50) / 100] (D65)."""
    light, a, b = rgb_to_lab(rgb)
    return jnp.stack([light / 100, (a + 50) / 100, (b + 50) / 100], axis=-1)


def colour_channels(x: jax.Array, colour: str) -> jax.Array:
    """[..., 3] RGB on the 0-255 scale -> [..., c] channels of ``colour``."""
    if colour == "rgb":
        return x / 255.0
    if colour == "lab":
        return _lab(x / 255.0)
    if colour == "hsv":
        return jnp.stack(rgb_to_hsv(x / 255.0), axis=-1)
    total = jnp.maximum(jnp.sum(x, axis=-1, keepdims=True), 1.0)
    return x[..., :2] / total


def pixel_features(images: jax.Array, colour: str) -> jax.Array:
    """[n, H, W, 3] RGB (0-255) -> [n, H, W, d] pixel features [y, M_theta x 4, colour]."""
    x = jnp.clip(images, 0.0, 255.0)
    n, h, w, _ = x.shape
    level = jnp.round(16 + (65.481 * x[..., 0] + 128.553 * x[..., 1] + 24.966 * x[..., 2]) / 255)
    grad = gradient_features((level - 16) / 235)
    y = jnp.broadcast_to((jnp.arange(h, dtype=x.dtype) + 1)[None, :, None, None] / h, (n, h, w, 1))
    return jnp.concatenate([y, grad, colour_channels(x, colour)], axis=-1)


def _upper(k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(k)


def half_vectorize(s: jax.Array) -> jax.Array:
    """[..., k, k] symmetric -> [..., k (k + 1) / 2]: the upper triangle row by row, the
    off-diagonal entries times sqrt 2 (so the Euclidean norm is the Frobenius norm)."""
    i, j = _upper(s.shape[-1])
    scale = np.where(i == j, 1.0, math.sqrt(2.0))
    return s[..., i, j] * jnp.asarray(scale, s.dtype)


def gaussian_spd(mean: jax.Array, cov: jax.Array) -> jax.Array:
    """The embedding |Sigma|^(-1/(d+1)) [[Sigma + mu mu^T, mu], [mu^T, 1]] of N(mu, Sigma).

    Args:
      mean: [..., d]; cov: [..., d, d] SPD.

    Returns:
      [..., d + 1, d + 1] SPD of determinant 1.
    """
    d = mean.shape[-1]
    top = jnp.concatenate([cov + mean[..., :, None] * mean[..., None, :], mean[..., :, None]], -1)
    bottom = jnp.concatenate([mean, jnp.ones_like(mean[..., :1])], -1)[..., None, :]
    _, logdet = jnp.linalg.slogdet(cov)
    return jnp.exp(-logdet / (d + 1))[..., None, None] * jnp.concatenate([top, bottom], -2)


def log_gaussian(mean: jax.Array, cov: jax.Array) -> jax.Array:
    """half_vectorize(logm(gaussian_spd(mean, cov))): [..., d], [..., d, d] ->
    [..., (d + 1) (d + 2) / 2], from one eigendecomposition of the unscaled matrix (whose
    determinant is |Sigma|, so the scale is the mean of its log eigenvalues)."""
    top = jnp.concatenate([cov + mean[..., :, None] * mean[..., None, :], mean[..., :, None]], -1)
    bottom = jnp.concatenate([mean, jnp.ones_like(mean[..., :1])], -1)[..., None, :]
    w, v = jnp.linalg.eigh(jnp.concatenate([top, bottom], -2))
    log_w = jnp.log(w)
    log_w = log_w - jnp.mean(log_w, axis=-1, keepdims=True)
    return half_vectorize((v * log_w[..., None, :]) @ jnp.swapaxes(v, -1, -2))


def _box_sums(x: jax.Array, size: int, step: int) -> jax.Array:
    """Sums of [H, W, c] over the size x size boxes centred on every step-th row and column,
    cut at the border: [ceil(H / step), ceil(W / step), c] (integral image)."""
    h, w, _ = x.shape
    integral = jnp.pad(jnp.cumsum(jnp.cumsum(x, 0), 1), ((1, 0), (1, 0), (0, 0)))
    half = size // 2
    rows, cols = np.arange(0, h, step), np.arange(0, w, step)
    r0, r1 = np.maximum(rows - half, 0), np.minimum(rows + half, h - 1) + 1
    c0, c1 = np.maximum(cols - half, 0), np.minimum(cols + half, w - 1) + 1
    return integral[r1][:, c1] - integral[r0][:, c1] - integral[r1][:, c0] + integral[r0][:, c0]


def patch_gaussians(
    feats: jax.Array, *, size: int = 5, step: int = 2, epsilon: float = 1e-3
) -> jax.Array:
    """Flattened embedded Gaussians of the patches of one image.

    Args:
      feats: [H, W, d] pixel features.

    Returns:
      [ceil(H / step), ceil(W / step), (d + 1) (d + 2) / 2]; patch (i, j) is centred on
      pixel (step i, step j), its size x size box cut at the border.
    """
    h, w, d = feats.shape
    i, j = _upper(d)
    outer = feats[..., i] * feats[..., j]
    ones = jnp.ones((h, w, 1), feats.dtype)
    sums = _box_sums(jnp.concatenate([ones, feats, outer], -1), size, step)
    count, s1, s2 = sums[..., :1], sums[..., 1 : 1 + d], sums[..., 1 + d :]
    second = jnp.zeros((*s2.shape[:2], d, d), feats.dtype).at[..., i, j].set(s2)
    second = second.at[..., j, i].set(s2)
    mean = s1 / count
    cov = (second - s1[..., :, None] * s1[..., None, :] / count[..., None]) / (count[..., None] - 1)
    trace = jnp.maximum(jnp.trace(cov, axis1=-2, axis2=-1), 0.01)
    cov = cov + epsilon * trace[..., None, None] * jnp.eye(d, dtype=feats.dtype)
    return log_gaussian(mean, cov)


def region_weights(width: int) -> np.ndarray:
    """Gaussian weights of the patch grid's columns x = 1..width around width / 2, sigma =
    width / 4 (the paper's weighting of a patch by its distance from the centre)."""
    x = np.arange(1, width + 1, dtype=np.float64)
    sigma, mu = width / 4, width / 2
    return np.exp(-((x - mu) ** 2) / (2 * sigma**2)) / (sigma * math.sqrt(2 * math.pi))


def region_gaussians(
    patches: jax.Array, *, regions: int = 7, epsilon: float = 1e-3, weighted: bool = True
) -> jax.Array:
    """Flattened embedded Gaussians of the horizontal regions of one image's patch grid.

    Args:
      patches: [P, Q, m] patch vectors; region g covers patch rows [g s, g s + 2 s) with
        s = P // (regions + 1).

    Returns:
      [regions, (m + 1) (m + 2) / 2].
    """
    p, q, m = patches.shape
    s = p // (regions + 1)
    weights = region_weights(q) if weighted else np.ones(q)
    weights = jnp.asarray(np.tile(weights, 2 * s), patches.dtype)
    starts = np.arange(regions) * s
    strips = jnp.stack([patches[a : a + 2 * s].reshape(-1, m) for a in starts])
    total = jnp.sum(weights)
    mean = jnp.einsum("k,gkm->gm", weights, strips) / total
    centred = strips - mean[:, None, :]
    cov = jnp.einsum("k,gka,gkb->gab", weights, centred, centred) / total
    trace = jnp.trace(cov, axis1=-2, axis2=-1)
    cov = cov + epsilon * trace[:, None, None] * jnp.eye(m, dtype=patches.dtype)
    return log_gaussian(mean, cov)


def _check(images, colour: str, step: int, regions: int) -> tuple[str, ...]:
    shape = np.shape(images)
    if len(shape) != 4 or shape[-1] != 3:
        raise ValueError(f"expected images of shape [n, H, W, 3], got {shape}")
    min_h, min_w = gog_min_size(step=step, regions=regions)
    if shape[1] < min_h or shape[2] < min_w:
        raise ValueError(
            f"images of {shape[1]} x {shape[2]} are too small for GOG with {regions} regions "
            f"and patch step {step}: expected at least {min_h} x {min_w}"
        )
    return _colours(colour)


def gog(
    images: jax.typing.ArrayLike,
    *,
    colour: str = "fused",
    patch_size: int = 5,
    step: int = 2,
    regions: int = 7,
    epsilon: float = 1e-3,
    weighted: bool = True,
    normalize: bool = True,
) -> jax.Array:
    """GOG descriptors of a batch of images (computed in float64).

    Args:
      images: [n, H, W, 3] RGB on the 0-255 scale, uint8 or float.
      colour: "fused" (the paper's best: RGB, Lab, HSV and nRnG concatenated) or one of
        ``COLOURS``.
      patch_size: k, the patches' side.
      step: p, the patch grid's step.
      regions: G, the horizontal strips.
      epsilon: the covariances' regulariser (times their trace).
      weighted: weight the patches by their column's distance from the centre.
      normalize: divide each colour space's vector by its L2 norm.

    Returns:
      [n, gog_dim(colour=colour, regions=regions)] float32, the colour spaces in the order
      of ``COLOURS``, each its regions top to bottom.
    """
    colours = _check(images, colour, step, regions)
    options = dict(patch_size=patch_size, step=step, regions=regions, epsilon=epsilon)
    with jax.enable_x64(True):
        x = jnp.asarray(images, jnp.float64)
        # One executable per colour space, run one after the other: in a single executable
        # the colour spaces' batched eigendecompositions run side by side, and jaxlib's CPU
        # eigh, which splits its batch over the same thread pool, deadlocked on 2 cores.
        parts = []
        for c in colours:
            part = _gog(x, colours=(c,), weighted=weighted, normalize=normalize, **options)
            parts.append(jax.block_until_ready(part.astype(jnp.float32)))
        return jnp.concatenate(parts, axis=1)


_STATIC = ("colours", "patch_size", "step", "regions", "weighted", "normalize")


@functools.partial(jax.jit, static_argnames=_STATIC)
def _gog(images, *, colours, patch_size, step, regions, epsilon, weighted, normalize):
    def one(image):
        parts = []
        for c in colours:
            feats = pixel_features(image[None], c)[0]
            patches = patch_gaussians(feats, size=patch_size, step=step, epsilon=epsilon)
            v = region_gaussians(patches, regions=regions, epsilon=epsilon, weighted=weighted)
            v = v.reshape(-1)
            norm = jnp.maximum(jnp.linalg.norm(v), 1e-12)
            parts.append(v / norm if normalize else v)
        return jnp.concatenate(parts)

    return jax.lax.map(one, images, batch_size=8)
