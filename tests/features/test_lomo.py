"""LOMO features against direct NumPy references and crafted images."""

import colorsys

import fixture_trees
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from warca_jax import features
from warca_jax.features.lomo import (
    grey_float64,
    hsv_bins_float64,
    lomo,
    lomo_dim,
    pool_mean_float64,
    siltp_codes,
    window_max_histograms,
)
from warca_jax.features.retinex import msrcp, tail_quantiles

COLOUR, SILTP3, SILTP5 = slice(0, 20480), slice(20480, 23720), slice(23720, 26960)
ROWS = (24, 11, 5)  # rows of windows per scale at 128 x 48


def _siltp_reference(img, tau, r):
    h, w = img.shape
    codes = np.zeros((h, w), np.int64)
    for i in range(h):
        for j in range(w):
            c = img[i, j]
            for k, (dy, dx) in enumerate(((0, r), (-r, 0), (0, -r), (r, 0))):
                nb = img[min(max(i + dy, 0), h - 1), min(max(j + dx, 0), w - 1)]
                digit = 1 if nb < (1 - tau) * c else 2 if nb > (1 + tau) * c else 0
                codes[i, j] += digit * 3**k
    return codes


def _window_reference(codes, bins):
    """Original LOMO: 10 x 10 windows with stride 5, bin-wise max over each row."""
    h, w = codes.shape
    out = []
    for top in range(0, h - 10 + 1, 5):
        hists = [
            np.bincount(codes[top : top + 10, left : left + 10].ravel(), minlength=bins)
            for left in range(0, w - 10 + 1, 5)
        ]
        out.append(np.max(hists, axis=0))
    return np.array(out)


def _hsv_bin(rgb):
    h, s, v = colorsys.rgb_to_hsv(*(c / 255 for c in rgb))
    vals = np.array([h, s, v]) * 8
    assert np.all(np.abs(vals - np.round(vals)) > 1e-3)  # away from bin edges
    qh, qs, qv = np.floor(vals).astype(int)
    return qv * 64 + qs * 8 + qh


def _matlab_hsv_bin(rgb, bins=8):
    """One pixel's (h, s, v) bins, as MATLAB's rgb2hsv computes them in double precision,
    written per pixel with Python floats (IEEE doubles, the same operations in order)."""
    r, g, b = (c / 255 for c in rgb)
    v = max(max(r, g), b)
    delta = v - min(min(r, g), b)
    d = delta if delta else 1.0
    h = 0.0
    if r == v:
        h = (g - b) / d
    if g == v:  # the later test wins where two channels share the max
        h = 2 + (b - r) / d
    if b == v:
        h = 4 + (r - g) / d
    h = h / 6
    if h < 0:
        h = h + 1
    if not delta:
        h = 0.0
    s = (delta if delta else 0.0) / v if v else 0.0
    return tuple(min(int(np.floor(c * bins)), bins - 1) for c in (h, s, v))


# Pixels whose exact hue or saturation sits on a bin edge (s = 3/8, h = 3/4, h = 1/4, ...):
# float32 and the other double-precision formula (s = 1 - min / max) put some in the next
# bin; MATLAB's operations give the expected bins here.
EDGE_PIXELS = [(78, 88, 55), (62, 58, 66), (31, 29, 33), (61, 73, 49), (72, 72, 63)]
EDGE_PIXELS += [(144, 152, 114)]


def test_hsv_bins_float64_follow_matlabs_operations():
    rng = np.random.default_rng(0)
    pixels = EDGE_PIXELS + [tuple(p) for p in rng.integers(0, 256, size=(300, 3))]
    pixels += [(0, 0, 0), (255, 255, 255), (90, 90, 90), (255, 0, 0), (255, 0, 255)]
    x = np.array(pixels, np.uint8)
    got = hsv_bins_float64(x / 255.0, (8, 8, 8))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [_matlab_hsv_bin(p) for p in pixels])
    assert tuple(got[0]) == (1, 2, 2)  # s = 0.37499999999999994 in double: bin 2, not 3
    assert tuple(got[1]) == (6, 0, 2)  # h = 4.5 / 6 = 0.75 exactly: bin 6
    # Away from the edges every formula agrees: colorsys's bins.
    for p, q in zip(pixels[len(EDGE_PIXELS) :], got[len(EDGE_PIXELS) :], strict=True):
        hsv = np.array(colorsys.rgb_to_hsv(*(c / 255 for c in p))) * 8
        if np.all(np.abs(hsv - np.round(hsv)) > 1e-6):
            np.testing.assert_array_equal(q, np.minimum(np.floor(hsv), 7))


