"""Loading image files into a uint8 batch for the descriptors.

Every image is converted to RGB (greyscale such as ORL's ``.pgm`` files is
replicated into three channels; palette images are expanded; the alpha channel of
RGBA images is dropped) and resized with bilinear resampling to ``height x width``,
128 x 48 by the person re-identification convention.

Only regular files are read (``warca_jax.io.reads``): a path that is, once its links are
resolved, a FIFO, a device (a link to ``/dev/zero``), a socket or a folder is refused
naming it before anything is opened; a FIFO would block the run and a device read
forever.

An image is turned upright by its EXIF orientation (``PIL.ImageOps.exif_transpose``): a
camera's JPEG stored sideways with the tag that says so is described as it is seen. An
image without the tag is read exactly as before. ``READ_VERSION`` numbers this reading;
the feature cache's key holds it, so features cached by an earlier reading are recomputed.

An image whose header declares more than ``max_image_pixels()`` pixels (Pillow's default
limit, 89,478,485, unless the environment variable ``WARCA_JAX_MAX_IMAGE_PIXELS`` says
otherwise) is refused before it is decoded, naming the file, its size and the limit: a
few kilobytes of PNG can declare 20,000 x 20,000 pixels, gigabytes once decoded. Pillow's
own checks while decoding (a GIF frame, a TIFF tile) use the same limit and are refused
the same way, never as Pillow's warning or traceback. Pillow's global
``Image.MAX_IMAGE_PIXELS`` is set only for the duration of a read, under a lock, and
restored after it.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
import warnings
from collections.abc import Iterator, Sequence

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from warca_jax.io import bounded_reads, reads

WHAT = "image file"
EXPECTED = "a regular image file"

MAX_IMAGE_PIXELS_ENV = "WARCA_JAX_MAX_IMAGE_PIXELS"
DEFAULT_MAX_IMAGE_PIXELS = 1024 * 1024 * 1024 // 4 // 3  # Pillow's default limit
READ_VERSION = 2  # 2: images turned upright by their EXIF orientation
_ORIENTATION = 0x0112  # the EXIF tag
_SWAPPED = (5, 6, 7, 8)  # orientations whose upright image swaps height and width
_PILLOW_LIMIT = threading.RLock()  # held while Image.MAX_IMAGE_PIXELS is ours
_EXIF_ERRORS = (OSError, ValueError, SyntaxError, struct.error, KeyError, IndexError, TypeError)
_BOMB = (Image.DecompressionBombError, Image.DecompressionBombWarning)


class ImageTooLargeError(ValueError):
    """An image declares more pixels than ``max_image_pixels()``; refused undecoded."""


def max_image_pixels() -> int:
    """The most pixels an image may have: ``WARCA_JAX_MAX_IMAGE_PIXELS`` when set, else
    Pillow's default limit.

    Raises:
      bounded_reads.EnvironmentSettingError: the environment variable is not a positive
        whole number, naming it.
    """
    text = os.environ.get(MAX_IMAGE_PIXELS_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_IMAGE_PIXELS
    if not text.replace("_", "").isdigit() or int(text.replace("_", "")) < 1:
        raise bounded_reads.EnvironmentSettingError(
            f"{MAX_IMAGE_PIXELS_ENV}={text!r}: expected a positive whole number of pixels, "
            f"e.g. {4 * DEFAULT_MAX_IMAGE_PIXELS}"
        )
    return int(text.replace("_", ""))


def _too_large(path: str, size: str, pixels: int, limit: int) -> ImageTooLargeError:
    return ImageTooLargeError(
        f"{path}: the image {size} ({pixels} pixels), more than the {limit} allowed (a "
        "decompression bomb, or a picture far larger than a re-id crop); refused before "
        f"decoding it (if the file is trusted, set {MAX_IMAGE_PIXELS_ENV} to a larger "
        "number of pixels)"
    )


@contextlib.contextmanager
def _pillow_limit(limit: int | None) -> Iterator[None]:
    """Pillow's pixel check at ``limit`` (None: off) for the duration, its warning raised
    as an error; ``Image.MAX_IMAGE_PIXELS`` and the warning filters restored after."""
    with _PILLOW_LIMIT, warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        saved = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = limit
        try:
            yield
        finally:
            Image.MAX_IMAGE_PIXELS = saved


@contextlib.contextmanager
def _opened(path: str) -> Iterator[Image.Image]:
    """The image at ``path``, its header read (not decoded), refused with one line naming
    it when it declares more than ``max_image_pixels()``; decoding it inside the ``with``
    runs Pillow's own checks at that limit (a refusal is an ``ImageTooLargeError``)."""
    limit = max_image_pixels()
    with reads.open_regular(path, what=WHAT, expected=EXPECTED) as f:
        with _pillow_limit(None):  # the header only: its size is checked here, below
            img = Image.open(f)
        with img:
            width, height = img.size
            if width * height > limit:
                raise _too_large(path, f"is {width} x {height}", width * height, limit)
            try:
                with _pillow_limit(limit):
                    yield img
            except _BOMB as e:  # a frame or tile beyond the limit, found while decoding
                found = re.search(r"\((\d+) pixels\)", str(e))
                pixels = int(found.group(1)) if found else limit + 1
                raise _too_large(path, "holds a frame or tile", pixels, limit) from None


