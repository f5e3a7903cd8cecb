"""How image files are read for the descriptors (warca_jax.features.image_files): upright by
their EXIF orientation, exactly as before without one, and an image declaring more pixels
than the limit refused before it is decoded, in one line naming the file."""

from __future__ import annotations

import os
import struct
import warnings
import zlib
from pathlib import Path

import fixture_trees
import numpy as np
import pytest
from PIL import Image, ImageFile

from warca_jax import datasets
from warca_jax.features import image_files

ENV = image_files.MAX_IMAGE_PIXELS_ENV


def _person(height=64, width=32) -> np.ndarray:
    """An upright crop: red head and torso, blue legs, a green left arm."""
    a = np.zeros((height, width, 3), np.uint8)
    a[: height // 2] = (200, 30, 30)
    a[height // 2 :] = (30, 30, 200)
    a[8:24, : width // 4] = (30, 200, 30)
    return a


def _jpeg(path, pixels, orientation=None) -> str:
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation
    Image.fromarray(pixels).save(path, quality=100, subsampling=0, exif=exif)
    return str(path)


def test_a_jpeg_stored_turned_with_exif_orientation_8_is_read_upright(tmp_path):
    upright = _person()
    stored = np.rot90(upright, k=-1)  # turned clockwise: orientation 8 turns it back
    turned = _jpeg(tmp_path / "turned.jpg", stored, orientation=8)
    plain = _jpeg(tmp_path / "upright.jpg", upright)
    assert image_files.image_size(turned) == (64, 32)  # height x width once upright
    got, want = image_files.load_images([turned, plain], height=64, width=32).astype(int)
    assert np.abs(got - want).mean() < 2  # the same picture, JPEG's rounding apart
    sideways = _jpeg(tmp_path / "sideways.jpg", stored)  # the same pixels, no tag
    (unturned,) = image_files.load_images([sideways], height=64, width=32).astype(int)
    assert np.abs(unturned - want).mean() > 40


@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_exif_orientation_gives_the_upright_image(tmp_path, orientation):
    upright = _person(48, 16)
    undo = {  # the stored pixels of each orientation (EXIF 2.3, tag 274)
        1: lambda a: a,
        2: np.fliplr,
        3: lambda a: np.rot90(a, 2),
        4: np.flipud,
        5: lambda a: np.transpose(a, (1, 0, 2)),
        6: lambda a: np.rot90(a, 1),
        7: lambda a: np.rot90(np.transpose(a, (1, 0, 2)), 2),
        8: lambda a: np.rot90(a, -1),
    }
    path = str(tmp_path / "x.png")
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(np.ascontiguousarray(undo[orientation](upright))).save(path, exif=exif)
    assert image_files.image_size(path) == (48, 16)
    np.testing.assert_array_equal(image_files.load_image(path, height=48, width=16), upright)


def _as_before(path, height, width) -> np.ndarray:
    """The reading before EXIF orientations were applied."""
    with Image.open(path) as img:
        img.load()
        if img.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
            arr = np.asarray(img, np.float64)
            top = max(float(arr.max()), 1.0)
            img = Image.fromarray(np.round(255.0 * arr / top).astype(np.uint8))
        rgb = img.convert("RGB")
        if rgb.size != (width, height):
            rgb = rgb.resize((width, height), resample=Image.Resampling.BILINEAR)
        return np.asarray(rgb, np.uint8)


def test_images_without_an_orientation_are_read_exactly_as_before(tmp_path):
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (37, 19, 3), dtype=np.uint8)
    made = {
        "rgb.png": Image.fromarray(rgb),
        "grey.pgm": Image.fromarray(rgb[..., 0]),
        "palette.png": Image.fromarray(rgb).convert("P"),
        "alpha.png": Image.fromarray(np.dstack([rgb, rgb[..., :1]])),
        "deep.png": Image.fromarray(rng.integers(0, 4000, (37, 19)).astype(np.uint16)),
        "photo.jpg": Image.fromarray(rgb),
        "one.bmp": Image.fromarray(rgb),
    }
    for name, img in made.items():
        path = str(tmp_path / name)
        img.save(path)
        for height, width in ((128, 48), (37, 19)):
            np.testing.assert_array_equal(
                image_files.load_image(path, height=height, width=width),
                _as_before(path, height, width),
                err_msg=name,
            )


def _png_declaring(path, width: int, height: int) -> str:
    """A 1 x 1 PNG whose IHDR says ``width`` x ``height`` (its CRC made right)."""
    Image.new("RGB", (1, 1)).save(path)
    raw = bytearray(path.read_bytes())
    assert raw[12:16] == b"IHDR"
    raw[16:24] = struct.pack(">II", width, height)
    raw[29:33] = struct.pack(">I", zlib.crc32(bytes(raw[12:29])))
    path.write_bytes(bytes(raw))
    return str(path)


@pytest.mark.parametrize("side", [10000, 20000], ids=["pillow-warning-range", "pillow-error-range"])
def test_an_image_declaring_too_many_pixels_in_a_dataset_is_one_line_naming_it(
    tmp_path, monkeypatch, side
):
    monkeypatch.delenv(ENV, raising=False)
    root = fixture_trees.prid450s(str(tmp_path / "prid"))
    bomb = _png_declaring(Path(root, "cam_b", "img_0003.png"), side, side)
    assert os.path.getsize(bomb) < 100
    before = Image.MAX_IMAGE_PIXELS
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(image_files.ImageTooLargeError) as err:
            datasets.read("prid450s", root, num_test_ids=4)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{bomb}: the image is {side} x {side}")
    assert f"({side * side} pixels), more than the 89478485 allowed" in msg
    assert f"set {ENV}" in msg
    assert not [w for w in seen if issubclass(w.category, Image.DecompressionBombWarning)]
    assert Image.MAX_IMAGE_PIXELS == before  # Pillow's limit is left as it was


def test_the_pixel_limit_is_raised_by_its_environment_variable(tmp_path, monkeypatch):
    path = _png_declaring(tmp_path / "big.png", 20000, 20000)
    monkeypatch.setenv(ENV, str(10**9))
    assert image_files.image_size(path) == (20000, 20000)  # the header is read, nothing decoded
    monkeypatch.setenv(ENV, "1000")
    with pytest.raises(image_files.ImageTooLargeError, match="more than the 1000 allowed"):
        image_files.image_size(path)
    monkeypatch.setenv(ENV, "many")
    with pytest.raises(ValueError, match=rf"{ENV}='many': expected a positive whole number"):
        image_files.image_size(path)


def test_pillows_own_checks_while_decoding_use_the_limit_and_name_the_file(tmp_path, monkeypatch):
    path = str(tmp_path / "small.png")
    Image.fromarray(_person(20, 20)).save(path)
    real_load = Image.Image.load

    def load_a_large_tile(img):  # what a TIFF tile or GIF frame larger than its image does
        Image._decompression_bomb_check((40, 40))
        return real_load(img)

    monkeypatch.setattr(Image.Image, "load", load_a_large_tile)
    monkeypatch.setattr(ImageFile.ImageFile, "load", load_a_large_tile)
    monkeypatch.setenv(ENV, "1000")
    with pytest.raises(image_files.ImageTooLargeError) as err:
        image_files.load_image(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: the image holds a frame or tile (1600 pixels)")
    assert "more than the 1000 allowed" in msg
