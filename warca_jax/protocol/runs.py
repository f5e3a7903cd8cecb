"""The (method, dataset, split) runs: which are applicable, and their jobs.

``check_applicable`` asks every learner, before any training, whether it accepts every
split's training data (``plan.not_applicable``); ``run_jobs`` makes the jobs of the
runs, the cross-validated methods with the grid point ``cv.select`` chose.
"""

from __future__ import annotations

import os

from absl import logging

from warca_jax import methods
from warca_jax.data import identity_splits
from warca_jax.protocol.cross_validation import (
    CrossValidationFailed,
    CrossValidationMissing,
    select,
)
from warca_jax.protocol.datasets import DataInfo, load_stored
from warca_jax.protocol.fields import safe
from warca_jax.protocol.jobs import make_job
from warca_jax.protocol.plan import Plan, run_config, run_method_config


def _validation_splits(plan: Plan, name: str, ds) -> list:
    """The CV splits of dataset ``name`` when a method of ``cv.methods`` runs on it."""
    config, cv = plan.config, plan.config.cv
    if not any(label in plan.cv_methods for label in plan.runs(name)):
        return []
    if cv.num_splits > len(ds.splits):
        raise ValueError(
            f"cv.num_splits = {cv.num_splits}, but dataset {name!r} has "
            f"{len(ds.splits)} splits; lower cv.num_splits"
        )
    try:
        return [
            identity_splits.validation_split(
                ds, c, fraction=cv.val_fraction, seed=config.data.seed, field="cv.val_fraction"
            )
            for c in range(cv.num_splits)
        ]
    except ValueError as e:
        raise ValueError(f"cross-validation on dataset {name!r}: {e}") from None


def _training_parts(plan: Plan, name: str, label: str, ds, val: list):
    """(the run's method config, [(where, training indices, method config)] of every fit
    ``label`` makes on ``name``)."""
    config, cv = plan.config, plan.config.cv
    cfg = run_method_config(config, label, name, plan.dim(name))
    parts = [(f"training part of split {s}", sp.train_idx, cfg) for s, sp in enumerate(ds.splits)]
    if label in plan.cv_methods:
        lam, eta = plan.grid(label)[0]
        over = dict(lam=lam, learning_rate=eta)
        if cv.num_iters:
            over["num_iters"] = cv.num_iters
        cv_cfg = run_method_config(config, label, name, plan.dim(name), **over)
        parts += [
            (f"cross-validation training part of split {c}", v.train_idx, cv_cfg)
            for c, v in enumerate(val)
        ]
    return cfg, parts


def check_applicable(plan: Plan, data: dict[str, DataInfo]) -> None:
    """Fills ``plan.not_applicable``: the runs whose learner refuses the dataset's data.

    Every learner checks its config against every split's training part (and, for the
    cross-validated ones, against the validation splits' training parts) before any
    training. A ``ValueError`` from that check makes (dataset, label) not applicable, with
    the reason; any other exception is a bug and propagates.

    Raises:
      ValueError: the cross-validation settings do not fit a dataset (more CV splits than
        it has, too few identities to hold some out).
    """
    plan.not_applicable = {}
    for name in plan.datasets:
        ds = load_stored(data[name].path)
        val = _validation_splits(plan, name, ds)
        for label in plan.runs(name):
            cfg, parts = _training_parts(plan, name, label, ds, val)
            validate = methods.get(cfg.name).validate
            for where, idx, run_cfg in parts:
                try:
                    validate(ds.features[idx], ds.labels[idx], run_cfg)
                except ValueError as e:
                    reason = f"{e} (on the {where})"
                    plan.not_applicable[(name, label)] = reason
                    logging.warning("%s on %s is not applicable: %s", label, name, reason)
                    break


def run_jobs(
    plan: Plan, workdir: str, data: dict[str, DataInfo], *, strict: bool = True
) -> list[dict]:
    """The (method, dataset, split) runs; cross-validated methods get their selection.

    A method whose every grid point failed gets runs that fail with that reason. With
    ``strict=False`` (the report) the runs of a method whose cross-validation is not
    done are left out instead of raising ``CrossValidationMissing``.
    """
    jobs = []
    for name in plan.datasets:
        for label in plan.active(name):
            over, fail = {}, ""
            if label in plan.cv_methods:
                try:
                    sel = select(plan, workdir, data, name, label)
                except CrossValidationMissing:
                    if strict:
                        raise
                    continue
                except CrossValidationFailed as e:
                    fail = str(e)
                else:
                    over = dict(lam=sel["lam"], learning_rate=sel["learning_rate"])
            cfg = run_config(
                plan.config,
                name,
                run_method_config(plan.config, label, name, plan.dim(name), **over),
            )
            for s in range(data[name].num_splits):
                folder = os.path.join(workdir, "runs", safe(name), safe(label), f"split_{s}")
                job = make_job("run", name, label, s, folder, cfg, data[name], workdir=workdir)
                if fail:
                    job["fail"] = fail
                jobs.append(job)
    return jobs
