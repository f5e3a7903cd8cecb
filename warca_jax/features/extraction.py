"""Extracting descriptors from image files in bounded memory, with an on-disk cache.

``extract`` streams the files in batches (load -> jitted descriptor -> NumPy), so memory
is bounded by ``batch_size`` images whatever the number of files. Every batch is padded
to the same size, so each descriptor compiles once per image size.

Before any image is decoded, every file must exist and be at least the descriptor's
``min_size`` (read from the files' headers): a smaller image has nothing for the
descriptor's stripes or windows and would only be stretched into a flat descriptor, so it
is refused, naming the file, its size and the smallest size the descriptor accepts
(``warca_jax.datasets.to_dataset`` can skip such images instead).

With ``cache_dir``, the features are cached as ``warca_jax.features.cache`` describes: an
entry is used only for the exact image bytes, descriptor, options and code version it was
computed from, and its array's checksum is verified on every read; any other entry is
recomputed with one warning naming the file and the reason.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import numpy as np

from warca_jax.features import feature_cache, image_files
from warca_jax.features.color_lbp import color_lbp, color_lbp_dim, color_lbp_min_size
from warca_jax.features.gog import COLOURS, gog, gog_dim, gog_min_size
from warca_jax.features.lomo import lomo, lomo_dim, lomo_min_size
from warca_jax.io import progress_report


class Descriptor(NamedTuple):
    """A jitted descriptor ``fn: [n, H, W, 3] -> [n, D]``, ``dim_at(H, W) -> D``,
    ``min_size``, the smallest image (height, width) it describes, and ``parts_at(H, W)``,
    the lengths of the parts it concatenates (None: one part; ``feature_norm`` normalises
    the parts one by one)."""

    fn: Callable[[jax.Array], jax.Array]
    dim_at: Callable[[int, int], int]
    min_size: tuple[int, int] = (1, 1)
    parts_at: Callable[[int, int], tuple[int, ...]] | None = None

    def dim(self, height: int = 128, width: int = 48) -> int:
        return self.dim_at(height, width)

    def parts(self, height: int = 128, width: int = 48) -> tuple[int, ...]:
        if self.parts_at is None:
            return (self.dim(height, width),)
        return tuple(self.parts_at(height, width))


DESCRIPTORS = {  # dims at 128 x 48; the smallest images: 6 x 5 and 11 x 11
    "color_lbp": Descriptor(color_lbp, lambda h, w: color_lbp_dim(), color_lbp_min_size()),
    "lomo": Descriptor(lomo, lambda h, w: lomo_dim(height=h, width=w), lomo_min_size()),
    # LOMO with the original's Retinex (``retinex="liao"``) before its colour histograms
    "lomo_retinex": Descriptor(
        functools.partial(lomo, retinex="liao"),
        lambda h, w: lomo_dim(height=h, width=w),
        lomo_min_size(),
    ),
    # the project's earlier readings of that Retinex, kept to compare the readings
    **{
        f"lomo_{r}": Descriptor(
            functools.partial(lomo, retinex=r),
            lambda h, w: lomo_dim(height=h, width=w),
            lomo_min_size(),
        )
        for r in ("msrcr", "msrcp")
    },
    # GOG: "gog" fuses the four colour spaces (27,622-d), "gog_rgb" etc. take one (7,567)
    "gog": Descriptor(
        gog,
        lambda h, w: gog_dim(),
        gog_min_size(),
        lambda h, w: tuple(gog_dim(colour=c) for c in COLOURS),
    ),
    **{
        f"gog_{c}": Descriptor(
            functools.partial(gog, colour=c), lambda h, w, c=c: gog_dim(colour=c), gog_min_size()
        )
        for c in COLOURS
    },
}


def get_descriptor(name: str) -> Descriptor:
    if name not in DESCRIPTORS:
        raise ValueError(f"unknown descriptor {name!r}; expected one of {sorted(DESCRIPTORS)}")
    return DESCRIPTORS[name]


def check_image_sizes(paths: Sequence[str], descriptor: str) -> None:
    """A ValueError naming the images below the descriptor's ``min_size`` (their sizes and
    the smallest size it accepts); checked from the files' headers, before any work."""
    min_h, min_w = get_descriptor(descriptor).min_size
    small = image_files.too_small(paths, (min_h, min_w))
    if small:
        shown = ", ".join(f"{p} ({h} x {w})" for _, p, (h, w) in small[:3])
        more = f" and {len(small) - 3} more" if len(small) > 3 else ""
        raise ValueError(
            f"{len(small)} of {len(paths)} images are too small for descriptor "
            f"{descriptor!r}, which needs at least {min_h} x {min_w} pixels (height x "
            f"width): {shown}{more}; remove them, or skip them with "
            "data.skip_small_images=True"
        )


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
      cache_dir: directory of the feature cache (``warca_jax.features.cache``); None
        disables it.
      progress: show a tqdm progress bar (else a heartbeat line in the log, ``progress``).

    Returns:
      [n, D] float32 features, row i for paths[i].

    Raises:
      ValueError: unknown descriptor, batch size below 1 or an image smaller than the
        descriptor's ``min_size`` (all before any work), unreadable image or non-finite
        features.
      FileNotFoundError: missing files, named, before any work is done.
    """
    desc = get_descriptor(descriptor)
    batch_size = check_batch_size(batch_size)
    paths = image_files.check_paths(paths)
    n, dim = len(paths), desc.dim(height, width)
    entry = None
    if cache_dir is not None:
        options = feature_cache.parameters(desc.fn)
        entry = feature_cache.Entry(
            cache_dir, paths, descriptor=descriptor, options=options, height=height, width=width
        )
        cached = entry.read((n, dim))
        if cached is not None:
            return cached
    check_image_sizes(paths, descriptor)
    if entry is not None:
        entry.take_stamps()

    out = np.empty((n, dim), np.float32)
    size = max(1, min(batch_size, n))  # n may be 0
    with progress_report.bar(n, f"{descriptor} features", show=progress, unit="images") as bar:
        for start in range(0, n, size):
            batch = image_files.load_images(paths[start : start + size], height=height, width=width)
            out[start : start + len(batch)] = _run_batch(desc, batch, size)
            _check_finite(out[start : start + len(batch)], descriptor, start)
            bar.update(len(batch))
    if entry is not None:
        entry.write(out)
    return out
