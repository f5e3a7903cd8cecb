"""The protocol config's list and map fields, read as data and checked.

Every field is plain data (configs/protocol.py): tuples of names and maps (ConfigDicts).
A field that does not hold what it should is a ValueError naming the field, the value
given and what is expected, with an example of the command-line override.
"""

from __future__ import annotations

import math

import ml_collections

BUILT_IN_DATASETS = ("synthetic", "npz")  # made by warca_jax.data.dataset_arrays, not by a loader

# config field -> (what it holds, an example value as given on the command line)
FIELDS = {
    "datasets": (
        "a tuple of dataset names, each <dataset>[:<variant of config.data_variants>]",
        "\"('viper','cuhk03')\"",
    ),
    "data_variants": (
        "a map variant -> {data field: value}, a dataset entry <dataset>:<variant> runs "
        "on the data section with those fields",
        "\"{'gog': {'descriptor': 'gog', 'normalize': 'center_l2'}}\"",
    ),
    "methods": (
        "a tuple of method labels <configs file>[:<variant>]",
        "\"('warca:linear','kissme','nn')\"",
    ),
    "cv.methods": ("a tuple of labels of config.methods", "\"('warca:linear',)\""),
    "dim_methods": ("a tuple of method labels", "\"('warca:linear','rpcca')\""),
    "dims": (
        "a map dataset name (or entry <dataset>:<variant>) -> output dimension >= 1",
        "\"{'market1501': 200, 'viper': 100}\"",
    ),
    "skip": (
        "a map dataset name (or entry) -> tuple of the method labels not run on it",
        "\"{'market1501': ('rpcca',), 'viper': ('lmnn',)}\"",
    ),
    "paths": ("a map dataset name -> folder", "\"{'viper': '~/data/VIPeR'}\""),
    "overrides": (
        "a map method label -> {field: value}",
        "\"{'warca:linear': {'num_iters': 500}}\"",
    ),
    "cv.grids": (
        "a map label -> {'lams': (...), 'etas': (...)}",
        "\"{'warca:linear': {'lams': (1e-4, 1e-2), 'etas': (0.01,)}}\"",
    ),
    "cv.lams": ("a non-empty tuple of finite numbers >= 0", "'(1e-4,1e-2)'"),
    "cv.etas": ("a non-empty tuple of finite numbers > 0", "'(1e-2,1e-1)'"),
}


def expect(field: str) -> str:
    """'; expected <what the field holds>, e.g. --config.<field>=<example>'."""
    what, example = FIELDS[field]
    return f"; expected {what}, e.g. --config.{field}={example}"


def get(config, field: str):
    """The value of a dotted config field (``cv.grids``)."""
    node = config
    for part in field.split("."):
        node = node[part]
    return node


