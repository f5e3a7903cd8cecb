"""Images smaller than a descriptor's smallest size are refused before any work, naming
them, or skipped with data.skip_small_images, the loaders' bookkeeping kept right."""

import logging
import os

import fixture_trees
import numpy as np
import pytest
from PIL import Image

from warca_jax import datasets, features
from warca_jax.features import extraction
from warca_jax.features.color_lbp import color_lbp_min_size
from warca_jax.features.lomo import lomo_min_size
from warca_jax.runs import defaults


def _image(path, height, width):
    Image.fromarray(np.full((height, width, 3), 120, np.uint8)).save(path)
    return str(path)


def test_the_smallest_sizes_follow_from_stripes_windows_and_radii():
    assert color_lbp_min_size() == (6, 5)  # 6 stripes; the radius-2 LBP circle: 5 across
    assert color_lbp_min_size(stripes=10) == (10, 5)
    assert color_lbp_min_size(lbp=((8, 1.0),)) == (6, 3)
    assert color_lbp_min_size(stripes=2, lbp=((16, 2.5),)) == (7, 7)
    assert lomo_min_size() == (11, 11)  # a 10 x 10 window; SILTP neighbours 2 x 5 apart
    assert lomo_min_size(radii=(3,)) == (10, 10)
    assert features.DESCRIPTORS["color_lbp"].min_size == (6, 5)
    assert features.DESCRIPTORS["lomo"].min_size == (11, 11)


@pytest.mark.parametrize("descriptor", ["color_lbp", "lomo"])
def test_a_too_small_image_is_refused_before_any_work(tmp_path, monkeypatch, descriptor):
    def never(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(extraction.image_files, "load_images", never)
    monkeypatch.setitem(
        extraction.DESCRIPTORS, descriptor, extraction.DESCRIPTORS[descriptor]._replace(fn=never)
    )
    h, w = features.DESCRIPTORS[descriptor].min_size
    paths = [_image(tmp_path / "ok.png", h, w), _image(tmp_path / "dot.png", 1, 1)]
    paths.append(_image(tmp_path / "narrow.png", h, w - 1))
    with pytest.raises(ValueError) as info:
        features.extract(paths, descriptor=descriptor, cache_dir=tmp_path / "cache")
    msg = str(info.value)
    assert "\n" not in msg and f"2 of 3 images are too small for descriptor {descriptor!r}" in msg
    assert f"at least {h} x {w} pixels (height x width)" in msg
    assert f"{paths[1]} (1 x 1)" in msg and f"{paths[2]} ({h} x {w - 1})" in msg
    assert "data.skip_small_images=True" in msg
    assert not os.path.exists(tmp_path / "cache")
    extraction.check_image_sizes(paths[:1], descriptor)  # the smallest size itself passes


@pytest.mark.slow
def test_an_image_of_the_smallest_size_is_described(tmp_path):
    paths = [_image(tmp_path / f"{i}.png", 6 + i, 5 + i) for i in range(2)]
    out = features.extract(paths, height=32, width=16)
    assert out.shape == (2, 2580) and np.isfinite(out).all()


def _viper_with_a_dot(tmp_path):
    root = fixture_trees.viper(str(tmp_path / "viper"))
    dot = os.path.join(root, "cam_b", "006_90.bmp")
    _image(dot, 1, 1)
    return root, dot


def test_a_one_pixel_image_in_a_viper_tree_is_refused_naming_it(tmp_path):
    root, dot = _viper_with_a_dot(tmp_path)
    with pytest.raises(ValueError, match=rf"1 of 17 images .*{dot} \(1 x 1\)"):
        datasets.read("viper", root, num_test_ids=4)


def test_skipping_small_images_keeps_labels_cameras_and_splits_right(tmp_path, monkeypatch, caplog):
    root, dot = _viper_with_a_dot(tmp_path)
    image_set = datasets.load("viper", root, num_test_ids=4, num_splits=3)
    gone = image_set.paths.index(dot)

    def extract(paths, **kwargs):  # row i holds the index of its image in the full set
        return np.array([[image_set.paths.index(p), 1.0] for p in paths], np.float32)

    monkeypatch.setattr(features, "extract", extract)
    with caplog.at_level(logging.WARNING):
        ds = datasets.to_dataset(image_set, skip_small_images=True)
    (line,) = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert "viper: skipped 1 of 17 images smaller than 6 x 5 pixels" in line and dot in line
    origin = ds.features[:, 0].astype(int)
    assert len(ds.labels) == 16 and gone not in origin
    np.testing.assert_array_equal(ds.labels, image_set.labels[origin])
    np.testing.assert_array_equal(ds.cams, image_set.cams[origin])
    for new, old in zip(ds.splits, image_set.splits, strict=True):
        for key in ("train_idx", "query_idx", "gallery_idx"):
            before = np.asarray(getattr(old, key))
            np.testing.assert_array_equal(origin[getattr(new, key)], before[before != gone])


@pytest.mark.slow
def test_skip_small_images_from_the_config(tmp_path, caplog):
    root, dot = _viper_with_a_dot(tmp_path)
    cfg = defaults.base_config().data
    cfg.name, cfg.path, cfg.num_test_ids, cfg.num_splits = "viper", root, 4, 2
    cfg.skip_small_images = True
    with caplog.at_level(logging.WARNING):
        ds = datasets.from_config(cfg)
    assert ds.features.shape == (16, 2580) and dot in caplog.text
    assert 999 in ds.labels and 6 in ds.labels  # 006's camera-A image stays


def test_images_are_described_at_data_height_and_width(tmp_path, monkeypatch):
    """``data.height`` / ``data.width`` (to_dataset's height, width) are the size images are
    resized to before description: 128 x 48 unless set (CUHK01's own 160 x 60, say)."""
    root = fixture_trees.viper(str(tmp_path / "viper"))
    image_set = datasets.load("viper", root, num_test_ids=4, num_splits=2)
    sizes = []

    def extract(paths, *, height, width, **kwargs):
        sizes.append((height, width))
        return np.ones((len(paths), 2), np.float32)

    monkeypatch.setattr(features, "extract", extract)
    datasets.to_dataset(image_set)
    datasets.to_dataset(image_set, height=160, width=60)
    cfg = defaults.base_config().data
    assert (cfg.height, cfg.width) == (128, 48)
    cfg.name, cfg.path, cfg.num_test_ids, cfg.num_splits = "viper", root, 4, 2
    cfg.height, cfg.width = 64, 24
    datasets.from_config(cfg)
    assert sizes == [(128, 48), (160, 60), (64, 24)]
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match=r"data\.width must be an integer >= 1"):
            datasets.to_dataset(image_set, width=bad)


def test_lomo_at_160_x_60_has_its_own_rows_of_windows():
    """At 160 x 60 LOMO has 31 + 15 + 7 rows of windows (53 x 674 dims), and extraction
    resizes the images to the size it is given."""
    assert features.DESCRIPTORS["lomo"].dim(160, 60) == 53 * 674
    x = np.random.default_rng(0).integers(0, 256, size=(2, 160, 60, 3), dtype=np.uint8)
    f = features.extract_arrays(x, descriptor="lomo")
    assert f.shape == (2, 53 * 674) and np.all(np.isfinite(f))