def test_grey_float64_is_rgb2gray_rounded_to_8_bits():
    x = np.random.default_rng(2).integers(0, 256, size=(2, 5, 7, 3)).astype(np.uint8)
    got = grey_float64(x)
    assert got.dtype == np.float64 and got.shape == (2, 5, 7)
    w = (0.298936021293775, 0.587043074451121, 0.114020904255103)
    for idx in np.ndindex(2, 5, 7):
        level = sum(wc * float(c) for wc, c in zip(w, x[idx], strict=True))
        assert got[idx] == int(level + 0.5) / 255.0


def test_pool_mean_float64_sums_in_column_major_order():
    g = np.random.default_rng(3).integers(0, 256, size=(1, 7, 9)) / 255.0
    got = pool_mean_float64(g)
    assert got.shape == (1, 3, 4)  # the odd last row and column dropped
    for i, j in np.ndindex(3, 4):
        tl, bl, tr, br = (float(v) for v in g[0, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2].T.ravel())
        assert got[0, i, j] == (((tl + bl) + tr) + br) / 4


def test_siltp_codes_in_float64_on_exact_ties():
    """Grey levels k / 255 with neighbours at exactly 0.7 and 1.3 times the centre: NumPy
    float64 input is compared in float64, as the original compares, digit by digit."""
    rng = np.random.default_rng(4)
    grey = rng.choice([7, 10, 13, 20, 14, 26, 30, 21, 39], size=(16, 16)) / 255.0
    for r in (3, 5):
        got = siltp_codes(grey, tau=0.3, radius=r)
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, _siltp_reference(grey, 0.3, r))


@pytest.mark.slow
def test_lomo_arithmetic_float64_and_float32_agree_away_from_edges():
    """The two arithmetics differ only on pixels at a bin edge or an exact SILTP tie: on
    colours away from both they give the same descriptor; on edge pixels the colour part
    follows ``hsv_bins_float64``."""
    x = np.zeros((1, 128, 48, 3), np.uint8)
    x[:, :64] = (200, 40, 90)
    x[:, 64:] = (20, 200, 250)
    a, b = (np.asarray(lomo(x, arithmetic=m)) for m in ("float64", "float32"))
    np.testing.assert_allclose(a, b, atol=1e-7)
    x[:] = EDGE_PIXELS[0]
    raw = np.asarray(lomo(x, arithmetic="float64", normalize=False))[0, COLOUR].reshape(40, 512)
    qh, qs, qv = _matlab_hsv_bin(EDGE_PIXELS[0])
    assert np.all(raw[:, qv * 64 + qs * 8 + qh] == 100)
    with pytest.raises(ValueError, match="unknown arithmetic 'float16'"):
        lomo(x, arithmetic="float16")


@pytest.mark.slow
@pytest.mark.parametrize("radius", [3, 5])
def test_siltp_codes_match_direct_reference(radius):
    grey = np.random.default_rng(radius).uniform(0.05, 1.0, size=(13, 15)).astype(np.float32)
    grey[4:8, 2:9] = 0.5  # a flat patch: digits 0
    got = np.asarray(siltp_codes(grey, tau=0.3, radius=radius))
    ref = _siltp_reference(grey.astype(np.float64), 0.3, radius)
    np.testing.assert_array_equal(got, ref)
    assert got.max() < 81 and len(np.unique(got)) > 10
    with jax.disable_jit():
        eager = siltp_codes(jnp.asarray(grey), tau=0.3, radius=radius)
    np.testing.assert_array_equal(np.asarray(eager), ref)


@pytest.mark.slow
@pytest.mark.parametrize(("h", "w"), [(32, 12), (37, 24), (128, 48)])
def test_window_max_histograms_match_sliding_windows(h, w):
    codes = np.random.default_rng(h).integers(0, 9, size=(2, h, w)).astype(np.int32)
    got = np.asarray(window_max_histograms(jnp.asarray(codes), 9))
    for i in range(2):
        np.testing.assert_array_equal(got[i], _window_reference(codes[i], 9))


@pytest.mark.slow
def test_tail_quantiles_match_jnp_quantile():
    v = jax.random.normal(jax.random.key(0), (3, 1001))
    lo, hi = tail_quantiles(v, 0.01)
    ref = jnp.quantile(v, jnp.array([0.01, 0.99]), axis=1)
    np.testing.assert_allclose(lo, ref[0], atol=1e-5)
    np.testing.assert_allclose(hi, ref[1], atol=1e-5)


@pytest.mark.slow
def test_shapes_norms_and_batching():
    x = np.random.default_rng(0).integers(0, 256, size=(2, 128, 48, 3), dtype=np.uint8)
    f = np.asarray(lomo(x))
    assert f.shape == (2, 26960) == (2, lomo_dim()) and f.dtype == np.float32
    assert np.all(np.isfinite(f)) and f.min() >= 0
    for part in (COLOUR, SILTP3, SILTP5):
        np.testing.assert_allclose(np.linalg.norm(f[:, part], axis=1), 1.0, rtol=1e-5)
    single = np.asarray(lomo(np.concatenate([x[1:], x[:1]])))
    np.testing.assert_allclose(single[::-1], f, atol=1e-6)  # rows do not mix
    assert lomo_dim(height=64, width=24, num_scales=2) == (11 + 5) * 674
    with pytest.raises(ValueError, match="too small"):
        lomo(x[:, :60, :40])


