r"""The paper's protocol over every selected method and dataset, resumable and parallel.

  python -m experiments.protocol --config=configs/protocol.py:synthetic --workdir=/tmp/protocol \
      [--num_workers=2] [--stage=all|cv|runs|report] [--num_shards=N --shard_index=I]

Stages (``all`` runs the three in order):

* ``cv``: for every method of ``cv.methods`` and dataset, every (lambda, eta) of the grid
  on each of the first ``cv.num_splits`` splits: the split's training identities are
  divided again (``cv.val_fraction`` of them held out, queries and gallery drawn from them
  as for a test split), the method is fitted on the rest and its validation rank-1 written
  to ``cv/<dataset>/<method>/split_<c>/lam_<lam>_eta_<eta>/result.json``;
* ``runs``: every (method, dataset, split) fitted on the split's training part and
  evaluated on its queries and gallery, into ``runs/<dataset>/<method>/split_<s>/``
  (``warca_jax.train.run_split``: the results, the model and its training log); the
  cross-validated methods use the grid point with the best mean validation score
  (``cv/<dataset>/<method>/selected.json``);
* ``report``: mean and std over splits into ``table2.md`` / ``table2_{rank1,rank5,auc}.csv``
  (the paper's Table 2: rows datasets, columns methods), ``study.md`` / ``study.csv`` (the
  study's rank-1, rank-10 and mAP per dataset and method), ``results.json``, and one CMC
  plot per dataset with every method, ``cmc_<dataset>.png``.

Every job writes its result when it finishes and is skipped when its result is there, so
an interrupted protocol started again loses nothing and redoes nothing. Each job's folder
holds the config it ran with; a job whose config has changed since is refused rather than
mixed (use a new workdir). Jobs are independent: ``--num_workers`` runs them in local
processes, and ``--num_shards``/``--shard_index`` give each machine every N-th job of a
stage over a shared workdir (README: "Running the protocol on several machines").
"""

from __future__ import annotations

import concurrent.futures
import copy
import csv
import functools
import importlib
import json
import multiprocessing
import os
import time
from collections.abc import Iterable

import ml_collections
import numpy as np
from absl import app, flags, logging
from ml_collections import config_flags
from tqdm.auto import tqdm

from warca_jax import data as data_lib
from warca_jax import methods, plots, train

STAGES = ("all", "cv", "runs", "report")
TABLE2_MEASURES = (("rank1", "Rank 1"), ("rank5", "Rank 5"), ("AUC", "AUC"))
STUDY_MEASURES = ("rank1", "rank10", "mAP")
DISPLAY = {  # column names of the paper's Table 2 and the study
    "warca:chi2": "WARCA-chi2",
    "warca:linear": "WARCA-L",
    "rpcca:chi2": "rPCCA-chi2",
    "rpcca": "rPCCA-L",
    "mlapg": "MLAPG",
    "frml": "FRML",
    "svmml": "SVMML",
    "lfda:chi2": "LFDA-chi2",
    "lfda": "LFDA-L",
    "kissme": "KISSME",
    "nn": "kNN Euclidean",
    "nn:manhattan": "kNN Manhattan",
    "nn:cosine": "kNN cosine",
    "nn:chi2": "kNN chi2",
    "kmeans": "k-means + kNN",
    "mahalanobis": "Mahalanobis",
    "xqda": "XQDA",
    "lmnn": "LMNN",
    "pairwise_sgd": "pairwise SGD",
    "triplet_sgd": "triplet SGD",
}


# ----------------------------------------------------------------------------- the plan


def _split_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def method_config(label: str) -> ml_collections.ConfigDict:
    """The ``method`` section of the config ``configs/<file>.py:<variant>`` named by ``label``."""
    file, _, variant = label.partition(":")
    try:
        module = importlib.import_module(f"configs.{file}")
    except ModuleNotFoundError:
        raise ValueError(
            f"unknown method label {label!r}: no configs/{file}.py; a label is "
            "<configs file>[:<variant>], e.g. warca:chi2 or kissme"
        ) from None
    if variant and variant not in getattr(module, "VARIANTS", ()):
        raise ValueError(
            f"unknown variant in method label {label!r}; configs/{file}.py has "
            f"{getattr(module, 'VARIANTS', ())}"
        )
    cfg = module.get_config(variant) if variant else module.get_config()
    return copy.deepcopy(cfg.method)


