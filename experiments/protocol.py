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

Every job writes its outcome when it finishes and is skipped when its outcome is there, so
an interrupted protocol started again loses nothing and redoes nothing. Each job's folder
holds the config it ran with; a job whose config has changed since is refused rather than
mixed (use a new workdir). Jobs are independent: ``--num_workers`` runs them in local
processes, and ``--num_shards``/``--shard_index`` give each machine every N-th job of a
stage over a shared workdir (README: "Running the protocol on several machines").

What a resume (and the report) trusts is checked first. A job's outcome file, its
``result.json`` / ``split_<s>.json`` or its ``failed.json``, records the job it belongs to
(``dataset``, ``method`` label, ``split``, and the SHA-256 of the job's config and of the
data, ``config_sha256`` and ``data_sha256``); it is reused only when it parses, names this
job and (a result) holds finite measures in range. Anything else (a file cut short by a
crash, a NaN, a copy of another split's or method's file, a result of another config) is
redone, with a log line naming the file. The stored dataset ``data/<name>.npz`` carries a
fingerprint of its arrays and is rebuilt when it does not read back whole.

Outcomes other than a result, shown in the tables instead of a number:

* not applicable (``n/a``, with the reason as a note): the learner's own check of its
  config against a dataset's training data refuses it (a ``ValueError`` from its
  ``validate``, e.g. LMNN's k = 3 target neighbours on VIPeR's two images per identity).
  Decided before any training, every time the protocol starts; the rest of the grid runs.
