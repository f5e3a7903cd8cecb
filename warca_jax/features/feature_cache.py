"""The on-disk feature cache: an entry is used only for the exact inputs it was computed from.

An entry is two files in ``cache_dir``: ``<descriptor>_<key16>.npy`` (the [n, D] float32
features) and ``<descriptor>_<key16>.json`` (what they were computed from). The key is a
sha256 over the request: the descriptor's name, its keyword defaults, the image size it
describes (height x width), the descriptor's code version (``CODE_VERSIONS``), the version
of the image reading (``images.READ_VERSION``: entries of images read before they were
turned upright by their EXIF orientation are for other inputs) and the absolute paths of
the images in order. The JSON records the full key, the array's shape,
dtype and checksum (``array_checksum``), and two digests of the images:

* ``stamps``: a sha256 over every image's size, mtime, ctime and inode (``os.stat``).
  Writing to a file changes its mtime and ctime, and a user cannot set a ctime back
  (``os.utime`` sets it to now), so equal stamps mean the same bytes;
* ``content``: a sha256 over every image's bytes, read only when the stamps differ (the
  files were copied, moved back, touched or rewritten): equal contents keep the entry
  (and its stamps are refreshed), other contents make it stale.

Reading an entry (``read``) stats every image and checks the array's checksum; it never
hashes the images' bytes while their stamps hold (the cost of both:
docs/runs.md#the-feature-cache-and-images-too-small-to-describe). An entry whose JSON is
for other inputs, whose images changed, or whose array is damaged, truncated, cut or
replaced (another array of the same shape, its rows permuted, zeros) is not used: ``read``
logs ONE warning naming the file and the reason, and the caller recomputes and rewrites
it. A missing entry is a plain miss.

Stamps taken within ``RACY_NS`` of the write are not trusted (as git does with its index):
on a file system with coarse timestamps, a file rewritten in the same tick with the same
size would keep its stamp, so such an entry hashes the images' bytes on its next read.

Files are written under a temporary name and moved into place (``workdir.atomic_file``:
a link planted at an entry's name is replaced, never written through), the array before
its JSON; the JSON's checksum binds the two, so a run killed between the
two writes leaves an entry that the next read recomputes, never a wrong one.

``CODE_VERSIONS`` is bumped by hand when a descriptor's output changes for the same
options (a fix, a new default computed differently): entries of the old code are then
for other inputs. Options are part of the key through the keyword defaults.
"""

from __future__ import annotations

import errno
import hashlib
import inspect
import json
import os
import time
from collections.abc import Callable, Sequence

import numpy as np
from absl import logging

from warca_jax.features import image_files
from warca_jax.io import bounded_reads, reads, run_files, writes

# A cache folder the run may read but not write (shared, or on a read-only mount).
_READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)

FORMAT = 2  # of the entry's JSON; entries of another format are for other inputs
# The code version of each descriptor: bump by hand when its output changes.
CODE_VERSIONS = {"color_lbp": 1, "lomo": 2}  # lomo 2: the retinex option "liao"
CODE_VERSIONS |= {name: 1 for name in ("gog", "gog_rgb", "gog_lab", "gog_hsv", "gog_nrng")}
CODE_VERSIONS["lomo_retinex"] = CODE_VERSIONS["lomo"]  # LOMO's code, its Retinex "liao"
CODE_VERSIONS |= {f"lomo_{r}": CODE_VERSIONS["lomo"] for r in ("msrcr", "msrcp")}  # the same
RACY_NS = 2 * 10**9  # stamps this close to the write are re-checked by content
_BLOCK = 1024  # 8-byte words per block of the checksum (8 KiB)
_CHUNK = 256  # blocks summed at a time (2 MiB, held in the CPU's cache)
_INT63 = 2**63 - 1  # inode numbers are unsigned 64-bit; their low 63 bits fit an int64


def parameters(fn: Callable) -> dict:
    """The keyword defaults of a descriptor, as strings, for the key."""
    fn = inspect.unwrap(fn)
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: repr(p.default) for p in params if p.default is not inspect.Parameter.empty}


