"""The ranked lists of the CUHK03 study's Figure 3 (``warca_jax.studies.figures``): each
query's top-k gallery entries in the evaluation's order, the queries drawn for the
figure, and the images of a dataset read from images.

The evaluation's order: gallery entries of the query's identity and camera and entries
labelled -1 are removed, the rest sorted by float32 distance, ties in gallery order (as
``warca_jax.evaluation``).
"""

from __future__ import annotations

import os

import numpy as np

from warca_jax import datasets
from warca_jax.data import dataset_arrays


def _kept(ql, qc, gl, gc) -> np.ndarray:
    """[q, g] bool: the gallery entries each query ranks (evaluation protocol)."""
    ql, qc, gl, gc = (np.asarray(a) for a in (ql, qc, gl, gc))
    junk = (gl[None, :] == ql[:, None]) & (gc[None, :] == qc[:, None])
    return (gl[None, :] != -1) & ~junk


def valid_queries(ql, qc, gl, gc) -> np.ndarray:
    """[q] bool: queries with a true match (same identity, other camera) in the gallery."""
    kept = _kept(ql, qc, gl, gc)
    return np.any(kept & (np.asarray(gl)[None, :] == np.asarray(ql)[:, None]), axis=1)


def ranked_lists(dist, query_labels, gallery_labels, query_cams, gallery_cams, *, top_k: int):
    """The top-k gallery entries of each query, in the evaluation's order.

    Entries of the query's identity and camera and entries labelled -1 are removed; the
    rest are sorted by float32 distance, ties in gallery order (as ``warca_jax.evaluation``).

    Args:
      dist: [q, g] distances of the queries to the gallery.
      query_labels, query_cams: [q] ints. gallery_labels, gallery_cams: [g] ints.
      top_k: entries kept per query.

    Returns:
      (index [q, k] gallery positions, distances [q, k], matches [q, k] bool: same identity).

    Raises:
      ValueError: a query with fewer than top_k entries left, or mismatched shapes.
    """
    dist = np.asarray(dist, dtype=np.float32)
    ql, gl = np.asarray(query_labels), np.asarray(gallery_labels)
    if dist.ndim != 2 or dist.shape != (len(ql), len(gl)):
        raise ValueError(f"dist must be [q={len(ql)}, g={len(gl)}], got {dist.shape}")
    kept = _kept(ql, query_cams, gl, gallery_cams)
    short = np.flatnonzero(kept.sum(axis=1) < top_k)
    if short.size:
        raise ValueError(
            f"top_k={top_k} but query {int(short[0])} has only "
            f"{int(kept[short[0]].sum())} gallery entries left after junk removal"
        )
    index = np.empty((len(ql), top_k), np.int64)
    for r in range(len(ql)):
        cols = np.flatnonzero(kept[r])
        index[r] = cols[np.argsort(dist[r, cols], kind="stable")[:top_k]]
    distances = np.take_along_axis(dist, index, axis=1)
    return index, distances, gl[index] == ql[:, None]


def pick_queries(split: dataset_arrays.Split, dataset: dataset_arrays.Dataset, num: int, seed: int):
    """``num`` positions into ``split.query_idx`` drawn from ``seed`` among valid queries."""
    q, g = split.query_idx, split.gallery_idx
    lab, (cam_q, cam_g) = dataset.labels, dataset_arrays.evaluation_cams(dataset, q, g)
    valid = np.flatnonzero(valid_queries(lab[q], cam_q, lab[g], cam_g))
    if num > len(valid):
        raise ValueError(
            f"ranked.num_queries={num} is larger than the {len(valid)} queries of split 0 "
            "with a true match in the gallery"
        )
    return np.random.default_rng(seed).choice(valid, size=num, replace=False)


def image_paths(data_cfg, dataset: dataset_arrays.Dataset) -> tuple[str, ...] | None:
    """The image path of every sample when the dataset is read from images, else None."""
    if data_cfg.name == "synthetic":
        return None
    try:
        datasets.get_loader(data_cfg.name)
    except ValueError:
        return None
    options = datasets.loader_options(data_cfg.loader_options, data_cfg.name)
    found = datasets.load(data_cfg.name, os.path.expanduser(data_cfg.path), **options)
    if not isinstance(found, datasets.ImageSet):
        return None  # a feature file: no images
    if len(found.paths) != len(dataset.labels) or not np.array_equal(found.labels, dataset.labels):
        raise ValueError(
            f"the images of {data_cfg.name} do not line up with its features "
            f"({len(found.paths)} images, {len(dataset.labels)} feature rows)"
        )
    return found.paths
