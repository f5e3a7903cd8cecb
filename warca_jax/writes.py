"""A write that fails is one error naming the file: a full disk, a size limit, a read-only
folder or a name too long.

What the operating system says when a write fails often does not name the file: a full
disk is ``OSError: [Errno 28] No space left on device`` from deep inside matplotlib, PIL
or NumPy. Every file a run writes goes through ``writing(path)`` (``workdir.atomic_path``
and the helpers built on it, ``makedirs``, ``appending``), which turns such an ``OSError``
into a ``WriteError`` that names the file, the OS error and what is kept: the files
finished before the failure are complete (each was moved into place whole) and a rerun
reuses them. The command line prints a ``WriteError`` as one line.

``check_path`` refuses, before any work, a path the file system cannot hold (a name over
its ``NAME_MAX`` bytes, a path over ``PATH_MAX``) and a folder that cannot be made in a
read-only or unwritable parent.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator

# What a failure means for the user where the OS's own words do not say it.
_HINTS = {
    errno.EFBIG: "the file size limit is reached (ulimit -f)",
    errno.ENAMETOOLONG: "a name in the path, or the path, is longer than the file system allows",
}
KEPT = "the files finished before it are complete, and a rerun reuses them"


class WriteError(OSError):
    """A file a run could not write; the message names it and the OS error.

    Constructed as ``WriteError(errno, message)`` (so that it pickles, for worker processes).
    """

    def __str__(self) -> str:
        return str(self.args[1]) if len(self.args) > 1 else super().__str__()


def write_error(path, error: OSError) -> WriteError:
    """The ``WriteError`` of ``error`` (raised while ``path`` was written)."""
    if isinstance(error, WriteError):
        return error
    name = errno.errorcode.get(error.errno, "")
    reason = error.strerror or str(error) or type(error).__name__
    hint = _HINTS.get(error.errno)
    what = f"{reason} [{name}]" if name else reason
    if hint:
        what += f": {hint}"
    return WriteError(error.errno, f"cannot write {os.fsdecode(path)}: {what}; {KEPT}")


@contextlib.contextmanager
def writing(path) -> Iterator[None]:
    """Turns an ``OSError`` raised inside the block into a ``WriteError`` naming ``path``."""
    try:
        yield
    except OSError as e:
        raise write_error(path, e) from e


def makedirs(path) -> None:
    """``os.makedirs(path, exist_ok=True)``; a failure is a ``WriteError`` naming ``path``."""
    with writing(path):
        os.makedirs(path, exist_ok=True)


@contextlib.contextmanager
def appending(path) -> Iterator[Callable[[str], None]]:
    """Opens ``path`` for appending; yields ``append(text)``, which writes and flushes.

    A failure (on opening, writing or closing) is a ``WriteError`` naming ``path``; the
    lines appended before it stay (a cut last line is dropped by ``workdir.read_jsonl``).
    """
    with writing(path):
        f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed below, errors converted
    try:

        def append(text: str) -> None:
            with writing(path):
                f.write(text)
                f.flush()

        yield append
    finally:
        with writing(path):
            f.close()


def _limits(folder: str) -> tuple[int, int]:
    """(NAME_MAX, PATH_MAX) of the file system holding ``folder`` (255 and 4096 if unknown)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError):
        return 255, 4096


def _existing_ancestor(path: str) -> str:
    """The nearest folder above ``path`` (or ``path`` itself) that exists."""
    here = os.path.abspath(path)
    while not os.path.lexists(here) and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    return here


def check_path(path, *, what: str = "workdir") -> None:
    """Refuses, before any work, a folder path that cannot be written.

    Raises:
      WriteError: a name in ``path`` longer than the file system's NAME_MAX bytes, the
        path longer than its PATH_MAX bytes (``ENAMETOOLONG``), or a folder to be made
        under a parent that is read-only (``EROFS``) or not writable (``EACCES``).
    """
    text = os.fspath(path)
    raw = os.fsencode(text)
    base = _existing_ancestor(text)
    name_max, path_max = _limits(base if os.path.isdir(base) else os.path.dirname(base))
    short = text if len(text) <= 300 else f"{text[:120]}...{text[-60:]} ({len(text)} characters)"
    for part in raw.split(b"/"):
        if len(part) > name_max:
            name = os.fsdecode(part)
            raise WriteError(
                errno.ENAMETOOLONG,
                f"{what} {short}: the name {name[:20]}... is {len(part)} bytes long; this "
                f"file system allows {name_max}: give a shorter name",
            )
    if len(raw) >= path_max:
        raise WriteError(
            errno.ENAMETOOLONG,
            f"{what} {short}: the path is {len(raw)} bytes long; this file system allows "
            f"{path_max - 1}: give a shorter path",
        )
    if base == os.path.abspath(text) or not os.path.isdir(base):
        return  # it exists (checked by its user), or a file stands in the way (likewise)
    if os.access(base, os.W_OK):
        return
    read_only = bool(os.statvfs(base).f_flag & os.ST_RDONLY)
    code = errno.EROFS if read_only else errno.EACCES
    raise WriteError(
        code,
        f"{what} {short} cannot be made: its parent {base} is "
        f"{'on a read-only file system' if read_only else 'not writable'} "
        f"[{errno.errorcode[code]}]: give a folder under a writable one",
    )
