"""Extracting descriptors from image files in bounded memory, with an on-disk cache.

``extract`` streams the files in batches (load -> jitted descriptor -> NumPy), so memory
is bounded by ``batch_size`` images whatever the number of files. Every batch is padded
to the same size, so each descriptor compiles once per image size.

With ``cache_dir``, the features are stored as ``<cache_dir>/<descriptor>_<key16>.npy``,
where the key is a sha256 over the descriptor name, its keyword defaults, the image size,
``CACHE_VERSION`` and, for every file, its absolute path, size and mtime (ns): a file
that is rewritten or touched gives a new key. Files are written to a temporary name and
moved into place with ``os.replace``, so a killed run never leaves a partial cache file.
A cache folder that may be read but not written (permission denied, read-only) costs the
cache only, with a warning; a full disk or a size limit is a ``WriteError`` naming the file.
"""

from __future__ import annotations

import errno
import hashlib
import inspect
import json
import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import numpy as np
from absl import logging
from tqdm import tqdm

from warca_jax import workdir
from warca_jax.features import images as images_lib
from warca_jax.features.color_lbp import color_lbp, color_lbp_dim
from warca_jax.features.lomo import lomo, lomo_dim

# Bump when a descriptor's output changes, so that stale caches are not read.
CACHE_VERSION = "1"
# A cache folder the run may read but not write (shared, or on a read-only mount)
_READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)


class Descriptor(NamedTuple):
    """A jitted descriptor ``fn: [n, H, W, 3] -> [n, D]`` and ``dim_at(H, W) -> D``."""

    fn: Callable[[jax.Array], jax.Array]
    dim_at: Callable[[int, int], int]

    def dim(self, height: int = 128, width: int = 48) -> int:
        return self.dim_at(height, width)


DESCRIPTORS = {
    "color_lbp": Descriptor(color_lbp, lambda h, w: color_lbp_dim()),  # 2,580
    "lomo": Descriptor(lomo, lambda h, w: lomo_dim(height=h, width=w)),  # 26,960 at 128 x 48
}


def get_descriptor(name: str) -> Descriptor:
    if name not in DESCRIPTORS:
        raise ValueError(f"unknown descriptor {name!r}; expected one of {sorted(DESCRIPTORS)}")
    return DESCRIPTORS[name]


def _parameters(fn: Callable) -> dict:
    """The keyword defaults of a descriptor, as strings, for the cache key."""
    fn = inspect.unwrap(fn)
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: repr(p.default) for p in params if p.default is not inspect.Parameter.empty}


def cache_key(paths: Sequence[str], *, descriptor: str, height: int, width: int) -> str:
    """sha256 hex digest identifying the features of these files (see module docstring)."""
    h = hashlib.sha256()
    head = {
        "descriptor": descriptor,
        "parameters": _parameters(get_descriptor(descriptor).fn),
        "height": height,
        "width": width,
        "version": CACHE_VERSION,
    }
    h.update(json.dumps(head, sort_keys=True).encode())
    for p in paths:
        st = os.stat(p)
        h.update(f"\n{os.path.abspath(p)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()


def _check_finite(feats: np.ndarray, name: str, start: int) -> None:
    bad = np.nonzero(~np.all(np.isfinite(feats), axis=1))[0]
    if bad.size:
        raise ValueError(
            f"descriptor {name!r} gave non-finite features for images {(bad + start)[:5].tolist()}"
        )


def check_batch_size(batch_size) -> int:
    """``batch_size`` when it is an integer >= 1; a ValueError naming ``data.batch_size``
    (the config field that sets it) otherwise, before any work."""
    integer = isinstance(batch_size, int | np.integer) and not isinstance(batch_size, bool)
    if not integer or batch_size < 1:
        raise ValueError(
            "data.batch_size must be an integer >= 1 (images described per batch while "
            f"extracting descriptors); got {batch_size!r}"
        )
    return int(batch_size)


def _run_batch(desc: Descriptor, batch: np.ndarray, size: int) -> np.ndarray:
    """Descriptor of a batch, padded with zero images to ``size`` rows (one compilation)."""
    m = len(batch)
    if m < size:
        pad = np.zeros((size - m, *batch.shape[1:]), batch.dtype)
        batch = np.concatenate([batch, pad])
    return np.asarray(desc.fn(batch), np.float32)[:m]


def extract_arrays(
    images: np.ndarray, *, descriptor: str = "color_lbp", batch_size: int = 256
) -> np.ndarray:
    """Descriptors of in-memory images, in batches.

    Args:
      images: [n, H, W, 3] RGB on the 0-255 scale, uint8 or float.
      descriptor: a name in ``DESCRIPTORS``.
      batch_size: images per jitted call, an integer >= 1.

    Returns:
      [n, D] float32.
    """
    desc = get_descriptor(descriptor)
    batch_size = check_batch_size(batch_size)
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"expected images of shape [n, H, W, 3], got {images.shape}")
    n, h, w, _ = images.shape
    size = max(1, min(batch_size, n))  # n may be 0
    out = np.empty((n, desc.dim(h, w)), np.float32)
    for start in range(0, n, size):
        out[start : start + size] = _run_batch(desc, images[start : start + size], size)
        _check_finite(out[start : start + size], descriptor, start)
    return out