def is_number(value) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def non_finite(value) -> bool:
    """Whether ``value`` is, or (a tuple or list) holds, a float that is NaN or infinite."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, tuple | list):
        return any(non_finite(v) for v in value)
    return False


def names(config, field: str) -> list[str]:
    """A tuple-of-names field as a list; a name given twice is a ValueError."""
    value = get(config, field)
    if not isinstance(value, tuple | list):
        raise ValueError(f"config.{field} must be a tuple, got {value!r}{expect(field)}")
    items = list(value)
    for item in items:
        if not isinstance(item, str) or not item.strip() or item != item.strip():
            raise ValueError(
                f"config.{field} holds {item!r}, which is not a name (a non-empty string "
                f"without surrounding spaces): got {value!r}{expect(field)}"
            )
        if "," in item:
            raise ValueError(
                f"config.{field} holds {item!r}: one name per element, not a "
                f"comma-separated string (got {value!r}){expect(field)}"
            )
    twice = sorted({t for t in items if items.count(t) > 1})
    if twice:
        raise ValueError(
            f"config.{field} names {twice} more than once (got {value!r}); each run would "
            f"be done twice into the same folder{expect(field)}"
        )
    return items


def mapping(config, field: str) -> dict:
    """A map field (a ConfigDict of name -> value) as a dict of its top level."""
    value = get(config, field)
    if not isinstance(value, ml_collections.ConfigDict | dict):
        raise ValueError(f"config.{field} must be a map, got {value!r}{expect(field)}")
    out = dict(value.items())
    for key in out:
        if not isinstance(key, str) or not key.strip():
            raise ValueError(
                f"config.{field} has the key {key!r}, which is not a name{expect(field)}"
            )
    return out


def safe(label: str) -> str:
    """A method label or dataset entry as a file or folder name (``warca:chi2`` ->
    ``warca-chi2``)."""
    return label.replace(":", "-")


def data_variants(config) -> dict[str, dict]:
    """config.data_variants as dicts: variant -> {data field: value} for every entry
    ``<dataset>:<variant>``, and ``<dataset>:<variant>`` -> the fields of that entry alone
    (set after the variant's). The values are checked against the data section by
    ``plan.data_config``."""
    if "data_variants" not in config:
        return {}
    out = {}
    for key, values in mapping(config, "data_variants").items():
        if key.count(":") > 1 or not isinstance(values, ml_collections.ConfigDict | dict):
            raise ValueError(
                f"config.data_variants[{key!r}] must be a map data field -> value under a "
                f"variant name or an entry <dataset>:<variant>, got {values!r}"
                f"{expect('data_variants')}"
            )
        if ":" in key:
            check_dataset_name(key.partition(":")[0], f"config.data_variants names {key!r}",
                               "data_variants")  # fmt: skip
        out[key] = dict(values.items())
    return out


def dataset_of(config, entry: str, where: str, field: str) -> str:
    """The dataset name of ``entry``, ``<dataset>[:<variant>]``: a dataset the protocol
    can load and, with a variant, one that config.data_variants names (as the variant or
    as the whole entry); a ValueError naming ``where`` otherwise."""
    name, sep, variant = entry.partition(":")
    if sep:
        known = data_variants(config)
        if variant not in known and entry not in known:
            raise ValueError(
                f"{where}: {entry!r} names the data variant {variant!r}, which "
                f"config.data_variants does not hold (it holds {sorted(known)})"
                f"{expect('data_variants')}"
            )
    check_dataset_name(name, where, field)
    return name


def check_dataset_name(name: str, where: str, field: str) -> None:
    """A ValueError naming ``where`` unless ``name`` is a dataset the protocol can load."""
    if name in BUILT_IN_DATASETS:
        return
    from warca_jax import datasets

    try:
        datasets.get_loader(name)
    except ValueError as e:
        raise ValueError(f"{where}: {e}{expect(field)}") from None


def dims(config) -> dict[str, int]:
    """config.dims (dataset or entry -> output dimension), checked, and config.default_dim."""
    out = mapping(config, "dims")
    for name, dim in out.items():
        dataset_of(config, name, f"config.dims names {name!r}", "dims")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(
                f"config.dims[{name!r}] must be an integer >= 1, got {dim!r}{expect('dims')}"
            )
    if isinstance(config.default_dim, bool) or not isinstance(config.default_dim, int):
        raise ValueError(f"config.default_dim must be an integer >= 1, got {config.default_dim!r}")
    if config.default_dim < 1:
        raise ValueError(f"config.default_dim must be >= 1, got {config.default_dim}")
    return out


def skips(config) -> set[tuple[str, str]]:
    """config.skip (dataset or entry -> labels not run on it) as a set of (dataset or
    entry, label) pairs."""
    out = set()
    for name, labels in mapping(config, "skip").items():
        dataset_of(config, name, f"config.skip names {name!r}", "skip")
        if not isinstance(labels, tuple | list) or not all(
            isinstance(label, str) and label.strip() for label in labels
        ):
            raise ValueError(
                f"config.skip[{name!r}] must be a tuple of method labels, got {labels!r}"
                f"{expect('skip')}"
            )
        out.update((name, label) for label in labels)
    return out


def paths(config) -> dict[str, str]:
    """config.paths (dataset -> folder), checked."""
    out = mapping(config, "paths")
    for name, folder in out.items():
        check_dataset_name(name, f"config.paths names {name!r}", "paths")
        if not isinstance(folder, str) or not folder.strip():
            raise ValueError(
                f"config.paths[{name!r}] must be a folder (a non-empty string), got "
                f"{folder!r}{expect('paths')}"
            )
    return out


def overrides(config) -> dict[str, dict]:
    """config.overrides (label -> {field: value}) as dicts; values are checked by the caller."""
    out = {}
    for label, fields in mapping(config, "overrides").items():
        if not isinstance(fields, ml_collections.ConfigDict | dict):
            raise ValueError(
                f"config.overrides[{label!r}] must be a map field -> value, got "
                f"{fields!r}{expect('overrides')}"
            )
        out[label] = dict(fields.items())
    return out


def grid_values(values, what: str, where: str, field: str) -> list[float]:
    """A tuple of finite numbers (a lambda or eta grid) as floats."""
    if not isinstance(values, tuple | list) or not all(is_number(v) for v in values):
        raise ValueError(
            f"{where} must be a tuple of finite numbers ({what}), got {values!r}{expect(field)}"
        )
    return [float(v) for v in values]


def cv_grids(config) -> dict[str, dict[str, list[float]]]:
    """config.cv.grids (label -> {"lams": ..., "etas": ...}), each grid checked."""
    out = {}
    for label, g in mapping(config, "cv.grids").items():
        if not isinstance(g, ml_collections.ConfigDict | dict) or not set(g.keys()) <= {
            "lams",
            "etas",
        }:
            raise ValueError(
                "config.cv.grids must map each label to {'lams': (...), 'etas': (...)}; "
                f"{label!r} has {g!r}{expect('cv.grids')}"
            )
        where = f"config.cv.grids[{label!r}]"
        out[label] = {
            key: grid_values(g[key], what, f"{where}[{key!r}]", "cv.grids")
            for key, what in (("lams", "lambdas"), ("etas", "step sizes"))
            if key in g
        }
    return out
