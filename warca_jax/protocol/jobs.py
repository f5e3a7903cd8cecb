"""One job: what it is (a dict), its outcome files and how they are checked, running it.

A job is a plain dict (picklable, for the worker processes): ``kind`` ("cv" or "run"),
the dataset, method label and split, its folder and config, and the stored data it
reads. Its outcome file (``result.json`` / ``split_<s>.json``, or ``failed.json``)
records the job (``identity``) and is trusted only when it names this job and holds
finite measures in range (``outcome``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time

import ml_collections
import numpy as np
from absl import logging

from warca_jax import evaluation
from warca_jax.data import identity_splits
from warca_jax.features import feature_norm
from warca_jax.io import run_files, workdir_lock, writes
from warca_jax.methods import model_checks
from warca_jax.protocol.datasets import DataInfo, load_stored
from warca_jax.runs import pipeline

# What a job that started raises when training or evaluation fails on its data: recorded
# as the job's failure (failed.json) and shown in the tables. Anything else is a bug and
# stops the protocol. A diverged run raises model_checks.TrainingDivergedError, a
# TrainingDivergedError, where it exists, is one; it is named here in case it is not).
TRAINING_FAILURES: tuple[type[BaseException], ...] = (
    FloatingPointError,
    ValueError,
    np.linalg.LinAlgError,
    model_checks.TrainingDivergedError,
)

CV_KEYS = ("rank1", "rank5", "rank10", "mAP", "train_seconds")  # finite in a CV result


def json_kind(value) -> str:
    """The JSON name of a parsed value's type ('object', 'array', ...)."""
    if isinstance(value, bool):
        return "true/false"
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", int: "number", float: "number"}.get(
        type(value), type(value).__name__
    )


