"""Bounded reads of the files a user or an earlier run hands over: arrays and JSON text.

A file's header says how much memory reading it takes, and a hostile or damaged file can
declare anything: a few kilobytes of ``.npz`` whose header declares a 300000 x 300000
array, a small archive member that inflates to gigabytes, a JSON text nested deeper than
Python's recursion limit. Every such file is read here, its declared sizes checked before
anything is allocated:

* ``.npy`` files and the members of ``.npz`` archives (``load``, ``read_npy``,
  ``NpzArchive``): each array's ``.npy`` header is read from the streamed member
  (``numpy.lib.format``), its declared size (``prod(shape) * itemsize``) compared with
  the memory budget ``max_array_bytes()`` and with what the member holds (a member's
  uncompressed size must be its header plus its data; a compressed member may not
  expand more than ``MAX_EXPANSION`` times, which numpy's deflate never reaches), and
  only then is the data read, in chunks, into an array of the declared size. Python
  objects are never read (``allow_pickle=False`` as before).
  The budget is half of the machine's physical memory; the environment variable
  ``WARCA_JAX_MAX_ARRAY_BYTES`` (a number of bytes, e.g. ``WARCA_JAX_MAX_ARRAY_BYTES=8e9``)
  sets another.
* JSON (``load_json``, ``read_json``): the text is read up to a size limit and its
  nesting depth counted (brackets outside strings) before ``json.loads`` parses it, so a
  deep or huge file is a ``JsonLimitError`` (a ``ValueError``), never a ``RecursionError``
  or a ``MemoryError``.

Every refusal is one line naming the file (and the array), what it declares and the limit.
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile

import numpy as np

MAX_ARRAY_BYTES_ENV = "WARCA_JAX_MAX_ARRAY_BYTES"
MAX_EXPANSION = 1100  # deflate expands at most about 1032 times
MAX_JSON_DEPTH = 32  # the project's JSON nests a handful of levels
MAX_FILE_JSON_BYTES = 64 << 20  # a JSON file of a run: a config, results, training curves
_CHUNK = 1 << 24  # bytes read at a time (16 MiB)
_MIN_BOMB = 1 << 20  # a member this small is read whatever its expansion
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET_STEP = np.zeros(256, np.int8)  # +1 for an opening bracket, -1 for a closing one
_BRACKET_STEP[[ord("["), ord("{")]] = 1
_BRACKET_STEP[[ord("]"), ord("}")]] = -1


class EnvironmentSettingError(ValueError):
    """An environment variable of the project set to a value it cannot use: the setting's
    fault, never the file's (a reader that meets it does not call the file damaged)."""


class ArrayTooLargeError(ValueError):
    """An array file declares more bytes than the memory budget (``max_array_bytes``)."""


class JsonLimitError(ValueError):
    """A JSON text beyond the size or depth a reader accepts, or a number too long."""


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def max_array_bytes() -> int:
    """The most bytes one array read from a file may declare.

    ``WARCA_JAX_MAX_ARRAY_BYTES`` when set (bytes; ``8e9`` and ``8_000_000_000`` both
    read), else half of the physical memory (16 GiB where the system does not say).

    Raises:
      EnvironmentSettingError: the environment variable is not a positive number, naming it.
    """
    text = os.environ.get(MAX_ARRAY_BYTES_ENV, "").strip()
    if text:
        try:
            value = float(text.replace("_", ""))
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 1:
            raise EnvironmentSettingError(
                f"{MAX_ARRAY_BYTES_ENV}={text!r}: expected a positive number of bytes, e.g. 8e9"
            )
        return int(value)
    memory = _physical_memory()
    return memory // 2 if memory else 16 << 30


def _gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB"


class _Counting:
    """A read-only view of a stream that counts the bytes read through it."""

    def __init__(self, stream):
        self.stream, self.count = stream, 0

    def read(self, n: int) -> bytes:
        data = self.stream.read(n)
        self.count += len(data)
        return data


