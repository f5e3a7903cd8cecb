"""Tests for warca_jax/data/dataset_arrays.py."""

import ml_collections
import numpy as np
import pytest

from warca_jax import datasets
from warca_jax.data import dataset_arrays, identity_splits, synthetic
from warca_jax.data.dataset_arrays import Split
from warca_jax.datasets import npz_file
from warca_jax.runs import defaults, pipeline, run_plan


def _small(num_ids=10, seed=0):
    return synthetic.make_synthetic(
        num_ids=num_ids, dim=16, signal_dim=4, num_nuisance=2, seed=seed
    )


def _assert_splits_equal(a, b):
    assert len(a) == len(b)
    for sa, sb in zip(a, b, strict=True):
        for x, y in zip(sa, sb, strict=True):
            np.testing.assert_array_equal(x, y)
            assert np.asarray(x).dtype == np.int64


# --- npz ---------------------------------------------------------------------------------


@pytest.mark.parametrize("num_splits", [1, 3])
def test_npz_round_trip(tmp_path, num_splits):
    features, labels, cams = _small()
    splits = identity_splits.random_splits(labels, cams, num_splits=num_splits, seed=4)
    stacked = [np.stack([getattr(s, k) for s in splits]) for k in dataset_arrays.SPLIT_KEYS]
    if num_splits == 1:
        stacked = [x[0] for x in stacked]
        assert stacked[0].ndim == 1
    path = tmp_path / "feats.npz"
    np.savez(
        path,
        features=features.astype(np.float64),
        labels=labels,
        cams=cams,
        **dict(zip(dataset_arrays.SPLIT_KEYS, stacked, strict=True)),
    )
    ds = npz_file.load_npz(path, num_splits=7)
    assert ds.name == "feats"
    assert ds.features.dtype == np.float32 and ds.labels.dtype == np.int64
    np.testing.assert_array_equal(ds.features, features)
    np.testing.assert_array_equal(ds.labels, labels)
    np.testing.assert_array_equal(ds.cams, cams)
    _assert_splits_equal(ds.splits, splits)


def test_npz_without_splits_draws_random_splits(tmp_path):
    features, labels, cams = _small()
    path = tmp_path / "plain.npz"
    np.savez(path, features=features, labels=labels.astype(np.float32), cams=cams)
    ds = npz_file.load_npz(path, num_splits=3, num_test_ids=4, seed=2)
    expected = identity_splits.random_splits(labels, cams, num_splits=3, num_test_ids=4, seed=2)
    _assert_splits_equal(ds.splits, expected)
    assert len(np.unique(ds.labels[ds.splits[0].query_idx])) == 4


def test_npz_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        npz_file.load_npz(tmp_path / "nope.npz")


def test_npz_missing_key(tmp_path):
    features, labels, _ = _small()
    path = tmp_path / "x.npz"
    np.savez(path, features=features)
    with pytest.raises(KeyError, match=r"missing key 'labels'.*present.*features.*required"):
        npz_file.load_npz(path)


@pytest.mark.slow
def test_npz_without_cameras_has_one_camera_per_image_and_trains(tmp_path):
    features, labels, _ = _small()
    path = tmp_path / "nocams.npz"
    np.savez(path, features=features, labels=labels)
    ds = npz_file.load_npz(path)
    np.testing.assert_array_equal(ds.cams, np.arange(len(labels)))
    split = ds.splits[0]
    cfg = defaults.overridden(defaults.method_config("warca"), dim=4, num_iters=20, log_every=10)
    metric, _ = pipeline.fit_method(
        ds.features[split.train_idx],
        ds.labels[split.train_idx],
        cfg,
        cams=ds.cams[split.train_idx],
    )
    assert np.all(np.isfinite(metric.projection))


def _npz_with(tmp_path, num_splits, split_keys):
    """x.npz: ``_small()``'s arrays and the keys ``split_keys(splits)`` gives from
    ``num_splits`` random splits of them."""
    features, labels, cams = _small()
    splits = identity_splits.random_splits(labels, cams, num_splits=num_splits)
    path = tmp_path / "x.npz"
    np.savez(path, features=features, labels=labels, cams=cams, **split_keys(splits))
    return path


def test_npz_some_split_keys_missing(tmp_path):
    path = _npz_with(
        tmp_path, 1, lambda s: dict(train_idx=s[0].train_idx, query_idx=s[0].query_idx)
    )
    with pytest.raises(KeyError, match=r"all three.*gallery_idx"):
        npz_file.load_npz(path)


