"""Progress of long work: a tqdm bar on a terminal, else a heartbeat in the log.

A run whose output goes to a file (or a notebook's captured log, or CI) shows no bar
(``defaults.progress_bars``); it still says every ``HEARTBEAT_SECONDS`` how far it is,
in one INFO line: ``<what>: 120 of 632 images, about 40 s left`` (with the last loss
for training, ``jobs`` for the protocol). ``bar(...)`` gives either, with the same
``update`` / ``set_postfix_str`` / ``close`` calls, so the code that reports progress
has one way to do it.
"""

from __future__ import annotations

import time

from absl import logging
from tqdm.auto import tqdm

HEARTBEAT_SECONDS = 10.0


class Heartbeat:
    """``tqdm``'s reporting calls, writing an INFO line at most every ``every`` seconds
    (the first after ``every`` seconds: short work says nothing)."""

    def __init__(self, total: int, desc: str, unit: str, initial: int = 0, every: float = 0.0):
        self.total, self.desc, self.unit = int(total), desc, unit
        self.n, self.start_n = int(initial), int(initial)
        self.every = every or HEARTBEAT_SECONDS
        self.t0 = self.last = time.monotonic()
        self.postfix = ""

    def update(self, n: int = 1) -> None:
        self.n += int(n)
        now = time.monotonic()
        if now - self.last >= self.every and self.n < self.total:
            self.last = now
            logging.info("%s", self.line(now))

    def line(self, now: float) -> str:
        """``<desc>: <n> of <total> <unit>[ (<postfix>)], about <t> left``."""
        out = f"{self.desc}: {self.n} of {self.total} {self.unit}"
        if self.postfix:
            out += f" ({self.postfix})"
        done = self.n - self.start_n
        if done > 0:
            left = (now - self.t0) / done * (self.total - self.n)
            out += f", about {_duration(left)} left"
        return out

    def set_postfix_str(self, s: str) -> None:
        self.postfix = s

    def close(self) -> None:
        pass

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def bar(total: int, desc: str, *, show: bool, unit: str = "it", initial: int = 0, **kw):
    """A tqdm bar when ``show`` (a terminal, ``defaults.progress_bars``), else a
    ``Heartbeat``; ``kw`` goes to tqdm (``leave``)."""
    if show:
        return tqdm(total=total, desc=desc, unit=unit, initial=initial, **kw)
    return Heartbeat(total, desc, unit, initial=initial)
