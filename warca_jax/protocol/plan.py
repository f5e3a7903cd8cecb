"""The plan of a protocol config: datasets, methods, grids, and the config of every run.

``Plan(config)`` checks the whole config before any work (every name known, every
override a real field of its method, every grid non-empty and finite) and holds the
checked lists. ``run_method_config`` / ``data_config`` / ``run_config`` make the config
of one run from the protocol config and a method label.
"""

from __future__ import annotations

import copy
import os

import ml_collections
from absl import logging

from warca_jax import methods
from warca_jax.methods.warca import config as warca_config
from warca_jax.protocol import fields
from warca_jax.runs import defaults

CV_MEASURES = ("rank1", "rank5", "rank10", "mAP")  # what cv.measure may name


def method_config(label: str) -> ml_collections.ConfigDict:
    """The learner's default ``method`` section named by ``label``, ``<method>[:<variant>]``,
    locked (``defaults.method_config``, which checks the label)."""
    cfg = defaults.method_config(label)
    cfg.lock()
    return cfg


def data_config(config, name: str) -> ml_collections.ConfigDict:
    """The ``data`` section of dataset entry ``name``, ``<dataset>[:<variant>]``: the
    protocol's with the dataset's name and folder, then the fields that
    ``config.data_variants`` sets for the variant, then those it sets for the entry."""
    dataset, _, variant = name.partition(":")
    cfg = copy.deepcopy(config.data)
    cfg.unlock()
    cfg.name = dataset
    if variant:
        fields.dataset_of(config, name, "config.datasets", "datasets")
        known = fields.data_variants(config)
        for key in (variant, name):
            _set_data_fields(cfg, key, known.get(key, {}))
    if dataset not in ("synthetic",):
        paths = fields.paths(config)
        if dataset in paths:
            cfg.path = os.path.expanduser(paths[dataset])
        elif config.data_root:
            cfg.path = os.path.join(os.path.expanduser(config.data_root), dataset)
        else:
            raise ValueError(
                f"dataset {dataset!r} needs a folder: set --config.data_root (holding "
                f"data_root/{dataset}) or --config.paths=\"{{'{dataset}': '/path'}}\""
            )
    cfg.lock()
    return cfg


def _set_data_fields(cfg, key: str, values: dict) -> None:
    """Sets ``config.data_variants[key]`` (data field -> value) on the data section ``cfg``;
    a map field is set entry by entry (``{'synthetic': {'num_ids': 30}}`` keeps the other
    synthetic fields), an entry it does not have refused unless the map is empty by
    default (``loader_options``, whose entries are the loader's)."""
    for field, value in values.items():
        where = f"config.data_variants[{key!r}][{field!r}]"
        if field not in cfg or field in ("name", "path"):
            raise ValueError(
                f"{where}: the data section has no such field to set (name and path are "
                f"the dataset's); it has "
                f"{sorted(k for k in cfg.keys() if k not in ('name', 'path'))}"
            )
        if not isinstance(cfg[field], ml_collections.ConfigDict):
            old, kind = cfg[field], cfg.get_type(field)
            cfg[field] = _override_value(key, field, old, value, kind, field="data_variants")
            continue
        if not isinstance(value, ml_collections.ConfigDict | dict):
            raise ValueError(
                f"{where} must be a map, as the data section's field is, got {value!r}"
                f"{fields.expect('data_variants')}"
            )
        section = cfg[field]
        open_map = not len(defaults.base_config().data[field])  # loader_options: the loader's
        for entry, v in value.items():
            if not open_map and entry not in section:
                raise ValueError(
                    f"{where}: the data section's {field} has no field {entry!r}; it has "
                    f"{sorted(section.keys())}"
                )
            if entry in section and not isinstance(section[entry], ml_collections.ConfigDict):
                v = _override_value(
                    key, f"{field}.{entry}", section[entry], v, field="data_variants"
                )
            section[entry] = v


def _override_value(label: str, key: str, old, value, kind=None, field: str = "overrides"):
    """``value`` for field ``key`` (now ``old``; ``kind``: its declared type, which a field
    that is None by default has) of ``label``'s section as ``config.<field>[label]`` sets
    it, or ValueError."""
    where = f"config.{field}[{label!r}][{key!r}]"
    shown = old
    if old is None and value is None:
        return value
    if old is None and kind in (bool, int, float, str):
        old = kind()
    if isinstance(old, ml_collections.ConfigDict):
        raise ValueError(f"{where}: {key!r} is a section of the method config, not a value")
    if isinstance(old, bool):
        ok, want = isinstance(value, bool), "True or False"
    elif isinstance(old, int):
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(old, float):
        ok, want = fields.is_number(value), "a finite number"
        value = float(value) if ok else value
    elif isinstance(old, str):
        ok, want = isinstance(value, str), "a string"
    elif isinstance(old, tuple | list):
        ok, want = isinstance(value, tuple | list), "a tuple"
        ok, want = (ok and not fields.non_finite(value)), f"{want} of finite values"
        value = type(old)(value) if ok else value
    else:
        ok, want = not fields.non_finite(value), "finite"
    if not ok:
        raise ValueError(
            f"{where} must be {want} (the field is {shown!r}), got {value!r}{fields.expect(field)}"
        )
    return value