def entry_key(paths: Sequence[str], *, descriptor: str, options: dict, height: int, width: int):
    """sha256 hex digest of a request: descriptor, options, size, code and image-reading
    versions, paths."""
    head = {
        "descriptor": descriptor,
        "parameters": options,
        "height": height,
        "width": width,
        "code_version": CODE_VERSIONS.get(descriptor, 0),
        "image_reading": image_files.READ_VERSION,
        "format": FORMAT,
    }
    h = hashlib.sha256(json.dumps(head, sort_keys=True).encode())
    for p in paths:
        h.update(b"\n" + os.path.abspath(p).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def array_checksum(a: np.ndarray) -> str:
    """A checksum of an array's dtype, shape and bytes, at about the cost of one pass.

    The bytes, as 8-byte words in blocks of ``_BLOCK``, give each block's sum and the sum
    of each position over the blocks (mod 2^64); the sha256 of both (and of the bytes left
    over) is the checksum. A changed word changes its block's and its position's sums;
    moved rows change the order of the block sums; so truncation, zeros, another array
    and permuted rows or columns all give another checksum. It guards against damage and
    mix-ups, not against a forgery built to match.
    """
    a = np.ascontiguousarray(a)
    raw = a.reshape(-1).view(np.uint8)
    blocks = raw.size // (8 * _BLOCK)
    words = raw[: blocks * 8 * _BLOCK].view(np.uint64).reshape(blocks, _BLOCK)
    block_sums = np.empty(blocks, np.uint64)
    position_sums = np.zeros(_BLOCK, np.uint64)
    for start in range(0, blocks, _CHUNK):
        chunk = words[start : start + _CHUNK]
        np.add.reduce(chunk, axis=1, out=block_sums[start : start + _CHUNK])
        position_sums += np.add.reduce(chunk, axis=0)
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(block_sums.tobytes())
    h.update(position_sums.tobytes())
    h.update(raw[blocks * 8 * _BLOCK :].tobytes())
    return h.hexdigest()


def image_stamps(paths: Sequence[str]) -> tuple[str, int]:
    """(sha256 over every file's size, mtime, ctime and inode; the newest mtime or ctime)."""
    stats = [os.stat(p) for p in paths]
    rows = [(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino & _INT63) for st in stats]
    table = np.array(rows, np.int64).reshape(-1, 4)  # one array: the per-file work is the stat
    return hashlib.sha256(table.tobytes()).hexdigest(), int(table[:, 1:3].max(initial=0))


def image_content(paths: Sequence[str]) -> str:
    """sha256 over the sha256 of every file's bytes, in order."""
    h = hashlib.sha256()
    for p in paths:
        with reads.open_regular(p, what="image file", expected="a regular image file") as f:
            h.update(hashlib.file_digest(f, "sha256").digest())
    return h.hexdigest()


class Entry:
    """One cache entry: ``read`` it, or ``write`` the features computed on a miss.

    Args:
      cache_dir: the cache's folder.
      paths: the image files, in the order of the features' rows.
      descriptor: the descriptor's name.
      options: its keyword defaults (``parameters``).
      height, width: the size the images are resized to before description.
    """

    def __init__(self, cache_dir, paths, *, descriptor, options, height, width):
        self.paths = list(paths)
        self.key = entry_key(
            self.paths, descriptor=descriptor, options=options, height=height, width=width
        )
        base = os.path.join(os.fspath(cache_dir), f"{descriptor}_{self.key[:16]}")
        self.array_path, self.json_path = base + ".npy", base + ".json"
        self.before = None  # the images' stamps before extraction (``take_stamps``)
        self.stamps = None  # what the record says of them

    def read(self, shape: tuple[int, int]) -> np.ndarray | None:
        """The cached features if the entry is valid for these inputs, else None.

        A missing entry is None without a word; any other refusal logs one warning
        naming the file and the reason.
        """
        if not os.path.exists(self.json_path) or not os.path.exists(self.array_path):
            return None
        reason, record = self._check_record(shape)
        if reason is None:
            try:  # a FIFO or device in its place is refused, never opened
                with reads.open_regular(self.array_path, what="the entry's array") as fh:
                    cached = bounded_reads.read_npy(fh, self.array_path)  # sizes checked first
            except reads.NotARegularFileError as e:
                reason = f"is refused ({e})"
            except (ValueError, OSError, EOFError) as e:
                reason = f"is damaged ({e})"
            else:
                if cached.shape != shape or cached.dtype != np.float32:
                    reason = f"holds {cached.dtype} {cached.shape}, expected float32 {shape}"
                elif array_checksum(cached) != record["checksum"]:
                    reason = (
                        "fails its checksum (the array is not the one written: damaged, cut "
                        "or replaced)"
                    )
                else:
                    return cached
        logging.warning("feature cache %s %s; recomputing it", self.array_path, reason)
        return None

    def _check_record(self, shape) -> tuple[str | None, dict | None]:
        """(None, the JSON record) when it is for these inputs, else (the reason, None)."""
        try:
            reads.regular_file(self.json_path, what="its record")
            record = run_files.read_json(self.json_path, what="feature cache record")
        except reads.NotARegularFileError as e:  # a FIFO or device: refused, never opened
            return f"is refused ({e})", None
        except (run_files.DamagedFileError, OSError):
            return f"has a damaged record ({self.json_path} does not parse)", None
        if not isinstance(record, dict) or record.get("key") != self.key:
            return (
                f"is for other inputs (its record {self.json_path} is for another "
                "descriptor, options, code version or image list)"
            ), None
        if record.get("shape") != list(shape) or not isinstance(record.get("checksum"), str):
            return f"has a record {self.json_path} for shape {record.get('shape')}", None
        stamps, newest = image_stamps(self.paths)
        if stamps == record.get("stamps"):
            return None, record
        if image_content(self.paths) != record.get("content"):
            return (
                f"was computed from other image contents (the bytes of some of the "
                f"{len(self.paths)} images changed since)"
            ), None
        if newest < time.time_ns() - RACY_NS:  # same bytes, new stamps (copied, touched)
            try:
                run_files.write_json(self.json_path, {**record, "stamps": stamps})
            except OSError:
                pass  # a read-only cache is still read; its next read hashes again
        return None, record

    def take_stamps(self) -> None:
        """Records the images' stamps and content before extraction reads them."""
        start = time.time_ns()
        self.before, newest = image_stamps(self.paths)
        racy = newest >= start - RACY_NS
        self.stamps = {
            "stamps": None if racy else self.before,
            "content": image_content(self.paths),
        }

    def write(self, features: np.ndarray) -> None:
        """Writes the features and their record (``take_stamps`` first). An image that
        changed during extraction, or a cache folder that may be read but not written
        (permission denied, read-only), costs the cache (logged), not the run; a full disk
        or a size limit is a ``WriteError`` naming the file."""
        if self.before is None or image_stamps(self.paths)[0] != self.before:
            logging.warning(
                "feature cache %s not written: images changed while they were described",
                self.array_path,
            )
            return
        record = {
            "format": FORMAT,
            "key": self.key,
            "shape": list(features.shape),
            "dtype": features.dtype.str,
            "checksum": array_checksum(features),
            **self.stamps,
        }
        try:
            writes.makedirs(os.path.dirname(self.array_path))
            with run_files.atomic_file(self.array_path, "wb") as f:
                np.save(f, features)
            run_files.write_json(self.json_path, record)
        except OSError as e:  # a read-only cache costs the cache, not the features
            if e.errno not in _READ_ONLY:  # a full disk or a size limit: stop, naming it
                raise writes.write_error(self.array_path, e) from e
            logging.warning(
                "feature cache %s not written (%s); continuing uncached", self.array_path, e
            )
