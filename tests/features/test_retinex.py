"""Liao et al.'s Retinex (``retinex="liao"``): each of its five steps, and its outputs
against those of the original's compiled Retinex (tests/reference_data/README.md)."""

import os

import numpy as np
import pytest
from repo_configs import ROOT
from scipy.ndimage import gaussian_filter

from warca_jax.features import extraction, feature_cache
from warca_jax.features import retinex as retinex_module
from warca_jax.features.image_files import load_images
from warca_jax.features.lomo import lomo
from warca_jax.features.retinex import (
    RETINEX,
    keep_brighter,
    liao_colour_restoration,
    liao_msr,
    liao_retinex,
    liao_stretch,
    recursive_gaussian,
)

REFERENCE = os.path.join(ROOT, "tests", "reference_data", "liao_retinex_reference.npz")


def _reference():
    with np.load(REFERENCE, allow_pickle=False) as f:
        return f["names"], f["inputs"], f["outputs"]


# Step 2's blur: GIMP's recursive Gaussian, 3 pixels on.


@pytest.mark.parametrize("sigma", [5.0, 20.0])
def test_an_impulse_blurs_to_a_gaussian_centred_3_pixels_on(sigma):
    n, p = 301, 150
    x = np.zeros(n)
    x[p] = 1.0
    y = recursive_gaussian(x, sigma, 0)
    assert int(np.argmax(y)) == p + 3
    assert int(np.argmax(recursive_gaussian(x, sigma, 0, shift=0))) == p
    np.testing.assert_allclose(y.sum(), 1.0, rtol=1e-3)  # mass kept
    kernel = np.exp(-0.5 * ((np.arange(n) - p - 3) / sigma) ** 2)
    kernel /= kernel.sum()
    # Young and van Vliet's recursion approximates the Gaussian to a few % of its peak.
    assert np.abs(y - kernel).max() < 0.05 * kernel.max()


@pytest.mark.parametrize(("sigma", "tol"), [(5.0, 1.0), (20.0, 0.1)])
def test_rows_then_columns_match_a_gaussian_filter_once_the_shift_is_undone(sigma, tol):
    """Away from the edges (4 sigma), on uniform noise in [0, 255]: within a grey level at
    sigma 5 and a tenth at 20 once moved back by 3 pixels in each direction, and several
    times further from it without that move; the filter without the quirk (``shift=0``)
    matches as it is."""
    n = int(8 * sigma) + 40
    x = np.random.default_rng(0).uniform(0, 255, (n, n))
    got = recursive_gaussian(recursive_gaussian(x, sigma, 1), sigma, 0)
    ref = gaussian_filter(x, sigma, mode="nearest", truncate=8.0)
    m = int(4 * sigma)
    assert np.abs(got[3 + m : -m, 3 + m : -m] - ref[m : -m - 3, m : -m - 3]).max() < tol
    undone = np.abs(got[3 + m : -m, 3 + m : -m] - ref[m : -m - 3, m : -m - 3]).max()
    assert np.abs(got[m:-m, m:-m] - ref[m:-m, m:-m]).max() > 3 * undone
    plain = recursive_gaussian(recursive_gaussian(x, sigma, 1, shift=0), sigma, 0, shift=0)
    assert np.abs(plain[m:-m, m:-m] - ref[m:-m, m:-m]).max() < tol


def test_a_constant_passes_unchanged_to_the_edges():
    """Edges replicated and a gain of 1: a constant stays that constant (to rounding) at
    every pixel, the first and last 3 included."""
    for value in (10.0, 87.0, 265.0):
        x = np.full((2, 17, 9, 3), value)
        for sigma in (5.0, 20.0):
            np.testing.assert_allclose(recursive_gaussian(x, sigma, 2), x, rtol=1e-13)
            np.testing.assert_allclose(recursive_gaussian(x, sigma, 1), x, rtol=1e-13)
    with pytest.raises(ValueError, match="shift must be 0, 1, 2 or 3"):
        recursive_gaussian(x, 5.0, 1, shift=4)


