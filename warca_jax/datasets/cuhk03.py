"""CUHK03 (Li et al., CVPR 2014): the new protocol (Zhong et al., CVPR 2017) and the classic one.

New protocol (767 training / 700 test identities, one fixed split), from the published
`cuhk03_new_protocol_config_{labeled,detected}.mat` (fields `filelist`, `labels`, `camId`,
1-based `train_idx`, `query_idx`, `gallery_idx`). `root` holds that .mat and either

- `images_{variant}/` with the images named as in `filelist` (e.g. `1_001_1_01.png`:
  camera pair, identity, camera 1 or 2, image index), giving an `ImageSet`; or
- `feature_data.json`, the coursework's precomputed features (a JSON list with one
  feature vector per `filelist` entry, e.g. 14,096 x 2,048 for `labeled`), giving a
  `Dataset` directly. The whole file is parsed in memory (about 1 GB for that size).

Labels are the .mat's `labels` and cams its `camId` (1, 2): queries and their gallery
matches come from different cameras, as the evaluation needs.

The classic protocol (`protocol="classic"`, 20 published test sets of 100 identities)
reads `cuhk-03.mat`; see `warca_jax.datasets.cuhk03_classic`.
"""

from __future__ import annotations

import json
import os

import numpy as np
import scipy.io

from warca_jax.data import dataset_arrays
from warca_jax.datasets import base
from warca_jax.io import bounded_reads, reads

VARIANTS = ("labeled", "detected")
SOURCES = ("auto", "images", "features")
PROTOCOLS = ("new", "classic")
MAT_KEYS = ("filelist", "labels", "camId", "train_idx", "query_idx", "gallery_idx")
JSON_NAME = "feature_data.json"


def mat_name(variant: str) -> str:
    """The published file name of the new-protocol .mat of `variant`."""
    return f"cuhk03_new_protocol_config_{variant}.mat"


def _check_variant(variant) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"CUHK03 variant must be one of {list(VARIANTS)}; got {variant!r}")


def read_protocol_mat(path) -> tuple[list[str], np.ndarray, np.ndarray, dataset_arrays.Split]:
    """Reads a CUHK03 new-protocol .mat file.

    Args:
      path: `cuhk03_new_protocol_config_{labeled,detected}.mat`.

    Returns:
      (file names [N], labels [N] int64, cams [N] int64, the split with 0-based indices).

    Raises:
      FileNotFoundError, ValueError: naming the file and what is wrong in it.
    """
    path = os.fspath(path)
    reads.regular_file(path, what="CUHK03 protocol file", expected="a regular .mat file")
    try:
        mat = scipy.io.loadmat(path)
    except Exception as e:  # scipy raises many types (IndexError on a short file).
        raise ValueError(f"{path}: cannot be read as a MATLAB .mat file: {e!r}") from e
    missing = [k for k in MAT_KEYS if k not in mat]
    if missing:
        present = sorted(k for k in mat if not k.startswith("__"))
        raise ValueError(
            f"{path}: missing fields {missing}; expected {list(MAT_KEYS)}, found {present}"
        )
    names = [str(np.asarray(x).ravel()[0]) for x in np.asarray(mat["filelist"]).ravel()]
    labels = np.asarray(mat["labels"]).ravel().astype(np.int64)
    cams = np.asarray(mat["camId"]).ravel().astype(np.int64)
    n = len(names)
    if not len(labels) == len(cams) == n:
        raise ValueError(
            f"{path}: filelist, labels and camId differ in length: {n}, {len(labels)}, {len(cams)}"
        )
    parts = []
    for key in MAT_KEYS[3:]:
        idx = np.asarray(mat[key]).ravel().astype(np.int64)
        if idx.size and (idx.min() < 1 or idx.max() > n):
            bad = idx[(idx < 1) | (idx > n)][0]
            raise ValueError(f"{path}: {key} has index {bad} outside the 1-based range [1, {n}]")
        parts.append(idx - 1)
    split = dataset_arrays.Split(*parts)
    dataset_arrays.validate_split(split, labels, n=n, where=f"{path} split")
    return names, labels, cams, split