def _sha256(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def make_job(
    kind: str, name: str, label: str, split: int, folder: str, cfg, info: DataInfo, **kw
) -> dict:
    """The job of ``kind`` ("cv" or "run") running config ``cfg`` into ``folder``."""
    config = cfg.to_dict()
    result = "result.json" if kind == "cv" else f"split_{split}.json"
    # what the job computes: the fields that only change how it looks or where it keeps
    # things are left out, and so are fields at the value runs had before they existed,
    # so that an outcome is reused exactly when ``claim`` accepts the folder's config
    canonical = run_files.computed_fields(config)
    return dict(
        kind=kind,
        dataset=name,
        label=label,
        split=split,
        folder=folder,
        config=config,
        config_sha256=_sha256(canonical),
        data=info.path,
        data_sha256=info.sha256,
        result=os.path.join(folder, result),
        failed=os.path.join(folder, "failed.json"),
        **kw,
    )


def identity(job: dict) -> dict:
    """What every outcome file of ``job`` records, to be told from any other job's."""
    return {
        "dataset": job["dataset"],
        "method": job["label"],
        "split": job["split"],
        "config_sha256": job["config_sha256"],
        "data_sha256": job["data_sha256"],
    }


def _wrong_job(job: dict, obj) -> str | None:
    """None if ``obj`` is an outcome of ``job``, else why not."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, found a JSON {json_kind(obj)}"
    if not set(identity(job)) & set(obj):
        return "it does not record which job it belongs to (a crash before it was completed?)"
    for key, want in identity(job).items():
        have = obj.get(key)
        if have == want:
            continue
        if key == "config_sha256":
            return "it was made with another config (or before outcomes recorded their job)"
        if key == "data_sha256":
            return "it was made from other data"
        return f"it holds the outcome of {key} {have!r}, this file's job is {key} {want!r}"
    return None


def _check_cv_result(job: dict, obj) -> str | None:
    reason = _wrong_job(job, obj) or run_files.finite_numbers(obj, CV_KEYS)
    if reason:
        return reason
    bad = [k for k in CV_KEYS[:-1] if not 0 <= obj[k] <= 100]
    if bad or obj["train_seconds"] < 0:
        return f"{bad or 'train_seconds'} out of range"
    return None


def _check_failed(job: dict, obj) -> str | None:
    reason = _wrong_job(job, obj)
    if reason:
        return reason
    if obj.get("status") != "failed" or not isinstance(obj.get("error"), str) or not obj["error"]:
        return "it records no failure (status 'failed' and an error)"
    return None


def outcome(job: dict) -> tuple[str, object] | None:
    """What the job's files record: ("done", results), ("failed", reason) or None.

    Every file is verified (``workdir.reuse_json``, and ``pipeline.reuse_split`` for a run's
    split file and model): one that is damaged, non-finite or another job's is logged
    and treated as absent, so that the job is redone.
    """
    if job["kind"] == "cv":
        res = run_files.reuse_json(job["result"], functools.partial(_check_cv_result, job))
    else:
        res = pipeline.reuse_split(job["folder"], job["split"])
        reason = None if res is None else _wrong_job(job, res)
        if reason:
            logging.warning("%s cannot be reused (%s); redoing it", job["result"], reason)
            res = None
    if res is not None:
        return "done", res
    failed = run_files.reuse_json(job["failed"], functools.partial(_check_failed, job))
    if failed is not None:
        return "failed", failed["error"]
    return None


def _job_cv(job: dict) -> None:
    """Fits one grid point on the validation split and writes its score."""
    run_cfg = ml_collections.ConfigDict(job["config"])
    ds = load_stored(job["data"], job["data_sha256"])
    ds = feature_norm.for_split(ds, job["split"], run_cfg.data)
    split = identity_splits.validation_split(
        ds, job["split"], fraction=job["val_fraction"], seed=job["seed"], field="cv.val_fraction"
    )
    t_job = time.perf_counter()
    t0 = time.perf_counter()
    metric, _ = pipeline.fit_method(
        ds.features[split.train_idx],
        ds.labels[split.train_idx],
        run_cfg.method,
        seed=run_cfg.seed + job["split"],
        cams=ds.cams[split.train_idx],
    )
    fit_seconds = time.perf_counter() - t0
    res = evaluation.evaluate_metric(metric, ds, split, run_cfg.eval, seed=run_cfg.seed)
    out = {
        **identity(job),
        "lam": run_cfg.method.lam,
        "learning_rate": run_cfg.method.learning_rate,
        "train_seconds": fit_seconds,
        **{k: float(res[k]) for k in ("rank1", "rank5", "rank10", "mAP")},
        "job_seconds": time.perf_counter() - t_job,
    }
    run_files.write_json(job["result"], out)  # a ValueError (a failure) if not finite


def _job_run(job: dict) -> None:
    """One (method, dataset, split) run into its folder (``pipeline.run_split``)."""
    t_job = time.perf_counter()
    run_cfg = ml_collections.ConfigDict(job["config"])
    ds = load_stored(job["data"], job["data_sha256"])
    out = pipeline.run_split(ds, job["split"], run_cfg, job["folder"])
    out["job_seconds"] = time.perf_counter() - t_job
    run_files.write_json(job["result"], {**identity(job), **out})


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)


def run_job(job: dict) -> dict:
    """Runs a job; returns its outcome, {"status": "done"} or {"status": "failed", "error"}.

    A failure (``TRAINING_FAILURES``) is written to the job's failed.json (and its
    result file, which cannot be sound, removed); any other exception propagates.
    Runs in the worker processes too (``pool.execute``), imported there by its module name.
    The job's folder is locked while it runs (``workdir_lock``): a job another process is
    running is a ``WorkdirInUseError`` naming that process.
    """
    writes.makedirs(job["folder"], within=job.get("workdir"))
    with workdir_lock.WorkdirLock(job["folder"]):
        return _run_locked(job)


def _run_locked(job: dict) -> dict:
    reason = job.get("fail")  # decided before training (every CV grid point failed)
    if not reason:
        try:
            (_job_cv if job["kind"] == "cv" else _job_run)(job)
        except run_files.DamagedFileError:
            raise  # a damaged file, not an outcome of the job: never recorded as one
        except TRAINING_FAILURES as e:
            reason = f"{type(e).__name__}: {e}"
    if reason:
        record_failure(job, reason)
        return {"status": "failed", "error": reason}
    _remove(job["failed"])
    return {"status": "done"}


def record_failure(job: dict, reason: str) -> None:
    """The job's failed.json with ``reason``; its result file, which cannot be sound, removed."""
    _remove(job["result"])
    run_files.write_json(job["failed"], {**identity(job), "status": "failed", "error": reason})


def claim(folder: str, run_cfg, within: str | None = None) -> None:
    """Creates a job's folder with its config.json, or checks the config already there.

    No folder from ``within`` (the workdir) down to ``folder`` may be a symbolic link
    (``writes.makedirs``): a link planted there would send the job's files elsewhere.

    A config.json that does not parse (a crash while it was written) is written again:
    the job's outcome files record the config they were made with, and are checked
    against it, so nothing is lost. One that parses but differs in a field that is not
    presentation only (``workdir.IGNORED_FIELDS``: progress bars, the plot's ranks, the
    feature cache's folder) is refused, naming the fields.
    """
    writes.makedirs(folder, within=within)
    path = os.path.join(folder, "config.json")
    text = run_cfg.to_json_best_effort(indent=1, sort_keys=True)
    old = run_files.reuse_json(
        path, lambda o: None if isinstance(o, dict) else f"a JSON {json_kind(o)}, not a config"
    )
    if old is None:
        run_files.write_text(path, text)
        return
    # what differs, presentation-only fields (progress) left out, as the main job does
    diffs = run_files.config_differences(old, json.loads(text))
    if diffs:
        raise ValueError(
            f"{folder} holds a run with a different config ({path}): "
            f"{run_files.describe_differences(diffs)}; use a new workdir or remove it to "
            "start over"
        )
