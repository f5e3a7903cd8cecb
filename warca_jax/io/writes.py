"""A write that fails is one error naming the file: a full disk, a size limit, a read-only
folder or a name too long.

What the operating system says when a write fails often does not name the file: a full
disk is ``OSError: [Errno 28] No space left on device`` from deep inside matplotlib, PIL
or NumPy. Every file a run writes goes through ``writing(path)`` (``atomic_path``
and the helpers built on it, ``makedirs``, ``appending``), which turns such an ``OSError``
into a ``WriteError`` that names the file, the OS error and what is kept: the files
finished before the failure are complete (each was moved into place whole) and a rerun
reuses them. The command line prints a ``WriteError`` as one line.

``check_path`` refuses, before any work, a path the file system cannot hold (a name over
its ``NAME_MAX`` bytes, a path over ``PATH_MAX``) and a folder that cannot be made in a
read-only or unwritable parent.

No write follows a symbolic link: a link planted where a run writes (``W/.lock`` pointing
at a file of the user's) would have that file overwritten. Every file is opened with
``O_NOFOLLOW`` (``no_link``, the opener of every write), and a file written whole is
first created under a new name, exclusively (``O_CREAT | O_EXCL``: ``temporary``), then
moved onto its name (``replace``), which replaces a link standing there (said in a log
line) rather than writing through it. A file that must be opened in place (the lock,
``metrics.jsonl`` appended to) is refused when a link, a FIFO, a device or a folder
stands at its name: ``InTheWayError``, one line naming it and what was expected.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator

from absl import logging

from warca_jax.io import reads

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


class InTheWayError(WriteError):
    """A symbolic link, FIFO, device or folder stands where a run writes a file in place:
    refused, never written through (constructed as ``WriteError`` is)."""


def in_the_way(path, what: str) -> InTheWayError:
    """The ``InTheWayError`` of ``path``, found to be ``what`` (``a FIFO (named pipe)``)."""
    return InTheWayError(
        errno.ELOOP if what.startswith("a symbolic link") else errno.EINVAL,
        f"cannot write {os.fsdecode(path)}: it is {what}; expected a regular file or no "
        "file there (a run never writes through a link or into a special file): remove "
        "it or use another folder",
    )


def no_link(path, flags: int, mode: int = 0o666) -> int:
    """``os.open(path, flags)`` without following a symbolic link at ``path``'s last
    component and without blocking, refused unless the result is a regular file; the
    opener of every file a run writes (``open(..., opener=no_link)``).

    Raises:
      InTheWayError: a symbolic link (even one to a regular file), a FIFO, a device, a
        socket or a folder at ``path``.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise in_the_way(path, f"a symbolic link (to {reads.link_target(path)})") from None
        if e.errno in (errno.ENXIO, errno.EISDIR) and os.path.lexists(path):
            st = os.lstat(path)  # ENXIO: a FIFO without a reader
            if not stat.S_ISREG(st.st_mode):
                raise in_the_way(path, reads.kind(st.st_mode)) from None
        raise
    st_mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(st_mode):
        os.close(fd)
        raise in_the_way(path, reads.kind(st_mode))
    return fd


def new_file(path, flags: int) -> int:
    """``no_link`` creating ``path``, which must not exist (``O_CREAT | O_EXCL``)."""
    return no_link(path, flags | os.O_CREAT | os.O_EXCL)


def temporary(path) -> str:
    """Creates an empty file under a new name beside ``path`` (``.<stem>.<pid>.<random>
    .tmp<ext>``: it keeps ``path``'s extension) and returns that name.

    The file is created exclusively (``new_file``): whatever stands at a name tried,
    a link included, is never opened; another name is tried instead.
    """
    head, tail = os.path.split(os.fspath(path))
    stem, ext = os.path.splitext(tail)
    for _ in range(100):
        tmp = os.path.join(head, f".{stem}.{os.getpid()}.{secrets.token_hex(4)}.tmp{ext}")
        try:
            os.close(new_file(tmp, os.O_WRONLY))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {path}", tmp)


