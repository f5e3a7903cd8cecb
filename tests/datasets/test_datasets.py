"""Tests for the image loaders of warca_jax/datasets, on fixture trees and the real ORL."""

import os
import re

import fixture_trees
import ml_collections
import numpy as np
import pytest

from warca_jax import datasets
from warca_jax.data import dataset_arrays

ORL = str(fixture_trees.ORL)
needs_orl = pytest.mark.skipif(not os.path.isdir(ORL), reason=f"real ORL faces not at {ORL}")


def _tree(tmp_path, name):
    writer, _, _, options = fixture_trees.TREES[name]
    return writer(str(tmp_path / name)), options


def _check_protocol(image_set):
    """Invariants every split must meet for the evaluation to be right."""
    labels, cams = image_set.labels, image_set.cams
    for split in image_set.splits:
        dataset_arrays.validate_split(split, labels, n=len(labels))
        train_ids = set(labels[split.train_idx])
        test_ids = set(labels[split.query_idx]) | set(labels[split.gallery_idx])
        assert not train_ids & test_ids
        for q in split.query_idx:
            same = split.gallery_idx[labels[split.gallery_idx] == labels[q]]
            if image_set.same_camera_matches:  # gallery draw: a match of any camera counts
                assert len(same), "a probe without a match"
            else:
                assert (cams[same] != cams[q]).any(), "a probe without a cross-camera match"


# --- every image loader ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(fixture_trees.TREES))
def test_loader_reads_fixture_tree(tmp_path, name):
    root, options = _tree(tmp_path, name)
    image_set = datasets.load(name, root, **options)
    assert isinstance(image_set, datasets.ImageSet)
    assert image_set.labels.dtype == np.int64 and image_set.cams.dtype == np.int64
    assert len(image_set.paths) == len(image_set.labels) == len(image_set.cams)
    assert all(os.path.isabs(p) and os.path.isfile(p) for p in image_set.paths)
    assert len(set(image_set.paths)) == len(image_set.paths)
    _check_protocol(image_set)
    if name != "market1501":
        assert len(image_set.splits) == 10
        for split in image_set.splits:
            assert len(np.unique(image_set.labels[split.query_idx])) == options["num_test_ids"]


def test_no_loader_option_is_named_like_a_to_dataset_option():
    # ``read`` sends these to ``to_dataset`` and the rest of its options to the loader
    described = {"descriptor", "cache_dir", "batch_size", "progress", "skip_small_images"}
    for name in datasets.LOADERS:
        assert not set(datasets.option_names(name)) & described, name


@pytest.mark.parametrize("name", sorted(set(fixture_trees.TREES) - {"market1501"}))
def test_same_seed_same_splits_other_seed_others(tmp_path, name):
    root, options = _tree(tmp_path, name)
    a = datasets.load(name, root, seed=3, num_splits=4, **options)
    b = datasets.load(name, root, seed=3, num_splits=4, **options)
    c = datasets.load(name, root, seed=4, num_splits=4, **options)
    fixture_trees.assert_same_splits(a.splits, b.splits)
    assert len(a.splits) == 4
    differs = [
        not np.array_equal(x, y)
        for sa, sc in zip(a.splits, c.splits, strict=True)
        for x, y in zip(sa, sc, strict=True)
    ]
    assert any(differs)
    # Within one seed the splits differ from each other too.
    assert not all(np.array_equal(a.splits[0].query_idx, s.query_idx) for s in a.splits[1:])


@pytest.mark.parametrize("name", sorted(fixture_trees.TREES))
def test_missing_root_names_the_expected_layout(tmp_path, name):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "nowhere"))):
        datasets.load(name, tmp_path / "nowhere")


@pytest.mark.parametrize("name", sorted(fixture_trees.TREES))
def test_badly_named_image_is_named_in_the_error(tmp_path, name):
    root, options = _tree(tmp_path, name)
    _, folder, bad, _ = fixture_trees.TREES[name]
    fixture_trees.write_images(os.path.join(root, folder), [bad])
    with pytest.raises(ValueError, match=f"cannot parse image file name .*{bad}.*expected"):
        datasets.load(name, root, **options)


@pytest.mark.parametrize(
    "name, subfolder",
    [
        ("market1501", "query"),
        ("cuhk01", "campus"),
        ("viper", "cam_b"),
        ("prid450s", "cam_a"),
        ("3dpes", "RGB"),
    ],
)
def test_missing_subfolder_is_named(tmp_path, name, subfolder):
    root, options = _tree(tmp_path, name)
    for f in os.listdir(os.path.join(root, subfolder)):
        os.remove(os.path.join(root, subfolder, f))
    os.rmdir(os.path.join(root, subfolder))
    with pytest.raises(FileNotFoundError, match=f"must contain .*; missing: {subfolder}/$"):
        datasets.load(name, root, **options)