def _dims(config) -> dict[str, int]:
    out = {}
    for item in _split_list(config.dims):
        name, sep, value = item.rpartition(":")
        if not sep or not value.isdigit() or int(value) < 1:
            raise ValueError(f"dims entries are dataset:dim with dim >= 1; got {item!r}")
        out[name] = int(value)
    if config.default_dim < 1:
        raise ValueError(f"default_dim must be >= 1, got {config.default_dim}")
    return out


def _skips(config) -> set[tuple[str, str]]:
    out = set()
    for item in _split_list(config.skip):
        name, sep, label = item.partition(":")
        if not sep or not label:
            raise ValueError(f"skip entries are dataset:method; got {item!r}")
        out.add((name, label))
    return out


def data_config(config, name: str) -> ml_collections.ConfigDict:
    """The ``data`` section of dataset ``name``: the protocol's with its name and folder."""
    cfg = copy.deepcopy(config.data)
    cfg.unlock()
    cfg.name = name
    if name not in ("synthetic",):
        paths = json.loads(config.paths) if config.paths else {}
        if not isinstance(paths, dict):
            raise ValueError(f"paths must be a JSON object name -> folder; got {config.paths!r}")
        if name in paths:
            cfg.path = os.path.expanduser(paths[name])
        elif config.data_root:
            cfg.path = os.path.join(os.path.expanduser(config.data_root), name)
        else:
            raise ValueError(
                f"dataset {name!r} needs a folder: set --config.data_root (holding "
                f'data_root/{name}) or --config.paths=\'{{"{name}": "/path"}}\''
            )
    cfg.lock()
    return cfg


def _overrides(config) -> dict[str, dict]:
    if not config.overrides:
        return {}
    out = json.loads(config.overrides)
    if not isinstance(out, dict) or not all(isinstance(v, dict) for v in out.values()):
        raise ValueError(
            f"overrides must be a JSON object label -> {{field: value}}; got {config.overrides!r}"
        )
    return out


def run_method_config(config, label: str, name: str, dim: int, **overrides):
    """The method section of one run.

    The label's config, then the dataset's output dimension (for ``config.dim_methods``),
    then ``config.overrides[label]``, then ``overrides`` (the cross-validated values).
    """
    cfg = method_config(label)
    cfg.unlock()
    if "dim" in cfg and label in _split_list(config.dim_methods):
        cfg.dim = dim
    for key, value in {**_overrides(config).get(label, {}), **overrides}.items():
        if key not in cfg:
            raise ValueError(
                f"override {key!r} of {label!r}: its method section has no such field; "
                f"it has {sorted(cfg.keys())}"
            )
        if key == "name":
            raise ValueError(f"override of {label!r}: the method name cannot be changed")
        cfg[key] = type(cfg[key])(value) if isinstance(cfg[key], float) else value
    cfg.lock()
    return cfg


def _run_config(config, name: str, method_cfg) -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = config.seed
    c.data = data_config(config, name)
    c.method = method_cfg
    c.eval = copy.deepcopy(config.eval)
    c.progress = False
    return c


def _safe(label: str) -> str:
    return label.replace(":", "-")


def _grid_name(lam: float, eta: float) -> str:
    return f"lam_{lam:g}_eta_{eta:g}"


