"""Loading image files into a uint8 batch for the descriptors.

Every image is converted to RGB (greyscale such as ORL's ``.pgm`` files is
replicated into three channels; palette images are expanded; the alpha channel of
RGBA images is dropped) and resized with bilinear resampling to ``height x width``,
128 x 48 by the person re-identification convention.

Only regular files are read (``warca_jax.reads``): a path that is, once its links are
resolved, a FIFO, a device (a link to ``/dev/zero``), a socket or a folder is refused
naming it before anything is opened; a FIFO would block the run and a device read
forever.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from PIL import Image, UnidentifiedImageError

from warca_jax import reads

WHAT = "image file"
EXPECTED = "a regular image file"


def check_paths(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Returns the paths as strings once every one is a regular file.

    Every path is checked before any image is decoded, so a long extraction does
    not fail half-way through on a typo.

    Raises:
      FileNotFoundError: naming the paths where nothing is, or a link to nothing.
      NotARegularFileError: naming a path that is a FIFO, device, socket or folder (a
        link resolved), or a link that loops (a ValueError).
    """
    paths = [os.fspath(p) for p in paths]
    missing = [p for p in paths if not os.path.lexists(p)]
    if missing:
        shown = ", ".join(repr(p) for p in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise FileNotFoundError(
            f"{len(missing)} of {len(paths)} image files do not exist (expected readable "
            f"image files): {shown}{more}"
        )
    for p in paths:
        reads.regular_file(p, what=WHAT, expected=EXPECTED)
    return paths


def load_image(path: str | os.PathLike, *, height: int = 128, width: int = 48) -> np.ndarray:
    """One image file as [height, width, 3] uint8 RGB.

    Raises:
      FileNotFoundError: the file does not exist.
      NotARegularFileError: the path is not a regular file (``reads.open_regular``).
      ValueError: the file exists but Pillow cannot decode it as an image.
    """
    path = os.fspath(path)
    try:
        with reads.open_regular(path, what=WHAT, expected=EXPECTED) as f, Image.open(f) as img:
            img.load()
            if img.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
                # 16-bit or float greyscale: scale to 8 bits before replicating.
                arr = np.asarray(img, np.float64)
                top = max(float(arr.max()), 1.0)
                img = Image.fromarray(np.round(255.0 * arr / top).astype(np.uint8))
            rgb = img.convert("RGB")
            if rgb.size != (width, height):
                rgb = rgb.resize((width, height), resample=Image.Resampling.BILINEAR)
            return np.asarray(rgb, np.uint8)
    except FileNotFoundError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise _unreadable(path, err) from err


def _unreadable(path: str, err: Exception) -> ValueError:
    return ValueError(
        f"cannot read {path!r} as an image (expected a file Pillow can decode, "
        f"e.g. .png, .jpg, .bmp, .pgm): {err}"
    )


def image_size(path: str | os.PathLike) -> tuple[int, int]:
    """(height, width) of an image file, from its header (the pixels are not decoded).

    Raises:
      ValueError: the file is not an image Pillow reads, naming it.
    """
    path = os.fspath(path)
    try:
        with reads.open_regular(path, what=WHAT, expected=EXPECTED) as f, Image.open(f) as img:
            width, height = img.size
    except FileNotFoundError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise _unreadable(path, err) from err
    return height, width


def too_small(
    paths: Sequence[str | os.PathLike], min_size: tuple[int, int]
) -> list[tuple[int, str, tuple[int, int]]]:
    """(index, path, (height, width)) of every image below ``min_size`` in either side."""
    out = []
    for i, p in enumerate(paths):
        size = image_size(p)
        if size[0] < min_size[0] or size[1] < min_size[1]:
            out.append((i, os.fspath(p), size))
    return out


def load_images(
    paths: Sequence[str | os.PathLike], *, height: int = 128, width: int = 48
) -> np.ndarray:
    """Loads image files as one uint8 batch.

    Args:
      paths: n image files in any format Pillow reads.
      height: output height in pixels.
      width: output width in pixels.

    Returns:
      [n, height, width, 3] uint8 RGB.

    Raises:
      FileNotFoundError: naming the missing files, before any file is decoded.
      ValueError: naming a file that exists but is not a readable image.
    """
    if height < 1 or width < 1:
        raise ValueError(f"height and width must be positive, got {height} x {width}")
    paths = check_paths(paths)
    out = np.empty((len(paths), height, width, 3), np.uint8)
    for i, p in enumerate(paths):
        out[i] = load_image(p, height=height, width=width)
    return out
