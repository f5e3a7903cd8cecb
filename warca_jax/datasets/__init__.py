"""Re-identification datasets, read from their published layouts.

`load(name, root, **options)` calls the loader `LOADERS[name]`. Image loaders return an
`ImageSet` (paths, labels, cams, splits); `to_dataset` computes its descriptors with
`warca_jax.features` and returns a `warca_jax.data.dataset_arrays.Dataset`, which
feature-file loaders return directly. `read` does both, and `from_config` does it for a
config's `data` section (or builds the synthetic data). Each loader's module docstring
gives the layout it reads and the protocol of its splits (WARCA paper, section 4.1).

Imports point one way: this package reads files into `warca_jax.data.dataset_arrays`'s
types and checks them with its validators; `warca_jax.data.dataset_arrays` never imports it.

| name       | layout                                          | test ids  | splits       |
|------------|-------------------------------------------------|-----------|--------------|
| market1501 | bounding_box_train/, bounding_box_test/, query/ | 750       | 1 fixed      |
| cuhk03     | new-protocol .mat + images_*/ or feature_data.json | 700    | 1 fixed      |
| cuhk03     | protocol="classic": cuhk-03.mat                 | 100       | 20 published |
| cuhk01     | campus/NNNNMMM.png                              | 486       | 10 random    |
| viper      | cam_a/, cam_b/ III_AA.bmp                       | 316       | 10 random    |
| prid450s   | cam_a/, cam_b/ img_NNNN.png                     | 225       | 10 random    |
| caviar     | NNNNMMM.jpg                                     | 36        | 10 random    |
| 3dpes      | RGB/<id>_<view>_*.bmp                           | 95        | 10 random    |
| ilids      | NNNNMMM.jpg                                     | 60        | 10 random    |
| opereid    | <id>_<camera>_*.<ext>                           | 119       | 10 random    |
| orl        | s1/ ... s40/ 1.pgm ... 10.pgm                   | 20        | 10 random    |
| features   | a .npz, .mat or .json feature file              | option    | file/random  |

`npz` is another name of `features` (the generic format:
docs/datasets.md#your-own-features-the-npz-format).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping

import ml_collections

from warca_jax.data import dataset_arrays, identity_splits
from warca_jax.data.synthetic import make_synthetic
from warca_jax.datasets.base import ImageSet, to_dataset
from warca_jax.datasets.caviar import load_caviar
from warca_jax.datasets.cuhk01 import load_cuhk01
from warca_jax.datasets.cuhk03 import load_cuhk03
from warca_jax.datasets.features_files import load_features_file
from warca_jax.datasets.ilids import load_ilids
from warca_jax.datasets.market1501 import load_market1501
from warca_jax.datasets.opereid import load_opereid
from warca_jax.datasets.orl import load_orl
from warca_jax.datasets.threedpes import load_threedpes
from warca_jax.datasets.two_camera import load_prid450s, load_viper
from warca_jax.features import feature_norm

__all__ = [
    "DEFAULT_PAPER_DIM",
    "LOADERS",
    "NAMES",
    "PAPER_DIMS",
    "ImageSet",
    "from_config",
    "get_loader",
    "load",
    "read",
    "to_dataset",
]

# The output dimension D' the WARCA paper gives its methods on a dataset (Sec. 5:
# 200 on Market-1501, 100 on VIPeR, 40 on the others): the protocol's ``dims`` and the main
# job's D' on these datasets when the user sets none (``run_plan.check_run_config``).
PAPER_DIMS = {"market1501": 200, "viper": 100}
DEFAULT_PAPER_DIM = 40

LOADERS = {
    "market1501": load_market1501,
    "cuhk03": load_cuhk03,
    "cuhk01": load_cuhk01,
    "viper": load_viper,
    "prid450s": load_prid450s,
    "caviar": load_caviar,
    "3dpes": load_threedpes,
    "ilids": load_ilids,
    "opereid": load_opereid,
    "orl": load_orl,
    "features": load_features_file,
}
ALIASES = {"npz": "features"}
# the names data.name takes: the built-in data, every loader and its aliases
NAMES = ("synthetic", *ALIASES, *LOADERS)
# loaders whose number of splits is the published protocol's (CUHK03: 1 new / 20 classic):
# data.num_splits is not passed to them (data.loader_options can set it)
PUBLISHED_SPLIT_COUNT = ("cuhk03",)


def _key(name: str) -> str:
    key = name.lower().replace("-", "").replace("_", "")
    return ALIASES.get(key, key)


def get_loader(name: str):
    """The loader registered under `name` (case, '-' and '_' ignored)."""
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a string; got {name!r}")
    key = _key(name)
    if key not in LOADERS:
        raise ValueError(f"unknown dataset {name!r}; valid names: {sorted(LOADERS)}")
    return LOADERS[key]


def _keyword_options(fn) -> list[str]:
    params = inspect.signature(fn).parameters
    return [p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY]


def option_names(name: str) -> list[str]:
    """The keyword options the loader registered under ``name`` takes (its docstring says
    what each means)."""
    return _keyword_options(get_loader(name))


def load(name: str, root, **options):
    """Reads a dataset with the loader registered under `name`.

    Args:
      name: a key of `LOADERS` (case, '-' and '_' ignored: "Market-1501" works).
      root: the dataset's folder (for "features": the file).
      **options: the loader's keyword options (see its docstring).

    Returns:
      An `ImageSet` (image datasets) or a `data.Dataset` (feature files, CUHK03 features).

    Raises:
      ValueError: for an unknown name, listing the valid ones.
      TypeError: for an option the loader does not take, listing those it does.
    """
    loader = get_loader(name)
    valid = option_names(name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(f"dataset {name!r} takes no option(s) {unknown}; valid options: {valid}")
    return loader(root, **options)


def read(name: str, root, **options) -> dataset_arrays.Dataset:
    """`load` followed by `to_dataset`: features, labels, cams and splits of a dataset.

    Args:
      name: a key of `LOADERS`.
      root: the dataset's folder or file.
      **options: `to_dataset`'s keyword options (descriptor, cache_dir, batch_size,
        progress, skip_small_images, height, width; its defaults for those not given) and
        the loader's (no loader takes an option of the same name as one of `to_dataset`'s).

    Returns:
      A validated `data.Dataset`.
    """
    described = {k: options.pop(k) for k in _keyword_options(to_dataset) if k in options}
    return to_dataset(load(name, root, **options), **described)


def from_config(cfg, *, progress: bool = False) -> dataset_arrays.Dataset:
    """The dataset a config's ``data`` section names.

    Args:
      cfg: ConfigDict with `name` (one of `NAMES`), `path` (the file, or the dataset's
        folder), `num_splits`, `num_train_ids` and `num_test_ids` (0: the defaults of
        `splits.random_splits` or of the dataset's protocol), `seed`, `synthetic` (keyword
        arguments of `make_synthetic` but the seed), and for datasets read from images
        `descriptor`, `cache_dir`, `batch_size`, `skip_small_images`, `height`, `width`
        and `loader_options` (a map of further loader options, e.g. {"variant": "detected"}).
      progress: show a progress bar while descriptors are extracted from images.

    Returns:
      A validated `data.Dataset`.

    Raises:
      ValueError: an unknown name, a path the chosen source does not read (e.g. with the
        synthetic data), a split option the dataset's fixed protocol does not take, a
        ``normalize`` that is not one of ``feature_norm.MODES`` (applied per split later).
    """
    feature_norm.check_mode(cfg.get("normalize", "none"))
    split_args = dict(
        num_splits=cfg.num_splits,
        num_train_ids=cfg.num_train_ids or None,
        num_test_ids=cfg.num_test_ids or None,
        seed=cfg.seed,
    )
    path = cfg.get("path", "")
    if cfg.name == "synthetic":
        if path:
            raise ValueError(
                f"data.path={path!r} is set but data.name='synthetic' reads no file: the "
                "run would train and report on the built-in synthetic data. Set "
                "data.name=npz (or the dataset's name, e.g. market1501) to read it, or "
                "data.path='' for the synthetic data"
            )
        features, labels, cams = make_synthetic(
            **{"seed": cfg.seed, **dict(cfg.get("synthetic", {}))}
        )
        splits = identity_splits.random_splits(labels, cams, **split_args)
        return dataset_arrays.validated_dataset(features, labels, cams, splits, "synthetic")
    try:
        loader = get_loader(cfg.name)
    except (ValueError, TypeError):
        raise ValueError(f"unknown dataset name {cfg.name!r}; valid names: {list(NAMES)}") from None
    if not path:
        raise ValueError(f"dataset {cfg.name!r} needs data.path: its folder (or file)")
    options = loader_options(cfg.get("loader_options", {}), cfg.name)
    takes = inspect.signature(loader).parameters
    key = _key(cfg.name)
    for name, value in split_args.items():
        if name == "num_splits" and key in PUBLISHED_SPLIT_COUNT:
            continue
        if name in takes:
            if name not in options and value is not None:
                options[name] = value
        elif name in ("num_train_ids", "num_test_ids") and value:
            raise ValueError(
                f"dataset {cfg.name!r} has a fixed protocol: data.{name} cannot be set "
                f"(got {value})"
            )
    return read(
        cfg.name,
        os.path.expanduser(path),
        descriptor=cfg.get("descriptor", "color_lbp"),
        cache_dir=os.path.expanduser(cfg.get("cache_dir", "")) or None,
        batch_size=cfg.get("batch_size", 256),
        progress=progress,
        skip_small_images=bool(cfg.get("skip_small_images", False)),
        height=int(cfg.get("height", 128)),
        width=int(cfg.get("width", 48)),
        **options,
    )


def loader_options(value, name: str | None = None) -> dict:
    """``data.loader_options`` (a map option -> value) as a dict, or a ValueError naming it.

    With ``name``, every option must be one that dataset's loader takes.
    """
    if not isinstance(value, Mapping | ml_collections.ConfigDict):
        raise ValueError(
            "data.loader_options must be a map option -> value, e.g. "
            f"--config.data.loader_options=\"{{'variant': 'detected'}}\"; got {value!r}"
        )
    options = dict(value.items())
    if name is not None:
        valid = option_names(name)
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ValueError(
                f"data.loader_options: dataset {name!r} takes no option(s) {unknown}; "
                f"its options are {valid}"
            )
    return options
