"""Image loading, the 2,580-d colour + LBP descriptor and the extraction driver."""

import colorsys
import itertools
import math
import os

import fixture_trees
import jax
import numpy as np
import pytest
from PIL import Image

from warca_jax import features
from warca_jax.features import color_lbp as clbp
from warca_jax.features import extraction, image_files

FLAT_LBP8, FLAT_LBP16 = 57, 241  # the all-ones code is the last uniform pattern


def _blocks(f):
    """[n, 2580] -> (colour [n, 6, 8, 16], lbp8 [n, 6, 59], lbp16 [n, 6, 243])."""
    s = np.asarray(f).reshape(len(f), 6, 430)
    return s[:, :, :128].reshape(-1, 6, 8, 16), s[:, :, 128:187], s[:, :, 187:]


def _expected_bins(rgb):
    """The 8 default channels' 16-bin indices of one colour, computed independently."""
    r, g, b = (c / 255.0 for c in rgb)
    y = 0.299 * r + 0.587 * g + 0.114 * b
    u = (-0.14713 * r - 0.28886 * g + 0.436 * b + 0.43599) / (2 * 0.43599)
    v = (0.615 * r - 0.51499 * g - 0.10001 * b + 0.615) / (2 * 0.615)
    h, s, _ = colorsys.rgb_to_hsv(r, g, b)
    vals = np.array([r, g, b, y, u, v, h, s])
    # The test is only meaningful away from bin edges (float32 vs float64 rounding).
    assert np.all(np.abs(vals * 16 - np.round(vals * 16)) > 1e-3), vals * 16
    return np.floor(vals * 16).astype(int)


def _lbp_reference(img, points, radius):
    """Direct per-pixel uniform-LBP codes with bilinear interpolation and edge replication."""
    h, w = img.shape
    img = img.astype(np.float64)

    def at(y, x):
        return img[min(max(y, 0), h - 1), min(max(x, 0), w - 1)]

    codes = np.zeros((h, w), np.int64)
    for i in range(h):
        for j in range(w):
            for p in range(points):
                dy = round(-radius * math.sin(2 * math.pi * p / points), 9)
                dx = round(radius * math.cos(2 * math.pi * p / points), 9)
                y0, x0 = math.floor(i + dy), math.floor(j + dx)
                fy, fx = i + dy - y0, j + dx - x0
                top = at(y0, x0) + fx * (at(y0, x0 + 1) - at(y0, x0))
                bottom = at(y0 + 1, x0) + fx * (at(y0 + 1, x0 + 1) - at(y0 + 1, x0))
                val = top + fy * (bottom - top) if fy else top
                codes[i, j] |= int(val >= img[i, j]) << p
    return codes


def _uniform_label_reference(code, points):
    bits = [(code >> k) & 1 for k in range(points)]
    if sum(bits[k] != bits[(k + 1) % points] for k in range(points)) > 2:
        return points * (points - 1) + 2
    uniform = [
        c
        for c in range(2**points)
        if sum(((c >> k) & 1) != ((c >> ((k + 1) % points)) & 1) for k in range(points)) <= 2
    ]
    return uniform.index(code)


def test_uniform_pattern_tables():
    t8, t16 = clbp.uniform_lbp_table(8), clbp.uniform_lbp_table(16)
    assert t8.shape == (256,) and t16.shape == (65536,)
    assert np.sum(t8 < 58) == 58 and np.all(t8[t8 >= 58] == 58)
    assert np.sum(t16 < 242) == 242 and np.all(t16[t16 >= 242] == 242)
    assert np.unique(t8[t8 < 58]).size == 58  # each uniform code its own bin
    assert t8[0] == 0 and t8[255] == FLAT_LBP8 and t16[65535] == FLAT_LBP16
    for code in (0b01010101, 0b00000101, 0b00001111, 0b10000001, 0b11101111):
        assert t8[code] == _uniform_label_reference(code, 8)
    assert clbp.lbp_num_bins(8) == 59 and clbp.lbp_num_bins(16) == 243


