"""One workdir, one run: an advisory lock on a folder, naming the process that holds it.

A run locks its folder with ``fcntl.flock`` on ``<folder>/.lock``, a file holding the
holder's process id, host and start time. A second run on the same folder is refused at
once with a ``WorkdirInUseError`` naming them. The kernel releases the lock when its
process ends, however it ends: a lock file left by a killed run is free, hence stale, and
is taken over (with a log line naming the run that left it). A run that ends removes the
file.

* ``one_run_per_workdir`` decorates a run ``fn(config, workdir, ...)`` (the main job, the
  studies): the lock is taken at once when the folder exists, so that a second run is
  refused before it loads anything, and otherwise when the run makes the folder
  (``workdir.prepare`` calls ``hold``), after its checks, so that a refused config
  leaves no folder behind.
* ``WorkdirLock(folder)`` is the lock itself, a context manager; the protocol takes one
  per job folder (not on the whole grid, which its workers and hosts share).

The lock file is opened in place, so it is opened without following a link
(``writes.no_link``): a symbolic link, FIFO, device or folder at ``<folder>/.lock`` is
refused before any work with a ``writes.InTheWayError`` naming it (a link to a user's
file would otherwise have that file truncated and overwritten with the lock's record).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import functools
import json
import os
import socket
import time

from absl import logging

from warca_jax.io import bounded_reads, writes
from warca_jax.io.writes import writing

LOCK_FILE = ".lock"


class WorkdirInUseError(RuntimeError):
    """The folder is locked by another run (named in the message)."""


def _record(text: str) -> dict:
    """A lock file's JSON record (pid, host, started); {} when it has none (empty, cut or
    damaged: a deep nest is a ValueError of ``bounded_reads``, not a RecursionError)."""
    try:
        record = bounded_reads.load_json(text)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _describe(text: str) -> str:
    """``pid P on host H (since T)`` from a lock file's JSON, or why it cannot say."""
    holder = _record(text)
    if {"pid", "host", "started"} <= holder.keys():
        return f"pid {holder['pid']} on host {holder['host']} (since {holder['started']})"
    return "a process that has not yet written its pid and host"


def holder_pid(folder) -> int | None:
    """The process id written in ``<folder>/.lock`` (None: no lock file, or none readable):
    after a worker was killed, the pid of the job it held."""
    try:
        fd = os.open(os.path.join(os.fspath(folder), LOCK_FILE), os.O_RDONLY | os.O_NOFOLLOW)
        try:
            text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        finally:
            os.close(fd)
    except OSError:
        return None
    pid = _record(text).get("pid")
    return pid if isinstance(pid, int) else None


class WorkdirLock:
    """An exclusive, advisory lock on ``folder`` (``<folder>/.lock``); see the module doc."""

    def __init__(self, folder) -> None:
        self.folder = os.fspath(folder)
        self.path = os.path.join(self.folder, LOCK_FILE)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def _holder(self, fd: int) -> str:
        for _ in range(20):  # the holder writes its pid just after taking the lock
            text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
            if text.strip():
                break
            time.sleep(0.01)
        return _describe(text)

    def _refuse(self, fd: int) -> WorkdirInUseError:
        return WorkdirInUseError(
            f"{self.folder} is in use by another run: {self._holder(fd)}, lock file "
            f"{self.path}; wait for it to end, or use another folder"
        )

    def check_free(self) -> None:
        """Raises ``WorkdirInUseError`` if another run holds the lock; writes nothing.

        Raises:
          WorkdirInUseError: another run holds it.
          InTheWayError: a link, FIFO, device or folder stands at the lock file's name.
        """
        try:
            fd = writes.no_link(self.path, os.O_RDONLY)
        except writes.InTheWayError:
            raise
        except OSError:
            return  # no lock file: no holder (one that cannot be read: found when taken)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._refuse(fd) from None
        except OSError:
            pass  # a file system without locks
        finally:
            os.close(fd)

    def _try(self) -> bool:
        """Takes the lock if it is free; False if the file was replaced meanwhile."""
        with writing(self.path):
            fd = writes.no_link(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            error = self._refuse(fd)
            os.close(fd)
            raise error from None
        except OSError as e:  # a file system without locks: run unlocked, said once
            os.close(fd)
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            logging.warning("%s cannot be locked (%s); running without a lock", self.path, e)
            return True
        try:  # a run that ended removed the file after we opened it: lock the new one
            same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def acquire(self) -> None:
        """Takes the lock (a no-op when held), writing this process's pid and host.

        Raises:
          WorkdirInUseError: another run holds it (the message names its pid and host).
          InTheWayError: a symbolic link, FIFO, device or folder stands at the lock
            file's name (a ``WriteError``): refused, nothing written through it.
          WriteError: the lock file cannot be written.
        """
        if self.held:
            return  # ours already (``hold`` after ``one_run_per_workdir``): nothing stale
        while not self.held:
            if self._try() and self._fd is None:
                return  # unlockable file system
        stale = os.pread(self._fd, 4096, 0).decode("utf-8", "replace")
        if stale.strip():
            logging.warning(
                "%s: taking over the lock left by %s, which ended without releasing it",
                self.folder,
                _describe(stale),
            )
        now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": now}
        with writing(self.path):
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps(me).encode(), 0)
        HELD.add(self)

    def release(self) -> None:
        """Removes the lock file and releases the lock (a no-op when not held)."""
        if self._fd is None:
            return
        HELD.discard(self)
        with contextlib.suppress(OSError):
            os.remove(self.path)  # before the unlock: no one locks a file that is going
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> WorkdirLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# The locks this process holds: a protocol worker stopped by its parent releases them
# before it exits (``release_all``), so that the run that resumes finds no stale lock.
HELD: set[WorkdirLock] = set()


def release_all() -> None:
    """Releases every lock this process holds."""
    for lock in list(HELD):
        lock.release()


# The locks of the runs in progress in this process whose folder did not exist when they
# started, by absolute path: ``hold`` takes one when ``run_files.prepare`` makes its folder.
_PENDING: dict[str, WorkdirLock] = {}


def hold(folder) -> None:
    """Takes the lock of the run in progress on ``folder`` if it is not yet taken."""
    lock = _PENDING.get(os.path.abspath(os.fspath(folder)))
    if lock is not None:
        lock.acquire()


def one_run_per_workdir(fn):
    """``fn(config, workdir, ...)`` holding ``workdir``'s lock while it runs (module doc)."""

    @functools.wraps(fn)
    def run(config, workdir, *args, **kwargs):
        if not isinstance(workdir, str | os.PathLike) or not os.fspath(workdir).strip():
            return fn(config, workdir, *args, **kwargs)  # refused by fn's own checks
        writes.check_path(workdir)  # a name too long, a read-only parent: before any work
        lock = WorkdirLock(workdir)
        key = os.path.abspath(os.fspath(workdir))
        if key in _PENDING:  # a nested call on the same folder: it is ours already
            return fn(config, workdir, *args, **kwargs)
        _PENDING[key] = lock
        try:
            if os.path.isdir(workdir) and os.access(workdir, os.W_OK):
                lock.acquire()  # a read-only one is refused by the run's own checks
            return fn(config, workdir, *args, **kwargs)
        finally:
            del _PENDING[key]
            lock.release()

    return run