def apply_overrides(label: str, cfg: ml_collections.ConfigDict, values: dict) -> None:
    """Sets ``config.overrides[label]`` (``values``: field -> value) on the unlocked ``cfg``.

    Raises:
      ValueError: a field the method section lacks, the method name, or a value of the
        wrong type (named with the field and what it holds).
    """
    for key, value in values.items():
        if key not in cfg:
            raise ValueError(
                f"config.overrides[{label!r}][{key!r}]: its method section has no such "
                f"field; it has {sorted(cfg.keys())}"
            )
        if key == "name":
            raise ValueError(f"override of {label!r}: the method name cannot be changed")
        value = _override_value(label, key, cfg[key], value, cfg.get_type(key))
        try:
            cfg[key] = value
        except TypeError as e:
            raise ValueError(f"config.overrides[{label!r}][{key!r}] = {value!r}: {e}") from None


def run_method_config(config, label: str, name: str, dim: int, **overrides):
    """The method section of one run.

    The label's config, then the dataset's output dimension (for ``config.dim_methods``),
    then ``config.overrides[label]``, then ``overrides`` (the cross-validated values).
    """
    cfg = method_config(label)
    cfg.unlock()
    if "dim" in cfg and label in fields.names(config, "dim_methods"):
        cfg.dim = dim
    apply_overrides(label, cfg, fields.overrides(config).get(label, {}))
    for key, value in overrides.items():
        if key not in cfg:
            raise ValueError(
                f"{key!r} of {label!r}: its method section has no such field; it has "
                f"{sorted(cfg.keys())}"
            )
        cfg[key] = type(cfg[key])(value) if isinstance(cfg[key], float) else value
    if "lam" in overrides and "lam_grid" in cfg:
        # WARCA: the lambda the protocol's cross-validation chose replaces its own rule
        cfg = warca_config.at_lam(cfg, cfg.lam)
    cfg.lock()
    return cfg


def run_config(config, name: str, method_cfg) -> ml_collections.ConfigDict:
    """The whole config of one run (``pipeline.run_split``'s): seed, data, method, eval."""
    c = ml_collections.ConfigDict()
    c.seed = config.seed
    c.data = data_config(config, name)
    c.method = method_cfg
    c.eval = copy.deepcopy(config.eval)
    c.progress = False
    return c


def _check_labels(config, field: str, labels) -> None:
    """Every label names a method config (a ValueError naming ``field`` otherwise)."""
    for label in labels:
        try:
            method_config(label)
        except ValueError as e:
            raise ValueError(f"config.{field}: {e}{fields.expect(field)}") from None


def _set_by_user(field: str, label: str, explicit) -> bool:
    """Whether the user set ``field`` (or its entry ``label``): every field when
    ``explicit`` is None, else the override paths it holds (``cv.grids.frml.etas``)."""
    if explicit is None:
        return True
    entry = f"{field}.{label}"
    return any(p in (field, entry) or p.startswith(entry + ".") for p in explicit)


def _only_run(field: str, labels, run: list[str], where: str, explicit) -> list[str]:
    """The ``labels`` of ``field`` that are in ``run`` (the list named ``where``). A label
    that is not is dropped with a log line when it is the config's default, and refused
    when the user set it (``_set_by_user``): a request that cannot be met."""
    refused = [x for x in labels if x not in run and _set_by_user(field, x, explicit)]
    if refused:
        raise ValueError(
            f"config.{field} name {refused}, which are not in {where} {tuple(run)}"
            f"{fields.expect(field)}"
        )
    for label in labels:
        if label not in run:
            logging.info("config.%s: %r left out, as %s does not hold it", field, label, where)
    return [x for x in labels if x in run]


def _cv_grids(config, cv_methods: list[str], explicit) -> dict[str, list[tuple[float, float]]]:
    """label -> its (lambda, eta) grid: cv.grids[label], else cv.lams x cv.etas."""
    grids = fields.cv_grids(config)
    kept = _only_run("cv.grids", list(grids), cv_methods, "cv.methods", explicit)
    grids = {label: grids[label] for label in kept}
    lams = fields.grid_values(config.cv.lams, "lambdas", "config.cv.lams", "cv.lams")
    etas = fields.grid_values(config.cv.etas, "step sizes", "config.cv.etas", "cv.etas")
    out = {}
    for label in cv_methods:
        lam_l = grids.get(label, {}).get("lams", lams)
        eta_l = grids.get(label, {}).get("etas", etas)
        if not lam_l or not eta_l:
            raise ValueError(
                f"the lambda and eta grids of {label} need at least one value each; "
                f"got lambdas {lam_l} and etas {eta_l}"
            )
        if any(v < 0 for v in lam_l) or any(not v > 0 for v in eta_l):
            key = "lams" if any(v < 0 for v in lam_l) else "etas"
            field = (
                f"config.cv.grids[{label!r}][{key!r}]"
                if key in grids.get(label, {})
                else f"config.cv.{key}"
            )
            raise ValueError(
                f"{field}: lambdas must be >= 0 and etas > 0; got {lam_l} and {eta_l} for {label}"
            )
        out[label] = [(lam, eta) for lam in lam_l for eta in eta_l]
    return out


