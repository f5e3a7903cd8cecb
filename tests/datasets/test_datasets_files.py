"""Tests for the file-based loaders: CUHK03 (new and classic protocols) and feature files."""

import json
import os
import shutil
import sys

import fixture_trees
import numpy as np
import pytest
import scipy.io
from PIL import Image
from repo_configs import ROOT

from warca_jax import datasets
from warca_jax.data import dataset_arrays, identity_splits
from warca_jax.datasets import cuhk03, features_files, npz_file

PROTOCOLS = os.path.join(ROOT, "data", "reid_protocols")
needs_protocols = pytest.mark.skipif(
    not os.path.isdir(PROTOCOLS), reason=f"real CUHK03 protocol files not at {PROTOCOLS}"
)


def _real_mat(variant):
    return os.path.join(PROTOCOLS, cuhk03.mat_name(variant))


# --- CUHK03 new protocol, real files -----------------------------------------------------


@pytest.mark.real_data
@needs_protocols
@pytest.mark.parametrize(
    "variant, n, n_train, n_gallery",
    [("labeled", 14096, 7368, 5328), ("detected", 14097, 7365, 5332)],
)
def test_real_new_protocol_files(variant, n, n_train, n_gallery):
    names, labels, cams, split = cuhk03.read_protocol_mat(_real_mat(variant))
    assert len(names) == len(labels) == len(cams) == n
    assert names[0] == "1_001_1_01.png"
    assert [len(x) for x in split] == [n_train, 1400, n_gallery]
    for idx in split:
        assert idx.dtype == np.int64 and idx.min() >= 0 and idx.max() < n
    assert len(np.unique(labels[split.train_idx])) == 767
    test_ids = np.unique(labels[np.concatenate(split[1:])])
    assert len(test_ids) == 700
    assert not np.intersect1d(labels[split.train_idx], test_ids).size
    np.testing.assert_array_equal(np.unique(cams), [1, 2])
    # Each identity's images share the name's identity field (pair, id) and camera.
    fields = [nm.split("_") for nm in names[:50]]
    assert all(int(f[2]) == c for f, c in zip(fields, cams[:50], strict=True))
    dataset_arrays.check_matches(split, labels, cams, where=variant, every=True)


@pytest.mark.real_data
@needs_protocols
def test_coursework_json_features_with_real_mat(tmp_path):
    shutil.copy(_real_mat("labeled"), tmp_path)
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(14096, 4)).round(3)
    with open(tmp_path / "feature_data.json", "w") as f:
        json.dump(feats.tolist(), f)
    ds = datasets.load("cuhk03", tmp_path)  # auto: no images folder, so the features.
    assert isinstance(ds, dataset_arrays.Dataset) and ds.name == "cuhk03_labeled"
    np.testing.assert_allclose(ds.features, feats.astype(np.float32))
    _, labels, cams, split = cuhk03.read_protocol_mat(_real_mat("labeled"))
    np.testing.assert_array_equal(ds.labels, labels)
    np.testing.assert_array_equal(ds.cams, cams)
    for x, y in zip(ds.splits[0], split, strict=True):
        np.testing.assert_array_equal(x, y)
    # The generic feature-file loader reads the same file with the .mat beside it.
    same = datasets.load("features", tmp_path / "feature_data.json")
    np.testing.assert_array_equal(same.features, ds.features)
    # The detected protocol lists 14,097 images: the 14,096 vectors do not fit it.
    with pytest.raises(ValueError, match="holds 14096 feature vectors but .* lists 14097"):
        features_files.load_json_features(
            tmp_path / "feature_data.json", protocol_mat=_real_mat("detected")
        )


# --- CUHK03 new protocol, small fake files -----------------------------------------------


def _new_protocol_tree(tmp_path, *, images=True):
    names, labels, cams = fixture_trees.cuhk03_new_mat(tmp_path / cuhk03.mat_name("labeled"))
    if images:
        fixture_trees.write_images(tmp_path / "images_labeled", names)
    return names, labels, cams


