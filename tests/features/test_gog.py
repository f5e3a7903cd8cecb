"""GOG (hierarchical Gaussian descriptor): each stage against a direct NumPy computation."""

import math

import jax
import numpy as np
import pytest
import scipy.linalg

from warca_jax.features import DESCRIPTORS, extract_arrays
from warca_jax.features.gog import (
    gaussian_spd,
    gog,
    gog_dim,
    gog_min_size,
    half_vectorize,
    log_gaussian,
    orientation_bins,
    patch_gaussians,
    region_gaussians,
)


def _np_halfvec(m):
    k = m.shape[0]
    return np.array(
        [m[i, j] * (1.0 if i == j else math.sqrt(2.0)) for i in range(k) for j in range(i, k)]
    )


def _np_log_gaussian(mean, cov):
    d = len(mean)
    p = np.block([[cov + np.outer(mean, mean), mean[:, None]], [mean[None, :], np.ones((1, 1))]])
    p = np.linalg.det(cov) ** (-1.0 / (d + 1)) * p
    return _np_halfvec(np.real(scipy.linalg.logm(p)))


def _random_gaussian(rng, d):
    a = rng.normal(size=(d, d))
    return rng.normal(size=d), a @ a.T / d + 0.1 * np.eye(d)


def test_embedding_of_a_known_gaussian():
    rng = np.random.default_rng(0)
    mean, cov = _random_gaussian(rng, 4)
    with jax.enable_x64(True):
        spd = np.asarray(jax.jit(gaussian_spd)(mean, cov))
        got = np.asarray(jax.jit(log_gaussian)(mean, cov))
    assert np.linalg.det(spd) == pytest.approx(1.0, abs=1e-10)
    assert np.all(np.linalg.eigvalsh(spd) > 0)
    np.testing.assert_allclose(got, _np_log_gaussian(mean, cov), atol=1e-10)
    assert got.shape == (15,)  # (d + 1) (d + 2) / 2
    # the logarithm of a determinant-1 matrix has trace 0: the diagonal entries sum to 0
    diag = [i * 5 - i * (i - 1) // 2 for i in range(5)]
    assert got[diag].sum() == pytest.approx(0.0, abs=1e-10)


def test_half_vectorize_keeps_the_frobenius_norm():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(2, 5, 5))
    s = a + np.swapaxes(a, 1, 2)
    with jax.enable_x64(True):
        v = np.asarray(half_vectorize(s))
    np.testing.assert_allclose(v[1], _np_halfvec(s[1]))
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), np.linalg.norm(s, axis=(1, 2)))


def test_orientation_bins():
    # angle atan2(dx, dy) + pi: dy > 0 is 180 degrees (bin 2), dx > 0 is 270 (bin 3),
    # dx < 0 is 90 (bin 1), dy < 0 is 360 = 0 (bin 0); halfway shares equally
    dx = np.array([0.0, 1.0, -1.0, 0.0, 1.0, 0.5])
    dy = np.array([1.0, 0.0, 0.0, -1.0, 1.0, -0.5 * math.sqrt(3.0)])
    got = np.asarray(jax.jit(orientation_bins)(dx, dy))
    expected = np.zeros((6, 4))
    expected[0, 2] = expected[1, 3] = expected[2, 1] = expected[3, 0] = 1.0
    expected[4, 2:] = 0.5
    # atan2(0.5, -sqrt(3)/2) = 150 degrees: 330 = bin 3 with 2/3 of the way to bin 0
    expected[5, 3], expected[5, 0] = 1 / 3, 2 / 3
    np.testing.assert_allclose(got, expected, atol=1e-6)
    rng = np.random.default_rng(2)
    w = np.asarray(jax.jit(orientation_bins)(rng.normal(size=50), rng.normal(size=50)))
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-6)
    assert np.all((w > 0).sum(axis=1) <= 2)


