"""``run_protocol``: a stage of the protocol, start to end (see the package docstring)."""

from __future__ import annotations

from absl import logging

from warca_jax.io import run_files
from warca_jax.protocol.cross_validation import cv_jobs
from warca_jax.protocol.datasets import prepare_dataset
from warca_jax.protocol.plan import Plan
from warca_jax.protocol.pool import execute, shard
from warca_jax.protocol.report import collect, write_report
from warca_jax.protocol.runs import check_applicable, run_jobs
from warca_jax.runs import defaults

STAGES = ("all", "cv", "runs", "report")


def _check_flags(stage: str, num_workers: int, num_shards: int, shard_index: int) -> None:
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be an integer >= 1, got {num_workers!r}")
    shard([], num_shards, shard_index)


def run_protocol(
    config,
    workdir: str,
    *,
    stage: str = "all",
    num_workers: int = 1,
    num_shards: int = 1,
    shard_index: int = 0,
    explicit=None,
) -> dict:
    """Runs a stage of the protocol (see the package docstring); returns the results.

    ``explicit``: the config fields the user set (``Plan``; the command line passes its
    overrides): cv settings of methods not run are refused there and dropped elsewhere.

    Raises:
      ValueError: a bad config or flag, before any work.
      NotADirectoryError, PermissionError: the workdir cannot be a folder of ours.
      RuntimeError: runs failed (each is named in the message and the log, shown as
        ``failed`` in the tables and has a ``failed.json``), raised after the report is
        written; or the runs stage found cross-validation results missing.
    """
    _check_flags(stage, num_workers, num_shards, shard_index)
    plan = Plan(config, explicit=explicit)
    if not isinstance(workdir, str) or not workdir:
        raise ValueError(f"workdir must be a folder path, got {workdir!r}")
    run_files.prepare(workdir)
    data = {name: prepare_dataset(config, name, workdir) for name in plan.datasets}
    check_applicable(plan, data)  # every learner checks every split before any training
    kw = dict(num_workers=num_workers, progress=defaults.progress_bars(config.progress))
    if stage in ("all", "cv"):
        jobs = shard(cv_jobs(plan, workdir, data), num_shards, shard_index)
        cv_failures = execute(jobs, desc="cross-validation", **kw)
        if cv_failures:
            logging.warning(
                "%d cross-validation grid points failed; they are never selected (the "
                "reasons are in selected.json and their failed.json)",
                len(cv_failures),
            )
    failures = []
    if stage in ("all", "runs"):
        jobs = shard(run_jobs(plan, workdir, data), num_shards, shard_index)
        failures = execute(jobs, desc="runs", **kw)
    results = collect(plan, workdir, data)
    if stage in ("all", "report") or num_shards == 1:
        for path in write_report(plan, workdir, results):
            logging.info("wrote %s", path)
    if failures:
        names = "; ".join(
            f"{j['dataset']} {j['label']} split {j['split']}: {e}" for j, e in failures
        )
        raise RuntimeError(
            f"{len(failures)} runs failed (shown as 'failed' in the tables; their "
            f"failed.json say why; remove one to run it again): {names}"
        )
    return results