def test_new_protocol_images(tmp_path):
    names, labels, cams = _new_protocol_tree(tmp_path)
    s = datasets.load("cuhk03", tmp_path, variant="labeled")
    assert isinstance(s, datasets.ImageSet) and s.name == "cuhk03_labeled"
    assert [os.path.basename(p) for p in s.paths] == names
    np.testing.assert_array_equal(s.labels, labels)
    np.testing.assert_array_equal(s.cams, cams)
    (split,) = s.splits
    assert sorted(set(s.labels[split.train_idx])) == [1, 2, 3]
    assert (s.cams[split.query_idx] == 1).all() and len(split.query_idx) == 3
    assert datasets.load("cuhk03", tmp_path, source="images").paths == s.paths


def test_new_protocol_missing_image_is_named(tmp_path):
    names, _, _ = _new_protocol_tree(tmp_path)
    os.remove(tmp_path / "images_labeled" / names[5])
    with pytest.raises(FileNotFoundError, match=f"lacks 1 of the 24 images.*first: {names[5]}"):
        datasets.load("cuhk03", tmp_path)


def test_new_protocol_layout_errors(tmp_path):
    _new_protocol_tree(tmp_path, images=False)
    with pytest.raises(FileNotFoundError, match="images_labeled/ or feature_data.json; missing"):
        datasets.load("cuhk03", tmp_path)
    with pytest.raises(FileNotFoundError, match="missing: images_labeled/"):
        datasets.load("cuhk03", tmp_path, source="images")
    with pytest.raises(FileNotFoundError, match="missing: cuhk03_new_protocol_config_detected"):
        datasets.load("cuhk03", tmp_path, variant="detected")
    with pytest.raises(ValueError, match="variant must be one of .*'labeled'"):
        datasets.load("cuhk03", tmp_path, variant="labelled")
    with pytest.raises(ValueError, match="apply to protocol='classic'"):
        datasets.load("cuhk03", tmp_path, num_splits=3)


def test_new_protocol_bad_mat(tmp_path):
    path = tmp_path / cuhk03.mat_name("labeled")
    scipy.io.savemat(path, {"labels": np.arange(3)})
    with pytest.raises(ValueError, match=r"missing fields \['filelist', 'camId'"):
        cuhk03.read_protocol_mat(path)
    fixture_trees.cuhk03_new_mat(path)
    mat = scipy.io.loadmat(path)
    mat["query_idx"][0, 0] = 0  # 0 is outside the 1-based range
    scipy.io.savemat(path, {k: v for k, v in mat.items() if not k.startswith("__")})
    with pytest.raises(ValueError, match=r"query_idx has index 0 outside the 1-based range"):
        cuhk03.read_protocol_mat(path)


