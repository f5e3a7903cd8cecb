"""The Python side of every iterative learner: run jitted chunks of steps, log, check.

Learners put a whole chunk of steps under one ``jax.jit`` (a ``lax.scan``); this loop
calls it, turns its metrics into a history row (``step``, ``seconds`` and the chunk's
metrics as floats), refuses a non-finite row, hands the row to ``log_fn`` (and to an
``on_chunk`` hook whose time is not counted as training) and shows progress.
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
    on_chunk: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Runs ``advance(done, length)`` until ``num_iters`` steps are done.

    Args:
      advance: runs ``length`` steps starting after step ``done`` (updating the
        learner's state) and returns a dict of scalar metrics for the chunk.
      num_iters: total steps.
      chunk: steps per call (the logging interval).
      method: the learner's name, for the divergence message.
      log_fn: called with every history row.
      progress: show a progress bar.
      t0: ``time.perf_counter()`` at the start of the fit (default: now).
      on_chunk: called with every history row after ``log_fn`` (the learner's hook for
        evaluating the model during training); the time it takes is left out of the
        ``seconds`` of later rows, so that they count training time only.

    Returns:
      The history rows.

    Raises:
      FloatingPointError: a chunk's metrics are not finite.
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
        if not all(np.isfinite(v) for v in row.values()):
            raise FloatingPointError(
                f"{method} diverged by step {done}: {row}; lower learning_rate"
            )
        history.append(row)
        if log_fn is not None:
            log_fn(row)
        if on_chunk is not None:
            t_hook = time.perf_counter()
            on_chunk(row)
            t0 += time.perf_counter() - t_hook
        bar.update(length)
    bar.close()
    return history
