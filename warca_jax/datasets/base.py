"""What every image-dataset loader shares: `ImageSet`, `to_dataset` and layout checks.

An image loader reads a dataset's published folder layout and returns an `ImageSet`:
absolute image paths, identity labels, camera ids and the protocol's splits, with no pixel
read. `to_dataset` turns it into a `warca_jax.data.dataset_arrays.Dataset` by computing
image descriptors with `warca_jax.features.extract` (imported only then, so the loaders
work without it).

`protocol_image_set` draws the splits of the WARCA paper's protocol for the loaders of
published datasets; each takes `num_test_ids` (P of the paper by default), `num_splits`
random splits and `seed` (the same seed gives the same splits), checked and gathered by
`split_options`.

Layout checks run before any other work: a missing root, subfolder or file raises
`FileNotFoundError` naming the layout that was expected and the first thing missing; an
image whose name does not parse raises `ValueError` naming the file and the pattern. An
image or file that is not a regular file once its links are resolved (a link to
`/dev/zero`, a FIFO, a socket, a link that loops or dangles) is refused naming it
(`warca_jax.io.reads.regular_file`), never opened: it would read forever or block.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

import numpy as np
from absl import logging

from warca_jax.data import dataset_arrays, identity_splits
from warca_jax.io import reads

# Files with other extensions (Thumbs.db, readme.txt, .mat) are ignored by the listings.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".pgm", ".ppm", ".tif", ".tiff")


class ImageSet(NamedTuple):
    """The images of a dataset, their identities and cameras, and its protocol's splits."""

    paths: tuple[str, ...]  # [N] absolute image paths
    labels: np.ndarray  # [N] int64 identities (-1: junk, ignored by the evaluation)
    cams: np.ndarray  # [N] int64 camera ids
    splits: tuple[dataset_arrays.Split, ...]
    name: str
    same_camera_matches: bool = False  # `dataset_arrays.Dataset`'s field of that name


def to_dataset(
    image_set,
    *,
    descriptor="color_lbp",
    cache_dir=None,
    batch_size=256,
    progress=False,
    skip_small_images=False,
    height=128,
    width=48,
) -> dataset_arrays.Dataset:
    """Computes the descriptors of an `ImageSet`'s images and returns a validated `Dataset`.

    Args:
      image_set: an `ImageSet`; a `data.Dataset` (what feature-file loaders return) is
        returned unchanged, so `to_dataset(load(name, root))` works for every loader.
      descriptor: the `warca_jax.features` descriptor name.
      cache_dir: where `warca_jax.features.extract` caches descriptors (None: no cache).
      batch_size: images decoded and described per batch.
      progress: show a progress bar while extracting.
      skip_small_images: leave out the images smaller than the descriptor's ``min_size``
        (logged: how many and which), their labels, cameras and split entries with them;
        False (the default): `features.extract` refuses them, naming them.
      height, width: the size images are resized to before description (an integer >= 1
        each; 128 x 48 by default).

    Returns:
      `Dataset(features [N, D] float32, labels, cams, splits, name)`, checked by
      `data.validate_arrays` and `data.validate_split`.
    """
    if isinstance(image_set, dataset_arrays.Dataset):
        return image_set
    if not isinstance(image_set, ImageSet):
        raise TypeError(
            f"to_dataset expects an ImageSet (or a Dataset); got {type(image_set).__name__}"
        )
    from warca_jax import features  # Lazy: loaders work without it.

    if skip_small_images and descriptor in features.DESCRIPTORS:
        image_set = without_small_images(image_set, features.DESCRIPTORS[descriptor].min_size)
    for name, value in (("height", height), ("width", width)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"data.{name} must be an integer >= 1; got {value!r}")
    feats = features.extract(
        list(image_set.paths),
        height=int(height),
        width=int(width),
        descriptor=descriptor,
        batch_size=batch_size,
        cache_dir=cache_dir,
        progress=progress,
    )
    return validated_dataset(
        feats, image_set.labels, image_set.cams, image_set.splits, image_set.name,
        image_set.same_camera_matches,
    )  # fmt: skip


validated_dataset = dataset_arrays.validated_dataset


