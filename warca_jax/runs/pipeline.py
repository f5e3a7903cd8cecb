"""train_and_evaluate(config, workdir): the one function main.py and notebooks call.

For every split of the dataset it fits the configured method on the training
part, embeds the query and gallery parts, evaluates, and writes into workdir:

* ``config.json``: the config of the run;
* ``metrics.jsonl``: one JSON object per logged training step (with its split, and
  ``val_rank1`` / ``val_mAP`` with ``data.val_fraction`` > 0); none for a closed form;
* ``model_split{s}.npz``: the learned ``Metric`` of split s (``Metric.load``);
* ``split_{s}.json``: the results of split s;
* ``results.json``: per-split results and their mean and std;
* ``cmc.png``: the mean CMC curve, its spread over the splits, its mAP (and Euclidean's);
* ``curves.png``: an iterative learner's training curves (``warca_jax.plots.run_plots``).

A run started again on the same workdir reuses every finished split (its
``split_{s}.json`` and model) and redoes only the unfinished ones; a workdir
holding a run with another config is refused rather than mixed.

With ``data.val_fraction`` > 0, a share of each split's training identities is held out
(``identity_splits.validation_split``, seeded by ``seed`` and the split index) and the learner
trains on the rest; after every logged chunk of steps the metric learned so far is
evaluated on the held-out query/gallery as the split's test is (``evaluate_metric``),
and ``val_rank1`` and ``val_mAP`` join that chunk's metrics.jsonl line. With
``eval.keep_best`` the model of the chunk with the best ``val_mAP`` (the earliest of
ties) is the split's model, saved and tested, instead of the last one. Only iterative
learners (``Method.takes("callback")``) can be watched this way: a closed-form learner
refuses ``data.val_fraction`` > 0 rather than train on fewer identities for nothing.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time

import numpy as np
from absl import logging

from warca_jax import evaluation, methods
from warca_jax.features import feature_norm
from warca_jax.io import run_files, workdir_lock, writes
from warca_jax.methods import held_out
from warca_jax.metric import Metric
from warca_jax.plots import run_plots
from warca_jax.runs import defaults
from warca_jax.runs.config_checks import check_config_file
from warca_jax.runs.run_plan import SplitPlan, check_run_config, plan_split

SUMMARY_KEYS = (
    "rank1",
    "rank5",
    "rank10",
    "rank20",
    "mAP",
    "mINP",
    "AUC",
    "AUC_top30",
    "MAP_at_R",
    "R_precision",
    "train_seconds",
    "eval_seconds",
    "num_skipped",
)
_CMC_KEEP = 100  # ranks of the CMC curve kept in the JSON files


def fit_method(
    features, labels, method_cfg, *, seed=0, log_fn=None, progress=False, callback=None, cams=None
):
    """Fits the learner named ``method_cfg.name`` and returns (Metric, history).

    ``methods.call_fit`` on the registered learner: each argument goes to the learners whose
    ``fit`` takes it (``cams``, the training samples' camera ids, to WARCA's cross-camera
    positives, ignored by the rest); ``callback(row, metric)``, called after every logged
    chunk with the metric learned so far (a dict it returns joins the row), is a ValueError
    for a learner that takes none.
    """
    return methods.call_fit(
        methods.get(method_cfg.name),
        features,
        labels,
        method_cfg,
        seed=seed,
        cams=cams,
        log_fn=log_fn,
        progress=progress,
        callback=callback,
    )


def _copy_metric(metric: Metric) -> Metric:
    """A copy of ``metric`` with its own arrays (the support vectors, never trained, shared)."""
    arrays = {
        f.name: np.array(getattr(metric, f.name))
        for f in dataclasses.fields(metric)
        if f.name != "support" and isinstance(getattr(metric, f.name), np.ndarray)
    }
    return dataclasses.replace(metric, **arrays)


def _jsonable(result: dict) -> dict:
    out = {}
    for k, v in result.items():
        if isinstance(v, np.ndarray):
            v = v[:_CMC_KEEP].tolist() if k == "cmc" else v.tolist()
        elif isinstance(v, np.generic):
            v = v.item()
        out[k] = v
    return out


def _drop_split_lines(path: str, split: int) -> None:
    """Drops an unfinished split's metrics.jsonl lines (and damaged ones); a link: replaced."""
    if os.path.lexists(path):  # a link, dangling or not, is never read nor appended to
        rows = [] if os.path.islink(path) else run_files.read_jsonl(path)
        run_files.write_jsonl(path, [r for r in rows if r.get("split") != split])


