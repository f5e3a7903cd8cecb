"""Datasets: the generic `.npz` format, validation and identity splits.

A `Dataset` holds features `[N, D]` (float32), identity labels `[N]` and camera ids `[N]`
(int64), and one or more `Split`s of indices into them. Everything here is NumPy: data
preparation happens once, before training, and every problem a user's data could have is
reported here with a message that names it, never later as a NaN or a shape error in a
jitted step.

The generic `.npz` format (DESIGN.md) holds `features`, `labels`, `cams` and optionally
fixed splits `train_idx`, `query_idx`, `gallery_idx` (0-based, all three or none), each
1-D for one split or 2-D `[S, n]` for S splits. Without fixed splits, `random_splits`
draws identity splits from a seed. The built-in synthetic data comes from
`warca_jax.synthetic`.
"""

from __future__ import annotations

import os
import zipfile
from typing import NamedTuple

import numpy as np

from warca_jax.synthetic import make_synthetic  # noqa: F401 - the built-in data, re-exported

REQUIRED_KEYS = ("features", "labels", "cams")
SPLIT_KEYS = ("train_idx", "query_idx", "gallery_idx")


class Split(NamedTuple):
    """One train/test split: int64 indices into a `Dataset`."""

    train_idx: np.ndarray
    query_idx: np.ndarray
    gallery_idx: np.ndarray


class Dataset(NamedTuple):
    """Features, identities, cameras and splits of one re-identification dataset."""

    features: np.ndarray  # [N, D] float32
    labels: np.ndarray  # [N] int64
    cams: np.ndarray  # [N] int64
    splits: tuple[Split, ...]
    name: str


def integer_ids(a, what: str, length: int | None = None, source: str = "") -> np.ndarray:
    """``a`` as a 1-D int64 array: the one check of identity labels, camera ids and indices.

    Integer-valued floats are accepted (as .mat files store them).

    Args:
      a: array-like.
      what: its name, for the messages (e.g. "query_labels").
      length: the number of entries it must have (None: any).
      source: what has ``length`` entries, for the message (e.g. "the features have 9
        rows").

    Raises:
      ValueError: not 1-D, the wrong length, not numbers (names must be mapped to
        integer ids first), or numbers that are not whole (the first one named).
    """
    a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {a.shape}")
    if length is not None and a.shape[0] != length:
        raise ValueError(f"{what} has {a.shape[0]} entries but {source}: one is needed per row")
    if a.dtype.kind in "iu":
        return a.astype(np.int64, copy=False)
    if a.dtype.kind != "f":
        example = f" (e.g. {a[0]!r})" if len(a) else ""
        raise ValueError(
            f"{what} must hold integers, got dtype {a.dtype}{example}; map names to integer "
            "ids first, with the same map everywhere"
        )
    bad = ~(np.isfinite(a) & (np.mod(a, 1) == 0) & (np.abs(a) < 2.0**53))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{what} must hold integers; {int(bad.sum())} values are not whole numbers "
            f"(first at index {i}: {a[i]})"
        )
    return a.astype(np.int64)


def feature_matrix(a, what: str = "features", *, allow_empty: bool = False) -> np.ndarray:
    """``a`` as a NumPy array, checked to be a 2-D real matrix: the one shape-and-type check
    of features, for datasets, learners and evaluation (not copied when it is one).

    Raises:
      ValueError: not real numbers, not 2-D, or (unless ``allow_empty``) no rows or columns.
    """
    a = a if isinstance(a, np.ndarray) else np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{what} must be real numbers, got dtype {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"{what} must be 2-D [N, D], got shape {a.shape}")
    if not allow_empty and 0 in a.shape:
        raise ValueError(f"{what} are empty (shape {a.shape}); expected [N, D] with N, D >= 1")
    return a


