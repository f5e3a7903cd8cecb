"""Ctrl-C and SIGTERM as a stop of the run, said in one line.

``stop_on_signals`` makes both raise ``Interrupted`` in the main thread (Python raises
``KeyboardInterrupt`` for SIGINT; SIGTERM would end the process without unwinding, so
without releasing the workdir's lock); ``cli.one_line_errors`` catches it and ``stop``
writes ``interrupted by ...; WORKDIR keeps what finished (...): run the same command to
resume`` and exits with 128 + the signal's number.
"""

from __future__ import annotations

import glob
import os
import signal
import sys

from absl import flags


class Interrupted(BaseException):
    """A stop signal (SIGINT or SIGTERM) received by an entry point, raised in its main
    thread as Python raises ``KeyboardInterrupt`` for SIGINT; a ``BaseException``, so that
    no ``except Exception`` of the library takes it for a failure of the work."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal's number
RECEIVED: list[int] = []


def _on_signal(signum, frame):
    del frame
    RECEIVED.append(signum)
    for sig in EXIT_STATUS:  # a second Ctrl-C must not interrupt the clean-up
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


def stop_on_signals() -> None:
    """SIGINT and SIGTERM raise ``Interrupted`` in the main thread (once; later ones are
    ignored while the run unwinds, releasing its locks)."""
    RECEIVED.clear()
    for sig in EXIT_STATUS:
        signal.signal(sig, _on_signal)


def finished_work(workdir: str) -> str:
    """What ``workdir`` holds finished, in words: a main job's splits, a protocol's jobs,
    or a study's results file."""
    if not workdir or not os.path.isdir(workdir):
        return "nothing finished yet"
    top = glob.escape(workdir)
    splits = glob.glob(os.path.join(top, "split_*.json"))
    jobs = glob.glob(os.path.join(top, "cv", "*", "*", "split_*", "*", "result.json"))
    runs = glob.glob(os.path.join(top, "runs", "*", "*", "split_*", "split_*.json"))
    if jobs or runs:
        return f"{len(jobs)} cross-validation fits and {len(runs)} runs finished"
    if splits:
        return f"{len(splits)} split{'s' if len(splits) != 1 else ''} finished"
    return "nothing finished yet"


def _workdir_flag() -> str:
    try:
        return str(flags.FLAGS["workdir"].value or "") if "workdir" in flags.FLAGS else ""
    except flags.UnparsedFlagAccessError:
        return ""


def stop(signum: int) -> None:
    """The one line of an interrupted run, then the exit with the signal's status (at once:
    the locks are released and the files written while the exception unwound; what JAX
    and the pool's threads would do at interpreter exit is skipped)."""
    workdir = _workdir_flag()
    name = "Ctrl-C (SIGINT)" if signum == signal.SIGINT else signal.Signals(signum).name
    where = f"{workdir} keeps what finished ({finished_work(workdir)}): " if workdir else ""
    sys.stdout.flush()
    sys.stderr.write(f"interrupted by {name}; {where}run the same command to resume\n")
    sys.stderr.flush()
    os._exit(EXIT_STATUS[signum])
