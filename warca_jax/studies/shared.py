"""What the studies share: a study's checked data and workdir, and the Euclidean baseline."""

from __future__ import annotations

import os
from collections.abc import Iterable

from warca_jax import datasets, evaluation, methods
from warca_jax.data import dataset_arrays
from warca_jax.io import run_files, writes
from warca_jax.metric import Metric
from warca_jax.runs import defaults, pipeline


def open_study(
    config, workdir: str, learners: Iterable, *, folder: str = ""
) -> dataset_arrays.Dataset:
    """The study's dataset (``config.data``), checked, and its workdir, ready.

    Every config of ``learners`` (a ``method`` section) is validated on the training part
    of every split (a ``ValueError`` before any training); then ``workdir`` (and ``folder``
    in it) is made, and refused when it holds a study with another config
    (``pipeline.check_config_file``; one with the same config is resumed).
    """
    dataset = datasets.from_config(config.data, progress=defaults.progress_bars(config.progress))
    for cfg in learners:
        validate = methods.get(cfg.name).validate
        for sp in dataset.splits:
            validate(dataset.features[sp.train_idx], dataset.labels[sp.train_idx], cfg)
    run_files.prepare(workdir)  # made, and locked (one run per workdir)
    writes.makedirs(os.path.join(workdir, folder), within=workdir)
    pipeline.check_config_file(workdir, config)
    return dataset


def euclidean_rank1(dataset: dataset_arrays.Dataset, eval_cfg) -> list[float]:
    """Rank-1 of the Euclidean distance (nothing learned) on every split's test part."""
    ident = Metric("identity", dataset.features.shape[1], name="euclidean")
    return [
        evaluation.evaluate_metric(ident, dataset, sp, eval_cfg)["rank1"] for sp in dataset.splits
    ]