def extract(
    paths: Sequence[str | os.PathLike],
    *,
    descriptor: str = "color_lbp",
    height: int = 128,
    width: int = 48,
    batch_size: int = 256,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = False,
) -> np.ndarray:
    """Descriptors of image files, streamed in batches and optionally cached on disk.

    Args:
      paths: n image files (see ``images.load_images``).
      descriptor: a name in ``DESCRIPTORS``.
      height: images are resized to height x width before description.
      width: see height.
      batch_size: images loaded and described at a time, an integer >= 1; bounds the
        memory.
      cache_dir: directory of the feature cache; None disables it.
      progress: show a tqdm progress bar.

    Returns:
      [n, D] float32 features, row i for paths[i].

    Raises:
      ValueError: unknown descriptor or batch size below 1 (before any work), unreadable
        image or non-finite features.
      FileNotFoundError: missing files, named, before any work is done.
    """
    desc = get_descriptor(descriptor)
    batch_size = check_batch_size(batch_size)
    paths = images_lib.check_paths(paths)
    n, dim = len(paths), desc.dim(height, width)
    target = None
    if cache_dir is not None:
        key = cache_key(paths, descriptor=descriptor, height=height, width=width)
        target = os.path.join(os.fspath(cache_dir), f"{descriptor}_{key[:16]}.npy")
        cached = _read_cache(target, (n, dim))
        if cached is not None:
            return cached

    out = np.empty((n, dim), np.float32)
    size = max(1, min(batch_size, n))  # n may be 0
    with tqdm(total=n, unit="img", desc=descriptor, disable=not progress) as bar:
        for start in range(0, n, size):
            batch = images_lib.load_images(paths[start : start + size], height=height, width=width)
            out[start : start + len(batch)] = _run_batch(desc, batch, size)
            _check_finite(out[start : start + len(batch)], descriptor, start)
            bar.update(len(batch))

    if target is not None:
        try:
            _write_cache(target, out)
        except OSError as e:  # a read-only cache costs the cache, not the features
            if e.errno not in _READ_ONLY:
                raise workdir.write_error(target, e) from e  # a full disk: stop, say so
            logging.warning("feature cache %s not written (%s); continuing uncached", target, e)
    return out


def _read_cache(target: str, shape: tuple[int, int]) -> np.ndarray | None:
    """The cached features in ``target``, or None (logged) when absent or unusable."""
    if not os.path.isfile(target):
        return None
    try:
        cached = np.load(target, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        logging.warning("feature cache %s is damaged (%s); recomputing it", target, e)
        return None
    if cached.shape != shape or cached.dtype != np.float32:
        logging.warning(
            "feature cache %s holds %s %s, expected float32 %s; recomputing it",
            target,
            cached.dtype,
            cached.shape,
            shape,
        )
        return None
    if not np.isfinite(cached).all():
        logging.warning(
            "feature cache %s holds %d non-finite values; recomputing it",
            target,
            int((~np.isfinite(cached)).sum()),
        )
        return None
    return cached


def _write_cache(target: str, out: np.ndarray) -> None:
    """Writes ``out`` to ``target`` under a temporary name, then moves it into place."""
    workdir.makedirs(os.path.dirname(target))
    with workdir.atomic_path(target) as tmp, open(tmp, "wb") as f:
        np.save(f, out)