class Plan:
    """The checked lists of datasets, methods and grid points of a protocol config."""

    def __init__(self, config):
        self.config = config
        self.datasets = _split_list(config.datasets)
        self.methods = _split_list(config.methods)
        self.cv_methods = _split_list(config.cv.methods)
        if not self.datasets:
            raise ValueError("config.datasets is empty; name at least one dataset")
        if not self.methods:
            raise ValueError("config.methods is empty; name at least one method label")
        for name in self.datasets:
            if name not in ("synthetic", "npz"):
                from warca_jax import datasets

                datasets.get_loader(name)  # ValueError listing the known names
        for label in self.methods:
            methods.get(method_config(label).name)
        unknown = sorted(set(self.cv_methods) - set(self.methods))
        if unknown:
            raise ValueError(f"cv.methods {unknown} are not in config.methods {self.methods}")
        for label in self.cv_methods:
            cfg = method_config(label)
            if "lam" not in cfg or "learning_rate" not in cfg:
                raise ValueError(
                    f"cv.methods: {label!r} has no lam and learning_rate fields to choose"
                )
        cv = config.cv
        grids = json.loads(cv.grids) if cv.grids else {}
        if not isinstance(grids, dict) or not all(
            isinstance(g, dict) and set(g) <= {"lams", "etas"} for g in grids.values()
        ):
            raise ValueError(
                'cv.grids must be a JSON object label -> {"lams": [...], "etas": [...]}; '
                f"got {cv.grids!r}"
            )
        unknown = sorted(set(grids) - set(self.cv_methods))
        if unknown:
            raise ValueError(f"cv.grids name {unknown}, which are not in cv.methods")
        self.grids = {}
        for label in self.cv_methods:
            lams = [float(v) for v in grids.get(label, {}).get("lams", cv.lams)]
            etas = [float(v) for v in grids.get(label, {}).get("etas", cv.etas)]
            if not lams or not etas:
                raise ValueError(
                    f"the lambda and eta grids of {label} need at least one value each"
                )
            if any(v < 0 for v in lams) or any(not v > 0 for v in etas):
                raise ValueError(
                    f"lambdas must be >= 0 and etas > 0; got {lams} and {etas} for {label}"
                )
            self.grids[label] = [(lam, eta) for lam in lams for eta in etas]
        if self.cv_methods:
            if cv.num_splits < 1:
                raise ValueError(f"cv.num_splits must be >= 1, got {cv.num_splits}")
            if not 0 < cv.val_fraction < 1:
                raise ValueError(f"cv.val_fraction must be in (0, 1), got {cv.val_fraction}")
            if cv.num_iters < 0:
                raise ValueError(f"cv.num_iters must be >= 0 (0: the method's), got {cv.num_iters}")
            if cv.measure not in ("rank1", "rank5", "rank10", "mAP"):
                raise ValueError(
                    f"cv.measure must be rank1, rank5, rank10 or mAP; got {cv.measure}"
                )
        self.dims = _dims(config)
        self.skips = _skips(config)
        unknown = sorted(set(_overrides(config)) - set(self.methods))
        if unknown:
            raise ValueError(f"overrides name {unknown}, which are not in config.methods")
        for label in self.methods:
            run_method_config(config, label, "", 1)  # every override names a real field
        for name in self.datasets:
            data_config(config, name)  # a folder for every real dataset

    def dim(self, name: str) -> int:
        return self.dims.get(name, self.config.default_dim)

    def runs(self, name: str) -> list[str]:
        return [m for m in self.methods if (name, m) not in self.skips]

    def grid(self, label: str) -> list[tuple[float, float]]:
        """The (lambda, eta) points cross-validated for ``label``, in grid order."""
        return self.grids[label]


# ----------------------------------------------------------------------------- data


@functools.lru_cache(maxsize=4)
def _load_cached(path: str) -> data_lib.Dataset:
    z = np.load(path)
    num = int(z["num_splits"])
    splits = tuple(
        data_lib.Split(z[f"train_{s}"], z[f"query_{s}"], z[f"gallery_{s}"]) for s in range(num)
    )
    return data_lib.Dataset(z["features"], z["labels"], z["cams"], splits, str(z["name"]))


def prepare_dataset(config, name: str, workdir: str) -> str:
    """Loads dataset ``name`` once (features extracted) and stores it for the jobs.

    Returns the path of ``<workdir>/data/<name>.npz``; a stored copy made from the same
    data config is reused.
    """
    folder = os.path.join(workdir, "data")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.npz")
    cfg = data_config(config, name)
    key = cfg.to_json_best_effort(sort_keys=True)
    if os.path.exists(path):
        with np.load(path) as z:
            if str(z["config"]) == key:
                return path
    ds = data_lib.load_dataset(cfg, progress=bool(config.progress))
    arrays = {"features": ds.features, "labels": ds.labels, "cams": ds.cams}
    for s, sp in enumerate(ds.splits):
        arrays.update({f"train_{s}": sp.train_idx, f"query_{s}": sp.query_idx})
        arrays[f"gallery_{s}"] = sp.gallery_idx
    tmp = path + ".tmp.npz"
    np.savez(tmp, num_splits=len(ds.splits), name=ds.name, config=key, **arrays)
    os.replace(tmp, path)
    return path


