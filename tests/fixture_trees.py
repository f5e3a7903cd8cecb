"""Small fixture trees in each re-id dataset's published layout, for the loaders' tests.

Every writer takes a root folder, writes a few tiny real images (8 x 4 pixels) with
real-format names and returns the root. `TREES` lists, per loader name, its writer, the
folder that holds its images, a file name the loader must refuse, and the options that
scale the protocol down to the fixture.
"""

from __future__ import annotations

import functools
import io
import os
from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image

# The real ORL faces shipped in the repository's data/ (see data/README.md).
ORL = Path(__file__).resolve().parents[1] / "data" / "orl_faces"


def orl_paths(people: int, shots: int) -> list[Path]:
    """The real ORL faces 1..``shots`` of people 1..``people``, person by person."""
    return [ORL / f"s{p}/{i}.pgm" for p in range(1, people + 1) for i in range(1, shots + 1)]


def assert_same_splits(a, b):
    """Two sequences of `dataset_arrays.Split`s hold the same indices."""
    assert len(a) == len(b)
    for sa, sb in zip(a, b, strict=True):
        for x, y in zip(sa, sb, strict=True):
            np.testing.assert_array_equal(x, y)


_FORMATS = {".jpg": "JPEG", ".png": "PNG", ".bmp": "BMP", ".pgm": "PPM"}


