"""The Python side of every iterative learner: run jitted chunks of steps, log, check.

Learners put a whole chunk of steps under one ``jax.jit`` (a ``lax.scan``); this loop
calls it, turns its metrics into a history row (``step``, ``seconds`` and the chunk's
metrics as floats), refuses a diverged row (``check_row``: a non-finite value, or a loss
grown ``MAX_LOSS_GROWTH`` times past its reference), lets an ``on_chunk`` hook (whose time
is not counted as training) add entries to it, e.g. validation scores, hands the row to
``log_fn`` and shows progress.

Every learner's result goes through ``check_model`` (once in the learner, once more in
the method registry's dispatch, ``warca_jax.methods``): a model with NaN or inf, or one
that maps every training sample to the same point (an all-zero projection), is a
``TrainingDivergedError``, never a model. The learners that run their own loop (MLAPG,
the study's SGD) call ``check_row`` on their rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import numpy as np
from tqdm.auto import tqdm

from warca_jax.metric import Metric

# A loss more than this many times its reference (the learner's loss scale at the start,
# or the first logged loss) is a diverged run: no training that is converging gets there.
MAX_LOSS_GROWTH = 1e6
# Rows of the training features embedded by ``check_model`` to look for a degenerate map.
_CHECK_ROWS = 64


class TrainingDivergedError(FloatingPointError, RuntimeError):
    """Training diverged, or ended in a degenerate model; no model is returned.

    Raised for a non-finite or exploding loss (``run_in_chunks`` / ``check_row``) and for a
    learned metric with NaN or inf or that maps every input to one point
    (``check_model``). The message names the learner, the step and the loss where known,
    and what to try. A ``FloatingPointError`` (what the learners raised before) and a
    ``RuntimeError``.
    """


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
    reference_loss: float | None = None,
    hint: str = "lower learning_rate",
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
      reference_loss: the size of the learner's loss at the start, where the learner
        knows it (e.g. its margin on normalised inputs); a row whose ``loss`` exceeds
        ``MAX_LOSS_GROWTH`` times it is a divergence. After the first row the reference is
        the larger of it and the first row's loss (the only one without it).
      hint: what to try after a divergence, for the message.

    Returns:
      The history rows.

    Raises:
      TrainingDivergedError: a chunk's metrics are not finite, or its loss blew up
        (``check_row``).
      FloatingPointError: the entries ``on_chunk`` returns are not finite.
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
        # before the hook: no evaluation of a diverged model
        check_row(row, method=method, step=done, reference_loss=reference_loss, hint=hint)
        if not history and "loss" in row:  # later losses are measured against the first too
            reference_loss = max(abs(row["loss"]), abs(reference_loss or 0.0))
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


def check_row(
    row: dict,
    *,
    method: str,
    step: int,
    reference_loss: float | None = None,
    hint: str = "lower learning_rate",
) -> None:
    """Raises ``TrainingDivergedError`` for a history row of a diverged run.

    Diverged: a value of the row is NaN or inf, or its ``loss`` is more than
    ``MAX_LOSS_GROWTH`` times ``reference_loss`` in size (the loss at the start; no such
    test when it is None or 0).
    """
    bad = sorted(k for k, v in row.items() if not np.isfinite(v))
    loss = row.get("loss")
    if bad:
        raise TrainingDivergedError(
            f"{method} diverged by step {step}: {', '.join(bad)} not finite (loss {loss}); {hint}"
        )
    if loss is not None and reference_loss and abs(loss) > MAX_LOSS_GROWTH * reference_loss:
        raise TrainingDivergedError(
            f"{method} diverged by step {step}: loss {loss:.4g} is more than "
            f"{MAX_LOSS_GROWTH:g} times its starting size {reference_loss:.4g}; {hint}"
        )


def check_model(
    metric: Metric,
    *,
    method: str,
    features: np.ndarray | None = None,
    hint: str = "lower learning_rate",
) -> Metric:
    """Returns ``metric`` when it is a usable model; ``TrainingDivergedError`` otherwise.

    Refused: NaN or inf in any of its arrays or floats; an all-zero projection; and, given
    the training ``features``, embeddings of (up to 64 of) them that are not finite or
    all the same point (every distance 0: nothing was learned).

    Args:
      metric: a learner's result.
      method: the learner's name, for the message.
      features: the training features as the learner got them (optional).
      hint: what to try, for the message.
    """
    bad = metric.non_finite_fields()
    if bad:
        raise TrainingDivergedError(
            f"{method} produced a non-finite model (NaN or inf in {bad}); {hint}"
        )
    proj = metric.projection
    if proj is not None and proj.size and not np.any(proj):
        raise TrainingDivergedError(
            f"{method} produced a degenerate model: its projection is all zeros (every input "
            f"maps to the same point); {hint}"
        )
    if features is None or metric.kind not in ("linear", "kernel"):
        return metric
    x = np.asarray(features[:_CHECK_ROWS])
    if x.ndim != 2 or len(x) < 2:
        return metric
    emb = np.asarray(metric.transform(x), np.float64)
    if not np.all(np.isfinite(emb)):
        raise TrainingDivergedError(
            f"{method} produced a model whose embeddings of training samples are not finite "
            f"(overflow: entries too large); {hint}"
        )
    if np.any(np.ptp(x.astype(np.float64), axis=0) > 0) and not np.any(np.ptp(emb, axis=0) > 0):
        raise TrainingDivergedError(
            f"{method} produced a degenerate model: it maps {len(x)} different training samples "
            f"to one point; {hint}"
        )
    return metric