def replace(tmp: str, path) -> None:
    """Moves ``tmp`` onto ``path`` (``os.replace``). A symbolic link at ``path`` is
    replaced by the file, its target left as it is, with a log line naming both."""
    if os.path.islink(path):
        logging.warning(
            "%s was a symbolic link (to %s): replaced by the file written there; the "
            "link's target is not written",
            os.fsdecode(path),
            reads.link_target(path),
        )
    os.replace(tmp, path)


@contextlib.contextmanager
def writing(path) -> Iterator[None]:
    """Turns an ``OSError`` raised inside the block into a ``WriteError`` naming ``path``."""
    try:
        yield
    except OSError as e:
        raise write_error(path, e) from e


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yields the name of a new, empty temporary file in ``path``'s folder; moves it onto
    ``path`` on success.

    The temporary file is created exclusively, without following a link
    (``temporary``); open it with ``opener=no_link`` (``workdir.atomic_file`` does)
    so that a link swapped in for it is refused, not written through. The move replaces
    a link standing at ``path`` rather than writing to its target (``replace``).
    On an exception the temporary file is removed and ``path`` is left as it was; an
    ``OSError`` (a full disk, a size limit...) is a ``WriteError`` naming ``path``. The
    temporary name keeps ``path``'s extension, so writers that add one (``np.savez``)
    do not.
    """
    tmp = None
    try:
        with writing(path):
            tmp = temporary(path)
            yield tmp
            replace(tmp, path)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.remove(tmp)


def linked_folder(path) -> InTheWayError:
    """The ``InTheWayError`` of a symbolic link where a run makes or enters a folder."""
    return InTheWayError(
        errno.ELOOP,
        f"cannot write into {os.fsdecode(path)}: it is a symbolic link (to "
        f"{reads.link_target(path)}); expected a folder of the run or nothing there (a run "
        "never writes through a link): remove it or use another folder",
    )


def makedirs(path, within=None) -> None:
    """``os.makedirs(path, exist_ok=True)`` that enters no symbolic link: ``path`` itself,
    and with ``within`` (a folder the run owns, such as its workdir) every folder from there
    down to ``path``, is made or entered only if it is not a link (which would send the
    run's writes elsewhere). The folders above ``within`` are the user's to choose.

    Raises:
      InTheWayError: a symbolic link at one of those folders, naming it and its target.
      WriteError: any other failure, naming ``path``.
    """
    path = os.fspath(path)
    chain = []  # the folders below ``within``, top down, each made or entered in turn
    if within is not None:
        rel = os.path.relpath(path, within)
        if rel != os.curdir and not rel.startswith(os.pardir):
            parts = rel.split(os.sep)
            chain = [os.path.join(within, *parts[: i + 1]) for i in range(len(parts))]
            with writing(within):
                os.makedirs(within, exist_ok=True)
    with writing(path):
        if os.path.islink(path):
            raise linked_folder(path)
        if not chain:  # no folder of the run above it: the path itself
            os.makedirs(path, exist_ok=True)
        for folder in chain:
            if os.path.islink(folder):
                raise linked_folder(folder)
            try:
                os.mkdir(folder)
            except FileExistsError:
                if not os.path.isdir(folder) or os.path.islink(folder):
                    raise
        if os.path.islink(path):  # made meanwhile
            raise linked_folder(path)


@contextlib.contextmanager
def appending(path) -> Iterator[Callable[[str], None]]:
    """Opens ``path`` for appending; yields ``append(text)``, which writes and flushes.

    The file is opened in place with ``no_link``: a symbolic link, FIFO or device at
    ``path`` is an ``InTheWayError``, never appended to. A failure (on opening, writing
    or closing) is a ``WriteError`` naming ``path``; the lines appended before it stay (a
    cut last line is dropped by ``workdir.read_jsonl``).
    """
    with writing(path):
        f = open(path, "a", encoding="utf-8", opener=no_link)  # noqa: SIM115 - closed below
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