@pytest.mark.slow
@pytest.mark.parametrize(("points", "radius"), [(8, 1.0), (16, 2.0)])
def test_lbp_codes_match_direct_reference(points, radius):
    # Small integer grey levels: many exact ties (>= matters), no near-ties.
    img = np.random.default_rng(points).integers(0, 8, size=(9, 11)).astype(np.float32)
    got = np.asarray(clbp.lbp_codes(img, points=points, radius=radius))
    np.testing.assert_array_equal(got, _lbp_reference(img, points, radius))


def test_lbp_codes_on_a_horizontal_step_edge():
    img = np.full((8, 6), 10.0, np.float32)
    img[4:] = 50.0
    codes = np.asarray(clbp.lbp_codes(img, points=8, radius=1))
    # Dark rows: every neighbour >= centre. The bright row under the edge: the three
    # upper neighbours (bits 1-3, all pulled towards 10) are darker: 0b11110001.
    assert np.all(codes[:4] == 255) and np.all(codes[5:] == 255)
    assert np.all(codes[4] == 0b11110001)
    assert clbp.uniform_lbp_table(8)[0b11110001] < 58
    np.testing.assert_array_equal(codes, _lbp_reference(img, 8, 1.0))


@pytest.mark.slow
def test_layout_shapes_and_normalisation():
    x = np.random.default_rng(0).integers(0, 256, size=(3, 128, 48, 3), dtype=np.uint8)
    f = np.asarray(clbp.color_lbp(x))
    assert f.shape == (3, 2580) == (3, clbp.color_lbp_dim()) and f.dtype == np.float32
    assert np.all(np.isfinite(f)) and f.min() >= 0
    colour, lbp8, lbp16 = _blocks(f)
    np.testing.assert_allclose(colour.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(lbp8.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(lbp16.sum(-1), 1.0, atol=1e-5)
    assert np.all(lbp8[..., :58].sum(-1) > 0.05)  # random noise has uniform patterns too
    ext = clbp.color_lbp(x[:1], channels=clbp.EXTENDED_CHANNELS)
    assert ext.shape == (1, 3156) == (1, clbp.color_lbp_dim(channels=clbp.EXTENDED_CHANNELS))
    np.testing.assert_allclose(np.asarray(ext).reshape(6, -1).sum(1), 16.0, rtol=1e-5)
    with pytest.raises(ValueError, match="unknown colour channel 'X'"):
        clbp.color_lbp(x[:1], channels=("R", "X"))


def test_rows_to_stripes():
    s = clbp.stripe_of_row(128, 6)
    assert np.bincount(s).tolist() == [22, 21, 21, 22, 21, 21]
    assert np.all(s[:64] <= 2) and np.all(s[64:] >= 3)


@pytest.mark.slow
@pytest.mark.parametrize("rgb", [(200, 40, 90), (20, 150, 230)])
def test_uniform_colour_gives_one_hot_histograms(rgb):
    x = np.broadcast_to(np.array(rgb, np.uint8), (1, 128, 48, 3))
    colour, lbp8, lbp16 = _blocks(clbp.color_lbp(x))
    expected = np.zeros((8, 16))
    expected[np.arange(8), _expected_bins(rgb)] = 1.0
    for s in range(6):
        np.testing.assert_array_equal(colour[0, s], expected)
    # A flat grey image: every code is all ones.
    assert np.all(lbp8[0, :, FLAT_LBP8] == 1) and np.all(lbp16[0, :, FLAT_LBP16] == 1)


@pytest.mark.slow
def test_top_and_bottom_halves_fill_their_stripes():
    top, bottom = (200, 40, 90), (20, 150, 230)
    x = np.zeros((1, 128, 48, 3), np.uint8)
    x[0, :64], x[0, 64:] = top, bottom
    colour, lbp8, lbp16 = _blocks(clbp.color_lbp(x))
    for s in range(6):
        bins = _expected_bins(top if s < 3 else bottom)
        assert np.all(colour[0, s, np.arange(8), bins] == 1.0)
    # Grey levels 93.5 above, 120.25 below: every dark pixel still sees neighbours >= it,
    # so only the bright rows next to the edge (row 64 for radius 1, rows 64-65 for
    # radius 2; stripe 3 has 22 rows) leave the flat code. Row 64 at radius 1 is the
    # step-edge code 0b11110001 (upper three neighbours darker).
    for s in (0, 1, 2, 4, 5):
        assert lbp8[0, s, FLAT_LBP8] == 1 and lbp16[0, s, FLAT_LBP16] == 1
    np.testing.assert_allclose(lbp8[0, 3, FLAT_LBP8], 21 / 22, rtol=1e-6)
    np.testing.assert_allclose(lbp8[0, 3, clbp.uniform_lbp_table(8)[0b11110001]], 1 / 22)
    np.testing.assert_allclose(lbp16[0, 3, FLAT_LBP16], 20 / 22, rtol=1e-6)


@pytest.mark.slow
def test_interior_lbp_skips_each_stripes_border():
    """``lbp_pixels="interior"``: each stripe's LBP histograms are those of the stripe's crop
    alone, over the pixels at least ceil(radius) inside it (MATLAB's ``lbp`` on the crop)."""
    x = np.zeros((1, 128, 48, 3), np.uint8)
    x[0, :64], x[0, 64:] = (200, 40, 90), (20, 150, 230)
    _, lbp8, lbp16 = _blocks(clbp.color_lbp(x, lbp_pixels="interior"))
    # The edge rows (64 for radius 1, 64-65 for radius 2) open stripe 3, so no stripe
    # counts them: every histogram is the flat code's alone (against 21/22 above).
    np.testing.assert_allclose(lbp8[0, :, FLAT_LBP8], 1, rtol=1e-6)
    np.testing.assert_allclose(lbp16[0, :, FLAT_LBP16], 1, rtol=1e-6)

    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, size=(2, 36, 14, 3), dtype=np.uint8)
    got = np.asarray(clbp.color_lbp(img, stripes=3, lbp_pixels="interior")).reshape(2, 3, -1)
    grey = 0.299 * img[..., 0] + 0.587 * img[..., 1] + 0.114 * img[..., 2]
    for n in range(2):
        for s, (points, radius, start) in itertools.product(range(3), [(8, 1, 128), (16, 2, 187)]):
            crop = grey[n, 12 * s : 12 * (s + 1)].astype(np.float32)
            k = math.ceil(radius)
            codes = np.asarray(clbp.lbp_codes(crop, points=points, radius=radius))[k:-k, k:-k]
            bins = clbp.uniform_lbp_table(points)[codes].ravel()
            want = np.bincount(bins, minlength=clbp.lbp_num_bins(points)) / bins.size
            width = clbp.lbp_num_bins(points)
            np.testing.assert_allclose(got[n, s, start : start + width], want, atol=1e-6)
    # The colour histograms are unchanged, and so is every block with the default.
    every = np.asarray(clbp.color_lbp(img, stripes=3)).reshape(2, 3, -1)
    np.testing.assert_array_equal(got[..., :128], every[..., :128])
    with pytest.raises(ValueError, match="stripes of more than 4 rows"):
        clbp.color_lbp(img[:, :12], stripes=3, lbp_pixels="interior")
    with pytest.raises(ValueError, match="unknown lbp_pixels 'edge'"):
        clbp.color_lbp(img, lbp_pixels="edge")


@pytest.mark.slow
def test_centred_binning_is_matlabs_hist_on_centres():
    """``binning="centred"``: bin = clip(floor(16 v + 1/2), 0, 15), so the bins are centred
    on 0, 1/16, ..., 15/16 and the two end bins are half as wide."""
    levels = np.array([0, 7, 9, 24, 25, 128, 247, 249, 255], np.uint8)  # R; G = B = 0
    x = np.zeros((len(levels), 12, 6, 3), np.uint8)
    x[..., 0] = levels[:, None, None]
    red = lambda f: np.asarray(f).reshape(len(levels), 1, -1)[:, 0, :16].argmax(-1)  # noqa: E731
    v = levels / 255.0
    centred = red(clbp.color_lbp(x, stripes=1, lbp=(), binning="centred"))
    floor = red(clbp.color_lbp(x, stripes=1, lbp=()))
    np.testing.assert_array_equal(centred, np.clip(np.floor(16 * v + 0.5), 0, 15))
    np.testing.assert_array_equal(floor, np.clip(np.floor(16 * v), 0, 15))
    assert centred.tolist() == [0, 0, 1, 2, 2, 8, 15, 15, 15]
    assert floor.tolist() == [0, 0, 0, 1, 1, 8, 15, 15, 15]
    with pytest.raises(ValueError, match="unknown binning 'round'"):
        clbp.color_lbp(x, binning="round")


@pytest.mark.slow
def test_jit_and_batching_agree():
    x = np.random.default_rng(1).integers(0, 256, size=(3, 128, 48, 3), dtype=np.uint8)
    batched = np.asarray(clbp.color_lbp(x))
    single = np.concatenate([np.asarray(clbp.color_lbp(x[i : i + 1])) for i in range(3)])
    np.testing.assert_array_equal(batched, single)
    with jax.disable_jit():
        eager = np.asarray(clbp.color_lbp(x[:1]))
    np.testing.assert_allclose(eager, batched[:1], atol=1e-6)
    as_float = np.asarray(clbp.color_lbp(x[:1].astype(np.float32)))
    np.testing.assert_array_equal(as_float, batched[:1])


def _write_images(tmp_path, n=5, size=(30, 40)):
    rng = np.random.default_rng(7)
    paths = []
    for i in range(n):
        p = tmp_path / f"img{i}.png"
        Image.fromarray(rng.integers(0, 256, size=(*size, 3), dtype=np.uint8)).save(p)
        paths.append(str(p))
    return paths


def test_load_images_converts_modes_and_resizes(tmp_path):
    grey = tmp_path / "grey.pgm"
    Image.fromarray(np.full((112, 92), 77, np.uint8)).save(grey)
    rgba = tmp_path / "rgba.png"
    Image.new("RGBA", (20, 30), (10, 20, 30, 128)).save(rgba)
    pal = tmp_path / "pal.png"
    Image.new("RGB", (48, 128), (200, 40, 90)).quantize(colors=2).save(pal)
    x = image_files.load_images([grey, rgba, pal])
    assert x.shape == (3, 128, 48, 3) and x.dtype == np.uint8
    assert np.all(x[0] == 77) and np.all(x[1] == (10, 20, 30))
    np.testing.assert_array_equal(x[2], np.broadcast_to((200, 40, 90), (128, 48, 3)))
    ramp = tmp_path / "ramp.png"
    Image.fromarray(np.tile(np.arange(0, 256, 4, dtype=np.uint8), (8, 1))).save(ramp)
    small = image_files.load_images([ramp], height=8, width=32)[0, 0, :, 0].astype(int)
    assert np.all(np.diff(small) > 0)  # bilinear resize of a ramp stays increasing


def test_load_images_errors_name_the_file(tmp_path):
    good = _write_images(tmp_path, n=1)
    missing = str(tmp_path / "nope.jpg")
    with pytest.raises(FileNotFoundError, match="nope.jpg"):
        image_files.load_images(good + [missing])
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"this is not an image")
    with pytest.raises(ValueError, match=r"junk\.png.*expected a file Pillow can decode"):
        image_files.load_images(good + [junk])