def test_npz_split_count_mismatch(tmp_path):
    def keys(splits):
        return dict(
            train_idx=np.stack([s.train_idx for s in splits]),
            query_idx=np.stack([s.query_idx for s in splits[:2]]),
            gallery_idx=np.stack([s.gallery_idx for s in splits]),
        )

    path = _npz_with(tmp_path, 3, keys)
    with pytest.raises(ValueError, match=r"number of splits S: \[3, 2, 3\]"):
        npz_file.load_npz(path)


def test_npz_bad_split_names_the_split(tmp_path):
    def keys(splits):
        s = splits[0]
        return dict(train_idx=s.train_idx + 1, query_idx=s.query_idx, gallery_idx=s.gallery_idx)

    path = _npz_with(tmp_path, 1, keys)
    with pytest.raises(ValueError, match="x split 0: "):
        npz_file.load_npz(path)


# --- validate_arrays ---------------------------------------------------------------------


def _bad_arrays(case):
    features, labels, cams = _small()
    features = features.astype(np.float64)
    if case == "nan":
        features[3, 1] = np.nan
        features[5, 0] = np.inf
    elif case == "overflow":
        features[7, 2] = 1e300
    elif case == "1d":
        features = features[:, 0]
    elif case == "strings":
        features = features.astype(str)
    elif case == "float_labels":
        labels = labels + 0.5
    elif case == "2d_cams":
        cams = cams[:, None]
    elif case == "length":
        labels = labels[:-1]
    elif case == "one_positive_id":
        labels = np.arange(len(labels))
        labels[1] = 0
    return features, labels, cams


@pytest.mark.parametrize(
    "case, pattern",
    [
        ("nan", r"finite.*1 NaN and 1 inf.*row 3"),
        ("overflow", r"fit in float32.*1 values overflow, first in row 7"),
        ("1d", r"features must be 2-D"),
        ("strings", r"features must be real numbers"),
        ("float_labels", r"labels must hold integers; .*first at index \d+: 0.5"),
        ("2d_cams", r"cams must be 1-D"),
        ("length", r"same length.*features 40, labels 39, cams 40"),
        ("one_positive_id", r"at least two identities with two or more images.*found 1"),
    ],
)
def test_validate_arrays_errors(case, pattern):
    with pytest.raises(ValueError, match=pattern):
        dataset_arrays.validate_arrays(*_bad_arrays(case))


def test_validate_arrays_converts():
    features, labels, cams = _small()
    f, y, c = dataset_arrays.validate_arrays(
        features.astype(np.float64), labels.astype(float), cams
    )
    assert (f.dtype, y.dtype, c.dtype) == (np.float32, np.int64, np.int64)
    np.testing.assert_array_equal(y, labels)


# --- validate_split ----------------------------------------------------------------------


def _bad_split(case, split, labels):
    tr, q, g = (np.array(x) for x in split)
    other_id = labels[tr[0]]
    if case == "range":
        g = np.append(g, len(labels))
    elif case == "negative":
        q = np.append(q, -1)
    elif case == "non_integer":
        tr = tr + 0.5
    elif case == "duplicated":
        g = np.append(g, g[0])
    elif case == "id_overlap":
        tr = np.setdiff1d(tr, [tr[0]])
        g = np.append(g, np.flatnonzero(labels == other_id)[0])
    elif case == "index_overlap":
        tr = np.append(tr, q[0])
    elif case == "empty_query":
        q = q[:0]
    elif case == "empty_gallery":
        g = g[:0]
    elif case == "no_positive":
        _, first = np.unique(labels[tr], return_index=True)
        tr = tr[first]
    return Split(tr, q, g)


@pytest.mark.parametrize(
    "case, pattern",
    [
        ("range", r"gallery_idx has index 40 out of range \[0, 40\)"),
        ("negative", r"query_idx has negative index -1"),
        ("non_integer", r"train_idx must hold integers"),
        ("duplicated", r"gallery_idx has duplicated index"),
        ("id_overlap", r"train identities overlap test"),
        ("index_overlap", r"train indices overlap query/gallery indices"),
        ("empty_query", r"query_idx is empty"),
        ("empty_gallery", r"gallery_idx is empty"),
        ("no_positive", r"no positive pairs in train"),
    ],
)
def test_validate_split_errors(case, pattern):
    _, labels, cams = _small()
    split = identity_splits.random_splits(labels, cams, num_splits=1)[0]
    dataset_arrays.validate_split(split, labels, n=len(labels))
    with pytest.raises(ValueError, match="split 5: " + pattern):
        dataset_arrays.validate_split(
            _bad_split(case, split, labels), labels, n=len(labels), where="split 5"
        )