def validation_split(dataset: data_lib.Dataset, s: int, *, fraction: float, seed: int):
    """A validation split inside the training part of split ``s``.

    ``fraction`` of the training identities (drawn from ``[seed, s]``) become validation
    identities, with queries and gallery drawn as ``data.random_splits`` draws a test
    split; the rest train. Indices are into ``dataset``.
    """
    train = dataset.splits[s].train_idx
    labels, cams = dataset.labels[train], dataset.cams[train]
    num_ids = len(np.unique(labels))
    num_val = max(2, int(round(fraction * num_ids)))
    if num_ids - num_val < 2:
        raise ValueError(
            f"split {s} has {num_ids} training identities: too few to hold {num_val} out for "
            "validation and train on the rest; lower cv.val_fraction or cv.num_splits"
        )
    (sub,) = data_lib.random_splits(
        labels, cams, num_splits=1, num_test_ids=num_val, seed=seed * 1000 + s
    )
    return data_lib.Split(train[sub.train_idx], train[sub.query_idx], train[sub.gallery_idx])


# ----------------------------------------------------------------------------- jobs


def _write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def _job_cv(job: dict) -> dict:
    """Fits one grid point on the validation split and writes its score."""
    run_cfg = ml_collections.ConfigDict(job["config"])
    ds = _load_cached(job["data"])
    split = validation_split(ds, job["split"], fraction=job["val_fraction"], seed=job["seed"])
    t0 = time.perf_counter()
    metric, _ = train.fit_method(
        ds.features[split.train_idx],
        ds.labels[split.train_idx],
        run_cfg.method,
        seed=run_cfg.seed + job["split"],
    )
    fit_seconds = time.perf_counter() - t0
    res = train.evaluate_metric(metric, ds, split, run_cfg.eval, seed=run_cfg.seed)
    out = {
        "lam": run_cfg.method.lam,
        "learning_rate": run_cfg.method.learning_rate,
        "split": job["split"],
        "train_seconds": fit_seconds,
        **{k: float(res[k]) for k in ("rank1", "rank5", "rank10", "mAP")},
    }
    _write_json(job["result"], out)
    return out


def _job_run(job: dict) -> dict:
    """One (method, dataset, split) run into its folder (``train.run_split``)."""
    run_cfg = ml_collections.ConfigDict(job["config"])
    ds = _load_cached(job["data"])
    return train.run_split(ds, job["split"], run_cfg, job["folder"])


def run_job(job: dict) -> tuple[str, str]:
    """Runs a job; returns (result path, error message or '')."""
    try:
        (_job_cv if job["kind"] == "cv" else _job_run)(job)
    except (FloatingPointError, ValueError, np.linalg.LinAlgError) as e:
        _write_json(job["failed"], {"error": f"{type(e).__name__}: {e}"})
        return job["result"], f"{type(e).__name__}: {e}"
    if os.path.exists(job["failed"]):
        os.remove(job["failed"])
    return job["result"], ""


def _claim(folder: str, run_cfg) -> None:
    """Creates a job's folder with its config, or checks the config already there."""
    os.makedirs(folder, exist_ok=True)
    train.check_config_file(folder, run_cfg)


def cv_jobs(plan: Plan, workdir: str, data_paths: dict) -> list[dict]:
    cv = plan.config.cv
    jobs = []
    for name in plan.datasets:
        for label in plan.cv_methods:
            if label not in plan.runs(name):
                continue
            for c in range(cv.num_splits):
                for lam, eta in plan.grid(label):
                    folder = os.path.join(
                        workdir, "cv", name, _safe(label), f"split_{c}", _grid_name(lam, eta)
                    )
                    over = dict(lam=lam, learning_rate=eta)
                    if cv.num_iters:
                        over["num_iters"] = cv.num_iters
                    cfg = _run_config(
                        plan.config,
                        name,
                        run_method_config(plan.config, label, name, plan.dim(name), **over),
                    )
                    jobs.append(
                        dict(
                            kind="cv",
                            dataset=name,
                            label=label,
                            split=c,
                            folder=folder,
                            config=cfg.to_dict(),
                            data=data_paths[name],
                            result=os.path.join(folder, "result.json"),
                            failed=os.path.join(folder, "failed.json"),
                            val_fraction=cv.val_fraction,
                            seed=plan.config.data.seed,
                        )
                    )
    return jobs


