r"""The CUHK03 study's figures as one command: rank-k curves, ranked lists, validation costs.

  python -m experiments.study_figures \
      --config=configs/study_figures.py[:variant] \
      --workdir=/tmp/figures [--config.methods="('nn','kissme','triplet_sgd')"]

For every config label of ``config.methods`` it fits that config's method on the first
``config.num_splits`` splits of the configured dataset, evaluates it with
``warca_jax.evaluation.evaluate_metric`` and writes into the workdir:

* ``config.json``: the run's config;
* ``rank_k.png``: rank-k matching rate (k = 1 .. max_rank) of every method, mean over the
  splits (the study's Figures 1, 2, 4 and 5 in one);
* ``rank_k.md``: the Markdown table of rank-1, rank-5, rank-10 and mAP;
* ``ranked_list.png``: for ``ranked.num_queries`` queries of split 0 (drawn from
  ``ranked.seed`` among those with a true match), the ``ranked.top_k`` nearest gallery
  entries under the metric of ``ranked.method``, true matches framed green and others
  red (the study's Figure 3); the images when the dataset has them, else labelled tiles;
* ``validation_cost.png``: validation cost per epoch of the SGD optimisers listed
  (``pairwise_sgd``, ``triplet_sgd``; the study's Figure 6), split 0; not written when none
  is listed;
* ``results.json``: everything above as numbers: per method the mean (and std over
  splits) of rank1, rank5, rank10, mAP, the rank-k curve, training seconds; the ranked
  lists; the validation-cost curves;
* ``fits/<label>_split<s>.{json,npz}``: each fit's results and learned metric. A run
  started again on the same workdir reuses them and redoes only the missing fits; a
  workdir holding a run with another config is refused.

The gallery order of a ranked list is the evaluation's: gallery entries of the query's
identity and camera and entries labelled -1 are removed, and ties keep gallery order
(``warca_jax.studies.ranking``).
"""

from __future__ import annotations

import os
import time

import ml_collections
import numpy as np
from absl import logging

from warca_jax import datasets, evaluation, methods
from warca_jax.data import dataset_arrays
from warca_jax.io import run_files, workdir_lock, writes
from warca_jax.metric import Metric
from warca_jax.plots import cmc, study_plots
from warca_jax.protocol import fields, plan
from warca_jax.runs import defaults, pipeline
from warca_jax.studies.ranking import _kept, image_paths, pick_queries, ranked_lists

SGD_METHODS = ("pairwise_sgd", "triplet_sgd")  # fit histories with epoch and val_cost
TABLE_RANKS = (1, 5, 10)


# ----------------------------------------------------------------------------- config
def method_configs(config) -> dict[str, ml_collections.ConfigDict]:
    """Label -> method section (``config.overrides`` applied) of every ``config.methods``.

    Labels and overrides are read as the protocol reads them (``warca_jax.protocol``):
    a tuple of labels 'method' or 'method:variant' (the learners' default configs), and a
    map label -> {field: value} whose fields must exist in that label's method section.
    """
    labels = fields.names(config, "methods")
    if not labels:
        raise ValueError(f"config.methods is empty{fields.expect('methods')}")
    out = {label: plan.method_config(label) for label in labels}
    overrides = fields.overrides(config)
    unknown = sorted(set(overrides) - set(out))
    if unknown:
        raise ValueError(f"config.overrides names {unknown}, which are not in methods {labels}")
    for label, values in overrides.items():
        out[label].unlock()
        plan.apply_overrides(label, out[label], values)
        out[label].lock()
    return out