# --- random_splits -----------------------------------------------------------------------


def test_random_splits_deterministic():
    _, labels, cams = _small(num_ids=30)
    a = identity_splits.random_splits(labels, cams, num_splits=3, seed=1)
    _assert_splits_equal(a, identity_splits.random_splits(labels, cams, num_splits=3, seed=1))
    b = identity_splits.random_splits(labels, cams, num_splits=3, seed=2)
    assert not np.array_equal(a[0].train_idx, b[0].train_idx)
    assert not np.array_equal(a[0].train_idx, a[1].train_idx)


def test_random_splits_properties():
    # Three cameras, some identities in one camera only, one identity with a single image.
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(40), 5)
    cams = rng.integers(0, 3, size=len(labels))
    cams[labels < 6] = 1
    keep = ~((labels == 0) & (np.arange(len(labels)) % 5 > 0))
    labels, cams = labels[keep], cams[keep]
    for split in identity_splits.random_splits(labels, cams, num_splits=5, seed=3):
        tr, q, g = split
        all_idx = np.concatenate([tr, q, g])
        np.testing.assert_array_equal(np.sort(all_idx), np.arange(len(labels)))
        assert not np.intersect1d(labels[tr], labels[np.concatenate([q, g])]).size
        test_ids = np.unique(labels[np.concatenate([q, g])])
        assert len(test_ids) == 20 and len(np.unique(labels[tr])) == 20
        for i in test_ids:
            qi, gi = q[labels[q] == i], g[labels[g] == i]
            n_cams = len(np.unique(cams[labels == i]))
            if n_cams > 1:
                assert len(np.unique(cams[qi])) == 1
                assert not np.isin(cams[gi], cams[qi]).any()
                assert len(gi) >= 1
            elif (labels == i).sum() > 1:
                assert len(qi) == 1 and len(gi) == (labels == i).sum() - 1
            else:
                assert len(qi) == 0 and len(gi) == 1


def test_random_splits_sizes():
    _, labels, cams = _small(num_ids=20)
    split = identity_splits.random_splits(
        labels, cams, num_splits=1, num_train_ids=5, num_test_ids=7
    )[0]
    assert len(np.unique(labels[split.train_idx])) == 5
    assert len(np.unique(labels[np.concatenate(split[1:])])) == 7


@pytest.mark.parametrize(
    "labels, kwargs, pattern",
    [
        (np.repeat(np.arange(10), 2), dict(num_train_ids=6, num_test_ids=5), r"6 \+ 5 exceeds"),
        (np.repeat(np.arange(10), 2), dict(num_test_ids=9), r"at least 2 train identities"),
        (np.arange(10), {}, r"random split 0: no positive pairs in train"),
    ],
)
def test_random_splits_errors(labels, kwargs, pattern):
    cams = np.arange(len(labels)) % 2
    with pytest.raises(ValueError, match=pattern):
        identity_splits.random_splits(labels, cams, num_splits=3, **kwargs)


# --- validation_split --------------------------------------------------------------------


def _one_split(labels, cams, train_idx, name="x") -> dataset_arrays.Dataset:
    """A dataset whose split 0 trains on ``train_idx`` (no test part: nothing reads it)."""
    features = np.zeros((len(labels), 2), np.float32)
    split = Split(np.asarray(train_idx), np.zeros(0, np.int64), np.zeros(0, np.int64))
    return dataset_arrays.Dataset(features, labels, cams, (split,), name)