def without_small_images(image_set: ImageSet, min_size: tuple[int, int]) -> ImageSet:
    """The `ImageSet` without its images below ``min_size`` (height, width), read from the
    files' headers: their labels and cameras go with them, every split keeps its other
    entries (renumbered), and one log line says how many were skipped and which."""
    from warca_jax.features import image_files  # Lazy, as in `to_dataset`.

    small = image_files.too_small(image_set.paths, min_size)
    if not small:
        return image_set
    keep = np.ones(len(image_set.paths), bool)
    keep[[i for i, _, _ in small]] = False
    renumber = np.cumsum(keep) - 1
    shown = ", ".join(f"{p} ({h} x {w})" for _, p, (h, w) in small)
    logging.warning(
        "%s: skipped %d of %d images smaller than %d x %d pixels (height x width), "
        "data.skip_small_images: %s",
        image_set.name, len(small), len(keep), *min_size, shown,
    )  # fmt: skip
    splits = []
    for s, split in enumerate(image_set.splits):
        kept = []
        for key in dataset_arrays.SPLIT_KEYS:
            idx = np.asarray(getattr(split, key), np.int64)
            kept.append(renumber[idx[keep[idx]]])
        splits.append(dataset_arrays.Split(*kept))
        where = f"{image_set.name} split {s} without its {len(small)} small images"
        dataset_arrays.validate_split(
            splits[-1], image_set.labels[keep], n=int(keep.sum()), where=where
        )
    paths = tuple(p for p, k in zip(image_set.paths, keep, strict=True) if k)
    return image_set._replace(
        paths=paths, labels=image_set.labels[keep], cams=image_set.cams[keep], splits=tuple(splits)
    )


def image_set(paths, labels, cams, splits, name: str, same_camera_matches=False) -> ImageSet:
    """Builds an `ImageSet` after checking lengths and every split."""
    labels = np.asarray(labels, dtype=np.int64)
    cams = np.asarray(cams, dtype=np.int64)
    paths = tuple(os.path.abspath(p) for p in paths)
    if not len(paths) == len(labels) == len(cams):
        raise ValueError(
            f"{name}: paths, labels and cams differ in length: "
            f"{len(paths)}, {len(labels)}, {len(cams)}"
        )
    for s, split in enumerate(splits):
        dataset_arrays.validate_split(split, labels, n=len(labels), where=f"{name} split {s}")
    return ImageSet(paths, labels, cams, tuple(splits), name, bool(same_camera_matches))


def protocol_image_set(
    paths,
    labels,
    cams,
    name: str,
    *,
    camera_rule=False,
    shots=1,
    probe_cam=0,
    gallery_draw=False,
    **split_options,
) -> ImageSet:
    """An `ImageSet` with the WARCA paper's splits of its identities.

    The splits are `splits.probe_gallery_splits` of `labels` and `cams` with
    `split_options` (num_test_ids, num_splits, seed, ...). With `camera_rule`, each test
    identity's probes are drawn from its camera-`probe_cam` images (0 or 1) and its gallery
    from the other camera's, `shots` of each (None: all); with `gallery_draw`, one random
    image is the gallery and its other images the probes, cameras ignored (the set's
    `same_camera_matches`); with neither, one random image is the probe and its other
    images the gallery.
    """
    cams = np.asarray(cams, dtype=np.int64)
    if camera_rule:
        if probe_cam not in (0, 1):
            raise ValueError(f"{name}: probe_cam must be camera 0 or 1; got {probe_cam!r}")
        split_options.update(
            probe_mask=cams == probe_cam,
            gallery_mask=cams == 1 - probe_cam,
            probes_per_id=shots,
            gallery_per_id=shots,
        )
    splits = identity_splits.probe_gallery_splits(
        labels, cams, name=name, gallery_draw=gallery_draw, **split_options
    )
    return image_set(paths, labels, cams, splits, name, gallery_draw)