def read_feature_json(path, *, num_rows: int) -> np.ndarray:
    """Reads the coursework's `feature_data.json`: a JSON list of `num_rows` vectors.

    Returns:
      features [num_rows, D] float32.

    Raises:
      FileNotFoundError, ValueError: naming the file and the problem.
    """
    path = os.fspath(path)
    with reads.open_regular(
        path, "r", encoding="utf-8", what="feature file", expected="a regular .json file"
    ) as f:
        try:  # its numbers take several times their text in Python: a quarter of the budget
            rows = bounded_reads.read_json(f, max_bytes=bounded_reads.max_array_bytes() // 4)
        except bounded_reads.JsonLimitError as e:
            raise ValueError(
                f"{path}: the feature file {e} (a quarter of the memory budget for arrays, "
                f"set by {bounded_reads.MAX_ARRAY_BYTES_ENV})"
            ) from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(rows, list) or not rows or not isinstance(rows[0], list):
        raise ValueError(f"{path}: expected a JSON list of feature vectors (lists of numbers)")
    if len(rows) != num_rows:
        raise ValueError(
            f"{path}: holds {len(rows)} feature vectors but the protocol file "
            f"lists {num_rows} images; they must match one to one"
        )
    dim = len(rows[0])
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != dim:
            got = len(row) if isinstance(row, list) else type(row).__name__
            raise ValueError(f"{path}: vector {i} has length {got}; vector 0 has {dim}")
    try:
        return np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: feature vectors must hold numbers only: {e}") from e


def load_cuhk03(
    root,
    *,
    variant="labeled",
    protocol="new",
    source="auto",
    num_splits=None,
    seed=0,
    image_dir=None,
    multi_shot=False,
):
    """Reads CUHK03 from `root` (module docstring).

    Args:
      root: folder with the protocol file(s) and images or features.
      variant: "labeled" (hand-drawn boxes, the paper's choice) or "detected" (DPM boxes).
      protocol: "new" (767/700, one split) or "classic" (`cuhk-03.mat`, 20 test sets).
      source: new protocol only: "images" (`images_{variant}/` -> `ImageSet`), "features"
        (`feature_data.json` -> `Dataset`) or "auto" (images if present, else features).
      num_splits: classic only: how many of the 20 test sets to use (None: all).
      seed: classic only: seed of the probe and gallery draws.
      image_dir: classic only: where the images are written (None: root/images_{variant}).
      multi_shot: classic only: all camera-A images as probes and all camera-B images as
        gallery, instead of one random image of each.

    Returns:
      An `ImageSet`, or a `Dataset` for `source="features"`.
    """
    _check_variant(variant)
    if protocol == "classic":
        from warca_jax.datasets import cuhk03_classic

        if source != "auto":
            raise ValueError(
                "source applies to the new protocol only; the classic one reads "
                "the images inside cuhk-03.mat"
            )
        return cuhk03_classic.load_cuhk03_classic(
            root,
            variant=variant,
            num_splits=num_splits,
            seed=seed,
            image_dir=image_dir,
            multi_shot=multi_shot,
        )
    if protocol != "new":
        raise ValueError(f"CUHK03 protocol must be one of {list(PROTOCOLS)}; got {protocol!r}")
    if num_splits is not None or image_dir is not None or multi_shot:
        raise ValueError(
            "num_splits, image_dir and multi_shot apply to protocol='classic'; "
            "the new protocol has one fixed split"
        )
    if source not in SOURCES:
        raise ValueError(f"CUHK03 source must be one of {list(SOURCES)}; got {source!r}")
    return _load_new_protocol(root, variant, source)


def _new_protocol_source(root, variant: str, source: str) -> tuple[str, str]:
    """(root, source) of the new protocol: its layout checked and ``source="auto"`` made
    "images" when ``images_{variant}/`` is there, else "features"."""
    images = f"images_{variant}"
    dataset = "CUHK03 (new protocol)"
    root = base.require_layout(root, dataset=dataset, files=(mat_name(variant),))
    if source == "auto":
        has_images = os.path.isdir(os.path.join(root, images))
        has_json = os.path.isfile(os.path.join(root, JSON_NAME))
        if not (has_images or has_json):
            raise FileNotFoundError(
                f"{dataset} root {root} must contain {mat_name(variant)} and either "
                f"{images}/ or {JSON_NAME}; missing: both {images}/ and {JSON_NAME}"
            )
        source = "images" if has_images else "features"
    if source == "features":
        base.require_layout(root, dataset=dataset, files=(mat_name(variant), JSON_NAME))
    else:
        base.require_layout(root, dataset=dataset, dirs=(images,), files=(mat_name(variant),))
    return root, source


def _load_new_protocol(root, variant: str, source: str):
    """The new protocol's one split, as an ``ImageSet`` or (``source="features"``) a
    ``Dataset``."""
    root, source = _new_protocol_source(root, variant, source)
    names, labels, cams, split = read_protocol_mat(os.path.join(root, mat_name(variant)))
    name = f"cuhk03_{variant}"
    if source == "features":
        feats = read_feature_json(os.path.join(root, JSON_NAME), num_rows=len(names))
        return base.validated_dataset(feats, labels, cams, (split,), name)
    folder = os.path.join(root, f"images_{variant}")
    present = set(os.listdir(folder))
    absent = [n for n in names if n not in present]
    if absent:
        raise FileNotFoundError(
            f"CUHK03: {folder} lacks {len(absent)} of the {len(names)} "
            f"images that {mat_name(variant)} lists; first: {absent[0]}"
        )
    paths = [os.path.join(folder, n) for n in names]
    return base.image_set(paths, labels, cams, (split,), name)