# --- per-dataset specifics ---------------------------------------------------------------


def test_market1501_labels_cams_and_fixed_split(tmp_path):
    root, _ = _tree(tmp_path, "market1501")
    ms = datasets.load("market1501", root)
    (split,) = ms.splits
    names = [os.path.basename(p) for p in ms.paths]
    assert "Thumbs.db" not in names and len(names) == 9 + 11 + 4
    assert sorted(set(ms.labels[split.train_idx])) == [2, 4, 6]
    gallery = dict(
        zip((names[i] for i in split.gallery_idx), ms.labels[split.gallery_idx], strict=True)
    )
    assert gallery["-1_c1s1_000401_03.jpg"] == -1 and gallery["0000_c3s1_000151_01.jpg"] == 0
    assert gallery["0003_c2s2_000203_02.jpg"] == 3
    assert set(ms.cams[split.query_idx]) == {1} and set(ms.cams[split.gallery_idx]) == {1, 2, 3}
    assert [os.path.basename(os.path.dirname(ms.paths[i])) for i in split.query_idx] == [
        "query"
    ] * 4


def test_market1501_junk_in_train_is_refused(tmp_path):
    root, _ = _tree(tmp_path, "market1501")
    fixture_trees.write_images(os.path.join(root, "bounding_box_train"), ["-1_c1s1_000001_01.jpg"])
    with pytest.raises(ValueError, match="-1_c1s1_000001_01.jpg has identity -1.*test/ only"):
        datasets.load("market1501", root)


@pytest.mark.parametrize("protocol, shots", [("single_shot", 1), ("multi_shot", 2)])
def test_cuhk01_camera_rule(tmp_path, protocol, shots):
    root, _ = _tree(tmp_path, "cuhk01")
    cs = datasets.load("cuhk01", root, num_test_ids=3, protocol=protocol)
    names = [os.path.basename(p) for p in cs.paths]
    assert cs.labels[names.index("0002003.png")] == 2 and cs.cams[names.index("0002003.png")] == 1
    assert cs.cams[names.index("0002002.png")] == 0
    assert not cs.same_camera_matches
    for split in cs.splits:
        assert len(split.query_idx) == 3 * shots and len(split.gallery_idx) == 3 * shots
        assert (cs.cams[split.query_idx] == 0).all() and (cs.cams[split.gallery_idx] == 1).all()
        assert len(split.train_idx) == 5 * 4


