"""An iterative learner's number of steps, chosen on identities held out of its training set.

A learner that minimises its training loss to convergence can fit the training people
and lose on new ones: LMNN at convergence ranks the test people of the ORL faces of data/
below plain Euclidean distance (docs/methods.md#lmnn-and-nca-when-to-stop). The reference
LMNN release (Weinberger's ``lmnn2``, its ``validation`` and ``earlystopping`` parameters)
answers this by holding a share of the training data out, scoring it every few steps,
stopping once the score stopped improving, and training again on all of it for the number
of steps that scored best. This module is that rule, for re-identification:

* ``split``: ``round(fraction * K)`` of the K training identities (those with two or
  more images, so that each has a match), drawn from the seed, are held out;
* ``Watch``: the learner's loop scores the metric learned so far on them every
  ``every`` steps by retrieval (each held-out image a query against the other held-out
  images, the query itself excluded; ``warca_jax.evaluation.evaluate``) and says when
  ``patience`` scores in a row did not beat the best (the earliest best of ties is kept);
* the learner then trains on every training identity, on the same step schedule, and
  stops at the chosen step.

The held-out people are never the test people of a split: they are drawn from the
training part the learner is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from absl import logging

from warca_jax import evaluation
from warca_jax.data import identity_splits
from warca_jax.metric import Metric


class Held(NamedTuple):
    """Training and held-out rows of a training set."""

    train: np.ndarray  # [n_train] row indices
    val: np.ndarray  # [n_val] row indices
    num_ids: int  # identities held out


def split(
    labels: np.ndarray, fraction: float, *, seed: int, field: str = "the held-out share"
) -> Held | str:
    """Holds out the identities ``identity_splits.held_out_ids`` draws (the project's one draw);
    ``field`` names the fraction in the sentence (``lam_val_fraction``, ``stop_val_fraction``).

    Returns:
      a ``Held``, or a sentence saying why nothing could be held out (fewer than 2
      identities to hold out, or fewer than 2 left to train on).
    """
    labels = np.asarray(labels)
    chosen, eligible = identity_splits.held_out_ids(labels, fraction, seed=seed)
    num_val, num_ids = len(chosen), len(np.unique(labels))
    if num_val < 2 or num_ids - num_val < 2:
        return (
            f"{field} {fraction:g} of {eligible} identities with two or more "
            f"images holds {num_val} out: 2 or more are needed, with 2 or more left to train on"
        )
    is_val = np.isin(labels, chosen)
    return Held(np.flatnonzero(~is_val), np.flatnonzero(is_val), num_val)


def retrieval_map(metric: Metric, x: np.ndarray, labels: np.ndarray) -> float:
    """mAP of each image of ``x`` as a query against the others under ``metric``."""
    z = metric.transform(x)
    own = np.arange(len(labels))  # each image its own camera: only itself is excluded
    res = evaluation.evaluate(z, z, labels, labels, own, own, distance=metric.distance)
    return float(res["mAP"])


class Best:
    """The best of a sequence of scores, the earliest of ties, and the misses since it.

    The one best-so-far rule of the project: ``Watch`` here, and the pipeline's
    ``eval.keep_best`` (``warca_jax.runs.pipeline.fit_split``), keep a model by it.
    """

    def __init__(self):
        self.step: int | None = None
        self.value = -np.inf
        self.misses = 0  # scores since the best that did not beat it

    def offer(self, step: int, value: float) -> bool:
        """Records ``value`` scored at ``step``; True when it beats every earlier score."""
        if value > self.value:
            self.step, self.value, self.misses = step, value, 0
            return True
        self.misses += 1
        return False


class Watch:
    """Scores a learner's metric on held-out rows every ``every`` steps; keeps the best."""

    def __init__(self, x: np.ndarray, labels: np.ndarray, *, every: int, patience: int):
        self.x, self.labels = x, labels
        self.every, self.patience = int(every), int(patience)
        self.best = Best()
        self.scores: list[tuple[int, float]] = []

    @property
    def best_step(self) -> int:
        """The step of the best held-out mAP (0 before any score)."""
        return 0 if self.best.step is None else self.best.step

    @property
    def best_map(self) -> float:
        """The best held-out mAP (-inf before any score)."""
        return self.best.value

    def due(self, step: int) -> bool:
        """Whether the metric after ``step`` steps is to be scored."""
        return step % self.every == 0

    def score(self, step: int, metric: Metric) -> bool:
        """Scores the metric after ``step`` steps; True when training should stop."""
        value = retrieval_map(metric, self.x, self.labels)
        self.scores.append((step, value))
        self.best.offer(step, value)
        return self.best.misses >= self.patience

    def summary(self, num_ids: int) -> str:
        """What the held-out identities chose, for the history and the log."""
        if not self.scores:
            return f"held out {num_ids} identities, scored nothing: num_iters {self.every}+ needed"
        return (
            f"{num_ids} held-out identities chose step {self.best_step} (held-out mAP "
            f"{self.best_map:.2f}; scored at {len(self.scores)} steps, the last "
            f"{self.scores[-1][0]})"
        )


def choose_steps(
    method: str,
    x: np.ndarray,
    labels: np.ndarray,
    cfg,
    validate: Callable,
    train_part: Callable[[np.ndarray, np.ndarray, Watch], object],
    *,
    seed: int,
) -> tuple[int | None, str | None]:
    """The step at which a learner's fit on all of (x, labels) is to stop, and a note.

    ``cfg`` carries ``stop_val_fraction`` (0: none), ``val_every`` and ``val_patience``;
    ``validate(x, labels, cfg)`` is the learner's check, which the training part left
    after holding identities out must still pass; ``train_part(x, labels, watch)`` trains
    on that part, scoring through ``watch``. Returns (None, None) for stop_val_fraction 0;
    (None, why) when nothing could be held out (logged): the learner then trains to its
    own end; else (the best step, what the held-out identities chose).
    """
    fraction = float(cfg.stop_val_fraction)
    if fraction <= 0:
        return None, None
    held = split(labels, fraction, seed=seed, field="stop_val_fraction")
    if not isinstance(held, str):
        try:
            validate(x[held.train], labels[held.train], cfg)
        except ValueError as e:
            held = f"the identities left to train on do not suit the config: {e}"
    if isinstance(held, str):
        logging.info("%s: no held-out identities (%s); training to num_iters / tol", method, held)
        return None, f"no held-out identities: {held}"
    watch = Watch(x[held.val], labels[held.val], every=cfg.val_every, patience=cfg.val_patience)
    train_part(x[held.train], labels[held.train], watch)
    note = watch.summary(held.num_ids)
    logging.info("%s: %s", method, note)
    return (watch.best_step if watch.scores else None), note