def _read_header(stream, where: str):
    """(shape, fortran_order, dtype) from the ``.npy`` header at ``stream``'s position."""
    try:
        version = np.lib.format.read_magic(stream)
    except ValueError as e:
        raise ValueError(f"{where} is not a .npy array ({e})") from None
    readers = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }
    if version not in readers:
        raise ValueError(f"{where} has .npy format version {version}, expected 1.0 or 2.0")
    try:
        return readers[version](stream)
    except (ValueError, TypeError, SyntaxError) as e:  # a header that is not a numpy one
        raise ValueError(f"{where} has a damaged .npy header ({e})") from None


def read_array(stream, *, where: str, available: int | None, limit: int | None = None):
    """The array at ``stream``'s position (a ``.npy`` header and its data), read bounded.

    Args:
      stream: a binary file object positioned at the ``.npy`` magic string.
      where: the file (and member) for the messages.
      available: the bytes the file or member holds from that position (header included),
        when known; the header and the declared data must fill them exactly.
      limit: the most bytes the array may declare (default ``max_array_bytes()``).

    Raises:
      ArrayTooLargeError: the declared size is over ``limit``.
      ValueError: not a ``.npy`` array, an array of Python objects, a declared size that
        is not what the file holds, or data cut short.
    """
    counted = _Counting(stream)
    shape, fortran, dtype = _read_header(counted, where)
    if any(d < 0 for d in shape):
        raise ValueError(f"{where} declares a negative dimension in its shape {tuple(shape)}")
    if dtype.hasobject:
        raise ValueError(
            f"{where}: Object arrays cannot be loaded when allow_pickle=False (the array "
            "holds Python objects, which are never read)"
        )
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    limit = max_array_bytes() if limit is None else limit
    declared = f"declares a {dtype} array of shape {tuple(shape)} ({nbytes} bytes, {_gib(nbytes)})"
    if nbytes > limit:
        raise ArrayTooLargeError(
            f"{where} {declared}, more than the {limit} bytes ({_gib(limit)}) allowed for one "
            f"array; refused before allocating it (if the file is trusted, set "
            f"{MAX_ARRAY_BYTES_ENV} to a larger number of bytes)"
        )
    header = counted.count
    if available is not None and header + nbytes != available:
        raise ValueError(
            f"{where} {declared} but holds {max(available - header, 0)} bytes of data: it "
            "is damaged, truncated or not written by numpy"
        )
    out = np.empty(count, dtype)
    view = memoryview(out.reshape(-1).view(np.uint8)) if nbytes else memoryview(b"")
    pos = 0
    while pos < nbytes:
        chunk = stream.read(min(_CHUNK, nbytes - pos))
        if not chunk:
            raise ValueError(f"{where} {declared} but is cut short after {pos} bytes of data")
        view[pos : pos + len(chunk)] = chunk
        pos += len(chunk)
    if fortran:
        return out.reshape(shape[::-1]).transpose()
    return out.reshape(shape)