@pytest.mark.slow
def test_constant_colour_is_one_hot_before_normalisation():
    rgb = (200, 40, 90)
    x = np.broadcast_to(np.array(rgb, np.uint8), (2, 128, 48, 3))
    raw = np.asarray(lomo(x, retinex="none", normalize=False))
    colour = raw[0, COLOUR].reshape(40, 512)
    expected = np.zeros((40, 512))
    expected[:, _hsv_bin(rgb)] = 100.0  # every 10 x 10 window, every row, every scale
    np.testing.assert_array_equal(colour, expected)
    silt = raw[0, 20480:].reshape(80, 81)  # flat grey: every SILTP digit is 0
    assert np.all(silt[:, 0] == 100) and np.all(silt[:, 1:] == 0)
    # With the Retinex a constant image is degenerate (no contrast) but stays finite.
    assert np.all(np.isfinite(np.asarray(lomo(x))))


@pytest.mark.slow
def test_max_pooling_over_a_row_of_windows():
    a, b = (200, 40, 90), (20, 200, 250)  # grey 94 and 152: SILTP contrast above tau
    x = np.zeros((2, 128, 48, 3), np.uint8)
    x[:] = a
    x[:, 10:15, 20:25] = b  # one 5 x 5 cell: window rows 1 and 2 contain it
    raw = np.asarray(lomo(x, retinex="none", normalize=False))
    colour = raw[0, COLOUR].reshape(40, 512)[: ROWS[0]]
    ba, bb = _hsv_bin(a), _hsv_bin(b)
    # A row's maximum of colour a is 100 (windows away from the patch), of b is 25.
    assert np.all(colour[:, ba] == 100)
    np.testing.assert_array_equal(colour[:, bb], [0, 25, 25] + [0] * 21)
    assert colour.sum() == 24 * 100 + 2 * 25
    # Pixels within 3 rows of the patch (rows 7-17) see it: window rows 0-3 only.
    silt3 = raw[0, SILTP3].reshape(40, 81)[: ROWS[0]]
    assert np.all(silt3[4:, 0] == 100) and np.all(silt3[4:, 1:] == 0)
    assert np.all(silt3[:4, 1:].sum(1) > 0) and np.all(silt3[:, 0] == 100)


@pytest.mark.slow
@pytest.mark.real_data
def test_orl_faces_lomo():
    f = features.extract(fixture_trees.orl_paths(4, 3), descriptor="lomo", batch_size=2)
    assert f.shape == (12, 26960) and np.all(np.isfinite(f))
    d = np.linalg.norm(f[:, None] - f[None], axis=-1)
    y = np.repeat(np.arange(4), 3)
    for p in range(4):
        same = d[np.ix_(y == p, y == p)][~np.eye(3, dtype=bool)].mean()
        assert same < 0.9 * d[np.ix_(y == p, y != p)].mean()


@pytest.mark.slow
def test_msrcp_keeps_each_pixels_chromaticity():
    """MSRCP scales every pixel's RGB by one gain, at most the one that takes its largest
    channel to 1: the channel ratios (so hue and saturation) of the input survive, and the
    output is in [0, 1]."""
    rng = np.random.default_rng(0)
    x = rng.integers(20, 200, size=(2, 128, 48, 3)).astype(np.float32)
    out = np.asarray(msrcp(jnp.asarray(x)))
    assert out.shape == x.shape and out.min() >= 0.0 and out.max() <= 1.0
    ratio = out / (x + 1.0)  # one gain per pixel, on I + 1
    np.testing.assert_allclose(ratio.max(axis=-1) - ratio.min(axis=-1), 0.0, atol=1e-6)
    assert np.ptp(ratio.max(axis=-1)) > 0  # the gain varies over the image


@pytest.mark.slow
@pytest.mark.parametrize("retinex", ["liao", "none", "msrcr", "msrcp"])
def test_every_retinex_gives_a_normalised_descriptor(retinex):
    x = np.random.default_rng(1).integers(0, 256, size=(2, 128, 48, 3)).astype(np.uint8)
    d = np.asarray(lomo(x, retinex=retinex))
    assert d.shape == (2, 26960) and np.isfinite(d).all()
    for part in (COLOUR, SILTP3, SILTP5):
        np.testing.assert_allclose(np.linalg.norm(d[:, part], axis=1), 1.0, rtol=1e-5)


def test_unknown_retinex_is_refused():
    with pytest.raises(ValueError, match="unknown retinex 'msr'; expected one of"):
        lomo(np.zeros((1, 128, 48, 3), np.uint8), retinex="msr")
