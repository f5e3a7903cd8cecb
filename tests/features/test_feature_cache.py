"""The feature cache (warca_jax/features/feature_cache.py): an entry is used only for the exact
inputs it was computed from, and a damaged or replaced one is recomputed with one warning."""

import logging
import os
import shutil

import numpy as np
import pytest
from PIL import Image

from warca_jax import features
from warca_jax.features import extraction, feature_cache


def _write(folder, n=4, seed=0):
    """n random 32 x 16 BMP images: a BMP's size depends on its shape alone."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        p = os.path.join(folder, f"img{i}.bmp")
        Image.fromarray(rng.integers(0, 256, (32, 16, 3), dtype=np.uint8)).save(p)
        paths.append(p)
    return paths


def _extract(paths, cache=None):
    return features.extract(paths, height=32, width=16, batch_size=4, cache_dir=cache)


@pytest.fixture
def settled(monkeypatch):
    """Stamps are trusted at once (tests write their images right before reading them)."""
    monkeypatch.setattr(feature_cache, "RACY_NS", 0)


def _entry(cache):
    (npy,) = [f for f in os.listdir(cache) if f.endswith(".npy")]
    return os.path.join(cache, npy)


def _cache_warnings(caplog):
    return [r.getMessage() for r in caplog.records if "feature cache" in r.getMessage()]


@pytest.mark.slow
def test_changed_pixels_under_the_same_name_size_and_mtime_are_recomputed(
    tmp_path, counted, settled, caplog
):
    paths = _write(tmp_path / "imgs")
    cache = tmp_path / "cache"
    first = _extract(paths, cache)
    assert len(counted) == 1
    np.testing.assert_array_equal(_extract(paths, cache), first)
    assert len(counted) == 1  # a hit
    st = os.stat(paths[2])
    Image.fromarray(np.full((32, 16, 3), 200, np.uint8)).save(paths[2])
    os.utime(paths[2], ns=(st.st_atime_ns, st.st_mtime_ns))  # the same name, size, mtime
    assert os.path.getsize(paths[2]) == st.st_size
    with caplog.at_level(logging.WARNING):
        again = _extract(paths, cache)
    assert len(counted) == 2
    np.testing.assert_array_equal(again, _extract(paths))  # a clean computation
    assert not np.array_equal(again[2], first[2])
    (msg,) = _cache_warnings(caplog)
    assert _entry(cache) in msg and "other image contents" in msg


def _other_dataset(path, tmp_path):
    other = _write(tmp_path / "other", seed=1)
    np.save(path, _extract(other))


def _truncate(path, _):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 1000)


def _huge_header(path, _):
    """The entry's array replaced by a header declaring 300000 x 300000 float32 values."""
    with open(path, "wb") as f:
        header = {"descr": "<f4", "fortran_order": False, "shape": (300000, 300000)}
        np.lib.format.write_array_header_1_0(f, header)
        f.write(bytes(64))


DAMAGE = {
    "another dataset": _other_dataset,
    "rows permuted": lambda p, _: np.save(p, np.load(p)[[1, 0, 3, 2]]),
    "zeros": lambda p, _: np.save(p, np.zeros_like(np.load(p))),
    "truncated": _truncate,
    "huge header": _huge_header,
    "four values": lambda p, _: np.save(p, np.load(p) + np.eye(4, 2580, 7, np.float32)),
}
REASON = {"truncated": "is damaged", "huge header": "declares a float32 array of shape"}


@pytest.mark.slow
@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_or_replaced_cache_is_recomputed_with_one_warning(
    tmp_path, counted, settled, caplog, damage
):
    paths = _write(tmp_path / "imgs")
    cache = str(tmp_path / "cache")
    clean = _extract(paths, cache)
    DAMAGE[damage](_entry(cache), tmp_path)
    calls = len(counted)
    with caplog.at_level(logging.WARNING):
        again = _extract(paths, cache)
    assert len(counted) == calls + 1  # recomputed
    np.testing.assert_array_equal(again, clean)
    (msg,) = _cache_warnings(caplog)
    assert msg.startswith(f"feature cache {_entry(cache)} ")
    assert REASON.get(damage, "fails its checksum") in msg and "recomputing it" in msg
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # rewritten: the next read is a silent hit
        np.testing.assert_array_equal(_extract(paths, cache), clean)
    assert len(counted) == calls + 1 and not _cache_warnings(caplog)


