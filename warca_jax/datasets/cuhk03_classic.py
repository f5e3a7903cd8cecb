"""CUHK03, classic protocol: the images and 20 test sets inside the published `cuhk-03.mat`.

`cuhk-03.mat` is a MATLAB v7.3 (HDF5) file, read with h5py (the `hdf5` extra). Its groups
`labeled` and `detected` hold 5 cells, one per camera pair, each a cell array [ids x 10]
of H x W x 3 uint8 images (some cells empty): images 1-5 from camera A of the pair, 6-10
from camera B. `testsets` holds 20 cells of [100 x 2] (camera pair, identity), 1-based.

This loader writes the images out once, as PNG files named like the new protocol's
`filelist` (`{pair}_{id:03d}_{camera 1|2}_{index:02d}.png`) in `images_{variant}/` (or
`image_dir`); files already there are kept, so a second call reads nothing but the index.
It returns an `ImageSet`, whose descriptors `to_dataset` computes and caches like any
other dataset's. Every object of the `.mat` file is checked before its data are read, and
every image before any is written: one that would read another file (external storage,
an external link, a virtual dataset) is refused naming it (`warca_jax.datasets.hdf5`).

Labels are `1000 * pair + identity` (identities are numbered within each pair) and cams
`2 * (pair - 1) + (0 for camera A, 1 for camera B)`. Protocol: split s uses test set s
(100 identities); all other identities train. For each test identity one random camera-A
image is the probe and one random camera-B image the gallery (`multi_shot=True`: all of
each), drawn from `np.random.default_rng([seed, s])`.
"""

from __future__ import annotations

import os

import numpy as np
from PIL import Image

from warca_jax.data import identity_splits
from warca_jax.datasets import base, hdf5
from warca_jax.io import run_files, writes

MAT_NAME = "cuhk-03.mat"


def _write_png(path: str, image: np.ndarray) -> None:
    # Atomic: an interrupted run leaves no half-written image; a failure names the file.
    with run_files.atomic_file(path, "wb") as f:
        Image.fromarray(image).save(f, format="PNG")


def load_cuhk03_classic(
    root, *, variant="labeled", num_splits=None, seed=0, image_dir=None, multi_shot=False
) -> base.ImageSet:
    """Reads `root/cuhk-03.mat`, writes its images out and returns the classic protocol.

    Args:
      root: folder holding `cuhk-03.mat`.
      variant: "labeled" or "detected" (the group of the .mat to read).
      num_splits: how many of the published test sets to use, in order (None: all 20).
      seed: seed of the probe and gallery draws.
      image_dir: where the PNG images go (None: `root/images_{variant}`).
      multi_shot: all camera-A images as probes and all camera-B images as gallery.

    Returns:
      An `ImageSet` with one split per test set.
    """
    if variant not in ("labeled", "detected"):
        raise ValueError(f"CUHK03 variant must be 'labeled' or 'detected'; got {variant!r}")
    identity_splits.check_split_options(
        num_splits=1 if num_splits is None else num_splits, seed=seed
    )
    root = base.require_layout(root, dataset="CUHK03 (classic protocol)", files=(MAT_NAME,))
    h5py = base.import_h5py(MAT_NAME)
    path = os.path.join(root, MAT_NAME)
    image_dir = os.path.abspath(image_dir or os.path.join(root, f"images_{variant}"))
    try:
        mat = h5py.File(path, "r")
    except OSError as e:
        raise ValueError(f"{path}: not a MATLAB v7.3 (HDF5) file: {e}") from e
    with mat:
        missing = [k for k in (variant, "testsets") if k not in mat]
        if missing:
            raise ValueError(
                f"{path}: missing {missing}; expected groups 'labeled', "
                f"'detected' and 'testsets', found {sorted(mat.keys())}"
            )
        test_sets = _test_sets(mat, path, num_splits)
        paths, labels, cams = _write_images(mat, path, variant, image_dir)
    cams = np.asarray(cams, dtype=np.int64)
    per_id = None if multi_shot else 1
    name = f"cuhk03_{variant}_classic"
    splits = identity_splits.probe_gallery_splits(
        labels,
        cams,
        num_test_ids=None,
        seed=seed,
        probe_mask=cams % 2 == 0,
        gallery_mask=cams % 2 == 1,
        probes_per_id=per_id,
        gallery_per_id=per_id,
        test_id_sets=test_sets,
        name=name,
    )
    return base.image_set(paths, labels, cams, splits, name)


def _test_sets(mat, path: str, num_splits: int | None) -> list[np.ndarray]:
    """The first ``num_splits`` (None: all) published test sets of the open .mat file, each
    the labels (1000 camera pair + identity) of its test identities."""
    test_sets = []
    for s, ref in enumerate(np.asarray(hdf5.item(mat, "testsets", path)).ravel()):
        pairs = np.asarray(hdf5.deref(mat, ref, path)).T
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise ValueError(
                f"{path}: testsets cell {s + 1} has shape {pairs.shape}; "
                "expected [identities x 2] (camera pair, identity)"
            )
        test_sets.append(1000 * pairs[:, 0].astype(np.int64) + pairs[:, 1].astype(np.int64))
    if num_splits is not None and num_splits > len(test_sets):
        raise ValueError(f"num_splits = {num_splits} but {path} has {len(test_sets)} test sets")
    return test_sets[:num_splits]


def _image_items(mat, path: str, variant: str) -> list[tuple[int, int, int, object]]:
    """(pair, identity, index from 0, dataset) of every image of ``variant`` in the open
    .mat file (empty cells left out), every object checked (``hdf5``), no image read."""
    items = []
    for p, pair_ref in enumerate(np.asarray(hdf5.item(mat, variant, path)).ravel(), start=1):
        cells = np.asarray(hdf5.deref(mat, pair_ref, path)).T  # HDF5 stores them transposed.
        if cells.ndim != 2 or cells.shape[1] != 10:
            raise ValueError(
                f"{path}: {variant} cell {p} has shape {cells.shape}; "
                "expected [identities x 10] images"
            )
        for i, row in enumerate(cells, start=1):
            for j, ref in enumerate(row):
                item = hdf5.deref(mat, ref, path)
                if item.ndim == 3:  # else an empty MATLAB cell
                    items.append((p, i, j, item))
    return items


def _write_images(mat, path: str, variant: str, image_dir: str) -> tuple[list, list, list]:
    """(paths, labels, cams) of every image of ``variant`` in the open .mat file, each
    written to ``image_dir`` as PNG once (an image already there is kept)."""
    items = _image_items(mat, path, variant)
    writes.makedirs(image_dir)
    paths, labels, cams = [], [], []
    for p, i, j, item in items:
        view = 1 if j < 5 else 2
        out = os.path.join(image_dir, f"{p}_{i:03d}_{view}_{j + 1:02d}.png")
        if not os.path.isfile(out):
            image = np.asarray(item).T
            if image.dtype != np.uint8 or image.shape[2] != 3:
                raise ValueError(
                    f"{path}: {variant} image ({p}, {i}, {j + 1}) is "
                    f"{image.dtype} {image.shape}; expected uint8 H x W x 3"
                )
            _write_png(out, image)
        paths.append(out)
        labels.append(1000 * p + i)
        cams.append(2 * (p - 1) + view - 1)
    return paths, labels, cams