* failed (``failed``, with the reason as a note, and in the job's ``failed.json``): the
  job started and training or evaluation failed on the data (it diverged, a matrix was
  singular, a non-finite result). A failed grid point of the cross-validation is never
  selected; a failed run is an error of the protocol once the grid is done (a
  ``RuntimeError`` naming it, after the report is written). A failure is an outcome: a
  restart does not redo it (the same config fails the same way); remove the job's
  ``failed.json`` to run it again.

Any other exception (a bug) stops the protocol at once.
"""

from __future__ import annotations

import concurrent.futures
import copy
import csv
import functools
import hashlib
import importlib
import json
import math
import multiprocessing
import os
import time
from collections.abc import Iterable
from typing import NamedTuple

import ml_collections
import numpy as np
from absl import app, flags, logging
from ml_collections import config_flags
from tqdm.auto import tqdm

from warca_jax import cli, methods, plots, train, training
from warca_jax import data as data_lib
from warca_jax import workdir as workdir_lib

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

# What a job that started raises when training or evaluation fails on its data: recorded
# as the job's failure (failed.json) and shown in the tables. Anything else is a bug and
# stops the protocol. A diverged run raises FloatingPointError (training's
# TrainingDivergedError, where it exists, is one; it is named here in case it is not).
TRAINING_FAILURES: tuple[type[BaseException], ...] = (
    FloatingPointError,
    ValueError,
    np.linalg.LinAlgError,
    *(
        cls
        for cls in (getattr(training, "TrainingDivergedError", None),)
        if isinstance(cls, type) and issubclass(cls, Exception)
    ),
)


# ----------------------------------------------------------------------------- the plan

# config field -> (what it holds, an example value as given on the command line)
_FIELDS = {
    "datasets": ("comma-separated dataset names", "viper,cuhk03"),
    "methods": (
        "comma-separated method labels <configs file>[:<variant>]",
        "warca:linear,kissme,nn",
    ),
    "cv.methods": ("comma-separated labels of config.methods", "warca:linear"),
    "dim_methods": ("comma-separated method labels", "warca:linear,rpcca"),
    "dims": ("comma-separated dataset:dim pairs with dim >= 1", "market1501:200,viper:100"),
    "skip": ("comma-separated dataset:method pairs", "market1501:rpcca,viper:lmnn"),
    "paths": (
        "a JSON object dataset name -> folder, or '' for none",
        '\'{"viper": "~/data/VIPeR"}\'',
    ),
    "overrides": (
        "a JSON object method label -> {field: value}, or '' for none",
        '\'{"warca:linear": {"num_iters": 500}}\'',
    ),
    "cv.grids": (
        'a JSON object label -> {"lams": [...], "etas": [...]}, or \'\' for none',
        '\'{"warca:linear": {"lams": [1e-4, 1e-2], "etas": [0.01]}}\'',
    ),
    "cv.lams": ("a non-empty tuple of finite numbers >= 0", "'(1e-4,1e-2)'"),
    "cv.etas": ("a non-empty tuple of finite numbers > 0", "'(1e-2,1e-1)'"),
}


def _expect(field: str) -> str:
    """'; expected <what the field holds>, e.g. --config.<field>=<example>'."""
    what, example = _FIELDS[field]
    return f"; expected {what}, e.g. --config.{field}={example}"


def _get(config, field: str):
    node = config
    for part in field.split("."):
        node = node[part]
    return node


def _json_kind(value) -> str:
    if isinstance(value, bool):
        return "true/false"
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", int: "number", float: "number"}.get(
        type(value), type(value).__name__
    )


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _split_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _list_field(config, field: str) -> list[str]:
    """A comma-separated config field as a list; a name given twice is a ValueError."""
    text = _get(config, field)
    if not isinstance(text, str):
        raise ValueError(f"config.{field} must be a string, got {text!r}{_expect(field)}")
    items = _split_list(text)
    twice = sorted({t for t in items if items.count(t) > 1})
    if twice:
        raise ValueError(
            f"config.{field} names {twice} more than once (got {text!r}); each run would "
            f"be done twice into the same folder{_expect(field)}"
        )
    return items


def _json_field(config, field: str) -> dict:
    """A config field holding a JSON object ('' for none), parsed; anything else explained."""
    text = _get(config, field)
    if not isinstance(text, str):
        raise ValueError(f"config.{field} must be a string, got {text!r}{_expect(field)}")
    if not text.strip():
        return {}

    def constant(name):
        raise ValueError(name)

    try:
        obj = json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"config.{field} is not valid JSON ({e.msg} at character {e.pos}): "
            f"got {text!r}{_expect(field)}"
        ) from None
    except ValueError as e:
        raise ValueError(
            f"config.{field} holds {e}, which is not a finite number: got {text!r}{_expect(field)}"
        ) from None
    if not isinstance(obj, dict):
        raise ValueError(
            f"config.{field} must be a JSON object, got a JSON {_json_kind(obj)}: "
            f"{text!r}{_expect(field)}"
        )
    return obj


def method_config(label: str) -> ml_collections.ConfigDict:
    """The ``method`` section of the config ``configs/<file>.py:<variant>`` named by ``label``."""
    file, _, variant = label.partition(":")
    if not file or not all(p.isidentifier() for p in file.split(".")):
        raise ValueError(
            f"unknown method label {label!r}: a label is <configs file>[:<variant>], e.g. "
            "warca:chi2 or kissme"
        )
    try:
        module = importlib.import_module(f"configs.{file}")
    except ModuleNotFoundError:
        raise ValueError(
            f"unknown method label {label!r}: no configs/{file}.py; a label is "
            "<configs file>[:<variant>], e.g. warca:chi2 or kissme"
        ) from None
    if not hasattr(module, "get_config"):
        raise ValueError(f"unknown method label {label!r}: configs/{file}.py is not a config")
    if variant and variant not in getattr(module, "VARIANTS", ()):
        raise ValueError(
            f"unknown variant in method label {label!r}; configs/{file}.py has "
            f"{getattr(module, 'VARIANTS', ())}"
        )
    cfg = module.get_config(variant) if variant else module.get_config()
    if "method" not in cfg:
        raise ValueError(f"method label {label!r}: configs/{file}.py has no method section")
    return copy.deepcopy(cfg.method)


def _dims(config) -> dict[str, int]:
    out = {}
    for item in _list_field(config, "dims"):
        name, sep, value = item.rpartition(":")
        value = value.strip()
        if not sep or not name.strip() or not value.isdigit() or int(value) < 1:
            raise ValueError(
                f"config.dims entries are dataset:dim with dim >= 1; got {item!r} in "
                f"{config.dims!r}{_expect('dims')}"
            )
        if name.strip() in out:
            raise ValueError(
                f"config.dims gives dataset {name.strip()!r} twice ({config.dims!r})"
                f"{_expect('dims')}"
            )
        out[name.strip()] = int(value)
    if isinstance(config.default_dim, bool) or not isinstance(config.default_dim, int):
        raise ValueError(f"config.default_dim must be an integer >= 1, got {config.default_dim!r}")
    if config.default_dim < 1:
        raise ValueError(f"config.default_dim must be >= 1, got {config.default_dim}")
    return out


def _skips(config) -> set[tuple[str, str]]:
    out = set()
    for item in _list_field(config, "skip"):
        name, sep, label = item.partition(":")
        if not sep or not name.strip() or not label.strip():
            raise ValueError(
                f"config.skip entries are dataset:method; got {item!r} in {config.skip!r}"
                f"{_expect('skip')}"
            )
        out.add((name.strip(), label.strip()))
    return out


def _paths(config) -> dict[str, str]:
    paths = _json_field(config, "paths")
    for name, folder in paths.items():
        if not isinstance(folder, str) or not folder.strip():
            raise ValueError(
                f"config.paths[{name!r}] must be a folder (a non-empty JSON string), got "
                f"{folder!r}{_expect('paths')}"
            )
    return paths


def data_config(config, name: str) -> ml_collections.ConfigDict:
    """The ``data`` section of dataset ``name``: the protocol's with its name and folder."""
    cfg = copy.deepcopy(config.data)
    cfg.unlock()
    cfg.name = name
    if name not in ("synthetic",):
        paths = _paths(config)
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
    out = _json_field(config, "overrides")
    for label, fields in out.items():
        if not isinstance(fields, dict):
            raise ValueError(
                f"config.overrides[{label!r}] must be a JSON object field -> value, got a "
                f"JSON {_json_kind(fields)} {fields!r}{_expect('overrides')}"
            )
    return out


def _override_value(label: str, key: str, old, value):
    """``value`` for field ``key`` (now ``old``) of ``label``'s method section, or ValueError."""
    where = f"config.overrides[{label!r}][{key!r}]"
    if isinstance(old, ml_collections.ConfigDict):
        raise ValueError(f"{where}: {key!r} is a section of the method config, not a value")
    if isinstance(old, bool):
        ok, want = isinstance(value, bool), "true or false"
    elif isinstance(old, int):
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(old, float):
        ok, want = _is_number(value), "a finite number"
        value = float(value) if ok else value
    elif isinstance(old, str):
        ok, want = isinstance(value, str), "a string"
    elif isinstance(old, tuple | list):
        ok, want = isinstance(value, list), "a JSON array"
        value = type(old)(value) if ok else value
    else:
        ok, want = True, ""
    if not ok:
        raise ValueError(
            f"{where} must be {want} (the field is {old!r}), got {value!r}{_expect('overrides')}"
        )
    return value


def run_method_config(config, label: str, name: str, dim: int, **overrides):
    """The method section of one run.

    The label's config, then the dataset's output dimension (for ``config.dim_methods``),
    then ``config.overrides[label]``, then ``overrides`` (the cross-validated values).
    """
    cfg = method_config(label)
    cfg.unlock()
    if "dim" in cfg and label in _list_field(config, "dim_methods"):
        cfg.dim = dim
    for key, value in _overrides(config).get(label, {}).items():
        if key not in cfg:
            raise ValueError(
                f"config.overrides[{label!r}][{key!r}]: its method section has no such "
                f"field; it has {sorted(cfg.keys())}"
            )
        if key == "name":
            raise ValueError(f"override of {label!r}: the method name cannot be changed")
        value = _override_value(label, key, cfg[key], value)
        try:
            cfg[key] = value
        except TypeError as e:
            raise ValueError(f"config.overrides[{label!r}][{key!r}] = {value!r}: {e}") from None
    for key, value in overrides.items():
        if key not in cfg:
            raise ValueError(
                f"{key!r} of {label!r}: its method section has no such field; it has "
                f"{sorted(cfg.keys())}"
            )
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


def _grid_values(values, what: str, where: str) -> list[float]:
    field = "cv.grids" if where.startswith("config.cv.grids") else where.removeprefix("config.")
    if not isinstance(values, list | tuple) or not all(_is_number(v) for v in values):
        raise ValueError(
            f"{where} must be a list of finite numbers ({what}), got {values!r}{_expect(field)}"
        )
    return [float(v) for v in values]


class Plan:
    """The checked lists of datasets, methods and grid points of a protocol config.

    ``not_applicable`` maps (dataset, label) to the reason the learner refused that
    dataset's training data (``check_applicable``); empty until that is known.
    """

    def __init__(self, config):
        self.config = config
        self.datasets = _list_field(config, "datasets")
        self.methods = _list_field(config, "methods")
        self.cv_methods = _list_field(config, "cv.methods")
        self.not_applicable: dict[tuple[str, str], str] = {}
        if not self.datasets:
            raise ValueError(
                f"config.datasets is empty; name at least one dataset{_expect('datasets')}"
            )
        if not self.methods:
            raise ValueError(
                f"config.methods is empty; name at least one method label{_expect('methods')}"
            )
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
        grids = _json_field(config, "cv.grids")
        for label, g in grids.items():
            if not isinstance(g, dict) or not set(g) <= {"lams", "etas"}:
                raise ValueError(
                    'config.cv.grids must be a JSON object label -> {"lams": [...], '
                    f'"etas": [...]}}; {label!r} has {g!r}{_expect("cv.grids")}'
                )
        unknown = sorted(set(grids) - set(self.cv_methods))
        if unknown:
            raise ValueError(f"cv.grids name {unknown}, which are not in cv.methods")
        lams = _grid_values(cv.lams, "lambdas", "config.cv.lams")
        etas = _grid_values(cv.etas, "step sizes", "config.cv.etas")
        self.grids = {}
        for label in self.cv_methods:
            g = grids.get(label, {})
            where = f"config.cv.grids[{label!r}]"
            lam_l = _grid_values(g["lams"], "lambdas", f"{where}['lams']") if "lams" in g else lams
            eta_l = (
                _grid_values(g["etas"], "step sizes", f"{where}['etas']") if "etas" in g else etas
            )
            if not lam_l or not eta_l:
                raise ValueError(
                    f"the lambda and eta grids of {label} need at least one value each; "
                    f"got lambdas {lam_l} and etas {eta_l}"
                )
            if any(v < 0 for v in lam_l) or any(not v > 0 for v in eta_l):
                raise ValueError(
                    f"lambdas must be >= 0 and etas > 0; got {lam_l} and {eta_l} for {label}"
                )
            self.grids[label] = [(lam, eta) for lam in lam_l for eta in eta_l]
        if self.cv_methods:
            if isinstance(cv.num_splits, bool) or not isinstance(cv.num_splits, int):
                raise ValueError(f"cv.num_splits must be an integer, got {cv.num_splits!r}")
            if cv.num_splits < 1:
                raise ValueError(f"cv.num_splits must be >= 1, got {cv.num_splits}")
            if not 0 < cv.val_fraction < 1:
                raise ValueError(f"cv.val_fraction must be in (0, 1), got {cv.val_fraction}")
            if cv.num_iters < 0:
                raise ValueError(f"cv.num_iters must be >= 0 (0: the method's), got {cv.num_iters}")
            if cv.measure not in ("rank1", "rank5", "rank10", "mAP"):
                raise ValueError(
                    f"cv.measure must be rank1, rank5, rank10 or mAP; got {cv.measure!r}"
                )
        self.dims = _dims(config)
        self.skips = _skips(config)
        _list_field(config, "dim_methods")
        _paths(config)  # well-formed even when every dataset is built in
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
        """The labels run on dataset ``name``: not skipped (not applicable ones included)."""
        return [m for m in self.methods if (name, m) not in self.skips]

    def active(self, name: str) -> list[str]:
        """The labels run on dataset ``name`` that are applicable to it."""
        return [m for m in self.runs(name) if (name, m) not in self.not_applicable]

    def grid(self, label: str) -> list[tuple[float, float]]:
        """The (lambda, eta) points cross-validated for ``label``, in grid order."""
        return self.grids[label]


# ----------------------------------------------------------------------------- data


class DataInfo(NamedTuple):
    """A dataset stored for the jobs: its file, the fingerprint of its arrays, its splits."""

    path: str
    sha256: str
    num_splits: int


def _stamp(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


def _fingerprint(features, labels, cams, splits) -> str:
    """The SHA-256 of a dataset's arrays and splits (``train.data_fingerprint``'s content)."""
    arrays = [features, labels, cams]
    for split in splits:
        arrays.extend(split)
    return workdir_lib.array_fingerprint(*arrays)


@functools.lru_cache(maxsize=4)
def _read_stored(path: str, stamp: tuple[int, int]) -> tuple[data_lib.Dataset, str, str]:
    """(dataset, data config it was made from, fingerprint) of ``data/<name>.npz``.

    ``stamp`` (mtime, size) keys the cache, so a file rebuilt since is read again.

    Raises:
      DamagedFileError: the file is not whole: it does not read back, lacks an array, or
        its arrays do not hash to the fingerprint stored with them.
    """
    del stamp
    head = ("num_splits", "name", "config", "fingerprint", "features", "labels", "cams")
    try:
        z, present = data_lib.read_npz(path, head, what="stored dataset")
        missing = sorted(set(head) - set(z))
        if missing:
            raise ValueError(f"it has no {missing} (it has {present})")
        num = int(z["num_splits"])
        keys = [f"{k}_{s}" for s in range(num) for k in ("train", "query", "gallery")]
        idx, _ = data_lib.read_npz(path, keys, what="stored dataset")
        missing = [k for k in keys if k not in idx]
        if missing:
            raise ValueError(f"it has no {missing[:3]}")
    except ValueError as e:
        raise workdir_lib.DamagedFileError(
            f"{path}: the stored dataset cannot be read back ({e})"
        ) from None
    splits = tuple(
        data_lib.Split(idx[f"train_{s}"], idx[f"query_{s}"], idx[f"gallery_{s}"])
        for s in range(num)
    )
    fingerprint = _fingerprint(z["features"], z["labels"], z["cams"], splits)
    if fingerprint != str(z["fingerprint"]):
        raise workdir_lib.DamagedFileError(
            f"{path}: the stored dataset is damaged: its arrays do not match the "
            "fingerprint stored with them"
        )
    ds = data_lib.Dataset(z["features"], z["labels"], z["cams"], splits, str(z["name"]))
    return ds, str(z["config"]), fingerprint


def _dataset(path: str, sha256: str | None = None) -> data_lib.Dataset:
    """The stored dataset at ``path``; with ``sha256``, it must be that data."""
    ds, _, fingerprint = _read_stored(path, _stamp(path))
    if sha256 is not None and fingerprint != sha256:
        raise RuntimeError(
            f"{path} changed while the protocol ran (another process rebuilt it from other "
            "data); start the protocol again"
        )
    return ds


def prepare_dataset(config, name: str, workdir: str) -> DataInfo:
    """Loads dataset ``name`` once (features extracted) and stores it for the jobs.

    Stores ``<workdir>/data/<name>.npz``; a stored copy made from the same data config is
    reused when it reads back whole (else it is rebuilt, with a log line naming it).
    """
    folder = os.path.join(workdir, "data")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.npz")
    cfg = data_config(config, name)
    key = cfg.to_json_best_effort(sort_keys=True)
    if os.path.exists(path):
        try:
            ds, old_key, fingerprint = _read_stored(path, _stamp(path))
        except workdir_lib.DamagedFileError as e:
            logging.warning("%s; rebuilding it", e)
        else:
            if old_key == key:
                return DataInfo(path, fingerprint, len(ds.splits))
            logging.info("%s was made from another data config; rebuilding it", path)
    ds = data_lib.load_dataset(cfg, progress=bool(config.progress))
    arrays = {"features": ds.features, "labels": ds.labels, "cams": ds.cams}
    for s, sp in enumerate(ds.splits):
        arrays.update({f"train_{s}": sp.train_idx, f"query_{s}": sp.query_idx})
        arrays[f"gallery_{s}"] = sp.gallery_idx
    fingerprint = _fingerprint(ds.features, ds.labels, ds.cams, ds.splits)
    with workdir_lib.atomic_path(path) as tmp:
        np.savez(
            tmp,
            num_splits=len(ds.splits),
            name=ds.name,
            config=key,
            fingerprint=fingerprint,
            **arrays,
        )
    return DataInfo(path, fingerprint, len(ds.splits))


def validation_split(dataset: data_lib.Dataset, s: int, *, fraction: float, seed: int):
    """A validation split inside the training part of split ``s``.

    ``fraction`` of the training identities (drawn from ``[seed, s]``) become validation
    identities, with queries and gallery drawn as ``data.random_splits`` draws a test
    split; the rest train. Indices are into ``dataset``.
    """
    train_idx = dataset.splits[s].train_idx
    labels, cams = dataset.labels[train_idx], dataset.cams[train_idx]
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
    return data_lib.Split(
        train_idx[sub.train_idx], train_idx[sub.query_idx], train_idx[sub.gallery_idx]
    )


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
    config, cv = plan.config, plan.config.cv
    plan.not_applicable = {}
    for name in plan.datasets:
        ds = _dataset(data[name].path)
        val = []
        if any(label in plan.cv_methods for label in plan.runs(name)):
            if cv.num_splits > len(ds.splits):
                raise ValueError(
                    f"cv.num_splits = {cv.num_splits}, but dataset {name!r} has "
                    f"{len(ds.splits)} splits; lower cv.num_splits"
                )
            try:
                val = [
                    validation_split(ds, c, fraction=cv.val_fraction, seed=config.data.seed)
                    for c in range(cv.num_splits)
                ]
            except ValueError as e:
                raise ValueError(f"cross-validation on dataset {name!r}: {e}") from None
        for label in plan.runs(name):
            cfg = run_method_config(config, label, name, plan.dim(name))
            validate = methods.get(cfg.name).validate
            parts = [
                (f"training part of split {s}", sp.train_idx, cfg) for s, sp in enumerate(ds.splits)
            ]
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
            for where, idx, run_cfg in parts:
                try:
                    validate(ds.features[idx], ds.labels[idx], run_cfg)
                except ValueError as e:
                    reason = f"{e} (on the {where})"
                    plan.not_applicable[(name, label)] = reason
                    logging.warning("%s on %s is not applicable: %s", label, name, reason)
                    break


# ----------------------------------------------------------------------------- jobs

CV_KEYS = ("rank1", "rank5", "rank10", "mAP", "train_seconds")  # finite in a CV result


def _sha256(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _job(kind: str, name: str, label: str, split: int, folder: str, cfg, info: DataInfo, **kw):
    config = cfg.to_dict()
    result = "result.json" if kind == "cv" else f"split_{split}.json"
    return dict(
        kind=kind,
        dataset=name,
        label=label,
        split=split,
        folder=folder,
        config=config,
        config_sha256=_sha256(config),
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
        return f"expected a JSON object, found a JSON {_json_kind(obj)}"
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
    reason = _wrong_job(job, obj) or workdir_lib.finite_numbers(obj, CV_KEYS)
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

    Every file is verified (``workdir.reuse_json``, and ``train.reuse_split`` for a run's
    split file and model): one that is damaged, non-finite or another job's is logged
    and treated as absent, so that the job is redone.
    """
    if job["kind"] == "cv":
        res = workdir_lib.reuse_json(job["result"], functools.partial(_check_cv_result, job))
    else:
        res = train.reuse_split(job["folder"], job["split"])
        reason = None if res is None else _wrong_job(job, res)
        if reason:
            logging.warning("%s cannot be reused (%s); redoing it", job["result"], reason)
            res = None
    if res is not None:
        return "done", res
    failed = workdir_lib.reuse_json(job["failed"], functools.partial(_check_failed, job))
    if failed is not None:
        return "failed", failed["error"]
    return None


def _job_cv(job: dict) -> None:
    """Fits one grid point on the validation split and writes its score."""
    run_cfg = ml_collections.ConfigDict(job["config"])
    ds = _dataset(job["data"], job["data_sha256"])
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
        **identity(job),
        "lam": run_cfg.method.lam,
        "learning_rate": run_cfg.method.learning_rate,
        "train_seconds": fit_seconds,
        **{k: float(res[k]) for k in ("rank1", "rank5", "rank10", "mAP")},
    }
    workdir_lib.write_json(job["result"], out)  # a ValueError (a failure) if not finite


def _job_run(job: dict) -> None:
    """One (method, dataset, split) run into its folder (``train.run_split``)."""
    run_cfg = ml_collections.ConfigDict(job["config"])
    ds = _dataset(job["data"], job["data_sha256"])
    out = train.run_split(ds, job["split"], run_cfg, job["folder"])
    workdir_lib.write_json(job["result"], {**identity(job), **out})


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)


def run_job(job: dict) -> dict:
    """Runs a job; returns its outcome, {"status": "done"} or {"status": "failed", "error"}.

    A failure (``TRAINING_FAILURES``) is written to the job's failed.json (and its
    result file, which cannot be sound, removed); any other exception propagates.
    """
    reason = job.get("fail")  # decided before training (every CV grid point failed)
    if not reason:
        try:
            (_job_cv if job["kind"] == "cv" else _job_run)(job)
        except workdir_lib.DamagedFileError:
            raise  # a damaged file, not an outcome of the job: never recorded as one
        except TRAINING_FAILURES as e:
            reason = f"{type(e).__name__}: {e}"
    if reason:
        os.makedirs(job["folder"], exist_ok=True)
        _remove(job["result"])
        workdir_lib.write_json(
            job["failed"], {**identity(job), "status": "failed", "error": reason}
        )
        return {"status": "failed", "error": reason}
    _remove(job["failed"])
    return {"status": "done"}


def _claim(folder: str, run_cfg) -> None:
    """Creates a job's folder with its config.json, or checks the config already there.

    A config.json that does not parse (a crash while it was written) is written again:
    the job's outcome files record the config they were made with, and are checked
    against it, so nothing is lost. One that parses but differs is refused.
    """
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "config.json")
    text = run_cfg.to_json_best_effort(indent=1, sort_keys=True)
    old = workdir_lib.reuse_json(
        path, lambda o: None if isinstance(o, dict) else f"a JSON {_json_kind(o)}, not a config"
    )
    if old is None:
        workdir_lib.write_text(path, text)
    elif old != json.loads(text):
        raise ValueError(
            f"{folder} holds a run with a different config ({path}); use a new workdir or "
            "remove it to start over"
        )


def _cv_job(plan: Plan, workdir: str, info: DataInfo, name, label, c, lam, eta) -> dict:
    cv = plan.config.cv
    folder = os.path.join(workdir, "cv", name, _safe(label), f"split_{c}", _grid_name(lam, eta))
    over = dict(lam=lam, learning_rate=eta)
    if cv.num_iters:
        over["num_iters"] = cv.num_iters
    cfg = _run_config(
        plan.config, name, run_method_config(plan.config, label, name, plan.dim(name), **over)
    )
    return _job(
        "cv",
        name,
        label,
        c,
        folder,
        cfg,
        info,
        val_fraction=cv.val_fraction,
        seed=plan.config.data.seed,
    )


def cv_jobs(plan: Plan, workdir: str, data: dict[str, DataInfo]) -> list[dict]:
    cv = plan.config.cv
    jobs = []
    for name in plan.datasets:
        for label in plan.cv_methods:
            if label not in plan.active(name):
                continue
            for c in range(cv.num_splits):
                for lam, eta in plan.grid(label):
                    jobs.append(_cv_job(plan, workdir, data[name], name, label, c, lam, eta))
    return jobs


class CrossValidationMissing(RuntimeError):
    """The runs stage needs cross-validation results that are not there yet."""


class CrossValidationFailed(RuntimeError):
    """Every grid point of a method failed in cross-validation: nothing to select."""


def select(plan: Plan, workdir: str, data: dict[str, DataInfo], name: str, label: str) -> dict:
    """The grid point with the best mean validation score over the CV splits.

    Writes ``cv/<dataset>/<method>/selected.json`` with the mean of every grid point (a
    point that failed on a split has the reasons and no mean, and is never selected).

    Raises:
      CrossValidationMissing: grid results are missing (the cv stage is not done).
      CrossValidationFailed: every grid point failed.
    """
    cv = plan.config.cv
    base = os.path.join(workdir, "cv", name, _safe(label))
    table, missing = [], []
    for lam, eta in plan.grid(label):
        row = {"lam": lam, "learning_rate": eta, "scores": [], "failed": []}
        for c in range(cv.num_splits):
            job = _cv_job(plan, workdir, data[name], name, label, c, lam, eta)
            got = outcome(job)
            if got is None:
                missing.append(job["result"])
            elif got[0] == "done":
                row["scores"].append(float(got[1][cv.measure]))
            else:
                row["scores"].append(None)
                row["failed"].append(f"split {c}: {got[1]}")
        table.append(row)
    if missing:
        raise CrossValidationMissing(
            f"{len(missing)} cross-validation results of {label} on {name} are missing "
            f"(first: {missing[0]}); run --stage=cv on every shard first"
        )
    for row in table:
        row["mean"] = None if row["failed"] else float(np.mean(row["scores"]))
    done = [r for r in table if r["mean"] is not None]
    if not done:
        raise CrossValidationFailed(
            f"every grid point of {label} on {name} failed in cross-validation (first: "
            f"{table[0]['failed'][0]}); see {base}"
        )
    best = max(done, key=lambda r: r["mean"])  # the first of equal ones, in grid order
    out = {
        "measure": cv.measure,
        "lam": best["lam"],
        "learning_rate": best["learning_rate"],
        "mean": best["mean"],
        "grid": table,
    }
    os.makedirs(base, exist_ok=True)
    workdir_lib.write_json(os.path.join(base, "selected.json"), out)
    return out


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
            cfg = _run_config(
                plan.config,
                name,
                run_method_config(plan.config, label, name, plan.dim(name), **over),
            )
            for s in range(data[name].num_splits):
                folder = os.path.join(workdir, "runs", name, _safe(label), f"split_{s}")
                job = _job("run", name, label, s, folder, cfg, data[name])
                if fail:
                    job["fail"] = fail
                jobs.append(job)
    return jobs


def execute(
    jobs: list[dict], *, num_workers: int, progress: bool, desc: str
) -> list[tuple[dict, str]]:
    """Runs the jobs without a recorded outcome (in ``num_workers`` processes).

    Returns:
      The failed jobs with their reasons: those that failed now and those whose
      failed.json recorded a failure before (they are not run again).
    """
    for job in jobs:
        if not job.get("fail"):  # one that fails before training runs no config
            _claim(job["folder"], ml_collections.ConfigDict(job["config"]))
    todo, failures = [], []
    for job in jobs:
        got = outcome(job)
        if got is None:
            todo.append(job)
        elif got[0] == "failed":
            failures.append((job, got[1]))
    logging.info("%s: %d jobs, %d already done", desc, len(jobs), len(jobs) - len(todo))
    for job, err in failures:
        logging.warning(
            "%s %s split %d failed before (%s); remove %s to run it again",
            job["dataset"],
            job["label"],
            job["split"],
            err,
            job["failed"],
        )
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc=desc, disable=not progress)

    def done(job, out):
        bar.update(1)
        bar.set_postfix_str(f"{job['dataset']} {job['label']} split {job['split']}")
        if out["status"] == "failed":
            logging.warning(
                "%s %s split %d failed: %s",
                job["dataset"],
                job["label"],
                job["split"],
                out["error"],
            )
            failures.append((job, out["error"]))

    if num_workers <= 1:
        for job in todo:
            done(job, run_job(job))
    else:
        ctx = multiprocessing.get_context("spawn")  # JAX is not fork-safe
        # workers sharing a GPU must not each reserve most of its memory up front
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        with concurrent.futures.ProcessPoolExecutor(num_workers, mp_context=ctx) as pool:
            futures = {pool.submit(run_job, job): job for job in todo}
            try:
                for fut in concurrent.futures.as_completed(futures):
                    done(futures[fut], fut.result())
            except BaseException:
                for fut in futures:
                    fut.cancel()  # a bug: stop at once, leaving the finished outcomes
                raise
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


def _failure_text(failed: dict[str, str]) -> str:
    """'split 0, 2: reason; split 1: other reason'."""
    by_reason: dict[str, list[str]] = {}
    for s, reason in failed.items():
        by_reason.setdefault(reason, []).append(s)
    return "; ".join(
        f"split{'s' if len(ss) > 1 else ''} {', '.join(ss)}: {r}" for r, ss in by_reason.items()
    )


def collect(plan: Plan, workdir: str, data: dict[str, DataInfo]) -> dict:
    """dataset -> method -> entry, read through the verified reader (``outcome``).

    An entry has ``status`` and ``num_splits`` and ``num_done`` (the splits with a
    result), and then:

    * ``done``: the mean and std over the finished splits of every measure, and the mean
      CMC curve (``_summary``);
    * ``failed``: ``failed``, split -> reason, for the splits that failed (no numbers);
    * ``not_applicable``: ``reason``, why the learner refused the dataset.

    A method with no outcome yet has no entry.
    """
    by_run: dict[tuple[str, str], list[dict]] = {}
    for job in run_jobs(plan, workdir, data, strict=False):
        by_run.setdefault((job["dataset"], job["label"]), []).append(job)
    results = {}
    for name in plan.datasets:
        num_splits = data[name].num_splits if name in data else 0
        results[name] = {}
        for label in plan.runs(name):
            if (name, label) in plan.not_applicable:
                results[name][label] = {
                    "status": "not_applicable",
                    "reason": plan.not_applicable[(name, label)],
                    "num_done": 0,
                    "num_splits": num_splits,
                }
                continue
            rows, failed = [], {}
            for job in by_run.get((name, label), []):
                got = outcome(job)
                if got is None:
                    continue
                if got[0] == "done":
                    rows.append(got[1])
                else:
                    failed[str(job["split"])] = got[1]
            common = {"num_done": len(rows), "num_splits": num_splits}
            if failed:
                results[name][label] = {"status": "failed", "failed": failed, **common}
            elif rows:
                results[name][label] = {"status": "done", **_summary(rows), **common}
    return results


class _Notes:
    """Numbered notes under a table: the reasons behind its n/a and failed cells."""

    def __init__(self):
        self.texts: list[str] = []

    def mark(self, text: str) -> str:
        text = " ".join(text.split())  # one line
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def lines(self) -> list[str]:
        if not self.texts:
            return []
        return ["Notes:", "", *[f"{i}. {t}" for i, t in enumerate(self.texts, 1)], ""]


def _cell(entry: dict | None, key: str, notes: _Notes | None = None, who: str = "") -> str:
    if entry is None:
        return "-"
    status = entry.get("status", "done")
    if status != "done":
        if status == "not_applicable":
            word, text = "n/a", f"{who}: not applicable: {entry['reason']}"
        else:
            word, text = "failed", f"{who}: failed on {_failure_text(entry['failed'])}"
        return word if notes is None else f"{word} {notes.mark(text)}"
    m, s = entry[key]["mean"], entry[key]["std"]
    partial = (
        ""
        if entry["num_done"] == entry["num_splits"]
        else f" ({entry['num_done']}/{entry['num_splits']})"
    )
    return f"{m:.2f} ± {s:.2f}{partial}"


def _note_text(entry: dict) -> str:
    """The study.csv note of an entry: '' for results, else why there are none."""
    if entry["status"] == "not_applicable":
        return f"not applicable: {entry['reason']}"
    if entry["status"] == "failed":
        return f"failed on {_failure_text(entry['failed'])}"
    return ""


def _md_table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _write_csv(path: str, rows: list[list]) -> None:
    with workdir_lib.atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def write_report(plan: Plan, workdir: str, results: dict) -> list[str]:
    """Writes the tables, the CMC plots and results.json; returns the files written.

    Cells: ``mean ± std`` over the splits done (``(k/n)`` when only k of n are), ``-``
    for a run skipped or not done, ``n/a [i]`` / ``failed [i]`` with note i giving the
    reason. The CSV tables hold ``n/a`` / ``failed`` in the mean column (study.csv: the
    reason in its ``note`` column).
    """
    written = []
    labels = plan.methods
    names = [DISPLAY.get(m, m) for m in labels]

    def done(entry):
        return entry is not None and entry.get("status", "done") == "done"

    parts = ["# Table 2: rank 1, rank 5 and AUC (mean ± std over splits, %)", ""]
    notes = _Notes()
    for key, title in TABLE2_MEASURES:
        rows = []
        for name in plan.datasets:
            res = results[name]
            best = max((res[m][key]["mean"] for m in labels if done(res.get(m))), default=None)
            cells = []
            for m, n in zip(labels, names, strict=True):
                cell = _cell(res.get(m), key, notes, f"{n} on {name}")
                if done(res.get(m)) and res[m][key]["mean"] == best:
                    cell = f"**{cell}**"
                cells.append(cell)
            rows.append([name, *cells])
        parts += [f"## {title}", "", _md_table(["dataset", *names], rows), ""]
        csv_rows = [["dataset", *[f"{n} {p}" for n in names for p in ("mean", "std")]]]
        for name in plan.datasets:
            row = [name]
            for m in labels:
                e = results[name].get(m)
                if e is None:
                    row += ["", ""]
                elif not done(e):
                    row += ["n/a" if e["status"] == "not_applicable" else "failed", ""]
                else:
                    row += [f"{e[key]['mean']:.4f}", f"{e[key]['std']:.4f}"]
            csv_rows.append(row)
        path = os.path.join(workdir, f"table2_{key.lower()}.csv")
        _write_csv(path, csv_rows)
        written.append(path)
    parts += notes.lines()
    path = os.path.join(workdir, "table2.md")
    workdir_lib.write_text(path, "\n".join(parts))
    written.append(path)

    parts = ["# Rank 1, rank 10 and mAP per dataset (mean ± std over splits, %)", ""]
    notes = _Notes()
    csv_rows = [
        [
            "dataset",
            "method",
            "splits",
            *[f"{k} {p}" for k in STUDY_MEASURES for p in ("mean", "std")],
            "train_seconds",
            "note",
        ]
    ]
    for name in plan.datasets:
        rows = []
        for m, n in zip(labels, names, strict=True):
            e = results[name].get(m)
            if (name, m) in plan.skips:
                continue
            rows.append(
                [
                    n,
                    *[_cell(e, k, notes, f"{n} on {name}") for k in STUDY_MEASURES],
                    f"{e['train_seconds']['mean']:.2f}" if done(e) else "-",
                ]
            )
            if done(e):
                csv_rows.append(
                    [
                        name,
                        m,
                        e["num_done"],
                        *[f"{e[k][p]:.4f}" for k in STUDY_MEASURES for p in ("mean", "std")],
                        f"{e['train_seconds']['mean']:.3f}",
                        "",
                    ]
                )
            elif e is not None:
                csv_rows.append(
                    [name, m, e["num_done"], *[""] * (2 * len(STUDY_MEASURES) + 1), _note_text(e)]
                )
        parts += [
            f"## {name}",
            "",
            _md_table(["method", "rank-1", "rank-10", "mAP", "train (s)"], rows),
            "",
        ]
    parts += notes.lines()
    csv_path = os.path.join(workdir, "study.csv")
    _write_csv(csv_path, csv_rows)
    path = os.path.join(workdir, "study.md")
    workdir_lib.write_text(path, "\n".join(parts))
    written += [csv_path, path]

    for name in plan.datasets:
        curves = {
            DISPLAY.get(m, m): results[name][m]["cmc"] for m in labels if done(results[name].get(m))
        }
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
    workdir_lib.write_json(path, results)
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
      NotADirectoryError, PermissionError: the workdir cannot be a folder of ours.
      RuntimeError: runs failed (each is named in the message and the log, shown as
        ``failed`` in the tables and has a ``failed.json``), raised after the report is
        written; or the runs stage found cross-validation results missing.
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be an integer >= 1, got {num_workers!r}")
    shard([], num_shards, shard_index)
    plan = Plan(config)
    if not isinstance(workdir, str) or not workdir:
        raise ValueError(f"workdir must be a folder path, got {workdir!r}")
    workdir_lib.prepare(workdir)
    data = {name: prepare_dataset(config, name, workdir) for name in plan.datasets}
    check_applicable(plan, data)  # every learner checks every split before any training
    kw = dict(num_workers=num_workers, progress=bool(config.progress))
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
    entries = [e for res in results.values() for e in res.values()]
    print(
        json.dumps(
            {
                "workdir": _WORKDIR.value,
                "runs_done": sum(e["num_done"] for e in entries),
                "not_applicable": sum(e["status"] == "not_applicable" for e in entries),
            }
        )
    )


if __name__ == "__main__":
    flags.mark_flags_as_required(["config", "workdir"])
    cli.run(main)
