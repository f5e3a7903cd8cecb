"""The job of a whole cross-validation grid: every point of a method on every CV split.

For a learner that trains a grid together (``Method.grid``: WARCA), ``cv.grid_job`` makes
one job per method and dataset. ``run_grid_job`` prepares each CV split once, trains the
points rung by rung (``halving.rungs``; one rung, the full training, by default) and
writes each point's outcome on each split exactly as a job of its own would
(``result.json`` or ``failed.json``, checked by ``jobs.outcome``), plus the grid's
``timing.json``.
"""

from __future__ import annotations

import os
import time

import jax
import ml_collections
import numpy as np

from warca_jax import evaluation, methods
from warca_jax.data import identity_splits
from warca_jax.features import feature_norm
from warca_jax.io import run_files, workdir_lock, writes
from warca_jax.protocol import successive_halving
from warca_jax.protocol.datasets import load_stored
from warca_jax.protocol.jobs import (
    TRAINING_FAILURES,
    _remove,
    identity,
    outcome,
    record_failure,
    run_job,
)


def pending(job: dict) -> bool:
    """Whether a grid job has a point without an outcome, or one halted under another
    ``halving`` than the job's (its grid must be trained again)."""
    for point in job["points"]:
        got = outcome(point)
        if got is None:
            return True
        if got[0] == "done" and "halted_at" in got[1]:
            if got[1].get("halving") != job["halving"] or got[1]["halted_at"] not in job["rungs"]:
                return True
    return False


def failures(job: dict) -> list[tuple[dict, str]]:
    """The recorded failures of a grid job's points."""
    out = []
    for point in job["points"]:
        got = outcome(point)
        if got is not None and got[0] == "failed":
            out.append((point, got[1]))
    return out


def run_any(job: dict) -> dict:
    """``run_grid_job`` for a grid job, ``jobs.run_job`` for any other (the workers' entry)."""
    return run_grid_job(job) if job.get("kind") == "cv_grid" else run_job(job)


def run_grid_job(job: dict) -> dict:
    """Trains a grid job in its locked folder (see the module).

    Returns:
      {"status": "done", "failures": [(point job, reason), ...]}.
    """
    writes.makedirs(job["folder"], within=job.get("workdir"))
    with workdir_lock.WorkdirLock(job["folder"]):
        return _Grid(job).run()


def _write_point(point: dict, res: dict | None, reason: str | None, extra: dict) -> None:
    """A grid point's outcome on one split: its result.json, or its failed.json."""
    if reason is None:
        try:
            run_files.write_json(point["result"], {**identity(point), **res, **extra})
            _remove(point["failed"])
            return
        except ValueError as e:  # a non-finite score: a failure, as a point job's
            reason = f"{type(e).__name__}: {e}"
    record_failure(point, reason)


