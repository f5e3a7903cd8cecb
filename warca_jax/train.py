"""train_and_evaluate(config, workdir): the one function main.py and notebooks call.

For every split of the dataset it fits the configured method on the training
part, embeds the query and gallery parts, evaluates, and writes into workdir:

* ``config.json``: the config of the run;
* ``metrics.jsonl``: one JSON object per logged training step (with its split);
* ``model_split{s}.npz``: the learned ``Metric`` of split s (``Metric.load``);
* ``split_{s}.json``: the results of split s;
* ``results.json``: per-split results and their mean and std;
* ``cmc.png``: the mean CMC curve (and the Euclidean baseline's).

A run started again on the same workdir reuses every finished split (its
``split_{s}.json`` and model) and redoes only the unfinished ones; a workdir
holding a run with another config is refused rather than mixed.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
from absl import logging

from warca_jax import data as data_lib
from warca_jax import evaluation, methods, plots
from warca_jax.metric import EMBEDDING_KINDS, Metric

SUMMARY_KEYS = (
    "rank1",
    "rank5",
    "rank10",
    "rank20",
    "mAP",
    "mINP",
    "AUC",
    "train_seconds",
    "eval_seconds",
    "num_skipped",
)
_CMC_KEEP = 100  # ranks of the CMC curve kept in the JSON files


def fit_method(features, labels, method_cfg, *, seed=0, log_fn=None, progress=False):
    """Fits the learner named ``method_cfg.name`` and returns (Metric, history)."""
    return methods.get(method_cfg.name).fit(
        features, labels, method_cfg, seed=seed, log_fn=log_fn, progress=progress
    )


def evaluate_metric(
    metric: Metric, dataset: data_lib.Dataset, split: data_lib.Split, eval_cfg, *, seed: int = 0
) -> dict:
    """Embeds the split's query and gallery with ``metric`` and evaluates them."""
    x = dataset.features
    q, g = split.query_idx, split.gallery_idx
    ids = (dataset.labels[q], dataset.labels[g], dataset.cams[q], dataset.cams[g])
    if metric.kind not in EMBEDDING_KINDS:  # a distance of its own: rank its matrix
        dist = metric.pairwise_distances(x[q], x[g])
        if eval_cfg.single_shot:
            return evaluation.single_shot_evaluate_distances(
                dist, *ids, repeats=eval_cfg.repeats, seed=seed
            )
        return evaluation.evaluate_distances(dist, *ids)
    emb = (metric.transform(x[q]), metric.transform(x[g]))
    if eval_cfg.single_shot:
        return evaluation.single_shot_evaluate(
            *emb, *ids, metric=metric.distance, repeats=eval_cfg.repeats, seed=seed
        )
    return evaluation.evaluate(*emb, *ids, metric=metric.distance)


def _jsonable(result: dict) -> dict:
    out = {}
    for k, v in result.items():
        if isinstance(v, np.ndarray):
            v = v[:_CMC_KEEP].tolist() if k == "cmc" else v.tolist()
        elif isinstance(v, np.generic):
            v = v.item()
        out[k] = v
    return out


def _write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def check_config_file(workdir: str, config) -> None:
    """Writes ``workdir/config.json``, or refuses a workdir whose config.json differs."""
    path = os.path.join(workdir, "config.json")
    text = config.to_json_best_effort(indent=1, sort_keys=True)
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if json.loads(old) != json.loads(text):
            raise ValueError(
                f"{workdir} holds a run with a different config ({path}); use a new workdir "
                "or remove it to start over"
            )
        return
    with open(path, "w") as f:
        f.write(text)


def _drop_split_lines(path: str, split: int) -> None:
    """Removes the metrics.jsonl lines of an unfinished split before it is redone."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        lines = [ln for ln in f if ln.strip() and json.loads(ln).get("split") != split]
    with open(path, "w") as f:
        f.writelines(lines)


def run_split(dataset, s: int, config, workdir: str) -> dict:
    """Fits, saves and evaluates split ``s``; returns its JSON-able results."""
    split = dataset.splits[s]
    metrics_path = os.path.join(workdir, "metrics.jsonl")
    _drop_split_lines(metrics_path, s)
    seed = config.seed + s

    with open(metrics_path, "a") as mf:

        def log_fn(row):
            mf.write(json.dumps({"split": s, **row}) + "\n")
            mf.flush()

        t0 = time.perf_counter()
        train = split.train_idx
        metric, _ = fit_method(
            dataset.features[train],
            dataset.labels[train],
            config.method,
            seed=seed,
            log_fn=log_fn,
            progress=config.progress,
        )
        train_seconds = time.perf_counter() - t0
    metric.save(os.path.join(workdir, f"model_split{s}.npz"))
    t0 = time.perf_counter()
    res = evaluate_metric(metric, dataset, split, config.eval, seed=seed)
    res["eval_seconds"] = time.perf_counter() - t0
    res["train_seconds"] = train_seconds
    out = {"split": s, **_jsonable(res)}
    if config.eval.baseline:
        base = evaluate_metric(
            Metric("identity", dataset.features.shape[1], name="euclidean"),
            dataset,
            split,
            config.eval,
            seed=seed,
        )
        out["baseline_euclidean"] = _jsonable(base)
    _write_json(os.path.join(workdir, f"split_{s}.json"), out)
    return out


def summarise(per_split: list[dict]) -> dict:
    """Mean and std (over splits) of ``SUMMARY_KEYS`` and the mean CMC curve."""
    mean = {k: float(np.mean([r[k] for r in per_split])) for k in SUMMARY_KEYS}
    std = {k: float(np.std([r[k] for r in per_split])) for k in SUMMARY_KEYS}
    length = min(len(r["cmc"]) for r in per_split)
    cmc = np.mean([r["cmc"][:length] for r in per_split], axis=0)
    return {"mean": mean, "std": std, "cmc": cmc.tolist()}


def train_and_evaluate(config, workdir: str) -> dict:
    """Runs the configured method on every split of the configured dataset.

    Args:
      config: a ConfigDict as returned by configs/warca.py.
      workdir: output folder (created if needed).

    Returns:
      The dict written to results.json.
    """
    dataset = data_lib.load_dataset(config.data, progress=bool(config.progress))
    validate = methods.get(config.method.name).validate
    for split in dataset.splits:
        t = split.train_idx
        validate(dataset.features[t], dataset.labels[t], config.method)
    os.makedirs(workdir, exist_ok=True)
    check_config_file(workdir, config)
    per_split = []
    for s in range(len(dataset.splits)):
        path = os.path.join(workdir, f"split_{s}.json")
        if os.path.exists(path) and os.path.exists(os.path.join(workdir, f"model_split{s}.npz")):
            with open(path) as f:
                per_split.append(json.load(f))
            logging.info("split %d already done; reusing %s", s, path)
            continue
        res = run_split(dataset, s, config, workdir)
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
    curves = {config.method.name: summary["cmc"]}
    if config.eval.baseline:
        base = summarise(
            [
                r["baseline_euclidean"] | {"train_seconds": 0.0, "eval_seconds": 0.0}
                for r in per_split
            ]
        )
        results["baseline_euclidean"] = {"mean": base["mean"], "std": base["std"]}
        curves["euclidean"] = base["cmc"]
    _write_json(os.path.join(workdir, "results.json"), results)
    plots.plot_cmc(
        curves,
        os.path.join(workdir, "cmc.png"),
        max_rank=config.eval.plot_max_rank,
        title=f"{config.method.name} on {dataset.name}",
    )
    return results
