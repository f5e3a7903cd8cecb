"""The shared skeleton of every iterative learner: steps, chunks, the loop, the checks.

An iterative learner is written in three pieces, the same for all of them:

* a step, ``step(state, batch) -> (state, metrics)`` (``metrics`` a dict of scalars);
* a chunk of steps under one ``jax.jit``: ``scan_steps`` runs the step in a ``lax.scan``
  and reduces its metrics over the chunk; the jitted chunk is built once per setting by
  ``compiled(build, *key)``, the one cache of compiled programs (a fit with the same
  hyperparameters reuses the compiled chunk);
* the loop, ``run_in_chunks(advance, ...)``, which calls the chunk, ``log_every`` steps
  at a time, and does everything else: it turns the chunk's metrics into a history row
  (``step``, ``seconds`` and the metrics as floats), refuses a diverged row
  (``check_row``: a non-finite value, or a loss grown ``MAX_LOSS_GROWTH`` times past its
  reference), lets an ``on_chunk`` hook (whose time is not counted as training) add
  entries to it, e.g. validation scores, hands the row to ``log_fn`` and shows progress.

A learner's ``advance(done, length)`` is the glue: it calls the compiled chunk on its
state and returns the chunk's metrics. Every iterative learner (WARCA, FRML, LMNN, MLAPG,
rPCCA, SVMML and the study's SGD) trains through ``run_in_chunks``.

Every learner's result goes through ``check_model`` (once in the learner, once more in
the method registry's dispatch, ``warca_jax.methods``): a model with NaN or inf, or one
that maps every training sample to the same point (an all-zero projection), is a
``TrainingDivergedError``, never a model (both in ``warca_jax.methods.model_checks``, with
``check_row``).

A learner's ``fit`` hands its own arguments on to the loop as a ``Loop`` (its name, the
training features, ``log_fn``, ``progress``, ``callback`` and its start time), built once
at its start; ``Loop.fit(advance, current_metric, num_iters=..., chunk=..., ...)`` is
``fit_in_chunks`` with them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from warca_jax.io import progress_report
from warca_jax.methods import model_checks
from warca_jax.metric import Metric


@functools.lru_cache(maxsize=64)
def compiled(build: Callable[..., Any], *key) -> Any:
    """``build(*key)``, built once per ``(build, key)``: every learner's program cache.

    ``build`` makes a learner's jitted chunk (and whatever goes with it, e.g. its optax
    transformation) from hashable hyperparameters; keeping the result means that ``jax.jit``
    sees the same function again and reuses its compiled program, so that a second fit
    with the same setting (a cross-validation grid, another split) compiles nothing.
    """
    return build(*key)


def _mean(v: jax.Array) -> jax.Array:
    return jnp.mean(v)


def _last(v: jax.Array) -> jax.Array:
    return v[-1]


REDUCTIONS = {"mean": _mean, "last": _last, "none": None}


def scan_steps(
    step: Callable[[Any, Any], tuple[Any, dict]],
    state: Any,
    xs: Any = None,
    *,
    length: int | None = None,
    reduce: str = "mean",
) -> tuple[Any, dict]:
    """A chunk of steps in one ``lax.scan``: the step skeleton of every iterative learner.

    Args:
      step: ``step(state, x) -> (state, metrics)``, one training step on the scanned
        ``x`` (a minibatch's indices or random bits, a step number, or None).
      state: the learner's state (any pytree).
      xs: the scanned inputs, one per step (None: ``length`` steps without one).
      length: the number of steps when ``xs`` is None.
      reduce: how the chunk's metrics are reduced over its steps: ``mean``, ``last``
        (the state's final loss) or ``none`` (stacked, for a learner that reduces them
        itself).

    Returns:
      (state after the chunk, metrics reduced over the chunk).
    """
    state, metrics = jax.lax.scan(step, state, xs, length=length)
    fn = REDUCTIONS[reduce]
    return state, metrics if fn is None else jax.tree.map(fn, metrics)


class Chunk(NamedTuple):
    """What ``advance`` returns when it ran fewer steps than asked, or training is over.

    Attributes:
      metrics: the chunk's scalar metrics, as a plain ``advance`` returns them.
      steps: the steps it ran (at most the ``length`` asked for).
      stop: training is over (e.g. converged): no more chunks.
      stopped: why training ended, on the last chunk (converged, or the step budget spent
        and what the stopping rule measured then); ``run_in_chunks`` puts it in that row as
        ``stopped`` and logs it, so that every learner reports the end of training alike.
    """

    metrics: dict
    steps: int
    stop: bool = False
    stopped: str | None = None


class StoppingRule:
    """The loss's relative change over the last ``window`` logged rows, at most ``tol``: the
    one convergence rule of the learners that stop on their loss (LMNN, NCA).

    ``check(metrics, step)`` adds ``rel_change`` to a chunk's metrics (from the
    ``window``-th row on) and says whether training is over; ``stopped`` says why it ended
    (None until it has), for ``Chunk.stopped``; ``chunk(metrics, done, length)`` is the
    ``Chunk`` an ``advance`` returns with both.
    """

    def __init__(self, *, tol: float, window: int, num_iters: int, log_every: int):
        self.tol, self.window, self.num_iters, self.log_every = tol, window, num_iters, log_every
        self.losses: list[float] = []
        self.stopped: str | None = None

    def check(self, metrics: dict, step: int) -> bool:
        self.losses.append(float(metrics["loss"]))
        rel, converged = None, False
        if len(self.losses) > self.window:
            before = self.losses[-1 - self.window]
            rel = abs(before - self.losses[-1]) / max(abs(before), 1e-30)
            metrics["rel_change"] = rel
            converged = bool(self.tol > 0 and rel <= self.tol)
        if converged and step < self.num_iters:
            self.stopped = (
                f"converged: relative change {rel:.3g} <= tol {self.tol:g} over the last "
                f"{self.window * self.log_every} steps, at step {step} of {self.num_iters}"
            )
            return True
        if step >= self.num_iters:
            change = "" if rel is None else f", relative change {rel:.3g} > tol {self.tol:g}"
            if converged:
                change = " (converged there too)"
            elif self.tol == 0:
                change = " (tol 0: no early stop)"
            self.stopped = f"num_iters reached: {self.num_iters} steps{change}"
        return False

    def chunk(self, metrics: dict, done: int, length: int) -> Chunk:
        """The ``Chunk`` of the ``length`` steps after ``done`` that gave ``metrics``: their
        ``check``, and so the end of training when it converged."""
        metrics = jax.device_get(metrics)
        stop = self.check(metrics, done + length)
        return Chunk(metrics, length, stop=stop, stopped=self.stopped)


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
        learner's state) and returns a dict of scalar metrics for the chunk (floats, or
        Python ints, which stay ints; a ``step`` entry replaces the loop's count in the
        row, for a learner that counts its steps otherwise), or a ``Chunk`` when it ran
        fewer steps or training is over (a learner that stops on convergence).
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
    bar = progress_report.bar(
        num_iters, f"{method} training", show=progress, unit="steps", leave=False
    )
    done = 0
    while done < num_iters:
        length = min(chunk, num_iters - done)
        out = advance(done, length)
        if not isinstance(out, Chunk):
            out = Chunk(out, length)
        done += out.steps
        row = {k: _scalar(v) for k, v in jax.device_get(out.metrics).items()}
        row.setdefault("step", done)
        row["seconds"] = time.perf_counter() - t0
        # before the hook: no evaluation of a diverged model
        model_checks.check_row(
            row, method=method, step=row["step"], reference_loss=reference_loss, hint=hint
        )
        if not history and "loss" in row:  # later losses are measured against the first too
            # (at least 1: a first loss near 0, as a hinge soon has, is no scale to grow from)
            reference_loss = max(abs(row["loss"]), abs(reference_loss or 0.0), 1.0)
        if on_chunk is not None:
            t0 += call_hook(on_chunk, row, method=method, step=done)
        if out.stopped is not None:
            row["stopped"] = out.stopped
            logging.info("%s stopped: %s", method, out.stopped)
        history.append(row)
        if log_fn is not None:
            log_fn(row)
        if "loss" in row:
            bar.set_postfix_str(f"loss {row['loss']:.4g}")
        bar.update(out.steps)
        if out.stop:
            break
    bar.close()
    return history


def fit_in_chunks(
    advance: Callable[[int, int], dict],
    current_metric: Callable[[], Metric],
    *,
    method: str,
    features: np.ndarray,
    callback: Callable[[dict, Metric], dict | None] | None = None,
    model_hint: str | None = None,
    **loop,
) -> tuple[Metric, list[dict]]:
    """The end every iterative learner's ``fit`` shares: ``run_in_chunks``, then the model.

    Args:
      advance: as for ``run_in_chunks``.
      current_metric: the ``Metric`` of the learner's state as it is now (called after
        every logged chunk when there is a ``callback``, and once at the end).
      method: the learner's name, for the messages.
      features: the training features, for ``check_model``'s collapse check.
      callback: the ``fit``'s ``callback(row, metric)`` (``run_in_chunks``' ``on_chunk``
        with the metric learned so far).
      model_hint: what to try when the final model is unusable (default: ``loop``'s hint,
        else ``check_model``'s).
      **loop: ``run_in_chunks``' other arguments (num_iters, chunk, log_fn, progress, t0,
        reference_loss, hint).

    Returns:
      (the checked final ``Metric``, the history rows).
    """
    on_chunk = None if callback is None else lambda row: callback(row, current_metric())
    history = run_in_chunks(advance, method=method, on_chunk=on_chunk, **loop)
    hint = model_hint or loop.get("hint") or "lower learning_rate"
    return model_checks.check_model(
        current_metric(), method=method, features=features, hint=hint
    ), history


class Loop(NamedTuple):
    """One ``fit`` of an iterative learner, as its loop needs it: the arguments every such
    ``fit`` hands on to ``fit_in_chunks`` unchanged.

    Attributes:
      method: the learner's name, for the messages and the progress bar.
      features: the training features as the ``fit`` got them (``check_model``).
      log_fn, progress, callback: the ``fit``'s arguments of those names.
      t0: ``time.perf_counter()`` at the start of the fit (None: when the loop starts).
    """

    method: str
    features: Any
    log_fn: Callable[[dict], None] | None = None
    progress: bool = False
    callback: Callable[[dict, Metric], dict | None] | None = None
    t0: float | None = None

    @classmethod
    def start(cls, method: str, features, log_fn=None, progress=False, callback=None) -> Loop:
        """A ``Loop`` whose clock (the rows' ``seconds``) starts now."""
        return cls(method, features, log_fn, progress, callback, time.perf_counter())

    def fit(self, advance, current_metric, **loop) -> tuple[Metric, list[dict]]:
        """``fit_in_chunks(advance, current_metric, ...)`` with this fit's arguments; ``loop``:
        the others (num_iters, chunk, reference_loss, hint, model_hint)."""
        return fit_in_chunks(advance, current_metric, **self._asdict(), **loop)


def _scalar(v) -> int | float:
    return v if isinstance(v, int) and not isinstance(v, bool) else float(v)


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