@pytest.mark.slow
def test_extract_batches_match_in_memory(tmp_path):
    paths = _write_images(tmp_path)
    full = features.extract(paths, batch_size=256)
    small = features.extract(paths, batch_size=2, progress=True)
    np.testing.assert_array_equal(full, small)
    images = image_files.load_images(paths)
    ref = features.extract_arrays(images, descriptor="color_lbp", batch_size=2)
    np.testing.assert_array_equal(full, ref)
    assert full.shape == (5, 2580) and full.dtype == np.float32
    assert features.DESCRIPTORS["lomo"].dim() == 26960
    with pytest.raises(ValueError, match=r"unknown descriptor 'sift'.*color_lbp.*lomo"):
        features.extract(paths, descriptor="sift")


@pytest.mark.slow
def test_extract_cache_hits_and_invalidates(tmp_path, monkeypatch, counted):
    (tmp_path / "imgs").mkdir()
    paths = _write_images(tmp_path / "imgs")
    calls = counted
    cache = tmp_path / "cache"
    first = features.extract(paths, batch_size=2, cache_dir=cache)
    assert len(calls) == 3
    stored = sorted(os.listdir(cache))
    assert [os.path.splitext(s)[1] for s in stored] == [".json", ".npy"]
    assert stored[1].startswith("color_lbp_") and len(stored[1]) == len("color_lbp_") + 16 + 4
    second = features.extract(paths, batch_size=2, cache_dir=cache)
    assert len(calls) == 3  # loaded, not recomputed
    np.testing.assert_array_equal(first, second)

    Image.new("RGB", (40, 30), (200, 40, 90)).save(paths[1])
    third = features.extract(paths, batch_size=2, cache_dir=cache)
    assert len(calls) == 6 and len(os.listdir(cache)) == 2  # the same entry, rewritten
    assert not np.array_equal(third[1], first[1])
    np.testing.assert_array_equal(third[[0, 2, 3, 4]], first[[0, 2, 3, 4]])
    os.utime(paths[0])  # touching alone keeps the bytes: read, not recomputed
    features.extract(paths, batch_size=2, cache_dir=cache)
    assert len(calls) == 6
    features.extract(paths[::-1], batch_size=2, cache_dir=cache)  # another list: another entry
    assert len(calls) == 9 and len(os.listdir(cache)) == 4