def select(plan: Plan, workdir: str, name: str, label: str) -> dict:
    """The grid point with the best mean validation score over the CV splits.

    Writes ``cv/<dataset>/<method>/selected.json`` with the mean of every grid point.
    Raises ``RuntimeError`` naming the missing grid results when the cv stage is not done.
    """
    cv = plan.config.cv
    base = os.path.join(workdir, "cv", name, _safe(label))
    table, missing = [], []
    for lam, eta in plan.grid(label):
        scores = []
        for c in range(cv.num_splits):
            folder = os.path.join(base, f"split_{c}", _grid_name(lam, eta))
            path = os.path.join(folder, "result.json")
            if os.path.exists(path):
                with open(path) as f:
                    scores.append(json.load(f)[cv.measure])
            elif os.path.exists(os.path.join(folder, "failed.json")):
                scores.append(float("-inf"))  # diverged: never selected
            else:
                missing.append(path)
        table.append({"lam": lam, "learning_rate": eta, "scores": scores})
    if missing:
        raise RuntimeError(
            f"{len(missing)} cross-validation results of {label} on {name} are missing "
            f"(first: {missing[0]}); run --stage=cv on every shard first"
        )
    for row in table:
        row["mean"] = float(np.mean(row["scores"]))
    best = max(table, key=lambda r: r["mean"])  # the first of equal ones, in grid order
    if not np.isfinite(best["mean"]):
        raise RuntimeError(f"every grid point of {label} on {name} diverged; see {base}")
    out = {
        "measure": cv.measure,
        "lam": best["lam"],
        "learning_rate": best["learning_rate"],
        "mean": best["mean"],
        "grid": table,
    }
    os.makedirs(base, exist_ok=True)
    _write_json(os.path.join(base, "selected.json"), out)
    return out


def run_jobs(plan: Plan, workdir: str, data_paths: dict) -> list[dict]:
    """The (method, dataset, split) runs; cross-validated methods get their selection."""
    jobs = []
    for name in plan.datasets:
        num_splits = int(np.load(data_paths[name])["num_splits"])
        for label in plan.runs(name):
            over = {}
            if label in plan.cv_methods:
                sel = select(plan, workdir, name, label)
                over = dict(lam=sel["lam"], learning_rate=sel["learning_rate"])
            cfg = _run_config(
                plan.config,
                name,
                run_method_config(plan.config, label, name, plan.dim(name), **over),
            )
            for s in range(num_splits):
                folder = os.path.join(workdir, "runs", name, _safe(label), f"split_{s}")
                jobs.append(
                    dict(
                        kind="run",
                        dataset=name,
                        label=label,
                        split=s,
                        folder=folder,
                        config=cfg.to_dict(),
                        data=data_paths[name],
                        result=os.path.join(folder, f"split_{s}.json"),
                        failed=os.path.join(folder, "failed.json"),
                    )
                )
    return jobs


def execute(
    jobs: list[dict], *, num_workers: int, progress: bool, desc: str
) -> list[tuple[dict, str]]:
    """Runs the jobs without a result (in ``num_workers`` processes); returns the failures."""
    for job in jobs:
        _claim(job["folder"], ml_collections.ConfigDict(job["config"]))
    todo = [j for j in jobs if not os.path.exists(j["result"])]
    logging.info("%s: %d jobs, %d already done", desc, len(jobs), len(jobs) - len(todo))
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc=desc, disable=not progress)
    failures = []

    def done(job, err):
        bar.update(1)
        bar.set_postfix_str(f"{job['dataset']} {job['label']} split {job['split']}")
        if err:
            logging.warning(
                "%s %s split %d failed: %s", job["dataset"], job["label"], job["split"], err
            )
            failures.append((job, err))

    if num_workers <= 1:
        for job in todo:
            done(job, run_job(job)[1])
    else:
        ctx = multiprocessing.get_context("spawn")  # JAX is not fork-safe
        # workers sharing a GPU must not each reserve most of its memory up front
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        with concurrent.futures.ProcessPoolExecutor(num_workers, mp_context=ctx) as pool:
            futures = {pool.submit(run_job, job): job for job in todo}
            for fut in concurrent.futures.as_completed(futures):
                done(futures[fut], fut.result()[1])
    bar.close()
    return failures