def validate_arrays(features, labels, cams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checks and converts the arrays of a dataset.

    Args:
      features: [N, D] finite numbers.
      labels: [N] integer-valued identity labels.
      cams: [N] integer-valued camera ids.

    Returns:
      features as float32, labels and cams as int64.

    Raises:
      ValueError: naming the problem and what was expected.
    """
    features = feature_matrix(features)
    original = features
    with np.errstate(over="ignore"):  # Overflow to inf is reported just below.
        features = features.astype(np.float32)
    finite = np.isfinite(features)
    if not finite.all():
        row = int(np.flatnonzero(~finite.all(axis=1))[0])
        if np.isfinite(np.asarray(original)).all():
            raise ValueError(
                f"features must fit in float32 (|x| < 3.4e38), as they are trained and "
                f"ranked in float32; {int((~finite).sum())} values overflow, first in row "
                f"{row}: divide the features by a common scale (rankings do not change)"
            )
        raise ValueError(
            f"features must be finite (in float32); found {int(np.isnan(features).sum())} NaN "
            f"and {int(np.isinf(features).sum())} inf values, first in row {row}"
        )
    labels = integer_ids(labels, "labels")
    cams = integer_ids(cams, "cams")
    if not len(features) == len(labels) == len(cams):
        raise ValueError(
            "features, labels and cams must have the same length; got "
            f"features {len(features)}, labels {len(labels)}, cams {len(cams)}"
        )
    _, counts = np.unique(labels, return_counts=True)
    k = int((counts >= 2).sum())
    if k < 2:
        raise ValueError(
            "need at least two identities with two or more images to form positive pairs; "
            f"found {k}"
        )
    return features, labels, cams


def validate_split(split: Split, labels, *, n: int, where: str = "split") -> None:
    """Checks that a split indexes a dataset of `n` images correctly.

    Indices must be integers in [0, n) without duplicates; query and gallery must be
    non-empty; train must share neither indices nor identities with query and gallery and
    must hold a positive pair. Query and gallery may (and should) share identities.

    Args:
      split: the split to check.
      labels: [n] identity labels of the dataset.
      n: the number of images in the dataset.
      where: names the split in error messages, e.g. "split 3".

    Raises:
      ValueError: naming the split and the problem.
    """
    labels = np.asarray(labels)
    if len(labels) != n:
        raise ValueError(f"{where}: labels have length {len(labels)} but n = {n}")
    idx = {}
    for key in SPLIT_KEYS:
        x = integer_ids(getattr(split, key), f"{where}: {key}")
        if x.size == 0 and key != "train_idx":
            raise ValueError(f"{where}: {key} is empty; query and gallery need images")
        if (x < 0).any():
            raise ValueError(f"{where}: {key} has negative index {int(x[x < 0][0])}")
        if (x >= n).any():
            raise ValueError(
                f"{where}: {key} has index {int(x[x >= n][0])} out of range [0, {n}) "
                "(indices are 0-based)"
            )
        values, counts = np.unique(x, return_counts=True)
        if (counts > 1).any():
            raise ValueError(f"{where}: {key} has duplicated index {int(values[counts > 1][0])}")
        idx[key] = x
    test_idx = np.concatenate([idx["query_idx"], idx["gallery_idx"]])
    shared = np.intersect1d(idx["train_idx"], test_idx)
    if shared.size:
        raise ValueError(
            f"{where}: train indices overlap query/gallery indices ({shared.size} shared, "
            f"first {int(shared[0])})"
        )
    shared = np.intersect1d(labels[idx["train_idx"]], labels[test_idx])
    if shared.size:
        raise ValueError(
            f"{where}: train identities overlap test (query/gallery) identities "
            f"({shared.size} shared, first {int(shared[0])})"
        )
    _, counts = np.unique(labels[idx["train_idx"]], return_counts=True)
    if not (counts >= 2).any():
        raise ValueError(
            f"{where}: no positive pairs in train: no identity has two or more training images"
        )


def check_matches(split: Split, labels, cams, *, where: str = "split", every: bool = False) -> None:
    """Checks that the queries of a split have true matches the evaluation can rank.

    A query's gallery images of its own identity taken by its own camera are not ranked
    (the cross-camera protocol), so a query has a match only if the gallery holds its
    identity from another camera. A split where no query does cannot be evaluated: it is
    refused before any training rather than after split 0 has trained. With ``every``
    (the single-shot protocols, whose probes are drawn to have one), every query must.

    Raises:
      ValueError: naming the split, the first query without a match and what was expected.
    """
    labels = np.asarray(labels, dtype=np.int64)
    cams = np.asarray(cams, dtype=np.int64)
    q, g = np.asarray(split.query_idx), np.asarray(split.gallery_idx)
    lo, c0 = labels.min(), cams.min()
    width = cams.max() - c0 + 1

    def count(keys, values):
        keys = np.sort(keys)
        return np.searchsorted(keys, values, "right") - np.searchsorted(keys, values, "left")

    def pair(i):
        return (labels[i] - lo) * width + (cams[i] - c0)

    bad = np.flatnonzero(count(labels[g], labels[q]) == count(pair(g), pair(q)))
    if bad.size == 0 or (not every and bad.size < len(q)):
        return
    i = int(q[bad[0]])
    if every:
        raise ValueError(
            f"{where}: probe {i} (identity {int(labels[i])}, camera {int(cams[i])}) has no "
            f"gallery image of its identity from another camera ({bad.size} such probes)"
        )
    raise ValueError(
        f"{where}: no query has a match to find: none of its {len(q)} query images has a "
        "gallery image of its identity from another camera (same-camera matches are not "
        "ranked); expected query and gallery to share identities across cameras (check "
        "the camera ids)"
    )


def validated_dataset(features, labels, cams, splits, name: str) -> Dataset:
    """Builds a `Dataset` after every array and split check of this module passes."""
    features, labels, cams = validate_arrays(features, labels, cams)
    checked = []
    for s, split in enumerate(splits):
        validate_split(split, labels, n=len(labels), where=f"{name} split {s}")
        split = Split(*(np.asarray(x).astype(np.int64) for x in split))
        check_matches(split, labels, cams, where=f"{name} split {s}")
        checked.append(split)
    return Dataset(features, labels, cams, tuple(checked), name)


NPZ_EXPECTED = (
    "a .npz archive of named arrays, as numpy.savez writes it, e.g. "
    "np.savez(path, features=X, labels=y, cams=c)"
)


def read_npz(path: str, keys, *, what: str = "file") -> tuple[dict, list[str]]:
    """Reads the arrays ``keys`` of a .npz archive; anything else is a clear error.

    Returns:
      The arrays found among ``keys`` (by name) and the names of all arrays present.

    Raises:
      ValueError: the file is empty, truncated, not a .npz archive, holds one bare array,
        or holds Python objects (e.g. a ragged array) instead of plain arrays; each
        message names the file and what was expected.
    """
    if os.path.getsize(path) == 0:
        raise ValueError(f"{path}: the {what} is empty (0 bytes); expected {NPZ_EXPECTED}")
    with open(path, "rb") as fh:
        return _read_npz(fh, path, keys, what)


def _read_npz(fh, path: str, keys, what: str) -> tuple[dict, list[str]]:
    """`read_npz` on an open file handle."""
    try:
        npz = np.load(fh, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        if isinstance(e, ValueError) and "pickle" in str(e):
            reason = "it is not a numpy file (text, or pickled data)"
        elif isinstance(e, zipfile.BadZipFile | EOFError):
            reason = f"it is damaged or truncated ({e})"
        else:
            reason = str(e)
        raise ValueError(
            f"{path}: cannot read the {what}: {reason}; expected {NPZ_EXPECTED}"
        ) from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError(
            f"{path}: the {what} holds one unnamed array of shape {npz.shape}; expected "
            f"{NPZ_EXPECTED}"
        )
    arrays = {}
    with npz:
        present = list(npz.files)
        for k in present:
            if k not in keys:
                continue
            try:
                arrays[k] = npz[k]
            except ValueError as e:
                if "pickle" in str(e) or "Object arrays" in str(e):
                    raise ValueError(
                        f"{path}: array {k!r} holds Python objects (a ragged array, or "
                        "strings of mixed length?), not numbers; expected a rectangular "
                        "numeric array"
                    ) from None
                raise ValueError(f"{path}: array {k!r} cannot be read: {e}") from None
            except (EOFError, OSError, zipfile.BadZipFile) as e:
                raise ValueError(
                    f"{path}: array {k!r} is damaged or truncated ({e}); expected {NPZ_EXPECTED}"
                ) from None
    return arrays, present


def load_npz(path, *, num_splits=10, num_train_ids=None, num_test_ids=None, seed=0) -> Dataset:
    """Loads a dataset in the generic `.npz` format (module docstring).

    Args:
      path: the `.npz` file.
      num_splits: how many random splits to draw when the file has no fixed splits.
      num_train_ids: training identities per random split (None or 0: the rest).
      num_test_ids: test identities per random split (None or 0: half, rounded down).
      seed: seed of the random splits.

    Returns:
      The validated `Dataset`, named after the file; fixed splits take precedence.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(
            f"{path} is a folder; data.name=npz reads one .npz file (a dataset's folder "
            "is read by its own loader: set data.name to its name, e.g. market1501)"
        )
    if not os.path.isfile(path):
        raise FileNotFoundError(f"dataset file not found: {path}")
    arrays, present = read_npz(path, REQUIRED_KEYS + SPLIT_KEYS, what="dataset file")
    expected = (
        f"keys present: {present}; required: {list(REQUIRED_KEYS)}; "
        f"optional (all three or none): {list(SPLIT_KEYS)}"
    )
    for key in REQUIRED_KEYS:
        if key not in arrays:
            raise KeyError(f"{path}: missing key {key!r}; {expected}")
    arrays["features"], arrays["labels"], arrays["cams"] = validate_arrays(
        arrays["features"], arrays["labels"], arrays["cams"]
    )
    have = [k for k in SPLIT_KEYS if k in arrays]
    name = os.path.splitext(os.path.basename(path))[0]
    if not have:
        splits = random_splits(
            arrays["labels"],
            arrays["cams"],
            num_splits=num_splits,
            num_train_ids=num_train_ids,
            num_test_ids=num_test_ids,
            seed=seed,
        )
    elif len(have) < len(SPLIT_KEYS):
        missing = [k for k in SPLIT_KEYS if k not in arrays]
        raise KeyError(f"{path}: fixed splits need all three keys; missing {missing}; {expected}")
    else:
        parts = [arrays[k] for k in SPLIT_KEYS]
        ndims = {p.ndim for p in parts}
        if ndims == {1}:
            parts = [p[None] for p in parts]
        elif ndims != {2}:
            shapes = {k: arrays[k].shape for k in SPLIT_KEYS}
            raise ValueError(f"{path}: split arrays must all be 1-D or all 2-D [S, n]; {shapes}")
        counts = [len(p) for p in parts]
        if len(set(counts)) != 1:
            raise ValueError(
                f"{path}: train_idx, query_idx and gallery_idx disagree on the number of "
                f"splits S: {counts}"
            )
        splits = tuple(Split(*(p[s] for p in parts)) for s in range(counts[0]))
    return validated_dataset(arrays["features"], arrays["labels"], arrays["cams"], splits, name)


def random_splits(
    labels, cams, *, num_splits, num_train_ids=None, num_test_ids=None, seed=0
) -> tuple[Split, ...]:
    """Draws random identity splits for the single-shot cross-camera protocol.

    Split s permutes the identities with `np.random.default_rng([seed, s])`; the first
    `num_test_ids` are test identities, the next `num_train_ids` train identities. Train
    holds all images of its identities. The images of the test identities are divided
    into query and gallery by `query_gallery` (per identity: a random query camera, the
    other cameras gallery).

    Args:
      labels: [N] identity labels.
      cams: [N] camera ids.
      num_splits: the number of splits S.
      num_train_ids: train identities per split (None or 0: all that are not test).
      num_test_ids: test identities per split (None or 0: half, rounded down; when only
        `num_train_ids` is given, the rest).
      seed: the same seed gives the same splits.

    Returns:
      S validated splits with sorted int64 indices.
    """
    labels = integer_ids(labels, "labels")
    cams = integer_ids(cams, "cams")
    if len(labels) != len(cams):
        raise ValueError(f"labels and cams differ in length: {len(labels)} vs {len(cams)}")
    if int(num_splits) < 1:
        raise ValueError(f"num_splits must be at least 1; got {num_splits}")
    order = np.argsort(labels, kind="stable")
    ids, starts = np.unique(labels[order], return_index=True)
    groups = np.split(order, starts[1:])
    n_ids = len(ids)
    n_test = int(num_test_ids or 0)
    n_train = int(num_train_ids or 0)
    if n_test < 0 or n_train < 0:
        raise ValueError(f"identity counts must be >= 0; got {num_train_ids}, {num_test_ids}")
    for what, k in (("num_test_ids", n_test), ("num_train_ids", n_train)):
        if k > n_ids:
            raise ValueError(
                f"{what}={k} exceeds the {n_ids} identities in the data; expected at "
                f"most {n_ids} (0: the default share)"
            )
    if not n_test:
        n_test = n_ids - n_train if n_train else n_ids // 2
    if not n_train:
        n_train = n_ids - n_test
    if n_train + n_test > n_ids:
        raise ValueError(
            f"num_train_ids + num_test_ids = {n_train} + {n_test} exceeds the {n_ids} "
            "identities in the data"
        )
    if n_train < 2:
        raise ValueError(
            f"need at least 2 train identities; with {n_test} test identities only "
            f"{n_train} of the {n_ids} are left: lower num_test_ids"
        )
    splits = []
    for s in range(int(num_splits)):
        rng = np.random.default_rng([seed, s])
        perm = rng.permutation(n_ids)
        train = [groups[g] for g in perm[n_test : n_test + n_train]]
        query, gallery = query_gallery([groups[g] for g in np.sort(perm[:n_test])], cams, rng)
        if max(len(t) for t in train) < 2:
            raise ValueError(
                f"random split {s}: no positive pairs in train: none of its {n_train} "
                "identities has two or more images"
            )
        train = np.sort(np.concatenate(train)).astype(np.int64)
        split = Split(train, query, gallery)
        validate_split(split, labels, n=len(labels), where=f"random split {s}")
        splits.append(split)
    return tuple(splits)


def query_gallery(groups, cams, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Divides the images of test identities into query and gallery (`random_splits`).

    Each identity seen by several cameras gets a random query camera: its images there are
    queries, its images in the other cameras gallery. One seen by a single camera puts one
    random image in query and the rest in gallery; with a single image it is a gallery
    distractor. Draws from `rng` identity by identity, in the order given.

    Args:
      groups: per identity, the int indices of its images.
      cams: camera ids of the whole dataset (indexed by `groups`).
      rng: the generator drawn from.

    Returns:
      (query, gallery): sorted int64 indices.
    """
    query, gallery = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for idx in groups:
        present = np.unique(cams[idx])
        if len(present) > 1:
            in_query = cams[idx] == rng.choice(present)
        else:
            in_query = np.zeros(len(idx), bool)
            if len(idx) > 1:
                in_query[rng.integers(len(idx))] = True
        query.append(idx[in_query])
        gallery.append(idx[~in_query])
    return tuple(np.sort(np.concatenate(x)).astype(np.int64) for x in (query, gallery))


def validation_split(
    labels, cams, train_idx, *, fraction: float, seed, field: str = "val_fraction"
) -> Split:
    """Holds identities of a training part out for validation.

    `round(fraction * K)` of the K identities of `train_idx`, drawn by
    `np.random.default_rng(seed)`, become validation identities, their images divided
    into query and gallery as `random_splits` divides test identities (`query_gallery`);
    the other identities stay for training.

    Args:
      labels: [N] identity labels of the dataset.
      cams: [N] camera ids of the dataset.
      train_idx: indices of the training part.
      fraction: share of its identities held out, in (0, 1).
      seed: seed of `np.random.default_rng` (an int or a sequence of ints); same seed,
        same split.
      field: the name of the fraction in error messages (e.g. "data.val_fraction").

    Returns:
      A `Split` of indices into the dataset: `train_idx` the identities left for
      training, `query_idx` and `gallery_idx` the validation query and gallery.

    Raises:
      ValueError: `fraction` outside (0, 1), fewer than 2 identities held out or left
        for training, or a part without what it needs (a query, a positive pair).
    """
    labels = integer_ids(labels, "labels")
    cams = integer_ids(cams, "cams")
    train_idx = integer_ids(train_idx, "train_idx")
    fraction = float(fraction)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"{field} must be in (0, 1) to hold identities out; got {fraction}")
    ids = np.unique(labels[train_idx])
    num_val = int(round(fraction * len(ids)))
    if num_val < 2 or len(ids) - num_val < 2:
        hint = (
            f"with {len(ids)} identities, {field} from {2 / len(ids):.3g} to {1 - 2 / len(ids):.3g}"
            if len(ids) >= 4
            else "too few identities: 4 or more are needed"
        )
        raise ValueError(
            f"{field}={fraction} holds out {num_val} of the {len(ids)} training identities, "
            f"leaving {len(ids) - num_val}; validation and training need at least 2 each "
            f"({hint})"
        )
    rng = np.random.default_rng(seed)
    held = np.sort(rng.permutation(ids)[:num_val])
    is_val = np.isin(labels[train_idx], held)
    groups = [train_idx[labels[train_idx] == i] for i in held]
    query, gallery = query_gallery(groups, cams, rng)
    split = Split(np.sort(train_idx[~is_val]), query, gallery)
    validate_split(split, labels, n=len(labels), where=f"{field}={fraction}: validation split")
    return split
