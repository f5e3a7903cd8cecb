"""CUHK03-style single-shot evaluation: one random image per gallery label, averaged.

Each repeat is an ``evaluate_distances`` of the kept gallery columns, so single-shot
ranks with the host sort (``sort``); the distances of features are computed once.
"""

from __future__ import annotations

import jax
import numpy as np

from warca_jax.distances import blocked_distances, scaled_features
from warca_jax.evaluation.checks import (
    _check_distance_input,
    _check_positive_int,
    _check_protocol,
    _check_sizes,
)
from warca_jax.evaluation.multi_shot import evaluate_distances


def single_shot_evaluate(
    query_features: jax.typing.ArrayLike,
    gallery_features: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    metric: str = "euclidean",
    repeats: int = 10,
    seed: int = 0,
    max_rank: int | None = None,
) -> dict:
    """CUHK03-style single-shot evaluation, averaged over random galleries.

    Each repeat keeps one uniformly random gallery image per gallery label (every distinct
    label, 0 and -1 included), drawn with ``np.random.default_rng(seed)``, and runs
    ``evaluate_distances`` on the kept columns (gallery order preserved). Distances are
    computed once, on the features rescaled as in ``evaluate`` (package docstring: Scale).

    Args:
      query_features: [nq, d]. gallery_features: [ng, d].
      query_labels, query_cams: [nq] ints. gallery_labels, gallery_cams: [ng] ints.
      metric: one of ``DISTANCES``.
      repeats: number of random galleries (>= 1).
      seed: seed of the gallery draws.
      max_rank: CMC length per repeat (default: the single-shot gallery size).

    Returns:
      The ``evaluate`` dict with every metric averaged over repeats (``cmc`` elementwise,
      truncated to the shortest), plus ``rank1_std`` and ``mAP_std`` (population std over
      repeats) and ``repeats``.
    """
    # Rescaled by a common power of two (the same ranking, at any finite scale); the
    # distances ranked are those of the rescaled features.
    x, y, _ = scaled_features(query_features, gallery_features, metric, 1)
    _, gl, _, _ = _check_protocol(
        query_labels, gallery_labels, query_cams, gallery_cams, len(x), len(y), max_rank
    )
    _check_sizes(len(x), gl, "the features have")
    dist = np.asarray(blocked_distances(x, y, metric=metric, block_size=1024))
    return single_shot_evaluate_distances(
        dist,
        query_labels,
        gallery_labels,
        query_cams,
        gallery_cams,
        repeats=repeats,
        seed=seed,
        max_rank=max_rank,
    )


def single_shot_evaluate_distances(
    dist: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    repeats: int = 10,
    seed: int = 0,
    max_rank: int | None = None,
) -> dict:
    """``single_shot_evaluate`` on a precomputed [nq, ng] distance matrix."""
    _check_positive_int("repeats", repeats)
    dist, ql, gl, qc, gc = _check_distance_input(
        dist, query_labels, gallery_labels, query_cams, gallery_cams, max_rank
    )
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(repeats):
        perm = rng.permutation(len(gl))
        _, first = np.unique(gl[perm], return_index=True)  # first of each label in perm
        cols = np.sort(perm[first])
        runs.append(
            evaluate_distances(dist[:, cols], ql, gl[cols], qc, gc[cols], max_rank=max_rank)
        )
    return _average_runs(runs)


def _average_runs(runs: list[dict]) -> dict:
    """The mean of the runs' results (``cmc`` truncated to the shortest), stds, repeats."""
    out = {}
    for key, value in runs[0].items():
        if key == "cmc":
            n = min(len(r["cmc"]) for r in runs)
            out[key] = np.mean([r["cmc"][:n] for r in runs], axis=0)
        elif isinstance(value, int):
            out[key] = int(round(np.mean([r[key] for r in runs])))
        else:
            out[key] = float(np.mean([r[key] for r in runs]))
    out["rank1_std"] = float(np.std([r["rank1"] for r in runs]))
    out["mAP_std"] = float(np.std([r["mAP"] for r in runs]))
    out["repeats"] = len(runs)
    return out
