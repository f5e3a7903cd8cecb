r"""A multi-shot CMC read three ways: the same saved models of a protocol run, their rank-1
when each probe image is ranked against the gallery images (the project's reading, and
torchreid's), when a gallery person's distance is the mean over their gallery images, and
when a probe person's two images and a gallery person's two images are compared as sets
(the mean over the four pairs).

  python -m benchmarks.bench_multi_shot_readings --workdir=W --entry=cuhk01-gog \
      --methods=xqda,nfst,warca-kernel

``W`` is a finished protocol run (``configs/protocol.py:past_paper`` or ``:table3``) whose
``runs/<entry>/<method>/split_<s>/`` hold each split's model and config; the features are
read again as that config says (give the run's descriptor cache with ``--cache_dir`` to
skip extraction). Nothing is refitted: the readings differ only in how the distances of one
model are turned into a ranking, so their gaps are what the reading alone moves.
"""

from __future__ import annotations

import json
import os
import platform

import numpy as np
from absl import app, flags
from ml_collections import ConfigDict

from warca_jax import datasets
from warca_jax.features import feature_norm
from warca_jax.metric import Metric

_WORKDIR = flags.DEFINE_string("workdir", "", "a finished protocol run's workdir")
_ENTRY = flags.DEFINE_string("entry", "cuhk01-gog", "its dataset entry's folder under runs/")
_METHODS = flags.DEFINE_list("methods", ["xqda"], "method folders under runs/<entry>/")
_CACHE_DIR = flags.DEFINE_string("cache_dir", "", "descriptor cache ('': the run's own)")

READINGS = ("image", "gallery_mean", "set_mean")


def rank1(dist: np.ndarray, probe_ids: np.ndarray, gallery_ids: np.ndarray) -> dict:
    """Rank-1 (%) of probe images against gallery images ``dist`` [P, G] under each reading."""
    people = np.unique(gallery_ids)
    # [P, people]: a gallery person's distance, the mean over their gallery images
    by_person = np.stack([dist[:, gallery_ids == i].mean(1) for i in people], 1)
    # [people, people]: a probe person's images against a gallery person's, the mean pair
    sets = np.stack([by_person[probe_ids == i].mean(0) for i in people])
    return {
        "image": 100 * np.mean(gallery_ids[dist.argmin(1)] == probe_ids),
        "gallery_mean": 100 * np.mean(people[by_person.argmin(1)] == probe_ids),
        "set_mean": 100 * np.mean(sets.argmin(1) == np.arange(len(people))),
    }


def method_readings(folder: str) -> list[dict]:
    """Each split's rank-1 under each reading, for the method runs in ``folder``."""
    splits = sorted(
        int(name.rpartition("_")[2]) for name in os.listdir(folder) if name.startswith("split_")
    )
    if not splits:
        raise ValueError(f"{folder} holds no split_<s>/ folder; expected a finished run")
    first = os.path.join(folder, f"split_{splits[0]}", "config.json")
    with open(first) as f:
        data_cfg = ConfigDict(json.load(f)["data"])
    if _CACHE_DIR.value:
        data_cfg.cache_dir = _CACHE_DIR.value
    dataset = datasets.from_config(data_cfg)
    out = []
    for s in splits:
        ds = feature_norm.for_split(dataset, s, data_cfg)
        split = ds.splits[s]
        metric = Metric.load(os.path.join(folder, f"split_{s}", f"model_split{s}.npz"))
        q, g = split.query_idx, split.gallery_idx
        dist = np.asarray(metric.pairwise_distances(ds.features[q], ds.features[g]), np.float64)
        out.append(rank1(dist, ds.labels[q], ds.labels[g]))
    return out


def main(argv):
    del argv
    if not _WORKDIR.value:
        raise app.UsageError("--workdir: a finished protocol run's folder is required")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(f"| method ({_ENTRY.value}) | " + " | ".join(READINGS) + " |")
    print("| --- |" + " --- |" * len(READINGS))
    for method in _METHODS.value:
        rows = method_readings(os.path.join(_WORKDIR.value, "runs", _ENTRY.value, method))
        cells = []
        for reading in READINGS:
            values = np.array([r[reading] for r in rows])
            cells.append(f"{values.mean():.2f} ± {values.std():.2f}")
        print(f"| {method} ({len(rows)} splits) | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    app.run(main)
