"""Tests for warca_jax/datasets: the registry, the split protocol and `to_dataset`."""

import os

import fixture_trees
import numpy as np
import pytest

from warca_jax import datasets, features
from warca_jax.data import dataset_arrays, identity_splits

ORL = str(fixture_trees.ORL)


def _orl_tree(tmp_path):
    return fixture_trees.orl(str(tmp_path / "orl"))


# --- registry ----------------------------------------------------------------------------


def test_unknown_name_lists_valid_names(tmp_path):
    with pytest.raises(ValueError, match=r"unknown dataset 'market'.*'cuhk03'.*'viper'"):
        datasets.load("market", tmp_path)


def test_unknown_option_lists_valid_options(tmp_path):
    with pytest.raises(TypeError, match=r"no option\(s\) \['num_test'\].*'num_test_ids'"):
        datasets.load("viper", tmp_path, num_test=3)


def test_name_spelling_is_forgiving(tmp_path):
    root = fixture_trees.market1501(str(tmp_path / "m"))
    assert datasets.load("Market-1501", root).name == "market1501"


# --- protocol ----------------------------------------------------------------------------


def test_rest_mode_one_probe_and_the_rest_as_gallery():
    labels = np.repeat(np.arange(10), 4)
    cams = np.arange(40)
    labels[-1] = 42  # One image only: never a test identity.
    splits = identity_splits.probe_gallery_splits(
        labels, cams, num_test_ids=5, num_splits=3, seed=1
    )
    for split in splits:
        test = np.unique(labels[split.query_idx])
        assert len(test) == 5 and len(split.query_idx) == 5 and 42 not in test
        np.testing.assert_array_equal(np.unique(labels[split.gallery_idx]), test)
        used = np.concatenate(split)
        np.testing.assert_array_equal(np.sort(used), np.arange(40))  # Every image used.


def test_mask_mode_counts_and_num_train_ids():
    labels = np.repeat(np.arange(12), 6)
    cams = np.tile([0, 0, 0, 1, 1, 1], 12)
    (split,) = identity_splits.probe_gallery_splits(
        labels,
        cams,
        num_test_ids=4,
        num_train_ids=3,
        num_splits=1,
        probe_mask=cams == 0,
        gallery_mask=cams == 1,
        probes_per_id=2,
        gallery_per_id=None,
    )
    assert len(split.query_idx) == 8 and (cams[split.query_idx] == 0).all()
    assert len(split.gallery_idx) == 12 and (cams[split.gallery_idx] == 1).all()
    assert len(split.train_idx) == 18 and len(np.unique(labels[split.train_idx])) == 3


def test_protocol_errors():
    labels, cams = np.repeat(np.arange(5), 2), np.tile([0, 1], 5)
    with pytest.raises(ValueError, match="num_test_ids = 9 but only 5 of the 5 identities"):
        identity_splits.probe_gallery_splits(labels, cams, num_test_ids=9)
    with pytest.raises(ValueError, match="test set 0 names identity 7, which has no images"):
        identity_splits.probe_gallery_splits(labels, cams, num_test_ids=None, test_id_sets=[[1, 7]])
    with pytest.raises(ValueError, match="num_splits must be a positive int; got 0"):
        identity_splits.probe_gallery_splits(labels, cams, num_test_ids=2, num_splits=0)
    with pytest.raises(ValueError, match="one probe per identity"):
        identity_splits.probe_gallery_splits(labels, cams, num_test_ids=2, probes_per_id=2)
    bad = dataset_arrays.Split(
        np.arange(4), np.array([4]), np.array([5, 6])
    )  # 4 and 5: same camera
    with pytest.raises(ValueError, match="probe 4 .*no gallery image of its identity"):
        dataset_arrays.check_matches(
            bad, np.array([0, 0, 1, 1, 2, 2, 3]), np.arange(7) % 2 * 0, where="s", every=True
        )


# --- to_dataset --------------------------------------------------------------------------


def test_to_dataset_calls_features_extract(tmp_path, monkeypatch):
    root = _orl_tree(tmp_path)
    image_set = datasets.load("orl", root, num_test_ids=3, num_splits=2)
    calls = []

    def extract(paths, **kwargs):
        calls.append((paths, kwargs))
        return np.arange(len(paths) * 3, dtype=np.float64).reshape(-1, 3) % 7

    monkeypatch.setattr(features, "extract", extract)
    ds = datasets.to_dataset(image_set, descriptor="lomo", cache_dir=str(tmp_path), batch_size=8)
    assert isinstance(ds, dataset_arrays.Dataset) and ds.features.dtype == np.float32
    assert ds.features.shape == (60, 3) and ds.name == "orl"
    ((paths, kwargs),) = calls
    assert paths == list(image_set.paths)
    assert kwargs == dict(
        descriptor="lomo",
        batch_size=8,
        cache_dir=str(tmp_path),
        progress=False,
        height=128,
        width=48,
    )
    fixture_trees.assert_same_splits(ds.splits, image_set.splits)
    assert datasets.to_dataset(ds) is ds
    same = datasets.read("orl", root, num_test_ids=3, num_splits=2, descriptor="lomo")
    np.testing.assert_array_equal(same.features, ds.features)
    assert calls[-1][1]["descriptor"] == "lomo"
    with pytest.raises(TypeError, match="expects an ImageSet"):
        datasets.to_dataset({"paths": []})


def test_to_dataset_rejects_non_finite_features(tmp_path, monkeypatch):
    root = _orl_tree(tmp_path)
    image_set = datasets.load("orl", root, num_test_ids=3, num_splits=1)
    monkeypatch.setattr(features, "extract", lambda paths, **_: np.full((len(paths), 2), np.nan))
    with pytest.raises(ValueError, match="features must be finite"):
        datasets.to_dataset(image_set)


@pytest.mark.slow
@pytest.mark.real_data
@pytest.mark.skipif(not os.path.isdir(ORL), reason=f"real ORL faces not at {ORL}")
def test_to_dataset_real_features_on_orl():
    s = datasets.load("orl", ORL, num_splits=1)
    ds = datasets.to_dataset(s, batch_size=128)
    assert ds.features.shape[0] == 400 and np.isfinite(ds.features).all()