def test_validation_split_holds_identities_out_of_a_training_part():
    _, labels, cams = _small(num_ids=30)
    (split,) = identity_splits.random_splits(labels, cams, num_splits=1, seed=0)
    data = _one_split(labels, cams, split.train_idx)
    val = identity_splits.validation_split(data, 0, fraction=0.3, seed=0)
    again = identity_splits.validation_split(data, 0, fraction=0.3, seed=0)
    _assert_splits_equal([val], [again])
    held = np.concatenate([val.query_idx, val.gallery_idx])
    np.testing.assert_array_equal(np.sort(np.concatenate([val.train_idx, held])), split.train_idx)
    assert len(np.unique(labels[held])) == round(0.3 * 15)
    assert not np.intersect1d(labels[held], labels[val.train_idx]).size
    for i in np.unique(labels[held]):  # one query camera per identity, the others gallery
        q, g = (
            val.query_idx[labels[val.query_idx] == i],
            val.gallery_idx[labels[val.gallery_idx] == i],
        )
        assert len(np.unique(cams[q])) == 1 and not np.isin(cams[g], cams[q]).any()
    other = identity_splits.validation_split(data, 0, fraction=0.3, seed=1)
    assert not np.array_equal(other.train_idx, val.train_idx)


def test_every_held_out_draw_holds_out_the_same_people_for_the_same_seed():
    """The pipeline's validation split, the protocol's cross-validation split (both the one
    ``identity_splits.validation_split``, at the split's training seed) and a learner's own
    held-out choice (WARCA's lambda, LMNN's steps) hold out the same people."""
    from warca_jax.methods import held_out

    config = defaults.experiment_config("warca", "small", small=True, lock=False)
    config.data.val_fraction = 0.2
    config.seed = 3
    dataset = datasets.from_config(config.data)
    for s in range(2):
        train = dataset.splits[s].train_idx
        fit_seed = config.seed + s  # the seed the pipeline gives split s's fit
        own = held_out.split(dataset.labels[train], 0.2, seed=fit_seed)
        people = np.unique(dataset.labels[train][own.val])
        for val in (
            run_plan.plan_split(dataset, s, config).val,
            identity_splits.validation_split(dataset, s, fraction=0.2, seed=config.seed),
        ):
            got = np.unique(dataset.labels[np.concatenate([val.query_idx, val.gallery_idx])])
            np.testing.assert_array_equal(got, people)
            assert not np.isin(dataset.labels[val.train_idx], people).any()


@pytest.mark.parametrize(
    "num_ids, fraction, pattern",
    [
        (10, 0.0, r"^x split 0: val_fraction must be in \(0, 1\)"),
        (10, 1.0, r"val_fraction must be in \(0, 1\)"),
        (10, 0.1, r"val_fraction=0.1 holds out 1 of the 10 .* from 0.2 to 0.8"),
        (10, 0.9, r"holds out 9 of the 10 training identities, leaving 1"),
        (3, 0.5, r"too few identities: 4 or more"),
    ],
)
def test_validation_split_errors(num_ids, fraction, pattern):
    labels = np.repeat(np.arange(num_ids), 2)
    cams = np.arange(len(labels)) % 2
    data = _one_split(labels, cams, np.arange(len(labels)))
    with pytest.raises(ValueError, match=pattern):
        identity_splits.validation_split(data, 0, fraction=fraction, seed=0)


# --- make_synthetic ----------------------------------------------------------------------


def _config(**overrides):
    cfg = ml_collections.ConfigDict(
        dict(
            name="synthetic",
            path="",
            num_splits=2,
            num_train_ids=0,
            num_test_ids=0,
            seed=5,
            synthetic=dict(num_ids=12, dim=16, signal_dim=4, num_nuisance=2),
        )
    )
    cfg.update(overrides)
    return cfg


def test_load_dataset_synthetic():
    ds = datasets.from_config(_config())
    x, y, c = synthetic.make_synthetic(**_config().synthetic.to_dict(), seed=5)
    np.testing.assert_array_equal(ds.features, x)
    assert ds.name == "synthetic" and len(ds.splits) == 2
    _assert_splits_equal(ds.splits, identity_splits.random_splits(y, c, num_splits=2, seed=5))


def test_load_dataset_npz(tmp_path):
    features, labels, cams = _small()
    path = tmp_path / "mine.npz"
    np.savez(path, features=features, labels=labels, cams=cams)
    ds = datasets.from_config(_config(name="npz", path=str(path), num_test_ids=3))
    assert ds.name == "mine" and len(ds.splits) == 2
    np.testing.assert_array_equal(ds.features, features)
    assert len(np.unique(ds.labels[ds.splits[1].query_idx])) == 3


def test_load_dataset_unknown_name():
    expected = r"unknown dataset name 'vipr'.*'synthetic', 'npz'.*'viper'"
    with pytest.raises(ValueError, match=expected):
        datasets.from_config(_config(name="vipr"))