@functools.cache
def _encoded(ext: str) -> bytes:
    """One tiny image in the format of `ext`, encoded once and copied to every file."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(8, 6, 3), dtype=np.uint8)
    image = Image.fromarray(pixels)
    if ext == ".pgm":
        image = image.convert("L")
    buffer = io.BytesIO()
    image.save(buffer, format=_FORMATS[ext])
    return buffer.getvalue()


def random_images(folder, n: int, height: int, width: int) -> list[str]:
    """``img0.png`` ... : n random RGB images of height x width (seed 0), their paths."""
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        path = os.path.join(folder, f"img{i}.png")
        Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def write_images(folder, names) -> None:
    """Writes a tiny image under each name (format from the extension) in `folder`."""
    os.makedirs(folder, exist_ok=True)
    for name in names:
        with open(os.path.join(folder, name), "wb") as f:
            f.write(_encoded(os.path.splitext(name)[1].lower()))


def market1501(root):
    """3 train identities, 4 test identities, junk, distractors and a Thumbs.db."""
    train = [f"{i:04d}_c{c}s1_{100 * c + i:06d}_01.jpg" for i in (2, 4, 6) for c in (1, 2, 3)]
    gallery = [f"{i:04d}_c{c}s2_{100 * c + i:06d}_02.jpg" for i in (1, 3, 5, 7) for c in (2, 3)]
    gallery += ["-1_c1s1_000401_03.jpg", "-1_c2s1_000402_01.jpg", "0000_c3s1_000151_01.jpg"]
    query = [f"{i:04d}_c1s3_{i:06d}_00.jpg" for i in (1, 3, 5, 7)]
    write_images(os.path.join(root, "bounding_box_train"), train)
    write_images(os.path.join(root, "bounding_box_test"), gallery)
    write_images(os.path.join(root, "query"), query)
    with open(os.path.join(root, "bounding_box_test", "Thumbs.db"), "wb") as f:
        f.write(b"not an image")
    return root


def cuhk01(root, *, num_ids=8):
    """`num_ids` identities x 4 images (001-002 camera A, 003-004 camera B)."""
    names = [f"{i:04d}{k:03d}.png" for i in range(1, num_ids + 1) for k in range(1, 5)]
    write_images(os.path.join(root, "campus"), names)
    return root


def viper(root, *, num_ids=8):
    """One image per identity in cam_a/ and cam_b/, identity 999 in cam_a only."""
    ids = [3 * i for i in range(num_ids)]
    write_images(os.path.join(root, "cam_a"), [f"{i:03d}_0.bmp" for i in ids] + ["999_0.bmp"])
    write_images(os.path.join(root, "cam_b"), [f"{i:03d}_90.bmp" for i in ids])
    return root


def prid450s(root, *, num_ids=8):
    """img_NNNN.png in cam_a/ and cam_b/ with their man_*.png masks beside them."""
    for cam in ("cam_a", "cam_b"):
        names = [f"img_{i:04d}.png" for i in range(1, num_ids + 1)]
        write_images(os.path.join(root, cam), names + ["man_" + n for n in names])
    return root


def caviar(root):
    """5 identities in both cameras (3 + 2 images), 2 in camera 0 only (4 images)."""
    names = [f"{i:04d}{k:03d}.jpg" for i in range(1, 6) for k in (1, 2, 3, 11, 12)]
    names += [f"{i:04d}{k:03d}.jpg" for i in (6, 7) for k in (1, 2, 3, 4)]
    write_images(root, names)
    return root


def threedpes(root):
    """6 identities with 2-4 images over 1-2 views, identity 9 with one image."""
    names = [
        f"{i:03d}_{1 + k % 2}_FRAME_{10 * k}_RGB.bmp" for i in range(1, 7) for k in range(2 + i % 3)
    ]
    write_images(os.path.join(root, "RGB"), names + ["009_1_FRAME_5_RGB.bmp"])
    return root


def ilids(root):
    """6 identities with 2-4 images, identity 9 with one."""
    names = [f"{i:04d}{k:03d}.jpg" for i in range(1, 7) for k in range(1, 3 + i % 3)]
    write_images(root, names + ["0009001.jpg"])
    return root


def opereid(root):
    """6 identities seen by 2-3 of 6 cameras, identity 9 by camera 4 only."""
    names = [
        f"{i:04d}_c{1 + (i + k) % 6}_{k:06d}.png" for i in range(1, 7) for k in range(2 + i % 2)
    ]
    names += [f"0009_c4_{k:06d}.png" for k in range(3)]
    write_images(root, names)
    return root


def orl(root, *, num_people=6):
    """s1/ ... sN/ with 1.pgm ... 10.pgm and a README beside them."""
    for p in range(1, num_people + 1):
        write_images(os.path.join(root, f"s{p}"), [f"{k}.pgm" for k in range(1, 11)])
    with open(os.path.join(root, "README"), "w") as f:
        f.write("ORL faces\n")
    return root


def cuhk03_new_mat(path, *, num_ids=6, images_per_cam=2):
    """A small .mat in the published new-protocol format (1-based indices).

    Identities 1-3 train, 4-`num_ids` test: the first image of camera 1 is the query, the
    camera-2 images the gallery. Returns (file names, labels, cams).
    """
    names, labels, cams = [], [], []
    for i in range(1, num_ids + 1):
        for cam in (1, 2):
            for k in range(images_per_cam):
                names.append(f"1_{i:03d}_{cam}_{(cam - 1) * 5 + k + 1:02d}.png")
                labels.append(i)
                cams.append(cam)
    labels, cams = np.array(labels), np.array(cams)
    first = np.r_[True, (labels[1:] != labels[:-1]) | (cams[1:] != cams[:-1])]
    train = np.flatnonzero(labels <= 3)
    query = np.flatnonzero((labels > 3) & (cams == 1) & first)
    gallery = np.flatnonzero((labels > 3) & (cams == 2))
    filelist = np.empty((len(names), 1), dtype=object)
    for j, n in enumerate(names):
        filelist[j, 0] = np.array([n])
    scipy.io.savemat(
        path,
        {
            "filelist": filelist,
            "labels": labels[:, None].astype(np.uint16),
            "camId": cams[:, None].astype(np.uint8),
            "train_idx": (train + 1)[:, None].astype(np.uint16),
            "query_idx": (query + 1)[:, None].astype(np.uint16),
            "gallery_idx": (gallery + 1)[:, None].astype(np.uint16),
        },
    )
    return names, labels, cams


def cuhk03_classic_mat(path, *, ids_per_pair=(3, 2, 2, 2, 3), test_sets=3):
    """A small `cuhk-03.mat` in MATLAB v7.3 (HDF5) form, as the published one is stored.

    `labeled` and `detected` hold 5 camera-pair cells [ids x 10] of references to
    H x W x 3 uint8 images (HDF5 keeps MATLAB's column-major order: [3, W, H]); image 10 of
    every identity and image 4 of identity 1 of each pair are empty cells. `testsets`
    holds `test_sets` cells of [2 x 2] (pair, identity), 1-based. Returns the images as
    a dict {(variant, pair, identity, index): H x W x 3 array}, all 1-based.
    """
    import h5py

    images = {}
    with h5py.File(path, "w", userblock_size=512) as f:
        refs = f.create_group("#refs#")
        ref_dtype = h5py.special_dtype(ref=h5py.Reference)
        counter = iter(range(10**6))

        def store(array):
            ds = refs.create_dataset(f"r{next(counter)}", data=array)
            return ds.ref

        empty = np.zeros(2, dtype=np.uint64)
        for v, variant in enumerate(("labeled", "detected")):
            pair_refs = np.empty((1, 5), dtype=object)
            for p, n_ids in enumerate(ids_per_pair, start=1):
                cell = np.empty((10, n_ids), dtype=object)  # MATLAB [ids x 10], transposed
                for i in range(1, n_ids + 1):
                    for k in range(1, 11):
                        if k == 10 or (i == 1 and k == 4):
                            cell[k - 1, i - 1] = store(empty)
                            continue
                        h, w = 6 + k % 3, 4
                        img = (np.arange(h * w * 3).reshape(h, w, 3) + 7 * p + i + 50 * v) % 256
                        img = img.astype(np.uint8)
                        images[(variant, p, i, k)] = img
                        cell[k - 1, i - 1] = store(img.T)
                pair_refs[0, p - 1] = f.create_dataset(
                    f"{variant}_{p}", data=cell, dtype=ref_dtype
                ).ref
            f.create_dataset(variant, data=pair_refs, dtype=ref_dtype)
        sets = np.empty((1, test_sets), dtype=object)
        for s in range(test_sets):
            pairs = np.array([[1 + s, 1], [5, 1 + s % 3]], dtype=np.float64)  # [ids x 2]
            sets[0, s] = store(pairs.T)
        f.create_dataset("testsets", data=sets, dtype=ref_dtype)
    matlab73_header(path)
    return images


def matlab73_header(path) -> None:
    """Writes MATLAB's 128-byte v7.3 header into the 512-byte userblock of an HDF5 file."""
    text = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2018 HDF5"
    header = text.ljust(116, b" ") + b"\x00" * 8 + b"\x00\x02" + b"IM"
    with open(path, "r+b") as f:
        f.write(header)


# name -> (writer, folder of its images, a name it must refuse, options for the fixture).
TREES = {
    "market1501": (market1501, "query", "0001_c1_000451.jpg", {}),
    "cuhk01": (cuhk01, "campus", "0001_001.png", {"num_test_ids": 4}),
    "viper": (viper, "cam_b", "045_a.bmp", {"num_test_ids": 4}),
    "prid450s": (prid450s, "cam_a", "img0001.png", {"num_test_ids": 4}),
    "caviar": (caviar, "", "001001.jpg", {"num_test_ids": 3}),
    "3dpes": (threedpes, "RGB", "person1_cam2.bmp", {"num_test_ids": 3}),
    "ilids": (ilids, "", "0001_001.jpg", {"num_test_ids": 3}),
    "opereid": (opereid, "", "0001-c2-000001.png", {"num_test_ids": 3}),
    "orl": (orl, "s2", "face1.pgm", {"num_test_ids": 3}),
}