def _split_check(s: int):
    """The check a reused split_{s}.json must pass: split s's, every measure finite."""

    def check(obj):
        reason = run_files.finite_numbers(obj, ("split", *SUMMARY_KEYS))
        if reason:
            return reason
        if obj["split"] != s:
            return f"it holds the results of split {obj['split']}, not of split {s}"
        cmc = obj.get("cmc")
        if not isinstance(cmc, list) or not cmc:
            return "its CMC curve is missing"
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in cmc):
            return "its CMC curve holds a non-number"
        return None

    return check


def reuse_split(workdir: str, s: int) -> dict | None:
    """Split s's results if its split_{s}.json and model_split{s}.npz are sound, else None.

    A damaged, non-finite or misplaced file is logged and None is returned: the caller
    redoes the split and overwrites both files.
    """
    res = run_files.reuse_json(os.path.join(workdir, f"split_{s}.json"), _split_check(s))
    if res is None:
        return None
    model = os.path.join(workdir, f"model_split{s}.npz")
    if not os.path.exists(model):
        logging.warning("%s is missing; redoing split %d", model, s)
        return None
    try:  # a cut, corrupt, non-finite model or one of no registered method: DamagedModelError
        methods.load_model(model)
    except (ValueError, OSError) as e:
        logging.warning("%s cannot be reused (%s); redoing split %d", model, e, s)
        return None
    return res


def fit_split(
    dataset, s: int, val, config, metrics_path: str, *, method: methods.Method | None = None
) -> tuple[Metric, float, dict]:
    """Fits split ``s``'s model, its history rows appended to ``metrics_path``.

    With held-out identities ``val`` (``identity_splits.validation_split``, drawn by
    ``run_plan``), the model is trained on their training part and scored on them after every
    logged chunk; with ``eval.keep_best`` the model with the best held-out mAP (the earliest
    of ties, ``held_out.Best``) is kept, else the last. ``method``: the learner
    (``check_run_config``'s look-up; None: the one ``config.method.name`` names). Benchmarks
    call it to fit as a run does without writing a run's workdir.

    Returns:
      (the model, its training seconds without the validation, ``watch``: the kept chunk's
      step and scores under ``kept`` and the validation's ``seconds``).
    """
    split = dataset.splits[s]
    seed = config.seed + s
    keep_best = val is not None and bool(config.eval.get("keep_best", False))
    # the kept chunk's step and scores (the best so far, or the last), its metric, the time
    watch = {"kept": None, "metric": None, "seconds": 0.0}
    best = held_out.Best()  # the earliest best held-out mAP, as LMNN's held-out rule keeps

    def callback(row, metric):
        t = time.perf_counter()
        res = evaluation.evaluate_metric(metric, dataset, val, config.eval, seed=seed)
        scores = {"val_rank1": float(res["rank1"]), "val_mAP": float(res["mAP"])}
        if best.offer(int(row["step"]), scores["val_mAP"]) or not keep_best or not watch["kept"]:
            watch["kept"] = {"kept_step": int(row["step"]), **scores}
            if keep_best:
                watch["metric"] = _copy_metric(metric)
        watch["seconds"] += time.perf_counter() - t
        return scores

    def log_fn(row):  # opened per row: a learner without a history writes no file
        with writes.appending(metrics_path) as append:
            append(json.dumps({"split": s, **row}) + "\n")

    t0 = time.perf_counter()
    train = split.train_idx if val is None else val.train_idx
    metric, _ = methods.call_fit(
        methods.get(config.method.name) if method is None else method,
        dataset.features[train],
        dataset.labels[train],
        config.method,
        cams=dataset.cams[train],
        seed=seed,
        log_fn=log_fn,
        progress=defaults.progress_bars(config.progress),
        callback=None if val is None else callback,
    )
    train_seconds = time.perf_counter() - t0 - watch["seconds"]
    if val is not None and watch["kept"] is None:
        raise RuntimeError(f"{config.method.name} logged no chunk: nothing was validated")
    if keep_best:
        metric = watch["metric"]
    return metric, train_seconds, watch