def test_msr_is_the_mean_over_sigmas_of_log_of_i_over_its_blur_plus_one():
    i = np.random.default_rng(1).integers(0, 256, (1, 20, 12, 3)) + 10.0
    expected = sum(
        np.log(i / recursive_gaussian(recursive_gaussian(i, s, 2), s, 1) + 1.0) / 2
        for s in (5.0, 20.0)
    )
    np.testing.assert_allclose(liao_msr(i), expected, rtol=1e-12)
    np.testing.assert_allclose(liao_msr(np.full((1, 20, 12, 3), 10.0)), np.log(2.0), rtol=1e-12)


# Step 3: the stretch between two order statistics.


def test_the_stretch_takes_the_values_at_floor_2_5_and_97_5_percent_of_n():
    rng = np.random.default_rng(2)
    for h, w in [(7, 10), (8, 5)]:  # n = 210: indices 5 and 204; n = 120: 3 and 117
        m = h * w * 3
        r = rng.permutation(m).reshape(1, h, w, 3).astype(np.float64)  # value = its rank
        lo, hi = m * 25 // 1000, m * 975 // 1000
        got = liao_stretch(r)
        np.testing.assert_array_equal(got, np.clip(255 * (r - lo) / (hi - lo) - 10, 0, 255))
        assert got[r == lo] == 0.0 and got[r == hi] == 245.0 and got[r == lo - 1] == 0.0
        q_lo, q_hi = np.quantile(r, [0.025, 0.975])  # interpolated quantiles differ
        assert (q_lo, q_hi) != (lo, hi)


def test_the_stretch_is_per_image_and_a_flat_image_stretches_to_zero():
    r = np.random.default_rng(3).uniform(0, 1, (2, 6, 4, 3))
    both = liao_stretch(np.concatenate([r, np.full((1, 6, 4, 3), 0.7)]))
    alone = np.concatenate([liao_stretch(r[:1]), liao_stretch(r[1:])])
    np.testing.assert_array_equal(both[:2], alone)
    np.testing.assert_array_equal(both[2], 0.0)


# Step 4: the colour restoration.


def test_colour_restoration_on_a_two_pixel_image():
    i = np.array([[[[20.0, 20.0, 20.0], [10.0, 40.0, 70.0]]]])  # I = RGB + 10
    r = np.array([[[[100.0, 50.0, 200.0], [30.0, 60.0, 250.0]]]])
    cr = np.log(np.array([[1, 1, 1], [30 / 120, 120 / 120, 210 / 120]]) + 1.0)
    expected = np.clip(r[0, 0] * cr / cr.mean(), 0, 255)
    np.testing.assert_allclose(liao_colour_restoration(r, i)[0, 0], expected, rtol=1e-12)
    assert expected[1, 2] == 255.0  # clipped
    grey = np.full((1, 3, 2, 3), 40.0)  # grey pixels: CR = log 2 everywhere, r unchanged
    r = np.random.default_rng(5).uniform(0, 255, (1, 3, 2, 3))
    np.testing.assert_allclose(liao_colour_restoration(r, grey), r, rtol=1e-12)


# Step 5: the maximum with the input, truncated to 8 bits.


def test_keep_brighter_truncates_to_8_bits():
    r = np.array([10.99, 3.2, 254.9999, 0.5, 255.0])
    rgb = np.array([5.0, 7.0, 200.0, 0.0, 255.0])
    got = keep_brighter(r, rgb)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, [10, 7, 254, 0, 255])


def test_no_pixel_is_darker_than_the_input():
    rng = np.random.default_rng(4)
    noise = rng.integers(0, 256, (2, 24, 16, 3), dtype=np.uint8)
    bright = rng.integers(200, 256, (1, 24, 16, 3), dtype=np.uint8)
    flat = np.full((1, 24, 16, 3), 90, np.uint8)
    for x in (noise, bright, flat):
        out = liao_retinex(x)
        assert out.dtype == np.uint8 and out.shape == x.shape
        assert np.all(out >= x)
    assert np.any(liao_retinex(bright) == bright)  # where the Retinex is darker, the input
    np.testing.assert_array_equal(liao_retinex(flat), flat)  # no contrast: unchanged


