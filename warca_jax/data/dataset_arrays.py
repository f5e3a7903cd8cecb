"""Datasets: their types and the one validation of features, ids and splits.

A `Dataset` holds features `[N, D]` (float32), identity labels `[N]` and camera ids `[N]`
(int64), and one or more `Split`s of indices into them. Everything here is NumPy: data
preparation happens once, before training, and every problem a user's data could have is
reported here with a message that names it, never later as a NaN or a shape error in a
jitted step.

The splits are drawn by `warca_jax.data.identity_splits`, the files read by
`warca_jax.datasets` (the generic `.npz` format by `warca_jax.datasets.npz_file`); both
import this module, never the reverse. The built-in synthetic data comes from
`warca_jax.data.synthetic`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

REQUIRED_KEYS = ("features", "labels", "cams")
SPLIT_KEYS = ("train_idx", "query_idx", "gallery_idx")


class MissingKeyError(KeyError, ValueError):
    """A data file without a key (variable) it must hold: a ``KeyError``, as a mapping's
    missing key is, and bad input (a ``ValueError``), so that the command line shows its
    message as one line; printed without the quotes ``KeyError`` puts around it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


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
    # True: the evaluation ranks a query's same-camera gallery images of its identity as
    # matches (Xiong et al.'s gallery-draw reading, `warca_jax.data.identity_splits`), not as
    # junk; the cameras still reach the learners that take them.
    same_camera_matches: bool = False


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


def evaluation_cams(dataset: Dataset, query_idx, gallery_idx) -> tuple[np.ndarray, np.ndarray]:
    """The camera ids the evaluation gets for a split's query and gallery: the dataset's,
    or, with ``same_camera_matches``, camera 0 for every query and 1 for every gallery
    image, so that no gallery image of the query's identity is set aside as junk."""
    if dataset.same_camera_matches:
        return np.zeros(len(query_idx), np.int64), np.ones(len(gallery_idx), np.int64)
    return dataset.cams[query_idx], dataset.cams[gallery_idx]


def check_matches(
    split: Split,
    labels,
    cams,
    *,
    where: str = "split",
    every: bool = False,
    same_camera_matches: bool = False,
) -> None:
    """Checks that the queries of a split have true matches the evaluation can rank.

    A query's gallery images of its own identity taken by its own camera are not ranked
    (the cross-camera protocol), so a query has a match only if the gallery holds its
    identity from another camera (with ``same_camera_matches``, from any camera). A split
    where no query does cannot be evaluated: it is refused before any training rather than
    after split 0 has trained. With ``every`` (the single-shot protocols, whose probes are
    drawn to have one), every query must.

    Raises:
      ValueError: naming the split, the first query without a match and what was expected.
    """
    labels = np.asarray(labels, dtype=np.int64)
    cams = np.asarray(cams, dtype=np.int64)
    if same_camera_matches:
        cams = np.zeros_like(cams)
        cams[np.asarray(split.gallery_idx)] = 1
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


def validated_dataset(
    features, labels, cams, splits, name: str, same_camera_matches: bool = False
) -> Dataset:
    """Builds a `Dataset` after every array and split check of this module passes."""
    features, labels, cams = validate_arrays(features, labels, cams)
    checked = []
    for s, split in enumerate(splits):
        validate_split(split, labels, n=len(labels), where=f"{name} split {s}")
        split = Split(*(np.asarray(x).astype(np.int64) for x in split))
        check_matches(
            split, labels, cams, where=f"{name} split {s}",
            same_camera_matches=same_camera_matches,
        )  # fmt: skip
        checked.append(split)
    return Dataset(features, labels, cams, tuple(checked), name, bool(same_camera_matches))
