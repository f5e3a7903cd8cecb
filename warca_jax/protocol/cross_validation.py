"""Cross-validation: the jobs of every grid point, and the selection of the best one.

``cv/<dataset>/<method>/split_<c>/lam_<lam>_eta_<eta>/result.json`` holds a grid point's
validation scores on CV split ``c``; ``select`` reads them all (verified) and writes
``cv/<dataset>/<method>/selected.json``, the point with the best mean ``cv.measure``.

A method whose learner trains a grid together (``Method.grid``: WARCA) gets one job for
its whole grid on a dataset, every point on every CV split (``grid_job.run_grid_job``): each
split's data, start and compiled program are prepared once, and with ``cv.halving`` =
eta > 1 the points are compared at rungs (successive halving): at each rung the best
1/eta of them by mean validation score go on, the rest stop there, recorded with
``halted_at`` and never selected. A point that reaches the end is the model a fit of its
own gives, so the choice is the full grid's whenever its winner survives the rungs.
"""

from __future__ import annotations

import os

import numpy as np

from warca_jax import methods
from warca_jax.io import run_files, writes
from warca_jax.protocol import successive_halving
from warca_jax.protocol.datasets import DataInfo
from warca_jax.protocol.fields import safe
from warca_jax.protocol.jobs import make_job, outcome
from warca_jax.protocol.plan import Plan, method_config, run_config, run_method_config


class CrossValidationMissing(RuntimeError):
    """The runs stage needs cross-validation results that are not there yet."""


class CrossValidationFailed(RuntimeError):
    """Every grid point of a method failed in cross-validation: nothing to select."""


def _grid_name(lam: float, eta: float) -> str:
    return f"lam_{lam:g}_eta_{eta:g}"


def cv_job(plan: Plan, workdir: str, info: DataInfo, name, label, c, lam, eta) -> dict:
    """The job of grid point (``lam``, ``eta``) of ``label`` on CV split ``c`` of ``name``."""
    cv = plan.config.cv
    grid_point = _grid_name(lam, eta)
    folder = os.path.join(workdir, "cv", safe(name), safe(label), f"split_{c}", grid_point)
    over = dict(lam=lam, learning_rate=eta)
    if cv.num_iters:
        over["num_iters"] = cv.num_iters
    cfg = run_config(
        plan.config, name, run_method_config(plan.config, label, name, plan.dim(name), **over)
    )
    return make_job(
        "cv",
        name,
        label,
        c,
        folder,
        cfg,
        info,
        val_fraction=cv.val_fraction,
        seed=plan.config.data.seed,
        workdir=workdir,
    )


def trains_grids(label: str) -> bool:
    """Whether ``label``'s learner trains a grid together (``Method.grid``)."""
    return methods.get(method_config(label).name).grid is not None


def grid_job(plan: Plan, workdir: str, info: DataInfo, name: str, label: str) -> dict:
    """The one job of ``label``'s whole grid on ``name``: every point on every CV split."""
    cv = plan.config.cv
    points = [
        cv_job(plan, workdir, info, name, label, c, lam, eta)
        for c in range(cv.num_splits)
        for lam, eta in plan.grid(label)
    ]
    halving = int(cv.get("halving", 1))
    first = points[0]["config"]["method"]
    num_iters, log_every = int(first["num_iters"]), int(first["log_every"])
    return dict(
        kind="cv_grid",
        dataset=name,
        label=label,
        split=-1,
        folder=os.path.join(workdir, "cv", safe(name), safe(label)),
        workdir=workdir,
        points=points,
        grid=[list(p) for p in plan.grid(label)],
        num_splits=cv.num_splits,
        halving=halving,
        rungs=successive_halving.rungs(num_iters, log_every, len(plan.grid(label)), halving),
        measure=cv.measure,
    )


def cv_jobs(plan: Plan, workdir: str, data: dict[str, DataInfo]) -> list[dict]:
    """Every grid point of every applicable ``cv.methods`` label on every CV split: one
    job per point, or one per method and dataset for a learner that trains grids."""
    cv = plan.config.cv
    jobs = []
    for name in plan.datasets:
        for label in plan.cv_methods:
            if label not in plan.active(name):
                continue
            if trains_grids(label):
                jobs.append(grid_job(plan, workdir, data[name], name, label))
                continue
            for c in range(cv.num_splits):
                for lam, eta in plan.grid(label):
                    jobs.append(cv_job(plan, workdir, data[name], name, label, c, lam, eta))
    return jobs


def _grid_table(plan: Plan, workdir: str, data, name: str, label: str):
    """(one row per grid point with its scores and failures, the missing result files)."""
    cv = plan.config.cv
    table, missing = [], []
    for lam, eta in plan.grid(label):
        row = {"lam": lam, "learning_rate": eta, "scores": [], "failed": []}
        for c in range(cv.num_splits):
            job = cv_job(plan, workdir, data[name], name, label, c, lam, eta)
            got = outcome(job)
            if got is None:
                missing.append(job["result"])
            elif got[0] == "done":
                row["scores"].append(float(got[1][cv.measure]))
                if "halted_at" in got[1]:  # stopped at a rung of successive halving
                    row["halted_at"] = int(got[1]["halted_at"])
            else:
                row["scores"].append(None)
                row["failed"].append(f"split {c}: {got[1]}")
        table.append(row)
    return table, missing


def select(plan: Plan, workdir: str, data: dict[str, DataInfo], name: str, label: str) -> dict:
    """The grid point with the best mean validation score over the CV splits.

    Writes ``cv/<dataset>/<method>/selected.json`` with the mean of every grid point (a
    point that failed on a split has the reasons and no mean, and is never selected).

    Raises:
      CrossValidationMissing: grid results are missing (the cv stage is not done).
      CrossValidationFailed: every grid point failed.
    """
    base = os.path.join(workdir, "cv", safe(name), safe(label))
    table, missing = _grid_table(plan, workdir, data, name, label)
    if missing:
        raise CrossValidationMissing(
            f"{len(missing)} cross-validation results of {label} on {name} are missing "
            f"(first: {missing[0]}); run --stage=cv on every shard first"
        )
    for row in table:
        row["mean"] = None if row["failed"] else float(np.mean(row["scores"]))
    # a point halted at a rung has its score there: shown, never selected
    done = [r for r in table if r["mean"] is not None and "halted_at" not in r]
    if not done:
        raise CrossValidationFailed(
            f"every grid point of {label} on {name} failed in cross-validation (first: "
            f"{table[0]['failed'][0]}); see {base}"
        )
    best = max(done, key=lambda r: r["mean"])  # the first of equal ones, in grid order
    out = {
        "measure": plan.config.cv.measure,
        "lam": best["lam"],
        "learning_rate": best["learning_rate"],
        "mean": best["mean"],
        "grid": table,
    }
    writes.makedirs(base, within=workdir)
    run_files.write_json(os.path.join(base, "selected.json"), out)
    return out