def shard(jobs: list[dict], num_shards: int, shard_index: int) -> list[dict]:
    """Every ``num_shards``-th job, starting at ``shard_index``."""
    if num_shards < 1 or not 0 <= shard_index < num_shards:
        raise ValueError(
            f"shard_index must be in [0, num_shards) with num_shards >= 1; "
            f"got {shard_index} of {num_shards}"
        )
    return jobs[shard_index::num_shards]


# ----------------------------------------------------------------------------- report


def _summary(per_split: list[dict]) -> dict:
    keys = ("rank1", "rank5", "rank10", "rank20", "mAP", "mINP", "AUC", "train_seconds")
    out = {
        k: {
            "mean": float(np.mean([r[k] for r in per_split])),
            "std": float(np.std([r[k] for r in per_split])),
        }
        for k in keys
    }
    length = min(len(r["cmc"]) for r in per_split)
    out["cmc"] = np.mean([r["cmc"][:length] for r in per_split], axis=0).tolist()
    return out


def collect(plan: Plan, workdir: str, data_paths: dict) -> dict:
    """dataset -> method -> summary (and ``num_splits``, ``num_done``) of the finished runs."""
    results = {}
    for name in plan.datasets:
        num_splits = int(np.load(data_paths[name])["num_splits"]) if name in data_paths else 0
        results[name] = {}
        for label in plan.runs(name):
            rows = []
            for s in range(num_splits):
                path = os.path.join(
                    workdir, "runs", name, _safe(label), f"split_{s}", f"split_{s}.json"
                )
                if os.path.exists(path):
                    with open(path) as f:
                        rows.append(json.load(f))
            if rows:
                results[name][label] = {
                    **_summary(rows),
                    "num_done": len(rows),
                    "num_splits": num_splits,
                }
    return results


def _cell(entry: dict | None, key: str) -> str:
    if entry is None:
        return "-"
    m, s = entry[key]["mean"], entry[key]["std"]
    partial = (
        ""
        if entry["num_done"] == entry["num_splits"]
        else f" ({entry['num_done']}/{entry['num_splits']})"
    )
    return f"{m:.2f} ± {s:.2f}{partial}"


def _md_table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def write_report(plan: Plan, workdir: str, results: dict) -> list[str]:
    """Writes the tables, the CMC plots and results.json; returns the files written."""
    written = []
    labels = plan.methods
    names = [DISPLAY.get(m, m) for m in labels]
    parts = ["# Table 2: rank 1, rank 5 and AUC (mean ± std over splits, %)", ""]
    for key, title in TABLE2_MEASURES:
        rows = []
        for name in plan.datasets:
            res = results[name]
            best = max((res[m][key]["mean"] for m in labels if m in res), default=None)
            cells = []
            for m in labels:
                cell = _cell(res.get(m), key)
                if m in res and res[m][key]["mean"] == best:
                    cell = f"**{cell}**"
                cells.append(cell)
            rows.append([name, *cells])
        parts += [f"## {title}", "", _md_table(["dataset", *names], rows), ""]
        path = os.path.join(workdir, f"table2_{key.lower()}.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["dataset", *[f"{n} {p}" for n in names for p in ("mean", "std")]])
            for name in plan.datasets:
                row = [name]
                for m in labels:
                    e = results[name].get(m)
                    row += [f"{e[key]['mean']:.4f}", f"{e[key]['std']:.4f}"] if e else ["", ""]
                w.writerow(row)
        written.append(path)
    path = os.path.join(workdir, "table2.md")
    with open(path, "w") as f:
        f.write("\n".join(parts))
    written.append(path)

    parts = ["# Rank 1, rank 10 and mAP per dataset (mean ± std over splits, %)", ""]
    csv_path = os.path.join(workdir, "study.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "dataset",
                "method",
                "splits",
                *[f"{k} {p}" for k in STUDY_MEASURES for p in ("mean", "std")],
                "train_seconds",
            ]
        )
        for name in plan.datasets:
            rows = []
            for m, n in zip(labels, names, strict=True):
                e = results[name].get(m)
                if (name, m) in plan.skips:
                    continue
                rows.append(
                    [
                        n,
                        *[_cell(e, k) for k in STUDY_MEASURES],
                        "-" if e is None else f"{e['train_seconds']['mean']:.2f}",
                    ]
                )
                if e:
                    w.writerow(
                        [
                            name,
                            m,
                            e["num_done"],
                            *[f"{e[k][p]:.4f}" for k in STUDY_MEASURES for p in ("mean", "std")],
                            f"{e['train_seconds']['mean']:.3f}",
                        ]
                    )
            parts += [
                f"## {name}",
                "",
                _md_table(["method", "rank-1", "rank-10", "mAP", "train (s)"], rows),
                "",
            ]
    path = os.path.join(workdir, "study.md")
    with open(path, "w") as f:
        f.write("\n".join(parts))
    written += [csv_path, path]

    for name in plan.datasets:
        curves = {DISPLAY.get(m, m): results[name][m]["cmc"] for m in labels if m in results[name]}
        if curves:
            path = os.path.join(workdir, f"cmc_{name}.png")
            plots.plot_cmc(
                curves,
                path,
                max_rank=plan.config.eval.plot_max_rank,
                title=f"CMC on {name}",
                figsize=(7, 5.5),
            )
            written.append(path)
    path = os.path.join(workdir, "results.json")
    _write_json(path, results)
    written.append(path)
    return written