def _positive_int(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def check_config(config) -> dict[str, ml_collections.ConfigDict]:
    """Checks what can be checked without data; returns ``method_configs(config)``."""
    cfgs = method_configs(config)
    _positive_int(config.max_rank, "max_rank")
    _positive_int(config.num_splits, "num_splits")
    _positive_int(config.ranked.num_queries, "ranked.num_queries")
    _positive_int(config.ranked.top_k, "ranked.top_k")
    if config.ranked.method not in cfgs:
        raise ValueError(
            f"ranked.method {config.ranked.method!r} must be one of the methods {list(cfgs)}"
        )
    return cfgs


# ----------------------------------------------------------------------------- ranked lists
# ----------------------------------------------------------------------------- run
def _slug(label: str) -> str:
    return label.replace(":", "-")


def _plain(v):
    """A history value as a JSON number (ints stay ints)."""
    return int(v) if isinstance(v, int | np.integer) else float(v)


def _rank_k(cmc: np.ndarray, max_rank: int) -> np.ndarray:
    """cmc[:max_rank], a shorter curve extended by its last value (CMC is flat past G)."""
    cmc = np.asarray(cmc, dtype=float)
    return np.concatenate([cmc, np.full(max(max_rank - len(cmc), 0), cmc[-1])])[:max_rank]


def fit_one(dataset, s: int, label: str, cfg, config, workdir: str) -> tuple[dict, Metric]:
    """Fits (or reuses) method ``label`` on split ``s``; returns (its results, its metric)."""
    stem = os.path.join(workdir, "fits", f"{_slug(label)}_split{s}")
    done = run_files.reuse_json(stem + ".json", run_files.record_check(split=s))
    if done is not None and os.path.exists(stem + ".npz"):
        try:
            return done, Metric.load(stem + ".npz")
        except (ValueError, OSError, KeyError) as e:
            logging.warning("%s.npz cannot be reused (%s); refitting", stem, e)
    split = dataset.splits[s]
    seed = config.seed + s
    t0 = time.perf_counter()
    metric, history = pipeline.fit_method(
        dataset.features[split.train_idx],
        dataset.labels[split.train_idx],
        cfg,
        seed=seed,
        progress=defaults.progress_bars(config.progress),
    )
    train_seconds = time.perf_counter() - t0
    res = evaluation.evaluate_metric(metric, dataset, split, config.eval, seed=seed)
    cmc = _rank_k(res["cmc"], config.max_rank)
    out = {
        "label": label,
        "method": cfg.name,
        "split": s,
        **{f"rank{k}": float(_rank_k(res["cmc"], k)[-1]) for k in TABLE_RANKS},
        "mAP": float(res["mAP"]),
        "cmc": cmc.tolist(),
        "train_seconds": train_seconds,
        "history": [{k: _plain(v) for k, v in row.items()} for row in history],
    }
    metric.save(stem + ".npz")
    run_files.write_json(stem + ".json", out)
    logging.info(
        "%s split %d: rank1 %.2f  mAP %.2f  (train %.1fs)",
        label,
        s,
        out["rank1"],
        out["mAP"],
        train_seconds,
    )
    return out, metric


def _summary(fits: list[dict]) -> dict:
    keys = [f"rank{k}" for k in TABLE_RANKS] + ["mAP", "train_seconds"]
    return {
        "method": fits[0]["method"],
        **{k: float(np.mean([f[k] for f in fits])) for k in keys},
        "std": {k: float(np.std([f[k] for f in fits])) for k in keys},
        "cmc": np.mean([f["cmc"] for f in fits], axis=0).tolist(),
    }


def markdown_table(summary: dict[str, dict], *, num_splits: int) -> str:
    """The rank-1/5/10 and mAP table (mean, and +- std over splits when there are several)."""

    def cell(row, key):
        return f"{row[key]:.2f}" + (f" ± {row['std'][key]:.2f}" if num_splits > 1 else "")

    lines = [
        "| method | rank-1 | rank-5 | rank-10 | mAP |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, row in summary.items():
        cells = [cell(row, k) for k in ("rank1", "rank5", "rank10", "mAP")]
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _check_data(config, cfgs, dataset: dataset_arrays.Dataset) -> None:
    """Checks that need the data, before any fit."""
    if config.num_splits > len(dataset.splits):
        raise ValueError(
            f"num_splits={config.num_splits} but {dataset.name} has {len(dataset.splits)} "
            "split(s) (data.num_splits sets how many random splits are drawn)"
        )
    for s in range(config.num_splits):
        split = dataset.splits[s]
        gallery = int(np.sum(dataset.labels[split.gallery_idx] != -1))
        if config.max_rank > gallery:
            raise ValueError(
                f"max_rank={config.max_rank} is larger than the {gallery} gallery entries of "
                f"split {s}"
            )
        x, y = dataset.features[split.train_idx], dataset.labels[split.train_idx]
        for label, cfg in cfgs.items():
            try:
                methods.get(cfg.name).validate(x, y, cfg)
            except ValueError as e:
                raise ValueError(f"method {label!r} on split {s}: {e}") from None
    split = dataset.splits[0]
    pick_queries(split, dataset, config.ranked.num_queries, config.ranked.seed)
    q, g = split.query_idx, split.gallery_idx
    cams_q, cams_g = dataset_arrays.evaluation_cams(dataset, q, g)
    kept = _kept(dataset.labels[q], cams_q, dataset.labels[g], cams_g)
    fewest = int(kept.sum(axis=1).min())
    if config.ranked.top_k > fewest:
        raise ValueError(
            f"ranked.top_k={config.ranked.top_k} is larger than the {fewest} gallery entries "
            "some query of split 0 ranks"
        )


def _rank_k_files(summary: dict, config, workdir: str, title: str) -> dict:
    """rank_k.png and rank_k.md of every method; their paths."""
    rank_k = study_plots.plot_rank_k(
        {label: row["cmc"] for label, row in summary.items()},
        os.path.join(workdir, "rank_k.png"),
        max_rank=config.max_rank,
        title=f"rank-k matching rate, {title}",
    )
    table = markdown_table(summary, num_splits=config.num_splits)
    path = os.path.join(workdir, "rank_k.md")
    run_files.write_text(path, f"Rank-k matching rates and mAP (%) on {title}.\n\n{table}")
    return {"rank_k": str(rank_k), "table": path}


def _ranked_list(dataset, metric: Metric, paths, config, workdir: str) -> tuple[str, dict]:
    """ranked_list.png of split 0 under ``config.ranked.method``'s metric; (path, record)."""
    split, label = dataset.splits[0], config.ranked.method
    chosen = pick_queries(split, dataset, config.ranked.num_queries, config.ranked.seed)
    q, g = split.query_idx[chosen], split.gallery_idx
    dist = metric.pairwise_distances(dataset.features[q], dataset.features[g])
    lab = dataset.labels
    index, dists, matches = ranked_lists(
        dist,
        lab[q],
        lab[g],
        *dataset_arrays.evaluation_cams(dataset, q, g),
        top_k=config.ranked.top_k,
    )
    shown = g[index]  # dataset indices of the ranked entries
    figure = cmc.plot_ranked_lists(
        lab[q],
        lab[shown],
        matches,
        dists,
        os.path.join(workdir, "ranked_list.png"),
        query_images=None if paths is None else [paths[i] for i in q],
        ranked_images=None if paths is None else [[paths[i] for i in r] for r in shown],
        title=f"top {config.ranked.top_k} under {label} on {dataset.name} (green: same identity)",
    )
    record = {
        "method": label,
        "images": paths is not None,
        "queries": [
            {
                "query": int(q[r]),
                "label": int(lab[q[r]]),
                "gallery": shown[r].tolist(),
                "labels": lab[shown[r]].tolist(),
                "distances": dists[r].tolist(),
                "match": matches[r].tolist(),
            }
            for r in range(len(q))
        ],
    }
    return str(figure), record


def _validation_costs(fits: dict, dataset_name: str, workdir: str) -> tuple[dict, dict]:
    """Validation cost per epoch of the SGD optimisers on split 0: (curves, files)."""
    val = {
        label: {
            "epoch": [row["epoch"] for row in rows[0]["history"]],
            "val_cost": [row["val_cost"] for row in rows[0]["history"]],
            "learning_rate": [row["learning_rate"] for row in rows[0]["history"]],
        }
        for label, rows in fits.items()
        if rows[0]["method"] in SGD_METHODS
    }
    if not val:
        return val, {}
    figure = study_plots.plot_validation_cost(
        {label: (v["epoch"], v["val_cost"]) for label, v in val.items()},
        os.path.join(workdir, "validation_cost.png"),
        title=f"validation cost per epoch, {dataset_name} split 0",
    )
    return val, {"validation_cost": str(figure)}


@workdir_lock.one_run_per_workdir
def run(config, workdir: str) -> dict:
    """Fits every method of ``config`` (configs/study_figures.py) and writes the figures and
    tables (module docstring) into ``workdir``, made when needed; returns results.json's dict.

    Raises:
      ValueError: a bad config or data, before any fit.
    """
    cfgs = check_config(config)
    dataset = datasets.from_config(config.data, progress=defaults.progress_bars(config.progress))
    _check_data(config, cfgs, dataset)
    paths = image_paths(config.data, dataset)
    run_files.prepare(workdir)  # made, and locked (one run per workdir)
    writes.makedirs(os.path.join(workdir, "fits"), within=workdir)
    pipeline.check_config_file(workdir, config)

    fits, metrics = {}, {}
    for label, cfg in cfgs.items():
        fits[label] = []
        for s in range(config.num_splits):
            res, metric = fit_one(dataset, s, label, cfg, config, workdir)
            fits[label].append(res)
            if s == 0:
                metrics[label] = metric
    summary = {label: _summary(rows) for label, rows in fits.items()}
    title = f"{dataset.name}, " + (
        f"mean of {config.num_splits} splits" if config.num_splits > 1 else "split 0"
    )
    files = _rank_k_files(summary, config, workdir, title)
    files["ranked_list"], ranked = _ranked_list(
        dataset, metrics[config.ranked.method], paths, config, workdir
    )
    val, val_files = _validation_costs(fits, dataset.name, workdir)
    files.update(val_files)
    results = {
        "dataset": dataset.name,
        "num_splits": config.num_splits,
        "max_rank": config.max_rank,
        "methods": summary,
        "ranked_list": ranked,
        "validation_cost": val,
        "files": files,
    }
    run_files.write_json(os.path.join(workdir, "results.json"), results)
    return results