def test_json_errors(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("[[1, 2], [3]]")
    with pytest.raises(ValueError, match="vector 1 has length 1; vector 0 has 2"):
        cuhk03.read_feature_json(path, num_rows=2)
    path.write_text('{"a": 1}')
    with pytest.raises(ValueError, match="expected a JSON list of feature vectors"):
        cuhk03.read_feature_json(path, num_rows=2)
    with pytest.raises(FileNotFoundError, match="none at .*cuhk03_new_protocol_config_labeled"):
        features_files.load_json_features(path)


# --- CUHK03 classic protocol (cuhk-03.mat, HDF5) -----------------------------------------


def test_classic_protocol_writes_images_and_uses_test_sets(tmp_path):
    images = fixture_trees.cuhk03_classic_mat(tmp_path / "cuhk-03.mat")
    s = datasets.load("cuhk03", tmp_path, protocol="classic", seed=1)
    assert s.name == "cuhk03_labeled_classic" and len(s.splits) == 3
    n_images = sum(1 for k in images if k[0] == "labeled")
    assert len(s.paths) == n_images == 12 * 9 - 5  # 12 identities, 9 or 8 images each
    names = [os.path.basename(p) for p in s.paths]
    i = names.index("2_001_2_07.png")
    assert s.labels[i] == 2001 and s.cams[i] == 3
    assert "2_001_1_04.png" not in names  # An empty cell.
    decoded = np.asarray(Image.open(s.paths[i]))
    np.testing.assert_array_equal(decoded, images[("labeled", 2, 1, 7)])
    for k, split in enumerate(s.splits):
        assert sorted(set(s.labels[split.query_idx])) == sorted({1000 * (1 + k) + 1, 5001 + k})
        assert len(split.query_idx) == len(split.gallery_idx) == 2
        assert (s.cams[split.query_idx] % 2 == 0).all() and (s.cams[split.gallery_idx] % 2).all()
        assert len(np.unique(s.labels[split.train_idx])) == 10
    # A second call finds the images written and does not rewrite them.
    mtime = os.path.getmtime(s.paths[i])
    again = datasets.load("cuhk03", tmp_path, protocol="classic", seed=1, num_splits=2)
    assert os.path.getmtime(s.paths[i]) == mtime and len(again.splits) == 2
    for x, y in zip(again.splits[1], s.splits[1], strict=True):
        np.testing.assert_array_equal(x, y)
    multi = datasets.load("cuhk03", tmp_path, protocol="classic", multi_shot=True)
    assert len(multi.splits[0].query_idx) == 4 + 4  # (1, 1) and (5, 1) lack image 4
    assert len(multi.splits[0].gallery_idx) == 4 + 4  # and image 10
    detected = datasets.load("cuhk03", tmp_path, protocol="classic", variant="detected")
    assert os.path.dirname(detected.paths[0]).endswith("images_detected")


def test_classic_protocol_errors(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="must contain cuhk-03.mat; missing: cuhk-03.mat"):
        datasets.load("cuhk03", tmp_path, protocol="classic")
    fixture_trees.cuhk03_classic_mat(tmp_path / "cuhk-03.mat")
    with pytest.raises(ValueError, match="num_splits = 5 but .* has 3 test sets"):
        datasets.load("cuhk03", tmp_path, protocol="classic", num_splits=5)
    assert not (tmp_path / "images_labeled").exists()  # Checked before any image is written.
    with pytest.raises(ValueError, match="num_splits must be a positive int; got 0"):
        datasets.load("cuhk03", tmp_path, protocol="classic", num_splits=0)
    with pytest.raises(ValueError, match="protocol must be one of"):
        datasets.load("cuhk03", tmp_path, protocol="old")
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(ImportError, match=r"pip install 'warca_jax\[hdf5\]'"):
        datasets.load("cuhk03", tmp_path, protocol="classic")


def test_classic_protocol_not_hdf5(tmp_path):
    (tmp_path / "cuhk-03.mat").write_bytes(b"MATLAB 5.0 MAT-file")
    with pytest.raises(ValueError, match="not a MATLAB v7.3 \\(HDF5\\) file"):
        datasets.load("cuhk03", tmp_path, protocol="classic")


# --- generic feature files ---------------------------------------------------------------


def _features(num_ids=8, per_id=4):
    labels = np.repeat(np.arange(1, num_ids + 1), per_id)
    cams = np.tile(np.arange(per_id) % 2, num_ids)
    feats = np.random.default_rng(1).normal(size=(len(labels), 5))
    return feats, labels, cams


@pytest.mark.parametrize("one_based", [True, False])
def test_mat_features_with_splits(tmp_path, one_based):
    feats, labels, cams = _features()
    splits = identity_splits.random_splits(labels, cams, num_splits=2, seed=3)
    stacked = {
        k: np.stack([getattr(s, k) for s in splits]) + one_based for k in dataset_arrays.SPLIT_KEYS
    }
    scipy.io.savemat(
        tmp_path / "f.mat", {"features": feats, "labels": labels[:, None], "cams": cams, **stacked}
    )
    ds = datasets.load("features", tmp_path / "f.mat", one_based=one_based)
    assert ds.name == "f" and ds.features.dtype == np.float32
    np.testing.assert_array_equal(ds.labels, labels)
    for a, b in zip(ds.splits, splits, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    if one_based:  # The last index N is valid 1-based only.
        with pytest.raises(ValueError, match="outside \\[0, 31\\].*pass one_based=True"):
            datasets.load("features", tmp_path / "f.mat", one_based=False)
    with pytest.raises(ValueError, match="holds split indices: pass one_based=True"):
        datasets.load("features", tmp_path / "f.mat")


def test_mat_features_column_vector_split_and_random_splits(tmp_path):
    feats, labels, cams = _features()
    (split,) = identity_splits.random_splits(labels, cams, num_splits=1, seed=0)
    cols = {k: getattr(split, k)[:, None] + 1 for k in dataset_arrays.SPLIT_KEYS}
    scipy.io.savemat(
        tmp_path / "one.mat", {"features": feats, "labels": labels, "cams": cams, **cols}
    )
    ds = datasets.load("features", tmp_path / "one.mat", one_based=True)
    np.testing.assert_array_equal(ds.splits[0].query_idx, split.query_idx)
    scipy.io.savemat(tmp_path / "plain.mat", {"features": feats, "labels": labels, "cams": cams})
    ds = datasets.load("features", tmp_path / "plain.mat", num_splits=3, num_test_ids=4, seed=2)
    expected = identity_splits.random_splits(labels, cams, num_splits=3, num_test_ids=4, seed=2)
    for a, b in zip(ds.splits, expected, strict=True):
        np.testing.assert_array_equal(a.gallery_idx, b.gallery_idx)
    scipy.io.savemat(tmp_path / "bad.mat", {"features": feats, "labels": labels})
    with pytest.raises(KeyError, match="missing variable 'cams'"):
        datasets.load("features", tmp_path / "bad.mat")


def test_mat_v73_features(tmp_path):
    h5py = pytest.importorskip("h5py")
    feats, labels, cams = _features()
    for header in (True, False):  # As MATLAB writes it, and as plain HDF5.
        path = tmp_path / f"v73_{header}.mat"
        with h5py.File(path, "w", userblock_size=512) as f:  # MATLAB stores arrays transposed.
            f["features"] = feats.T
            f["labels"] = labels[None].astype(np.float64)
            f["cams"] = cams[None].astype(np.float64)
        if header:
            fixture_trees.matlab73_header(path)
        ds = datasets.load("features", path, num_test_ids=4)
        np.testing.assert_allclose(ds.features, feats.astype(np.float32))
        np.testing.assert_array_equal(ds.cams, cams)
    (tmp_path / "junk.mat").write_bytes(b"not a mat file at all")
    with pytest.raises(ValueError, match="junk.mat: cannot be read as a MATLAB .mat file"):
        datasets.load("features", tmp_path / "junk.mat")


def test_npz_features_and_extension_errors(tmp_path):
    feats, labels, cams = _features()
    np.savez(tmp_path / "f.npz", features=feats, labels=labels, cams=cams)
    ds = datasets.load("features", tmp_path / "f.npz", num_splits=2, num_test_ids=3, seed=5)
    ref = npz_file.load_npz(tmp_path / "f.npz", num_splits=2, num_test_ids=3, seed=5)
    np.testing.assert_array_equal(ds.splits[1].query_idx, ref.splits[1].query_idx)
    with pytest.raises(ValueError, match="one_based applies to .mat files"):
        datasets.load("features", tmp_path / "f.npz", one_based=True)
    with pytest.raises(ValueError, match=r"must end in one of \['.npz', '.mat', '.json'\]"):
        datasets.load("features", tmp_path / "f.csv")
    with pytest.raises(FileNotFoundError, match="feature file not found: .*nope.mat"):
        datasets.load("features", tmp_path / "nope.mat")