class NpzArchive:
    """The arrays of an open ``.npz`` archive, each read bounded (``read_array``) when
    asked for, as ``numpy.load`` gives them (``files``, ``archive[name]``, ``in``).

    Args:
      fh: the archive, a binary file object (not closed here).
      path: its name, for the messages.
    """

    def __init__(self, fh, path: str):
        self.path = path
        self._zip = zipfile.ZipFile(fh)
        self._members = {}
        for info in self._zip.infolist():
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            self._members.setdefault(name, info)
        self.files = list(self._members)

    def __contains__(self, name) -> bool:
        return name in self._members

    def __getitem__(self, name: str) -> np.ndarray:
        return self.read(name)

    def read(self, name: str, *, limit: int | None = None) -> np.ndarray:
        """Array ``name`` (``limit``: the most bytes it may declare, default the budget).

        Raises:
          KeyError: no such array.
          ArrayTooLargeError, ValueError: as ``read_array``; a compressed member that
            claims to expand more than ``MAX_EXPANSION`` times.
        """
        if name not in self._members:
            raise KeyError(f"{self.path}: no array {name!r} (it has {self.files})")
        info = self._members[name]
        where = f"{self.path}: array {name!r}"
        if info.compress_type != zipfile.ZIP_STORED:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > MAX_EXPANSION and info.file_size > _MIN_BOMB:
                raise ValueError(
                    f"{where} inflates from {info.compress_size} to {info.file_size} bytes "
                    f"({ratio:.0f} times; numpy's compression reaches about 1000): a "
                    "decompression bomb or a damaged archive, refused before inflating it"
                )
        with self._zip.open(info) as stream:
            out = read_array(stream, where=where, available=info.file_size, limit=limit)
            if stream.read(1):  # also makes zipfile check the member's CRC
                raise ValueError(f"{where} holds bytes after its data: it is damaged")
        return out

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load(fh, path: str) -> NpzArchive | np.ndarray:
    """What ``numpy.load(fh, allow_pickle=False)`` gives, every array read bounded.

    An ``.npz`` archive is an ``NpzArchive`` (close it, or use it in a ``with``); a
    ``.npy`` file is its array. Anything else is a ValueError saying it is not a numpy
    file (text, or pickled data, which is never read).
    """
    start = fh.tell()
    magic = fh.read(6)
    fh.seek(start)
    if magic.startswith(_ZIP_MAGIC):
        return NpzArchive(fh, path)
    if magic == np.lib.format.MAGIC_PREFIX:
        try:
            size = os.fstat(fh.fileno()).st_size - start
        except (AttributeError, OSError, ValueError):  # not a file of the file system
            size = None
        return read_array(fh, where=path, available=size)
    raise ValueError(
        f"{path} is not a numpy file (not a .npz archive nor a .npy array: text, or "
        "pickled data, which is never read)"
    )


def read_npy(fh, path: str) -> np.ndarray:
    """The array of the open ``.npy`` file ``fh`` (named ``path``), read bounded
    (``read_array``: its header and its data must fill the file)."""
    return read_array(fh, where=path, available=os.fstat(fh.fileno()).st_size - fh.tell())


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` outside strings in a JSON text."""
    stripped = _STRING.sub("", text).encode("utf-8", "surrogatepass")
    steps = _BRACKET_STEP[np.frombuffer(stripped, np.uint8)]
    return int(np.cumsum(steps[steps != 0], dtype=np.int64).max(initial=0))


def load_json(text: str | bytes, *, max_bytes: int | None = None, max_depth: int = MAX_JSON_DEPTH):
    """``json.loads(text)`` within limits: the size checked first, then the depth.

    Args:
      text: the JSON text (bytes are UTF-8).
      max_bytes: the most bytes it may take in UTF-8 (default ``MAX_FILE_JSON_BYTES``).
      max_depth: the deepest nesting of arrays and objects it may hold.

    Raises:
      JsonLimitError: over ``max_bytes`` or nested deeper than ``max_depth``, or a number
        too long for Python to read; the message is the reason (the caller names the
        file).
      json.JSONDecodeError, UnicodeDecodeError: not JSON, not UTF-8.
    """
    max_bytes = MAX_FILE_JSON_BYTES if max_bytes is None else max_bytes
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise JsonLimitError(f"is larger than {max_bytes} bytes, the most this file may hold")
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    opened = text.count("[") + text.count("{")  # fewer than max_depth: no need to scan
    depth = json_depth(text) if opened > max_depth else opened
    if depth > max_depth:
        raise JsonLimitError(f"is nested {depth} levels deep, more than the {max_depth} allowed")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as e:  # an integer of over 4300 digits
        raise JsonLimitError(f"holds a value Python cannot read ({e})") from None


def read_json(f, *, max_bytes: int | None = None, max_depth: int = MAX_JSON_DEPTH):
    """The JSON in the open file ``f`` (binary or text), read no further than ``max_bytes``
    + 1 bytes or characters, then parsed by ``load_json`` (same limits, same errors)."""
    max_bytes = MAX_FILE_JSON_BYTES if max_bytes is None else max_bytes
    return load_json(f.read(max_bytes + 1), max_bytes=max_bytes, max_depth=max_depth)