def _check_cv_settings(cv) -> None:
    if isinstance(cv.num_splits, bool) or not isinstance(cv.num_splits, int):
        raise ValueError(f"cv.num_splits must be an integer, got {cv.num_splits!r}")
    if cv.num_splits < 1:
        raise ValueError(f"cv.num_splits must be >= 1, got {cv.num_splits}")
    if not 0 < cv.val_fraction < 1:
        raise ValueError(f"cv.val_fraction must be in (0, 1), got {cv.val_fraction}")
    if cv.num_iters < 0:
        raise ValueError(f"cv.num_iters must be >= 0 (0: the method's), got {cv.num_iters}")
    halving = cv.get("halving", 1)
    if isinstance(halving, bool) or not isinstance(halving, int) or halving < 1:
        raise ValueError(
            f"cv.halving must be an integer >= 1 (1: every grid point trained to the end, "
            f"3: keep the best third at each rung), got {halving!r}"
        )
    if cv.measure not in CV_MEASURES:
        raise ValueError(f"cv.measure must be rank1, rank5, rank10 or mAP; got {cv.measure!r}")


class Plan:
    """The checked lists of datasets, methods and grid points of a protocol config.

    ``not_applicable`` maps (dataset, label) to the reason the learner refused that
    dataset's training data (``runs.check_applicable``); empty until that is known.

    ``explicit``: the config fields the user set, as override paths (the command line's
    ``--config.cv.methods=...`` is ``cv.methods``); None: every field. An entry of
    ``cv.methods`` for a label that ``methods`` does not hold, or of ``cv.grids`` for one
    that ``cv.methods`` does not hold, is left out with a log line when it is the
    config's default (narrowing ``methods`` drops their cross-validation), and refused
    when the user set it.
    """

    def __init__(self, config, *, explicit=None):
        self.config = config
        self.datasets = fields.names(config, "datasets")
        self.methods = fields.names(config, "methods")
        self.cv_methods = fields.names(config, "cv.methods")
        self.not_applicable: dict[tuple[str, str], str] = {}
        if not self.datasets:
            raise ValueError(
                f"config.datasets is empty; name at least one dataset{fields.expect('datasets')}"
            )
        if not self.methods:
            raise ValueError(
                f"config.methods is empty; name at least one method label{fields.expect('methods')}"
            )
        for name in self.datasets:
            fields.dataset_of(config, name, "config.datasets", "datasets")
        for label in self.methods:
            methods.get(method_config(label).name)
        self.cv_methods = _only_run(
            "cv.methods", self.cv_methods, self.methods, "config.methods", explicit
        )
        for label in self.cv_methods:
            cfg = method_config(label)
            if "lam" not in cfg or "learning_rate" not in cfg:
                raise ValueError(
                    f"cv.methods: {label!r} has no lam and learning_rate fields to choose"
                )
        self.grids = _cv_grids(config, self.cv_methods, explicit)
        if self.cv_methods:
            _check_cv_settings(config.cv)
        self.dims = fields.dims(config)
        self.skips = fields.skips(config)
        _check_labels(config, "skip", sorted({label for _, label in self.skips}))
        _check_labels(config, "dim_methods", fields.names(config, "dim_methods"))
        fields.paths(config)  # well-formed even when every dataset is built in
        fields.data_variants(config)  # well-formed even when no entry names one
        # a table's own overrides of the methods a run leaves out go with them, as its
        # cross-validated methods do; the user's are refused
        _only_run("overrides", sorted(fields.overrides(config)), self.methods, "config.methods",
                  explicit)  # fmt: skip
        for label in self.methods:
            run_method_config(config, label, "", 1)  # every override names a real field
        for name in self.datasets:
            data_config(config, name)  # a folder for every real dataset

    def dim(self, name: str) -> int:
        """The output dimension on dataset entry ``name``: its own, else its dataset's."""
        dataset = name.partition(":")[0]
        return self.dims.get(name, self.dims.get(dataset, self.config.default_dim))

    def runs(self, name: str) -> list[str]:
        """The labels run on dataset entry ``name``: not skipped, on the entry or on its
        dataset (not applicable ones included)."""
        dataset = name.partition(":")[0]
        return [m for m in self.methods if not {(name, m), (dataset, m)} & self.skips]

    def active(self, name: str) -> list[str]:
        """The labels run on dataset ``name`` that are applicable to it."""
        return [m for m in self.runs(name) if (name, m) not in self.not_applicable]

    def grid(self, label: str) -> list[tuple[float, float]]:
        """The (lambda, eta) points cross-validated for ``label``, in grid order."""
        return self.grids[label]
