"""A file the project reads is a regular file: never a device, a FIFO or a socket.

A path the user gives (a feature file, a dataset's ``.mat``, an image of a dataset's
folder) may name something that is not a file: a link to ``/dev/zero`` reads zeros
forever, and opening a FIFO waits for a writer that may never come, so the run hangs
without a word. ``regular_file`` checks a path with ``os.stat`` (links resolved) before
anything opens it, and ``open_regular`` opens a file only after that check, without
blocking, and checks the open file again (a file swapped in between is refused too).

Each refusal is one line naming the path and what was expected:

* nothing there: ``FileNotFoundError`` (``<what> not found: <path>``); a link whose
  target does not exist: ``FileNotFoundError`` naming the link and its target;
* a link that loops, or a folder, device, FIFO or socket (after links are resolved):
  ``NotARegularFileError``, a ``ValueError`` naming the path, what it is and, for a link,
  what it points to.
"""

from __future__ import annotations

import errno
import os
import stat

# What a file's mode says it is, for messages; a regular file is not named here.
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


class NotARegularFileError(ValueError):
    """A path to be read names a link that loops, a folder, a device, a FIFO or a socket."""


def kind(mode: int) -> str:
    """What a ``st_mode`` is, in words: ``a FIFO (named pipe)``, ``a folder``, ...."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else f"a file of type {stat.S_IFMT(mode):o}"


def link_target(path) -> str:
    """What the symbolic link ``path`` points to, as written in it (``?`` if unreadable)."""
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _through(path) -> str:
    """`` (a symbolic link to T)`` when ``path`` is a link, else nothing."""
    return f" (a symbolic link to {link_target(path)})" if os.path.islink(path) else ""


def refusal(path, mode: int, *, what: str, expected: str) -> NotARegularFileError:
    """The error for ``path``, found to be of ``mode`` where ``expected`` was wanted."""
    return NotARegularFileError(
        f"{what} {os.fsdecode(path)}{_through(path)} is {kind(mode)}, not a regular file; "
        f"expected {expected}"
    )


def regular_file(path, *, what: str = "file", expected: str = "a regular file") -> os.stat_result:
    """``os.stat(path)`` when ``path`` is, after its links are resolved, a regular file.

    Nothing is opened. ``what`` names the file in messages (``"feature file"``,
    ``"VIPeR: image"``), ``expected`` says what it should be.

    Raises:
      FileNotFoundError: nothing at ``path`` (``<what> not found: <path>``), or a link
        whose target does not exist (naming both).
      NotARegularFileError: a link that loops, or a folder, device, FIFO or socket.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise FileNotFoundError(
                f"{what} {os.fsdecode(path)} is a dangling symbolic link (to "
                f"{link_target(path)}, which does not exist); expected {expected}"
            ) from None
        raise FileNotFoundError(f"{what} not found: {os.fsdecode(path)}") from None
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise NotARegularFileError(
            f"{what} {os.fsdecode(path)}{_through(path)} is a symbolic link that loops "
            f"(too many levels of links); expected {expected}"
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise refusal(path, st.st_mode, what=what, expected=expected)
    return st


def _opener(what: str, expected: str, follow: bool = True):
    """An ``open(..., opener=)`` that checks the file first, opens it without blocking
    (a FIFO swapped in after the check does not hang the run) and checks it again; with
    ``follow=False`` a symbolic link at ``path`` is refused too (a run's own files)."""

    def opener(path, flags):
        if not follow and os.path.islink(path):
            raise NotARegularFileError(
                f"{what} {os.fsdecode(path)} is a symbolic link (to {link_target(path)}); "
                f"expected {expected}: a run's own files are never links"
            )
        regular_file(path, what=what, expected=expected)
        nofollow = 0 if follow else os.O_NOFOLLOW
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC | nofollow)
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise refusal(path, mode, what=what, expected=expected)
        return fd

    return opener


def open_regular(
    path,
    mode: str = "rb",
    *,
    what: str = "file",
    expected: str = "a regular file",
    follow: bool = True,
    **kwargs,
):
    """``open(path, mode, **kwargs)`` for reading, refused unless ``path`` is a regular
    file (``regular_file``; checked again on the open file); ``follow=False``: and not a
    symbolic link (a workdir's own files: a link there could read any file)."""
    if any(c in mode for c in "wax+"):
        raise ValueError(f"open_regular reads; mode {mode!r} writes")
    return open(path, mode, opener=_opener(what, expected, follow), **kwargs)  # noqa: SIM115