def run_split(dataset, s: int, config, workdir: str, plan: SplitPlan | None = None) -> dict:
    """Fits, saves and evaluates split ``s``; returns its JSON-able results.

    ``plan``: its learner and held-out part as ``check_run_config`` prepared them
    (``CheckedRun.plan``); None (a protocol job): ``plan_split`` makes it. The split's
    features are normalised first as ``data.normalize`` says (``feature_norm.for_split``).
    """
    dataset = feature_norm.for_split(dataset, s, config.data)
    split = dataset.splits[s]
    metrics_path = os.path.join(workdir, "metrics.jsonl")
    _drop_split_lines(metrics_path, s)
    seed = config.seed + s
    method, val = plan_split(dataset, s, config) if plan is None else plan
    metric, train_seconds, watch = fit_split(dataset, s, val, config, metrics_path, method=method)
    metric.save(os.path.join(workdir, f"model_split{s}.npz"))
    t0 = time.perf_counter()
    res = evaluation.evaluate_metric(metric, dataset, split, config.eval, seed=seed)
    res["eval_seconds"] = time.perf_counter() - t0
    res["train_seconds"] = train_seconds
    out = {"split": s, **_jsonable(res)}
    if val is not None:  # the validated model: its step and scores, and the held-out part
        held = np.concatenate([val.query_idx, val.gallery_idx])
        out.update(
            watch["kept"],
            val_seconds=watch["seconds"],
            num_val_ids=int(len(np.unique(dataset.labels[held]))),
            num_train_ids=int(len(np.unique(dataset.labels[val.train_idx]))),
        )
    if config.eval.baseline:
        base = evaluation.evaluate_metric(
            Metric("identity", dataset.features.shape[1], name="euclidean"),
            dataset,
            split,
            config.eval,
            seed=seed,
        )
        out["baseline_euclidean"] = _jsonable(base)
    run_files.write_json(os.path.join(workdir, f"split_{s}.json"), out)
    return out


def summarise(per_split: list[dict]) -> dict:
    """Mean and std (over splits) of ``SUMMARY_KEYS`` and the mean CMC curve."""
    mean = {k: float(np.mean([r[k] for r in per_split])) for k in SUMMARY_KEYS}
    std = {k: float(np.std([r[k] for r in per_split])) for k in SUMMARY_KEYS}
    length = min(len(r["cmc"]) for r in per_split)
    cmc = np.mean([r["cmc"][:length] for r in per_split], axis=0)
    return {"mean": mean, "std": std, "cmc": cmc.tolist()}


@workdir_lock.one_run_per_workdir
def train_and_evaluate(config, workdir: str, *, auto_dim: bool = False) -> dict:
    """Runs the configured method on every split of the configured dataset.

    Args:
      config: a ConfigDict as returned by configs/warca.py.
      workdir: output folder (created if needed), locked while the run lasts (a second
        run on it is a ``workdir_lock.WorkdirInUseError`` naming this one's pid and host).
      auto_dim: D' follows the data where the caller set none (``config_checks.fit_dim_to_data``);
        False: ``config.method.dim`` as given.

    Returns:
      The dict written to results.json.
    """
    checked = check_run_config(config, workdir, auto_dim=auto_dim)
    dataset = checked.dataset
    run_files.prepare(workdir)
    check_config_file(workdir, config, dataset)
    per_split = []
    for s in range(len(dataset.splits)):
        done = reuse_split(workdir, s)
        if done is not None:
            per_split.append(done)
            logging.info("split %d already done; reusing split_%d.json", s, s)
            continue
        res = run_split(dataset, s, config, workdir, checked.plan(s))
        logging.info(
            "split %d: rank1 %.2f  mAP %.2f  (train %.1fs)",
            s,
            res["rank1"],
            res["mAP"],
            res["train_seconds"],
        )
        per_split.append(res)

    summary = summarise(per_split)
    results = {
        "method": config.method.name,
        "dataset": dataset.name,
        "num_splits": len(per_split),
        **summary,
        "splits": per_split,
    }
    if config.eval.baseline:
        base = summarise(
            [
                r["baseline_euclidean"] | {"train_seconds": 0.0, "eval_seconds": 0.0}
                for r in per_split
            ]
        )
        results["baseline_euclidean"] = {"mean": base["mean"], "std": base["std"]}
    run_files.write_json(os.path.join(workdir, "results.json"), results)
    run_plots.write_run_figures(  # cmc.png, and curves.png of an iterative learner
        workdir,
        results,
        iterative=checked.method.takes("callback"),
        max_rank=config.eval.plot_max_rank,
        # a name from a non-UTF-8 file name holds surrogates no font can draw
        title=f"{config.method.name} on {dataset.name}".encode("utf-8", "replace").decode(),
    )
    return results
