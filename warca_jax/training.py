"""The Python side of every iterative learner: run jitted chunks of steps, log, check.

Learners put a whole chunk of steps under one ``jax.jit`` (a ``lax.scan``); this loop
calls it, turns its metrics into a history row (``step``, ``seconds`` and the chunk's
metrics as floats), refuses a non-finite row, lets an ``on_chunk`` hook (whose time is
not counted as training) add entries to it, e.g. validation scores, hands the row to
``log_fn`` and shows progress.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import numpy as np
from tqdm.auto import tqdm


def run_in_chunks(
    advance: Callable[[int, int], dict],
    *,
    num_iters: int,
    chunk: int,
    method: str,
    log_fn: Callable[[dict], None] | None = None,
    progress: bool = False,
    t0: float | None = None,
    on_chunk: Callable[[dict], dict | None] | None = None,
) -> list[dict]:
    """Runs ``advance(done, length)`` until ``num_iters`` steps are done.

    Args:
      advance: runs ``length`` steps starting after step ``done`` (updating the
        learner's state) and returns a dict of scalar metrics for the chunk.
      num_iters: total steps.
      chunk: steps per call (the logging interval).
      method: the learner's name, for the divergence message.
      log_fn: called with every history row, after ``on_chunk``.
      progress: show a progress bar.
      t0: ``time.perf_counter()`` at the start of the fit (default: now).
      on_chunk: the learner's hook for evaluating the model during training, called with a
        copy of every row (once the chunk's own metrics are known to be finite) before the
        row is stored and logged. If it returns a dict, its scalar entries (new keys only) are
        added to the row as floats, so that they are in the history and reach
        ``log_fn``. The time it takes is left out of the ``seconds`` of this and later
        rows, so that they count training time only.

    Returns:
      The history rows.

    Raises:
      FloatingPointError: a chunk's metrics, or the entries ``on_chunk`` returns, are
        not finite.
      ValueError: ``on_chunk`` returned an entry the row already has.
    """
    t0 = time.perf_counter() if t0 is None else t0
    history = []
    bar = tqdm(total=num_iters, desc=method, disable=not progress, leave=False)
    done = 0
    while done < num_iters:
        length = min(chunk, num_iters - done)
        metrics = advance(done, length)
        done += length
        row = {k: float(v) for k, v in jax.device_get(metrics).items()}
        row.update(step=done, seconds=time.perf_counter() - t0)
        _check_finite(row, method, done)  # before the hook: no evaluation of a diverged model
        if on_chunk is not None:
            t0 += call_hook(on_chunk, row, method=method, step=done)
        history.append(row)
        if log_fn is not None:
            log_fn(row)
        bar.update(length)
    bar.close()
    return history


def call_hook(hook: Callable[[dict], dict | None], row: dict, *, method: str, step: int) -> float:
    """Calls ``hook`` with a copy of ``row`` and merges the dict it returns into ``row``.

    The entries it returns are added as floats; each must be new to the row and finite.
    Shared by ``run_in_chunks`` and the learners that log rows from a loop of their own.

    Returns:
      The seconds the hook took (to leave out of training time).

    Raises:
      ValueError: the hook returned an entry the row already has.
      FloatingPointError: the hook returned a non-finite value.
    """
    t_hook = time.perf_counter()
    extra = hook(dict(row))
    seconds = time.perf_counter() - t_hook
    if extra:
        extra = {k: float(v) for k, v in jax.device_get(extra).items()}
        clash = sorted(set(extra) & set(row))
        if clash:
            raise ValueError(
                f"{method}: the on_chunk hook returned {clash}, which the row has "
                f"already ({sorted(row)}); use new names"
            )
        if not all(np.isfinite(v) for v in extra.values()):
            raise FloatingPointError(
                f"{method}: the on_chunk hook returned non-finite values at step {step}: {extra}"
            )
        row.update(extra)
    return seconds


def _check_finite(row: dict, method: str, step: int) -> None:
    if not all(np.isfinite(v) for v in row.values()):
        raise FloatingPointError(f"{method} diverged by step {step}: {row}; lower learning_rate")