def require_layout(root, *, dataset: str, dirs=(), files=()) -> str:
    """Checks that `root` is a folder holding the given subfolders and files.

    Args:
      root: the dataset's root folder.
      dataset: the dataset's name, for messages.
      dirs: subfolders that must exist (relative to root).
      files: files that must exist (relative to root).

    Returns:
      The absolute root path.

    Raises:
      FileNotFoundError: naming the expected layout and the first missing entry (a link
        whose target is missing: naming the link).
      NotARegularFileError: one of ``files`` is a FIFO, device, socket or folder, or a
        link that loops (a ValueError naming it).
    """
    root = os.path.abspath(os.path.expanduser(os.fspath(root)))
    expected = ", ".join([f"{d}/" for d in dirs] + list(files)) or "images"
    if not os.path.isdir(root):
        raise FileNotFoundError(
            f"{dataset} root {root} is not a folder; expected a folder containing {expected}"
        )
    for d in dirs:
        if not os.path.isdir(os.path.join(root, d)):
            raise FileNotFoundError(f"{dataset} root {root} must contain {expected}; missing: {d}/")
    for f in files:
        if not os.path.lexists(os.path.join(root, f)):
            raise FileNotFoundError(f"{dataset} root {root} must contain {expected}; missing: {f}")
        reads.regular_file(os.path.join(root, f), what=f"{dataset}:", expected="a regular file")
    return root


def is_image(name: str) -> bool:
    """Whether a file name has one of `IMAGE_EXTENSIONS` (case-insensitive)."""
    return os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS


def list_images(folder: str, pattern: str, *, dataset: str, example: str, skip=None):
    """Lists the images of one folder and parses their names.

    Args:
      folder: the folder (not recursive; subfolders and files without an image extension
        are ignored; an image that is not a regular file is refused).
      pattern: a regular expression that the whole file name must match.
      dataset: the dataset's name, for messages.
      example: an example of a valid name, for messages.
      skip: optional regular expression; image names matching it are ignored (masks).

    Returns:
      A list of `(absolute path, re.Match)`, sorted by file name.

    Raises:
      ValueError: naming the first image whose name does not match, or an empty folder.
      NotARegularFileError: an image that is a FIFO, device or socket once its links are
        resolved, or a link that loops (a ValueError naming it; never opened).
      FileNotFoundError: an image that is a link to nothing, naming the link.
    """
    regex = re.compile(pattern, re.IGNORECASE)
    skip_regex = re.compile(skip, re.IGNORECASE) if skip else None
    found = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not is_image(name) or os.path.isdir(path):
            continue
        if skip_regex is not None and skip_regex.fullmatch(name):
            continue
        reads.regular_file(path, what=f"{dataset}: image", expected="a regular image file")
        match = regex.fullmatch(name)
        if match is None:
            raise ValueError(
                f"{dataset}: cannot parse image file name {path}; expected names matching "
                f"{pattern!r}, e.g. {example}"
            )
        found.append((path, match))
    if not found:
        raise ValueError(f"{dataset}: no images in {folder}; expected files named like {example}")
    return found


def import_h5py(what: str):
    """Imports h5py (the `hdf5` extra), which MATLAB v7.3 (HDF5) files need to be read."""
    try:
        import h5py
    except ImportError as e:
        raise ImportError(
            f"reading {what} (MATLAB v7.3 = HDF5) needs h5py: pip install 'warca_jax[hdf5]'"
        ) from e
    return h5py


def split_options(*, num_splits, seed, **others) -> dict:
    """The split options of a loader (``num_splits``, ``seed`` and the ``others``, e.g.
    ``num_test_ids``) as a dict for `protocol_image_set`, once
    `identity_splits.check_split_options` passed."""
    identity_splits.check_split_options(num_splits=num_splits, seed=seed)
    return {**others, "num_splits": num_splits, "seed": seed}


def cameras_by_index(found, *, dataset: str, per_camera: int, example: str):
    """(labels, cams) of the `list_images` matches ``found`` of names <identity><index>:
    indices 1 .. per_camera are camera 0, the next ``per_camera`` camera 1; ValueError
    naming an image whose index is outside them."""
    labels, cams = [], []
    for path, match in found:
        index = int(match.group(2))
        if not 1 <= index <= 2 * per_camera:
            raise ValueError(
                f"{dataset}: {path} has image index {index}; expected 001-{2 * per_camera:03d} "
                f"in names like {example}"
            )
        labels.append(int(match.group(1)))
        cams.append(0 if index <= per_camera else 1)
    return labels, cams