def test_patch_statistics_against_numpy():
    rng = np.random.default_rng(3)
    feats = rng.uniform(size=(7, 6, 3))
    with jax.enable_x64(True):
        fn = jax.jit(lambda f: patch_gaussians(f, size=5, step=2, epsilon=1e-3))
        got = np.asarray(fn(feats))
    assert got.shape == (4, 3, 10)
    for i, r in enumerate(range(0, 7, 2)):
        for j, c in enumerate(range(0, 6, 2)):
            box = feats[max(r - 2, 0) : r + 3, max(c - 2, 0) : c + 3].reshape(-1, 3)
            cov = np.cov(box, rowvar=False)  # unbiased, as the paper's patches
            cov = cov + 1e-3 * max(np.trace(cov), 0.01) * np.eye(3)
            expected = _np_log_gaussian(box.mean(axis=0), cov)
            np.testing.assert_allclose(got[i, j], expected, atol=1e-9)


def test_region_statistics_against_numpy():
    rng = np.random.default_rng(4)
    patches = rng.normal(size=(9, 4, 3))  # s = 9 // 3: regions on rows 0-5 and 3-8
    with jax.enable_x64(True):
        fn = jax.jit(lambda p: region_gaussians(p, regions=2, epsilon=1e-3))
        got = np.asarray(fn(patches))
    sigma, mu = 1.0, 2.0  # a quarter and half of the 4 columns
    w = np.exp(-((np.arange(1, 5) - mu) ** 2) / (2 * sigma**2))
    for g, start in enumerate((0, 3)):
        x = patches[start : start + 6].reshape(-1, 3)
        ww = np.tile(w, 6)
        mean = ww @ x / ww.sum()
        cov = (ww[:, None] * (x - mean)).T @ (x - mean) / ww.sum()
        cov = cov + 1e-3 * np.trace(cov) * np.eye(3)
        np.testing.assert_allclose(got[g], _np_log_gaussian(mean, cov), atol=1e-9)


def test_length_is_the_papers():
    assert gog_dim(colour="rgb") == 7567
    assert gog_dim(colour="nrng") == 4921
    assert gog_dim() == 27622
    assert DESCRIPTORS["gog"].dim() == 27622 and DESCRIPTORS["gog_lab"].dim() == 7567
    images = jax.ShapeDtypeStruct((2, 128, 48, 3), np.uint8)
    assert jax.eval_shape(lambda x: gog(x), images).shape == (2, 27622)
    assert jax.eval_shape(lambda x: gog(x, colour="hsv"), images).shape == (2, 7567)


@pytest.mark.slow  # two compilations of the whole descriptor (about a minute)
def test_batched_equals_one_by_one():
    rng = np.random.default_rng(5)
    images = rng.integers(0, 256, size=(3, 16, 6, 3), dtype=np.uint8)
    batch = np.asarray(gog(images, colour="rgb"))  # one compilation per batch size
    assert batch.shape == (3, 7567) and np.all(np.isfinite(batch))
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, rtol=1e-6)
    one = np.concatenate([np.asarray(gog(images[i : i + 1], colour="rgb")) for i in range(3)])
    np.testing.assert_allclose(batch, one, rtol=1e-6, atol=1e-7)
    assert not np.allclose(batch[0], batch[1])


@pytest.mark.slow
def test_fused_through_the_registry():
    rng = np.random.default_rng(6)
    images = rng.integers(0, 256, size=(2, 16, 4, 3), dtype=np.uint8)
    fused = extract_arrays(images, descriptor="gog", batch_size=2)
    assert fused.shape == (2, 27622)
    parts = np.split(fused, np.cumsum([7567, 7567, 7567]), axis=1)
    for part in parts:  # each colour space normalised on its own
        np.testing.assert_allclose(np.linalg.norm(part, axis=1), 1.0, rtol=1e-5)
    rgb = extract_arrays(images, descriptor="gog_rgb", batch_size=2)
    np.testing.assert_allclose(parts[0], rgb, rtol=1e-5, atol=1e-7)


def test_bad_input():
    assert gog_min_size() == (16, 4)
    with pytest.raises(ValueError, match="too small for GOG"):
        gog(np.zeros((1, 15, 48, 3), np.uint8))
    with pytest.raises(ValueError, match="unknown GOG colour"):
        gog(np.zeros((1, 128, 48, 3), np.uint8), colour="xyz")
    with pytest.raises(ValueError, match=r"\[n, H, W, 3\]"):
        gog(np.zeros((128, 48, 3), np.uint8))
