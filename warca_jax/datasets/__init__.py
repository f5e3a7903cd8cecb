"""Re-identification datasets, read from their published layouts.

`load(name, root, **options)` calls the loader `LOADERS[name]`. Image loaders return an
`ImageSet` (paths, labels, cams, splits); `to_dataset` computes its descriptors with
`warca_jax.features` and returns a `warca_jax.data.Dataset`, which feature-file loaders
return directly. `load_dataset` does both. Each loader's module docstring gives the layout
it reads and the protocol of its splits (WARCA paper, section 4.1):

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
"""

from __future__ import annotations

import inspect

from warca_jax import data
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

__all__ = ["LOADERS", "ImageSet", "get_loader", "load", "load_dataset", "to_dataset"]

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


def get_loader(name: str):
    """The loader registered under `name` (case, '-' and '_' ignored)."""
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a string; got {name!r}")
    key = name.lower().replace("-", "").replace("_", "")
    if key not in LOADERS:
        raise ValueError(f"unknown dataset {name!r}; valid names: {sorted(LOADERS)}")
    return LOADERS[key]


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
    params = inspect.signature(loader).parameters
    valid = [p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise TypeError(f"dataset {name!r} takes no option(s) {unknown}; valid options: {valid}")
    return loader(root, **options)


def load_dataset(
    name: str,
    root,
    *,
    descriptor="color_lbp",
    cache_dir=None,
    batch_size=256,
    progress=False,
    **options,
) -> data.Dataset:
    """`load` followed by `to_dataset`: features, labels, cams and splits of a dataset.

    Args:
      name: a key of `LOADERS`.
      root: the dataset's folder or file.
      descriptor, cache_dir, batch_size, progress: passed to `to_dataset`.
      **options: the loader's keyword options.

    Returns:
      A validated `data.Dataset`.
    """
    return to_dataset(
        load(name, root, **options),
        descriptor=descriptor,
        cache_dir=cache_dir,
        batch_size=batch_size,
        progress=progress,
    )
