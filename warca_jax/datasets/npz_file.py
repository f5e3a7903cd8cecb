"""The generic `.npz` dataset format and a reader of `.npz` archives that names every way a
file can be wrong (the format for users: docs/datasets.md#your-own-features-the-npz-format).

A dataset file holds `features`, `labels`, optionally `cams` (without them every image is
its own camera, as the iLIDS loader reads a dataset with no camera ids: a query's only
excluded gallery entry is itself, and WARCA trains on every same-identity pair), and
optionally fixed splits
`train_idx`, `query_idx`, `gallery_idx` (0-based, all three or none), each 1-D for one split
or 2-D `[S, n]` for S splits. Without fixed splits, `splits.random_splits` draws identity
splits from a seed.
"""

from __future__ import annotations

import os
import zipfile
import zlib

import numpy as np

from warca_jax.data.dataset_arrays import (
    REQUIRED_KEYS,
    SPLIT_KEYS,
    Dataset,
    MissingKeyError,
    Split,
    validate_arrays,
    validated_dataset,
)
from warca_jax.data.identity_splits import random_splits
from warca_jax.io import bounded_reads, reads

NPZ_EXPECTED = (
    "a .npz archive of named arrays, as numpy.savez writes it, e.g. "
    "np.savez(path, features=X, labels=y, cams=c)"
)


def read_npz(path: str, keys, *, what: str = "file") -> tuple[dict, list[str]]:
    """Reads the arrays ``keys`` of a .npz archive; anything else is a clear error.

    Every array is read bounded (``warca_jax.io.bounded_reads``): its declared size is
    checked against the memory budget (``WARCA_JAX_MAX_ARRAY_BYTES``) and against what
    the archive holds before anything is allocated.

    Returns:
      The arrays found among ``keys`` (by name) and the names of all arrays present.

    Raises:
      ValueError: the file is empty, truncated, not a .npz archive, holds one bare array,
        or holds Python objects (e.g. a ragged array) instead of plain arrays, or an array
        declares more bytes than it holds or than the budget allows
        (``bounded_reads.ArrayTooLargeError``); each message names the file and what was
        expected. A FIFO, device or socket (links resolved) is a
        ``reads.NotARegularFileError``, refused before it is opened.
    """
    expected = f"a regular file: {NPZ_EXPECTED}"
    if reads.regular_file(path, what=what, expected=expected).st_size == 0:
        raise ValueError(f"{path}: the {what} is empty (0 bytes); expected {NPZ_EXPECTED}")
    with reads.open_regular(path, what=what, expected=expected) as fh:
        return _read_npz(fh, path, keys, what)


def _read_npz(fh, path: str, keys, what: str) -> tuple[dict, list[str]]:
    """`read_npz` on an open file handle."""
    try:
        npz = bounded_reads.load(fh, path)
    except bounded_reads.ArrayTooLargeError:
        raise  # one line naming the file, the array and the limit
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        if isinstance(e, ValueError) and "pickle" in str(e):
            reason = "it is not a numpy file (text, or pickled data)"
        elif isinstance(e, zipfile.BadZipFile | EOFError):
            reason = f"it is damaged or truncated ({e})"
        else:
            reason = str(e)
        raise ValueError(
            f"{path}: cannot read the {what}: {reason}; expected {NPZ_EXPECTED}"
        ) from None
    if not isinstance(npz, bounded_reads.NpzArchive):
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
                if "Object arrays" not in str(e):
                    raise  # bounded_reads: one line naming the file and the array
                raise ValueError(
                    f"{path}: array {k!r} holds Python objects (a ragged array, or "
                    "strings of mixed length?), not numbers; expected a rectangular "
                    "numeric array"
                ) from None
            except (EOFError, OSError, zipfile.BadZipFile, zlib.error) as e:
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
    reads.regular_file(path, what="dataset file", expected=f"a regular file: {NPZ_EXPECTED}")
    arrays, present = read_npz(path, REQUIRED_KEYS + SPLIT_KEYS, what="dataset file")
    required = [k for k in REQUIRED_KEYS if k != "cams"]
    expected = (
        f"keys present: {present}; required: {required}; optional: 'cams' (one camera "
        f"per image without it); optional (all three or none): {list(SPLIT_KEYS)}"
    )
    for key in required:
        if key not in arrays:
            raise MissingKeyError(f"{path}: missing key {key!r}; {expected}")
    if "cams" not in arrays:
        arrays["cams"] = np.arange(len(np.asarray(arrays["labels"]).reshape(-1)))
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
        raise MissingKeyError(
            f"{path}: fixed splits need all three keys; missing {missing}; {expected}"
        )
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
