"""Precomputed features in a file: `.npz`, `.mat` and the coursework's `.json`.

- `.npz`: the generic format of `warca_jax.npz_file.load_npz` (0-based split indices).
- `.mat` (MATLAB v5/v7 through scipy, v7.3 through h5py): variables `features` [N, D],
  `labels` [N], `cams` [N] and optionally `train_idx`, `query_idx`, `gallery_idx` (all three
  or none), each a vector for one split or [S, n] for S splits. MATLAB users write 1-based
  indices and Python users 0-based, so a file with splits needs `one_based=True` or
  `False`; indices out of range for that choice are reported with the likely fix.
- `.json`: a JSON list of N feature vectors, one per entry of a CUHK03 new-protocol .mat
  (the coursework's `feature_data.json`), which gives labels, cams and the split; by
  default `cuhk03_new_protocol_config_labeled.mat` beside the .json.

Files without splits get `splits.random_splits` from `num_splits`, `num_train_ids`,
`num_test_ids` and `seed`, as `.npz` files do.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.io

from warca_jax.data import dataset_arrays, identity_splits
from warca_jax.datasets import base, cuhk03, hdf5, npz_file
from warca_jax.io import reads

EXTENSIONS = (".npz", ".mat", ".json")


def _is_hdf5(path: str) -> bool:
    """Whether the file carries the HDF5 signature (at 0 or after a 512 * 2^k userblock)."""
    with reads.open_regular(path, what="feature file") as f:
        for offset in (0, 512, 1024, 2048):
            f.seek(offset)
            if f.read(8) == b"\x89HDF\r\n\x1a\n":
                return True
    return False


def _read_mat(path: str) -> dict:
    """All variables of a .mat file as NumPy arrays (v7.3 ones transposed back).

    A v7.3 (HDF5) file's variables are all checked before any is read: one that would
    read another file (external storage, an external link, a virtual dataset) is an
    ``hdf5.ExternalDataError`` naming it (`warca_jax.datasets.hdf5`).
    """
    if _is_hdf5(path):  # MATLAB v7.3, which scipy does not read.
        h5py = base.import_h5py(path)
        with h5py.File(path, "r") as f:
            variables = {k: hdf5.item(f, k, path) for k in f}
            return {k: np.asarray(v).T for k, v in variables.items() if isinstance(v, h5py.Dataset)}
    try:
        mat = scipy.io.loadmat(path)
    except Exception as e:  # scipy raises many types (IndexError on a short file).
        raise ValueError(f"{path}: cannot be read as a MATLAB .mat file: {e!r}") from e
    return {k: v for k, v in mat.items() if not k.startswith("__")}


def _split_array(x: np.ndarray, key: str, path: str) -> np.ndarray:
    """A MATLAB vector ([n, 1] or [1, n]) as [1, n]; a matrix as [S, n]."""
    x = np.asarray(x)
    if x.dtype.kind not in "iuf":
        raise ValueError(f"{path}: {key} must be a numeric array; got dtype {x.dtype}")
    if x.ndim == 2 and 1 in x.shape:
        x = x.reshape(1, -1)
    elif x.ndim == 1:
        x = x[None]
    elif x.ndim != 2:
        raise ValueError(f"{path}: {key} must be a vector or [S, n]; got shape {x.shape}")
    return x


def load_mat_features(
    path, *, one_based=None, num_splits=10, num_train_ids=None, num_test_ids=None, seed=0
) -> dataset_arrays.Dataset:
    """Reads features, labels, cams and optional splits from a .mat file (module docstring).

    Args:
      path: the .mat file.
      one_based: whether the file's split indices are 1-based (MATLAB) or 0-based; required
        when the file has them.
      num_splits, num_train_ids, num_test_ids, seed: random splits of a file without.

    Returns:
      The validated `Dataset`, named after the file.
    """
    path = os.fspath(path)
    reads.regular_file(path, what="feature file", expected="a regular .mat file")
    arrays = _read_mat(path)
    expected = (
        f"variables present: {sorted(arrays)}; required: {list(dataset_arrays.REQUIRED_KEYS)}; "
        f"optional (all three or none): {list(dataset_arrays.SPLIT_KEYS)}"
    )
    for key in dataset_arrays.REQUIRED_KEYS:
        if key not in arrays:
            raise dataset_arrays.MissingKeyError(f"{path}: missing variable {key!r}; {expected}")
    labels = np.asarray(arrays["labels"]).ravel()
    cams = np.asarray(arrays["cams"]).ravel()
    n = len(labels)
    have = [k for k in dataset_arrays.SPLIT_KEYS if k in arrays]
    if not have:
        splits = identity_splits.random_splits(
            labels,
            cams,
            num_splits=num_splits,
            seed=seed,
            num_train_ids=num_train_ids,
            num_test_ids=num_test_ids,
        )
    elif len(have) < len(dataset_arrays.SPLIT_KEYS):
        missing = [k for k in dataset_arrays.SPLIT_KEYS if k not in arrays]
        raise dataset_arrays.MissingKeyError(
            f"{path}: fixed splits need all three variables; missing {missing}; {expected}"
        )
    else:
        if one_based not in (True, False):
            raise ValueError(
                f"{path} holds split indices: pass one_based=True (MATLAB, "
                f"1..N) or one_based=False (0..N-1); got {one_based!r}"
            )
        parts = [_split_array(arrays[k], k, path) for k in dataset_arrays.SPLIT_KEYS]
        if len({len(p) for p in parts}) != 1:
            raise ValueError(
                f"{path}: train_idx, query_idx and gallery_idx disagree on the "
                f"number of splits: {[len(p) for p in parts]}"
            )
        lo, hi = (1, n) if one_based else (0, n - 1)
        for key, p in zip(dataset_arrays.SPLIT_KEYS, parts, strict=True):
            bad = (p < lo) | (p > hi)
            if bad.any():
                hint = "one_based=False" if one_based else "one_based=True"
                raise ValueError(
                    f"{path}: {key} has index {p[bad][0]:g} outside [{lo}, {hi}] "
                    f"for one_based={one_based} and N = {n}; if the file uses "
                    f"the other convention, pass {hint}"
                )
        offset = 1 if one_based else 0
        parts = [p.astype(np.int64) - offset for p in parts]
        splits = tuple(dataset_arrays.Split(*(p[s] for p in parts)) for s in range(len(parts[0])))
    name = os.path.splitext(os.path.basename(path))[0]
    return base.validated_dataset(arrays["features"], labels, cams, splits, name)


def load_json_features(path, *, protocol_mat=None) -> dataset_arrays.Dataset:
    """Reads the coursework's feature list with the CUHK03 new protocol (module docstring).

    Args:
      path: the .json file, a list of N feature vectors.
      protocol_mat: the CUHK03 new-protocol .mat (None: the labeled one beside `path`).

    Returns:
      The validated `Dataset` with the protocol's one split, named after the file.
    """
    path = os.fspath(path)
    if protocol_mat is None:
        protocol_mat = os.path.join(
            os.path.dirname(os.path.abspath(path)), cuhk03.mat_name("labeled")
        )
        if not os.path.lexists(protocol_mat):
            raise FileNotFoundError(
                f"{path}: a .json feature list needs a CUHK03 protocol "
                f"file; none at {protocol_mat}; pass protocol_mat="
            )
    names, labels, cams, split = cuhk03.read_protocol_mat(protocol_mat)
    feats = cuhk03.read_feature_json(path, num_rows=len(names))
    name = os.path.splitext(os.path.basename(path))[0]
    return base.validated_dataset(feats, labels, cams, (split,), name)


def load_features_file(
    path,
    *,
    num_splits=10,
    num_train_ids=None,
    num_test_ids=None,
    seed=0,
    one_based=None,
    protocol_mat=None,
) -> dataset_arrays.Dataset:
    """Reads a feature file by its extension: `.npz`, `.mat` or `.json` (module docstring).

    Args:
      path: the file.
      num_splits, num_train_ids, num_test_ids, seed: random splits of a file without.
      one_based: `.mat` only: whether its split indices are 1-based.
      protocol_mat: `.json` only: the CUHK03 new-protocol .mat.

    Returns:
      The validated `Dataset`.
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in EXTENSIONS:
        raise ValueError(f"feature file {path} must end in one of {list(EXTENSIONS)}")
    if not os.path.isdir(path):  # a folder: each reader says what it expected instead
        reads.regular_file(path, what="feature file", expected=f"a regular {ext} file")
    split_args = dict(
        num_splits=num_splits, num_train_ids=num_train_ids, num_test_ids=num_test_ids, seed=seed
    )
    if one_based is not None and ext != ".mat":
        raise ValueError(
            f"one_based applies to .mat files; {path} is {ext} (.npz indices are 0-based)"
        )
    if protocol_mat is not None and ext != ".json":
        raise ValueError(f"protocol_mat applies to .json feature lists; {path} is {ext}")
    if ext == ".npz":
        return npz_file.load_npz(path, **split_args)
    if ext == ".mat":
        return load_mat_features(path, one_based=one_based, **split_args)
    return load_json_features(path, protocol_mat=protocol_mat)
