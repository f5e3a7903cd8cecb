"""Per-split normalisation of the features (``data.normalize``,
``warca_jax.features.feature_norm``)."""

import numpy as np
import pytest
from ml_collections import config_dict

from warca_jax import datasets
from warca_jax.features import extraction, feature_norm, gog_dim
from warca_jax.runs import defaults, pipeline


def _reference(x, train, sizes):
    """Each part minus its training mean, over its L2 norm, written out in float64."""
    out, start = [], 0
    for size in sizes:
        part = x[:, start : start + size].astype(np.float64)
        part = part - part[train].mean(axis=0)
        out.append(part / np.linalg.norm(part, axis=1, keepdims=True))
        start += size
    return np.concatenate(out, axis=1)


def test_each_part_is_centred_by_the_training_mean_and_scaled_to_unit_norm():
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(30, 10)) + 5.0).astype(np.float32)
    train = np.arange(0, 30, 2)
    got = feature_norm.center_l2(x, train, (4, 6))
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, _reference(x, train, (4, 6)), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(got[:, :4], axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(got[:, 4:], axis=1), 1.0, rtol=1e-6)


def test_the_test_images_never_move_the_training_features():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(20, 6)).astype(np.float32)
    train = np.arange(10)
    other = x.copy()
    other[10:] += 100.0  # other test images
    a = feature_norm.center_l2(x, train, (6,))
    b = feature_norm.center_l2(other, train, (6,))
    np.testing.assert_array_equal(a[:10], b[:10])


def test_a_part_equal_to_the_mean_stays_zero():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    got = feature_norm.center_l2(x, np.array([0]), (2,))
    np.testing.assert_array_equal(got[0], [0.0, 0.0])
    assert np.isfinite(got).all()


def test_the_parts_are_fused_gogs_colour_spaces_and_else_the_whole_vector():
    cfg = config_dict.ConfigDict({"descriptor": "gog", "height": 128, "width": 48})
    assert feature_norm.parts(cfg, gog_dim()) == (7567, 7567, 7567, 4921)
    assert sum(extraction.DESCRIPTORS["gog"].parts()) == gog_dim()
    cfg.descriptor = "gog_rgb"
    assert feature_norm.parts(cfg, 7567) == (7567,)
    cfg.descriptor = "gog"
    assert feature_norm.parts(cfg, 64) == (64,)  # features not from the descriptor
    assert feature_norm.parts(config_dict.ConfigDict({"name": "npz"}), 64) == (64,)


@pytest.mark.parametrize("mode", ["l2", "", None, 1, "CENTER_L2"])
def test_an_unknown_mode_is_refused_naming_the_field(mode):
    with pytest.raises(ValueError, match=r"data.normalize must be one of \('none', 'center_l2'\)"):
        feature_norm.check_mode(mode)
    if not isinstance(mode, int):  # a typed config field refuses an int itself
        cfg = defaults.base_config()
        cfg.data.normalize = mode
        with pytest.raises(ValueError, match="data.normalize"):
            datasets.from_config(cfg.data)


def test_bad_parts_and_an_empty_training_set_are_refused():
    x = np.ones((4, 5), np.float32)
    with pytest.raises(ValueError, match="add up to 5"):
        feature_norm.center_l2(x, np.arange(2), (2, 2))
    with pytest.raises(ValueError, match="at least one training image"):
        feature_norm.center_l2(x, np.arange(0), (5,))


def test_for_split_uses_the_splits_training_images():
    cfg = defaults.base_config()
    ds = datasets.from_config(cfg.data)
    assert feature_norm.for_split(ds, 0, cfg.data) is ds  # 'none'
    cfg.data.normalize = "center_l2"
    for s in (0, 1):
        got = feature_norm.for_split(ds, s, cfg.data)
        train = ds.splits[s].train_idx
        np.testing.assert_allclose(
            got.features, _reference(ds.features, train, (ds.features.shape[1],)), atol=1e-6
        )
        np.testing.assert_array_equal(got.labels, ds.labels)


def test_the_main_job_scores_the_normalised_features(tmp_path):
    # Euclidean distance on the split's normalised features is the run's baseline.
    cfg = defaults.base_config()
    cfg.method = defaults.method_config("nn")
    cfg.data.num_splits = 1
    cfg.data.normalize = "center_l2"
    res = pipeline.train_and_evaluate(cfg, str(tmp_path))
    ds = datasets.from_config(cfg.data)
    plain = defaults.base_config()
    plain.method = defaults.method_config("nn")
    plain.data.num_splits = 1
    other = pipeline.train_and_evaluate(plain, str(tmp_path / "plain"))
    assert res["splits"][0]["baseline_euclidean"]["mAP"] == pytest.approx(res["splits"][0]["mAP"])
    assert res["mean"]["mAP"] != pytest.approx(other["mean"]["mAP"])
    assert ds.features.shape[1] == 64