# End to end: the original's outputs, pixel for pixel.


def test_every_pixel_of_the_original_binarys_outputs():
    names, inputs, outputs = _reference()
    assert inputs.shape == outputs.shape == (3, 128, 48, 3)
    got = liao_retinex(inputs)
    for name, g, o in zip(names, got, outputs, strict=True):
        np.testing.assert_array_equal(g, o, err_msg=str(name))
    np.testing.assert_array_equal(liao_retinex(inputs[2:].astype(np.float32)), outputs[2:])


def test_each_step_is_needed_for_the_original_outputs(monkeypatch):
    """Without the 3-pixel shift, or without step 5's maximum, pixels differ."""
    _, inputs, outputs = _reference()
    rgb = inputs.astype(np.float64)
    restored = liao_colour_restoration(liao_stretch(liao_msr(rgb + 10.0)), rgb + 10.0)
    no_max = np.floor(restored).astype(np.uint8)
    assert np.mean(no_max == outputs) < 0.95
    plain = lambda x, sigma, axis: recursive_gaussian(x, sigma, axis, shift=0)  # noqa: E731
    monkeypatch.setattr(retinex_module, "recursive_gaussian", plain)
    assert np.mean(liao_retinex(inputs) == outputs) < 0.9


def test_the_reference_viper_inputs_are_the_shipped_subsets_images():
    names, inputs, _ = _reference()
    paths = [os.path.join(ROOT, "data", str(n)) for n in names[:2]]
    np.testing.assert_array_equal(load_images(paths), inputs[:2])


# In LOMO: an option, fed to the colour histogram only.


def test_liao_is_a_lomo_option_and_the_retinex_is_in_the_cache_key():
    assert "liao" in RETINEX
    assert feature_cache.parameters(lomo)["retinex"] == "'none'"
    assert feature_cache.CODE_VERSIONS["lomo"] >= 2
    # the descriptor `lomo_retinex` (data.descriptor) is LOMO with it, keyed apart
    desc = extraction.get_descriptor("lomo_retinex")
    assert feature_cache.parameters(desc.fn)["retinex"] == "'liao'"
    assert feature_cache.CODE_VERSIONS["lomo_retinex"] == feature_cache.CODE_VERSIONS["lomo"]
    assert desc.dim(160, 60) == extraction.get_descriptor("lomo").dim(160, 60)
    # the earlier readings too, each its own descriptor and key, to compare the readings
    for reading in ("msrcr", "msrcp"):
        desc = extraction.get_descriptor(f"lomo_{reading}")
        assert feature_cache.parameters(desc.fn)["retinex"] == repr(reading)
        assert feature_cache.CODE_VERSIONS[f"lomo_{reading}"] == feature_cache.CODE_VERSIONS["lomo"]


@pytest.mark.slow
def test_the_lomo_retinex_descriptor_is_lomo_on_the_originals_retinex():
    _, inputs, _ = _reference()
    got = extraction.extract_arrays(inputs[:2], descriptor="lomo_retinex", batch_size=2)
    np.testing.assert_array_equal(got, np.asarray(lomo(inputs[:2], retinex="liao")))


@pytest.mark.slow
def test_lomo_describes_the_retinex_colours_and_the_original_texture():
    _, inputs, _ = _reference()
    x = inputs[:2]
    got = np.asarray(lomo(x, retinex="liao", normalize=False))
    on_retinex = np.asarray(lomo(liao_retinex(x), retinex="none", normalize=False))
    plain = np.asarray(lomo(x, retinex="none", normalize=False))
    colour = slice(0, 20480)
    np.testing.assert_array_equal(got[:, colour], on_retinex[:, colour])
    np.testing.assert_array_equal(got[:, 20480:], plain[:, 20480:])  # SILTP of the input
    assert not np.array_equal(got[:, colour], plain[:, colour])