# ----------------------------------------------------------------------------- driver


def run_protocol(
    config,
    workdir: str,
    *,
    stage: str = "all",
    num_workers: int = 1,
    num_shards: int = 1,
    shard_index: int = 0,
) -> dict:
    """Runs a stage of the protocol (see the module docstring); returns the results.

    Raises:
      ValueError: a bad config or flag, before any work.
      RuntimeError: jobs failed (each is named in the log and has a ``failed.json``), or
        the runs stage found cross-validation results missing.
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    shard([], num_shards, shard_index)
    plan = Plan(config)
    os.makedirs(workdir, exist_ok=True)
    data_paths = {name: prepare_dataset(config, name, workdir) for name in plan.datasets}
    for name in plan.datasets:  # every learner checks every split before any training
        ds = _load_cached(data_paths[name])
        for label in plan.runs(name):
            cfg = run_method_config(config, label, name, plan.dim(name))
            validate = methods.get(cfg.name).validate
            for split in ds.splits:
                t = split.train_idx
                validate(ds.features[t], ds.labels[t], cfg)
    failures = []
    kw = dict(num_workers=num_workers, progress=bool(config.progress))
    if stage in ("all", "cv"):
        jobs = shard(cv_jobs(plan, workdir, data_paths), num_shards, shard_index)
        failures += execute(jobs, desc="cross-validation", **kw)
    if stage in ("all", "runs"):
        jobs = shard(run_jobs(plan, workdir, data_paths), num_shards, shard_index)
        failures += execute(jobs, desc="runs", **kw)
    results = collect(plan, workdir, data_paths)
    if stage in ("all", "report") or num_shards == 1:
        for path in write_report(plan, workdir, results):
            logging.info("wrote %s", path)
    if failures:
        names = "; ".join(
            f"{j['dataset']} {j['label']} split {j['split']}: {e}" for j, e in failures
        )
        raise RuntimeError(f"{len(failures)} jobs failed (their failed.json say why): {names}")
    return results


_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "configs/protocol.py[:variant]", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder of the protocol's runs and reports.")
_STAGE = flags.DEFINE_enum("stage", "all", STAGES, "Which stage to run.")
_WORKERS = flags.DEFINE_integer("num_workers", 1, "Local processes running jobs in parallel.")
_SHARDS = flags.DEFINE_integer("num_shards", 1, "Machines sharing the workdir.")
_SHARD = flags.DEFINE_integer("shard_index", 0, "This machine's shard, in [0, num_shards).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    results = run_protocol(
        _CONFIG.value,
        _WORKDIR.value,
        stage=_STAGE.value,
        num_workers=_WORKERS.value,
        num_shards=_SHARDS.value,
        shard_index=_SHARD.value,
    )
    done = sum(e["num_done"] for res in results.values() for e in res.values())
    print(json.dumps({"workdir": _WORKDIR.value, "runs_done": done}))


if __name__ == "__main__":
    flags.mark_flags_as_required(["config", "workdir"])
    app.run(main)