def _orientation(img: Image.Image, *, header_only: bool = False) -> int:
    """The image's EXIF orientation (1, upright, when it has none or it does not read);
    ``header_only`` reads only what ``Image.open`` found (a PNG is not decoded for it)."""
    try:
        exif = Image.Image.getexif(img) if header_only else img.getexif()
        value = int(exif.get(_ORIENTATION, 1))
    except _EXIF_ERRORS:  # an EXIF block that does not parse: read as before, unturned
        return 1
    return value if 1 <= value <= 8 else 1


@contextlib.contextmanager
def open_image(path: str | os.PathLike) -> Iterator[Image.Image]:
    """The decoded image at ``path``, upright by its EXIF orientation (module docstring).

    Raises:
      FileNotFoundError: the file does not exist.
      ImageTooLargeError: it declares more than ``max_image_pixels()`` (before decoding).
      ValueError: Pillow cannot decode it as an image, naming it.
    """
    path = os.fspath(path)
    try:
        with _opened(path) as img:
            img.load()
            yield ImageOps.exif_transpose(img) if _orientation(img) != 1 else img
    except (FileNotFoundError, ImageTooLargeError):
        raise
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise _unreadable(path, err) from err


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
      ImageTooLargeError: it declares more than ``max_image_pixels()`` (before decoding).
      ValueError: the file exists but Pillow cannot decode it as an image.
    """
    with open_image(path) as img:
        if img.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
            # 16-bit or float greyscale: scale to 8 bits before replicating.
            arr = np.asarray(img, np.float64)
            top = max(float(arr.max()), 1.0)
            img = Image.fromarray(np.round(255.0 * arr / top).astype(np.uint8))
        rgb = img.convert("RGB")
        if rgb.size != (width, height):
            rgb = rgb.resize((width, height), resample=Image.Resampling.BILINEAR)
        return np.asarray(rgb, np.uint8)


def _unreadable(path: str, err: Exception) -> ValueError:
    return ValueError(
        f"cannot read {path!r} as an image (expected a file Pillow can decode, "
        f"e.g. .png, .jpg, .bmp, .pgm): {err}"
    )


def image_size(path: str | os.PathLike) -> tuple[int, int]:
    """(height, width) of an image file once upright, from its header (the pixels are not
    decoded): its EXIF orientation found there swaps the two where it turns the image.

    Raises:
      ImageTooLargeError: it declares more than ``max_image_pixels()``, naming it.
      ValueError: the file is not an image Pillow reads, naming it.
    """
    path = os.fspath(path)
    try:
        with _opened(path) as img:
            width, height = img.size
            turned = _orientation(img, header_only=True) in _SWAPPED
    except (FileNotFoundError, ImageTooLargeError):
        raise
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise _unreadable(path, err) from err
    return (width, height) if turned else (height, width)


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