def test_cuhk01_gallery_draw_is_the_default(tmp_path):
    """Xiong et al.'s reading: one random gallery image per test person, its other three
    images probes, whatever their camera; the same-camera twin counts as a match."""
    root, _ = _tree(tmp_path, "cuhk01")
    cs = datasets.load("cuhk01", root, num_test_ids=3)
    assert cs.same_camera_matches
    twins = 0
    for split in cs.splits:
        assert len(split.query_idx) == 3 * 3 and len(split.gallery_idx) == 3
        assert len(split.train_idx) == 5 * 4
        for g in split.gallery_idx:
            mine = split.query_idx[cs.labels[split.query_idx] == cs.labels[g]]
            assert len(mine) == 3 and (cs.cams[mine] == cs.cams[g]).sum() == 1
            twins += 1
    assert twins == 3 * len(cs.splits)
    again = datasets.load("cuhk01", root, num_test_ids=3)
    for a, b in zip(cs.splits, again.splits, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    with pytest.raises(ValueError, match="unknown protocol 'xiong'; expected one of"):
        datasets.load("cuhk01", root, protocol="xiong")


@pytest.mark.slow
def test_gallery_draw_evaluation_ranks_the_same_camera_twin(tmp_path):
    """With same_camera_matches a probe whose only match shares its camera is ranked;
    without, it is skipped as a query with nothing to find."""
    from warca_jax import evaluation
    from warca_jax.data import dataset_arrays
    from warca_jax.metric import Metric

    labels = np.repeat(np.arange(4), 4)
    cams = np.tile([0, 0, 1, 1], 4)
    x = np.eye(16, dtype=np.float32)[labels * 4]  # one point per identity
    x = x + 1e-3 * np.arange(16, dtype=np.float32)[:, None]
    split = dataset_arrays.Split(np.arange(8), np.array([9, 10, 11, 13, 14, 15]), np.array([8, 12]))
    ds = dataset_arrays.validated_dataset(x, labels, cams, [split], "toy", same_camera_matches=True)
    metric = Metric("identity", 16, name="euclidean")
    cfg = ml_collections.ConfigDict(dict(single_shot=False, repeats=1))
    result = evaluation.evaluate_metric(metric, ds, split, cfg)
    assert (result["num_valid"], result["num_skipped"]) == (6, 0)
    assert result["rank1"] == pytest.approx(100.0)
    plain = dataset_arrays.validated_dataset(x, labels, cams, [split], "toy")
    result = evaluation.evaluate_metric(metric, plain, split, cfg)
    assert (result["num_valid"], result["num_skipped"]) == (4, 2)


def test_cuhk01_index_out_of_range(tmp_path):
    root, _ = _tree(tmp_path, "cuhk01")
    fixture_trees.write_images(os.path.join(root, "campus"), ["0001005.png"])
    with pytest.raises(ValueError, match="0001005.png has image index 5; expected 001-004"):
        datasets.load("cuhk01", root)


@pytest.mark.parametrize("name", ["viper", "prid450s"])
def test_two_camera_probe_cam_a_gallery_cam_b(tmp_path, name):
    root, _ = _tree(tmp_path, name)
    ts = datasets.load(name, root, num_test_ids=4)
    assert not any(os.path.basename(p).startswith("man_") for p in ts.paths)
    assert len(ts.paths) == (17 if name == "viper" else 16)
    for split in ts.splits:
        assert (ts.cams[split.query_idx] == 0).all() and (ts.cams[split.gallery_idx] == 1).all()
        np.testing.assert_array_equal(
            np.sort(ts.labels[split.query_idx]), np.sort(ts.labels[split.gallery_idx])
        )
        assert len(split.query_idx) == 4
    if name == "viper":  # 999 is in cam_a only: always training.
        assert all(999 in ts.labels[s.train_idx] for s in ts.splits)


@pytest.mark.parametrize("name", ["viper", "prid450s"])
def test_two_camera_random_probe_is_the_papers_rule(tmp_path, name):
    # probe="random": each test identity's probe camera drawn at random, its other image in
    # the gallery; the test identities (so the training part) are those of the camera rule
    root, _ = _tree(tmp_path, name)
    fixed = datasets.load(name, root, num_test_ids=4, num_splits=6)
    ts = datasets.load(name, root, num_test_ids=4, num_splits=6, probe="random")
    query_cams = []
    for a, b in zip(fixed.splits, ts.splits, strict=True):
        np.testing.assert_array_equal(np.sort(a.train_idx), np.sort(b.train_idx))
        q, g = b.query_idx, b.gallery_idx
        np.testing.assert_array_equal(np.sort(ts.labels[q]), np.sort(ts.labels[g]))
        for i in q:  # the gallery image of the probe's identity is from the other camera
            match = g[ts.labels[g] == ts.labels[i]]
            assert len(match) == 1 and ts.cams[match[0]] != ts.cams[i]
        query_cams.extend(ts.cams[q])
    assert set(query_cams) == {0, 1}  # both cameras give probes over the splits
    again = datasets.load(name, root, num_test_ids=4, num_splits=6, probe="random")
    for a, b in zip(ts.splits, again.splits, strict=True):
        np.testing.assert_array_equal(a.query_idx, b.query_idx)  # same seed, same probes
    with pytest.raises(ValueError, match=r"unknown probe rule 'cam_c'; expected one of"):
        datasets.load(name, root, probe="cam_c")


@pytest.mark.parametrize("name", ["viper", "prid450s"])
def test_two_camera_probe_cam_b_is_the_other_direction(tmp_path, name):
    # the same test identities as cam_a's, with probes and gallery swapped
    root, _ = _tree(tmp_path, name)
    fixed = datasets.load(name, root, num_test_ids=4, num_splits=3)
    other = datasets.load(name, root, num_test_ids=4, num_splits=3, probe="cam_b")
    for a, b in zip(fixed.splits, other.splits, strict=True):
        np.testing.assert_array_equal(np.sort(a.train_idx), np.sort(b.train_idx))
        np.testing.assert_array_equal(np.sort(a.query_idx), np.sort(b.gallery_idx))
        np.testing.assert_array_equal(np.sort(a.gallery_idx), np.sort(b.query_idx))
        assert (other.cams[b.query_idx] == 1).all() and (other.cams[b.gallery_idx] == 0).all()


def test_caviar_tests_only_two_camera_identities(tmp_path):
    root, _ = _tree(tmp_path, "caviar")
    cs = datasets.load("caviar", root, num_test_ids=3)
    assert set(cs.cams) == {0, 1}
    for split in cs.splits:
        test = set(cs.labels[split.query_idx])
        assert test <= {1, 2, 3, 4, 5} and {6, 7} <= set(cs.labels[split.train_idx])
        assert len(split.gallery_idx) == 3 * 4  # 5 images each, one of them the probe.


def test_caviar_index_out_of_range(tmp_path):
    root, _ = _tree(tmp_path, "caviar")
    fixture_trees.write_images(root, ["0001021.jpg"])
    with pytest.raises(ValueError, match="0001021.jpg has image index 21; expected 001-020"):
        datasets.load("caviar", root)


@pytest.mark.parametrize("name", ["3dpes", "ilids"])
def test_no_camera_ids_one_camera_per_image(tmp_path, name):
    root, options = _tree(tmp_path, name)
    s = datasets.load(name, root, **options)
    np.testing.assert_array_equal(s.cams, np.arange(len(s.paths)))
    for split in s.splits:
        assert 9 in s.labels[split.train_idx]  # One image: always training.
        for q in split.query_idx:  # The gallery holds every other image of the identity.
            same = np.flatnonzero(s.labels == s.labels[q])
            assert set(same) - {q} == set(
                split.gallery_idx[s.labels[split.gallery_idx] == s.labels[q]]
            )


def test_threedpes_view_as_camera(tmp_path):
    root, _ = _tree(tmp_path, "3dpes")
    s = datasets.load("3dpes", root, num_test_ids=3, view_as_camera=True)
    assert set(s.cams) == {1, 2}
    _check_protocol(s)


def test_opereid_keeps_cameras_and_trains_on_one_camera_identities(tmp_path):
    root, _ = _tree(tmp_path, "opereid")
    s = datasets.load("opereid", root, num_test_ids=3)
    names = [os.path.basename(p) for p in s.paths]
    assert s.cams[names.index("0002_c4_000001.png")] == 4
    assert all(9 in s.labels[split.train_idx] for split in s.splits)


@pytest.mark.real_data
@needs_orl
def test_orl_real_data():
    s = datasets.load("orl", ORL)
    assert len(s.paths) == 400 and len(np.unique(s.labels)) == 40
    assert (np.bincount(s.labels)[1:] == 10).all()
    names = [os.path.relpath(p, ORL) for p in s.paths]
    assert names[:2] == ["s1/1.pgm", "s1/2.pgm"] and names[10] == "s2/1.pgm"
    np.testing.assert_array_equal(s.cams[:10], [0] * 5 + [1] * 5)
    assert len(s.splits) == 10
    for split in s.splits:
        assert len(split.train_idx) == 200 and len(split.query_idx) == 100
        assert len(split.gallery_idx) == 100
        assert (s.cams[split.query_idx] == 0).all() and (s.cams[split.gallery_idx] == 1).all()
    _check_protocol(s)
    fixture_trees.assert_same_splits(s.splits, datasets.load("orl", ORL).splits)
    small = datasets.load("orl", ORL, num_test_ids=10, num_train_ids=5, num_splits=2)
    assert [len(np.unique(small.labels[x])) for x in small.splits[1][:2]] == [5, 10]


def test_orl_unexpected_folder_and_empty_root(tmp_path):
    root, _ = _tree(tmp_path, "orl")
    os.makedirs(os.path.join(root, "extra"))
    with pytest.raises(ValueError, match="unexpected folder .*extra; expected only person"):
        datasets.load("orl", root)
    with pytest.raises(FileNotFoundError, match="must contain person folders .*missing: s1/"):
        datasets.load(
            "orl", fixture_trees.write_images(tmp_path / "empty", []) or tmp_path / "empty"
        )


def test_matlab_randperm_is_matlabs():
    # MATLAB's documentation: rng default (the twister at seed 0); randperm(8) -> 6 3 7 8 5 1 2 4
    from warca_jax.datasets import two_camera

    first, second = two_camera.matlab_randperms(8, 2)
    np.testing.assert_array_equal(first + 1, [6, 3, 7, 8, 5, 1, 2, 4])
    assert sorted(second) == list(range(8)) and list(second) != list(first)  # the stream goes on


def test_viper_liao_folds_are_the_demos(tmp_path):
    from warca_jax.datasets import two_camera

    root, _ = _tree(tmp_path, "viper")
    ts = datasets.load("viper", root, num_test_ids=4, num_splits=3, folds="liao", probe="cam_b")
    ids = np.array(sorted(set(ts.labels[ts.cams == 0]) & set(ts.labels[ts.cams == 1])))
    assert len(ids) == 8  # 999 is in cam_a only: never a test identity, always training
    for split, perm in zip(ts.splits, two_camera.matlab_randperms(8, 3), strict=True):
        np.testing.assert_array_equal(np.sort(ts.labels[split.query_idx]), np.sort(ids[perm[4:]]))
        assert (ts.cams[split.query_idx] == 1).all() and (ts.cams[split.gallery_idx] == 0).all()
        assert set(ts.labels[split.train_idx]) == set(ids[perm[:4]]) | {999}
    _check_protocol(ts)
    with pytest.raises(ValueError, match=r"folds='liao' test half .* num_test_ids = 4; got 3"):
        datasets.load("viper", root, num_test_ids=3, folds="liao")
    with pytest.raises(ValueError, match=r"unknown folds 'matlab'; expected one of"):
        datasets.load("viper", root, folds="matlab")
