"""The stored datasets the jobs read, and the validation splits drawn inside them.

Each dataset is loaded once (features extracted) and stored as ``<workdir>/data/<name>.npz``
with a fingerprint of its arrays; every job reads it from there (``load_stored``, cached
per process) and checks it is the data the job was made for.
"""

from __future__ import annotations

import functools
import os
from typing import NamedTuple

import numpy as np
from absl import logging

from warca_jax import datasets
from warca_jax.data import dataset_arrays
from warca_jax.datasets import npz_file
from warca_jax.io import run_files, writes
from warca_jax.protocol import fields
from warca_jax.protocol.plan import data_config
from warca_jax.runs import config_checks, defaults


class DataInfo(NamedTuple):
    """A dataset stored for the jobs: its file, the fingerprint of its arrays, its splits."""

    path: str
    sha256: str
    num_splits: int


def _stamp(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=4)
def _read_stored(path: str, stamp: tuple[int, int]) -> tuple[dataset_arrays.Dataset, str, str]:
    """(dataset, data config it was made from, fingerprint) of ``data/<name>.npz``.

    ``stamp`` (mtime, size) keys the cache, so a file rebuilt since is read again.

    Raises:
      DamagedFileError: the file is not whole: it does not read back, lacks an array, or
        its arrays do not hash to the fingerprint stored with them.
    """
    del stamp
    head = ("num_splits", "name", "config", "fingerprint", "features", "labels", "cams")
    try:
        z, present = npz_file.read_npz(path, head + ("same_camera_matches",), what="stored dataset")
        missing = sorted(set(head) - set(z))
        if missing:
            raise ValueError(f"it has no {missing} (it has {present})")
        num = int(z["num_splits"])
        keys = [f"{k}_{s}" for s in range(num) for k in ("train", "query", "gallery")]
        idx, _ = npz_file.read_npz(path, keys, what="stored dataset")
        missing = [k for k in keys if k not in idx]
        if missing:
            raise ValueError(f"it has no {missing[:3]}")
    except ValueError as e:
        raise run_files.DamagedFileError(
            f"{path}: the stored dataset cannot be read back ({e})"
        ) from None
    splits = tuple(
        dataset_arrays.Split(idx[f"train_{s}"], idx[f"query_{s}"], idx[f"gallery_{s}"])
        for s in range(num)
    )
    same = bool(z.get("same_camera_matches", False))  # absent in older stores
    ds = dataset_arrays.Dataset(z["features"], z["labels"], z["cams"], splits, str(z["name"]), same)
    fingerprint = config_checks.content_fingerprint(ds)
    if fingerprint != str(z["fingerprint"]):
        raise run_files.DamagedFileError(
            f"{path}: the stored dataset is damaged: its arrays do not match the "
            "fingerprint stored with them"
        )
    return ds, str(z["config"]), fingerprint


def load_stored(path: str, sha256: str | None = None) -> dataset_arrays.Dataset:
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

    ``name`` is a dataset entry, ``<dataset>[:<variant>]`` (``plan.data_config``).
    Stores ``<workdir>/data/<name>.npz`` (``viper:gog`` as ``viper-gog.npz``); a stored
    copy made from the same data config is reused when it reads back whole (else it is
    rebuilt, with a log line naming it).
    """
    folder = os.path.join(workdir, "data")
    writes.makedirs(folder, within=workdir)
    path = os.path.join(folder, f"{fields.safe(name)}.npz")
    cfg = data_config(config, name)
    key = cfg.to_json_best_effort(sort_keys=True)
    if os.path.exists(path):
        try:
            ds, old_key, fingerprint = _read_stored(path, _stamp(path))
        except run_files.DamagedFileError as e:
            logging.warning("%s; rebuilding it", e)
        else:
            if old_key == key:
                return DataInfo(path, fingerprint, len(ds.splits))
            logging.info("%s was made from another data config; rebuilding it", path)
    ds = datasets.from_config(cfg, progress=defaults.progress_bars(config.progress))
    arrays = {"features": ds.features, "labels": ds.labels, "cams": ds.cams}
    for s, sp in enumerate(ds.splits):
        arrays.update({f"train_{s}": sp.train_idx, f"query_{s}": sp.query_idx})
        arrays[f"gallery_{s}"] = sp.gallery_idx
    fingerprint = config_checks.content_fingerprint(ds)
    with run_files.atomic_file(path, "wb") as f:
        np.savez(
            f,
            num_splits=len(ds.splits),
            name=ds.name,
            config=key,
            fingerprint=fingerprint,
            same_camera_matches=ds.same_camera_matches,
            **arrays,
        )
    return DataInfo(path, fingerprint, len(ds.splits))