class _Grid:
    """One run of a grid job: its fits per split, the failures, the seconds."""

    def __init__(self, job: dict):
        self.job = job
        self.grid = [tuple(g) for g in job["grid"]]
        self.splits = range(job["num_splits"])
        # the point jobs by (CV split, grid index), as cross_validation.grid_job lists them
        self.points = {(p["split"], i % len(self.grid)): p for i, p in enumerate(job["points"])}
        first = self.points[(0, 0)]
        self.run_cfg = ml_collections.ConfigDict(first["config"])
        self.stored = load_stored(first["data"], first["data_sha256"])
        self.ds = {}  # CV split -> the data as its fits see them (data.normalize)
        self.fits, self.vsplits = {}, {}
        self.failed: dict[tuple[int, int], str] = {}  # (split, point) -> reason
        self.seconds = {"prepare": 0.0, "eval": 0.0}
        self.rungs: list[dict] = []

    def run(self) -> dict:
        t0 = time.perf_counter()
        self._prepare()
        untrained = [p for p in range(len(self.grid)) if self._failed_anywhere(p)]
        live = [p for p in range(len(self.grid)) if p not in untrained]
        for r, step in enumerate(self.job["rungs"]):
            if not live:
                break
            live = self._rung(step, live, last=r == len(self.job["rungs"]) - 1)
        for p in untrained:  # a split's data refused: the point fails on every split
            reason = next(self.failed[(c, p)] for c in self.splits if (c, p) in self.failed)
            for c in self.splits:
                why = self.failed.get((c, p), f"not trained: {reason}")
                _write_point(self.points[(c, p)], None, why, {})
        self._write_timing(time.perf_counter() - t0)
        out = [(self.points[k], why) for k, why in sorted(self.failed.items())]
        return {"status": "done", "failures": out}

    def _failed_anywhere(self, p: int) -> bool:
        return any((c, p) in self.failed for c in self.splits)

    def _prepare(self) -> None:
        """Each split's validation split and its ``Method.grid`` (prepared once)."""
        t0 = time.perf_counter()
        method = methods.get(self.run_cfg.method.name)
        for c in self.splits:
            point = self.points[(c, 0)]
            ds = self.ds[c] = feature_norm.for_split(self.stored, c, self.run_cfg.data)
            self.vsplits[c] = identity_splits.validation_split(
                ds, c, fraction=point["val_fraction"], seed=point["seed"], field="cv.val_fraction"
            )
            tr = self.vsplits[c].train_idx
            try:
                self.fits[c] = method.grid(
                    ds.features[tr], ds.labels[tr], self.run_cfg.method, self.grid,
                    seed=self.run_cfg.seed + c, cams=ds.cams[tr],
                )  # fmt: skip
            except TRAINING_FAILURES as e:
                why = f"{type(e).__name__}: {e}"
                self.failed.update({(c, p): why for p in range(len(self.grid))})
        self.seconds["prepare"] = time.perf_counter() - t0

    def _score(self, c: int, p: int) -> dict:
        res = evaluation.evaluate_metric(
            self.fits[c].metric(p), self.ds[c], self.vsplits[c], self.run_cfg.eval,
            seed=self.run_cfg.seed,
        )  # fmt: skip
        return {k: float(res[k]) for k in ("rank1", "rank5", "rank10", "mAP")}

    def _rung(self, step: int, live: list[int], *, last: bool) -> list[int]:
        """Trains ``live`` to ``step`` and scores them; writes the points that stop here
        (all of them at the last rung); returns the points that go on."""
        self.rungs.append({"step": step, "points": len(live)})
        results = {}
        for c in self.splits:
            self.fits[c].advance(step, live)
            t0 = time.perf_counter()
            for p in live:
                if p in self.fits[c].failed:
                    self.failed[(c, p)] = self.fits[c].failed[p]
                    continue
                try:
                    results[(c, p)] = self._score(c, p)
                except TRAINING_FAILURES as e:
                    self.failed[(c, p)] = f"{type(e).__name__}: {e}"
            self.seconds["eval"] += time.perf_counter() - t0
        scored = [p for p in live if all((c, p) in results for c in self.splits)]
        measure = self.job["measure"]
        means = {p: float(np.mean([results[(c, p)][measure] for c in self.splits])) for p in scored}
        going = scored if last else successive_halving.survivors(means, self.job["halving"])
        for p in live:
            if p not in going or last:
                self._stop(p, step, results, halted=p not in going)
        return going

    def _stop(self, p: int, step: int, results: dict, *, halted: bool) -> None:
        """Writes point ``p``'s outcome on every split and frees its state."""
        extra = {"halted_at": step, "halving": self.job["halving"]} if halted else {}
        lam, eta = self.grid[p]
        for c in self.splits:
            res = results.get((c, p))
            if res is not None:
                seconds = self.fits[c].seconds[p]
                res = {"lam": lam, "learning_rate": eta, "train_seconds": seconds, **res}
            reason = self.failed.get((c, p), None if res else "not scored")
            _write_point(self.points[(c, p)], res, reason, extra)
            self.fits[c].drop(p)

    def _write_timing(self, wall: float) -> None:
        fits = list(self.fits.values())
        run_files.write_json(
            os.path.join(self.job["folder"], "timing.json"),
            {
                "dataset": self.job["dataset"],
                "method": self.job["label"],
                "job_seconds": wall,
                "prepare_seconds": self.seconds["prepare"],
                "train_seconds": sum(sum(f.seconds.values()) for f in fits),
                "eval_seconds": self.seconds["eval"],
                "rungs": self.rungs,
                "halving": self.job["halving"],
                "backend": jax.default_backend(),
            },
        )