def test_an_entry_for_other_inputs_is_recomputed(tmp_path, counted, settled, caplog):
    paths = _write(tmp_path / "imgs")
    cache = tmp_path / "cache"
    clean = _extract(paths, cache)
    target = _entry(cache)
    _extract(paths[::-1], tmp_path / "elsewhere")  # another image list's entry...
    for ext in (".npy", ".json"):  # ...copied over this one, record and all
        (src,) = [f for f in os.listdir(tmp_path / "elsewhere") if f.endswith(ext)]
        shutil.copy(tmp_path / "elsewhere" / src, os.path.splitext(target)[0] + ext)
    with caplog.at_level(logging.WARNING):
        np.testing.assert_array_equal(_extract(paths, cache), clean)
    (msg,) = _cache_warnings(caplog)
    assert target in msg and "is for other inputs" in msg


def test_touched_images_are_hashed_once_and_not_recomputed(
    tmp_path, counted, settled, caplog, monkeypatch
):
    paths = _write(tmp_path / "imgs")
    cache = tmp_path / "cache"
    clean = _extract(paths, cache)
    hashed = []
    real = feature_cache.image_content
    monkeypatch.setattr(feature_cache, "image_content", lambda p: hashed.append(1) or real(p))
    _extract(paths, cache)
    assert hashed == []  # valid stamps: no image is read
    os.utime(paths[1])
    shutil.copy2(paths[3], str(tmp_path / "x.bmp"))
    os.replace(str(tmp_path / "x.bmp"), paths[3])  # a copy: a new inode, the same bytes
    with caplog.at_level(logging.WARNING):
        np.testing.assert_array_equal(_extract(paths, cache), clean)
        np.testing.assert_array_equal(_extract(paths, cache), clean)
    assert len(counted) == 1 and hashed == [1] and not _cache_warnings(caplog)


def test_recent_stamps_are_checked_by_content(tmp_path, counted, monkeypatch):
    paths = _write(tmp_path / "imgs")  # written just now: within RACY_NS of the entry
    cache = tmp_path / "cache"
    _extract(paths, cache)
    hashed = []
    real = feature_cache.image_content
    monkeypatch.setattr(feature_cache, "image_content", lambda p: hashed.append(1) or real(p))
    _extract(paths, cache)
    assert hashed == [1] and len(counted) == 1


def test_an_image_changed_during_extraction_is_not_cached(tmp_path, monkeypatch, caplog):
    paths = _write(tmp_path / "imgs")
    real = extraction.DESCRIPTORS["color_lbp"]

    def rewriting(batch):
        Image.fromarray(np.zeros((32, 16, 3), np.uint8)).save(paths[0])
        return real.fn(batch)

    monkeypatch.setitem(extraction.DESCRIPTORS, "color_lbp", real._replace(fn=rewriting))
    with caplog.at_level(logging.WARNING):
        _extract(paths, tmp_path / "cache")
    assert "changed while they were described" in caplog.text
    assert not os.path.exists(tmp_path / "cache") or not os.listdir(tmp_path / "cache")


def test_checksum_sees_moved_rows_columns_and_single_values():
    a = np.random.default_rng(0).random((300, 100), dtype=np.float32)  # 117 KB: 14 blocks
    ref = feature_cache.array_checksum(a)
    assert feature_cache.array_checksum(a.copy()) == ref
    b = a.copy()
    b[[10, 200]] = b[[200, 10]]
    c = a.copy()
    c[:, [3, 4]] = c[:, [4, 3]]
    d = a.copy()
    d.reshape(-1)[-1] += 1  # the bytes after the last whole block
    e = a.copy()
    e[150, 50] = np.nextafter(e[150, 50], 2)
    variants = [b, c, d, e, a[:-1], a.reshape(100, 300), np.zeros_like(a), a.astype(np.float64)]
    sums = {feature_cache.array_checksum(x) for x in variants}
    assert ref not in sums and len(sums) == len(variants)


@pytest.mark.parametrize(
    "new_version",
    [
        pytest.param(
            lambda monkeypatch: monkeypatch.setitem(feature_cache.CODE_VERSIONS, "color_lbp", 99),
            id="descriptor_code",
        ),
        # features cached before images were turned upright by their EXIF orientation are
        # not reused
        pytest.param(
            lambda monkeypatch: monkeypatch.setattr(feature_cache.image_files, "READ_VERSION", 1),
            id="image_reading",
        ),
    ],
)
def test_the_code_and_image_reading_versions_are_part_of_the_key(
    tmp_path, counted, settled, monkeypatch, new_version
):
    paths = _write(tmp_path / "imgs")
    cache = tmp_path / "cache"
    _extract(paths, cache)
    new_version(monkeypatch)
    _extract(paths, cache)
    assert len(counted) == 2 and len(os.listdir(cache)) == 4
