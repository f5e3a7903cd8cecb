"""A run checked before any work, once: its learner, its data, each split's held-out part.

``check_run_config`` is every check ``pipeline.train_and_evaluate`` makes before it trains
or writes anything, each made once per run: the settings (``config_checks.check_settings``,
which looks the learner up in the registry, the run's one look-up), ``data.val_fraction``
and ``eval.keep_best`` (``config_checks.check_validation_config``), the data, and the
learner's ``validate`` on every split's training part less its held-out identities, drawn
here once per split (``identity_splits.validation_split``). What it checked and drew comes
back as a ``CheckedRun``, whose ``plan(s)`` (a ``SplitPlan``: the learner and split s's
held-out part) ``pipeline.run_split`` fits from. A caller that runs one split without
checking the run (a protocol job) gets its plan from ``plan_split``.
"""

from __future__ import annotations

from typing import NamedTuple

from warca_jax import datasets, methods
from warca_jax.data import dataset_arrays, identity_splits
from warca_jax.runs import config_checks, defaults


class SplitPlan(NamedTuple):
    """What split s's fit needs, checked and drawn once (``check_run_config``)."""

    method: methods.Method  # the learner ``config.method.name`` names
    val: dataset_arrays.Split | None  # its held-out part (``validation_split``), or None


class CheckedRun(NamedTuple):
    """A run as ``check_run_config`` checked it: its data, its learner (looked up once) and
    each split's held-out part (drawn once, None without ``data.val_fraction``)."""

    dataset: dataset_arrays.Dataset
    method: methods.Method
    vals: tuple[dataset_arrays.Split | None, ...]

    def plan(self, s: int) -> SplitPlan:
        return SplitPlan(self.method, self.vals[s])


def _held_out(dataset: dataset_arrays.Dataset, s: int, config, fraction: float):
    """Split ``s``'s held-out part at the checked ``fraction`` (``data.val_fraction``), drawn
    from the split's training seed ``config.seed + s``; None when it is 0."""
    if not fraction:
        return None
    return identity_splits.validation_split(
        dataset, s, fraction=fraction, seed=config.seed, field="data.val_fraction"
    )


def plan_split(dataset: dataset_arrays.Dataset, s: int, config) -> SplitPlan:
    """Split ``s``'s plan for a caller that has not checked the run (``run_split`` of a
    protocol job): the learner looked up, ``data.val_fraction`` and ``eval.keep_best``
    checked (``config_checks.check_validation_config``), the held-out part drawn."""
    method = methods.get(config.method.name)
    fraction = config_checks.check_validation_config(config, method)
    return SplitPlan(method, _held_out(dataset, s, config, fraction))


def check_run_config(config, workdir: str, *, auto_dim: bool = False) -> CheckedRun:
    """Every check of a run before any work (nothing is trained or written), once each.

    The workdir path, the ``method`` section against the method it names (the run's one
    look-up of its learner) and ``data.batch_size`` (``config_checks.check_settings``),
    ``data.val_fraction`` and ``eval.keep_best``, the data itself, and the method's
    ``validate`` on every split's training part, less its held-out identities (drawn here,
    once per split, and handed to ``run_split`` in the returned ``CheckedRun``).

    With ``auto_dim`` (the main job, when the command line sets no ``method.dim``), D'
    follows the data first (``config_checks.fit_dim_to_data``).

    Raises:
      ValueError: the first problem, its message led by the config field it is about
        (``config.method.kernel: unknown kernel 'rbff'; ...``), or by the dataset and
        split for bad training data (``config_checks.named_fields``).
    """
    method = config_checks.check_settings(config, workdir)
    with config_checks.named_fields(config):
        fraction = config_checks.check_validation_config(config, method)
        bars = defaults.progress_bars(config.progress)
        dataset = datasets.from_config(config.data, progress=bars)
    vals = [_held_out(dataset, s, config, fraction) for s in range(len(dataset.splits))]
    trains = [
        split.train_idx if val is None else val.train_idx
        for split, val in zip(dataset.splits, vals, strict=True)
    ]
    if auto_dim:
        config_checks.fit_dim_to_data(config, dataset, method, trains)
    for s, t in enumerate(trains):
        where = f"{dataset.name} split {s}"
        with config_checks.named_fields(config, section="method", where=where):
            method.validate(dataset.features[t], dataset.labels[t], config.method)
    return CheckedRun(dataset, method, tuple(vals))