@pytest.mark.slow
def test_extract_rejects_non_finite_features(tmp_path, monkeypatch):
    paths = _write_images(tmp_path, n=2)
    real = extraction.DESCRIPTORS["color_lbp"]
    nan_fn = real._replace(fn=lambda b: real.fn(b).at[1, 3].set(np.nan))
    monkeypatch.setitem(extraction.DESCRIPTORS, "color_lbp", nan_fn)
    with pytest.raises(ValueError, match=r"non-finite features for images \[1\]"):
        features.extract(paths)


@pytest.mark.slow
@pytest.mark.real_data
def test_orl_faces_same_person_is_closer():
    f = features.extract(fixture_trees.orl_paths(5, 4), descriptor="color_lbp", batch_size=20)
    assert f.shape == (20, 2580) and np.all(np.isfinite(f))
    s = f[:, None] + f[None]
    chi2 = np.where(s > 0, (f[:, None] - f[None]) ** 2 / np.where(s > 0, s, 1), 0).sum(-1)
    y = np.repeat(np.arange(5), 4)
    for p in range(5):
        same = chi2[np.ix_(y == p, y == p)][~np.eye(4, dtype=bool)].mean()
        other = chi2[np.ix_(y == p, y != p)].mean()
        assert same < 0.75 * other, (p, same, other)


@pytest.mark.parametrize(
    "rgb, lab",
    [  # CIE L*a*b* (D65) of the sRGB primaries and white, as colour science tabulates them
        ((1.0, 1.0, 1.0), (100.0, 0.0, 0.0)),
        ((1.0, 0.0, 0.0), (53.24, 80.09, 67.20)),
        ((0.0, 1.0, 0.0), (87.73, -86.18, 83.18)),
        ((0.0, 0.0, 1.0), (32.30, 79.19, -107.86)),
        ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
    ],
)
def test_rgb_to_lab_gives_the_tabulated_values(rgb, lab):
    got = np.array([float(v) for v in clbp.rgb_to_lab(jax.numpy.asarray(rgb, np.float32))])
    np.testing.assert_allclose(got, lab, atol=0.05)
