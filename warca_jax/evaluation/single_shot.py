"""CUHK03-style single-shot evaluation: one random image per gallery identity, averaged.

Two draws (``draw=``), both repeated ``repeats`` times with one seed and averaged:

- ``"per_query"`` (the default; torchreid's ``eval_cuhk03``, the field's convention): for
  each query, the gallery entries of its identity *and* camera (and label -1) are removed
  first, then one random entry is kept per remaining identity. Each query ranks its own
  subset, so a query with any true match always keeps one; none is skipped for the draw.
  Ranked here on the distance matrix, block by block (``_per_query_runs``).
- ``"gallery"`` (warca_jax before, kept for comparison with earlier results): one random
  entry per gallery label for the whole gallery, drawn before junk removal; each repeat is
  an ``evaluate_distances`` of the kept columns (the host sort, ``sort``). A query whose
  drawn same-identity entry shares its camera has no true match left and is skipped
  (a large share of the queries when the gallery shares the query cameras, as in CUHK03).

The distances of features are computed once.
"""

from __future__ import annotations

import jax
import numpy as np

from warca_jax.evaluation.checks import (
    _check_distance_input,
    _check_positive_int,
    _check_protocol,
    _check_sizes,
    _no_true_match,
)
from warca_jax.evaluation.metrics import _summary
from warca_jax.evaluation.multi_shot import evaluate_distances
from warca_jax.maths.distances import blocked_distances, scaled_features

DRAWS = ("per_query", "gallery")  # the single-shot draws (module docstring)
_DRAW_BLOCK = 256  # queries per block of the per-query draw (fixed: the draw depends on it)


def single_shot_evaluate(
    query_features: jax.typing.ArrayLike,
    gallery_features: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    distance: str = "euclidean",
    repeats: int = 10,
    seed: int = 0,
    max_rank: int | None = None,
    draw: str = "per_query",
) -> dict:
    """CUHK03-style single-shot evaluation, averaged over random draws of the gallery.

    Distances are computed once, on the features rescaled as in ``evaluate`` (package
    docstring: Scale), then ranked by ``single_shot_evaluate_distances``.

    Args:
      query_features: [nq, d]. gallery_features: [ng, d].
      query_labels, query_cams: [nq] ints. gallery_labels, gallery_cams: [ng] ints.
      distance: one of ``DISTANCES``.
      repeats: number of random draws (>= 1).
      seed: seed of the draws.
      max_rank: CMC length per repeat (default: the single-shot gallery size).
      draw: ``"per_query"`` (torchreid's) or ``"gallery"`` (``single_shot_evaluate_distances``).

    Returns:
      The dict of ``single_shot_evaluate_distances``.
    """
    # Rescaled by a common power of two (the same ranking, at any finite scale); the
    # distances ranked are those of the rescaled features.
    x, y, _ = scaled_features(query_features, gallery_features, distance, 1)
    _, gl, _, _ = _check_protocol(
        query_labels, gallery_labels, query_cams, gallery_cams, len(x), len(y), max_rank
    )
    _check_sizes(len(x), gl, "the features have")
    _check_draw(draw)
    dist = np.asarray(blocked_distances(x, y, distance=distance, block_size=1024))
    return single_shot_evaluate_distances(
        dist,
        query_labels,
        gallery_labels,
        query_cams,
        gallery_cams,
        repeats=repeats,
        seed=seed,
        max_rank=max_rank,
        draw=draw,
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
    draw: str = "per_query",
) -> dict:
    """CUHK03-style single-shot metrics of a precomputed [nq, ng] distance matrix.

    ``draw="per_query"`` (default; torchreid's ``eval_cuhk03``): for each query and repeat,
    the gallery entries of label -1 and those of the query's identity and camera are
    removed, then one uniformly random entry is kept per remaining label (label 0, the
    distractors, counts as one label). The query's true match is then its one kept entry
    of its identity; its position is 1 + the kept entries ranked before it (stable order:
    distance, then gallery index). The single-shot gallery size G is the number of distinct
    gallery labels other than -1 (the same for every valid query). Queries with no true
    match at all are skipped (as by ``evaluate_distances``); the draw skips none.

    ``draw="gallery"`` (warca_jax's former draw): each repeat keeps one uniformly random
    gallery entry per gallery label (every distinct label, 0 and -1 included) for the whole
    gallery and runs ``evaluate_distances`` on the kept columns (gallery order preserved);
    junk is removed after the draw, so a query whose drawn entry of its identity is from
    its own camera is skipped in that repeat.

    mAP: each draw reports the mean over valid queries and repeats of the AP *within the
    drawn gallery*. With ``"per_query"`` a query has exactly one true match there, so its
    AP is 1 / (position of that match) (a mean reciprocal rank; mINP equals mAP, and
    MAP@R and R-precision equal rank-1). With ``"gallery"`` likewise, over the queries not
    skipped. torchreid's ``eval_cuhk03`` instead reports the AP of the whole gallery after
    junk removal (its CMC is single-shot, its mAP is not): that is ``evaluate_distances``'s
    mAP.

    Random numbers: ``"per_query"`` draws repeat r from the r-th child of
    ``np.random.SeedSequence(seed)`` (blocks of 256 queries in query order);
    ``"gallery"`` uses ``np.random.default_rng(seed)``. Memory of ``"per_query"``: a few
    [256, ng] arrays (about 40 bytes per element).

    Args:
      dist: [nq, ng] distances (numpy or jax), finite; cast to float32 as in
        ``evaluate_distances``.
      query_labels, query_cams: [nq] ints. gallery_labels, gallery_cams: [ng] ints.
      repeats: number of random draws (>= 1).
      seed: seed of the draws.
      max_rank: CMC length per repeat (default: the single-shot gallery size).
      draw: ``"per_query"`` or ``"gallery"``.

    Returns:
      The ``evaluate`` dict (package docstring: Results) with every metric averaged over
      repeats (``cmc`` elementwise, truncated to the shortest), plus ``rank1_std`` and
      ``mAP_std`` (population std over repeats) and ``repeats``.
    """
    _check_positive_int("repeats", repeats)
    _check_draw(draw)
    dist, ql, gl, qc, gc = _check_distance_input(
        dist, query_labels, gallery_labels, query_cams, gallery_cams, max_rank
    )
    if draw == "per_query":
        stats, g = _per_query_runs(dist, ql, gl, qc, gc, repeats=repeats, seed=seed)
        runs = [_summary(*run, g=g, max_rank=max_rank) for run in stats]
    else:
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


def _check_draw(draw) -> None:
    if draw not in DRAWS:
        raise ValueError(f"draw must be one of {DRAWS}, got {draw!r}")


def _per_query_runs(dist, ql, gl, qc, gc, *, repeats: int, seed: int) -> list:
    """The per-query draw, ranked block by block.

    Returns:
      (runs, g): per repeat the per-query ``(first, ap, inp, num_good, map_r, r_prec)`` of
      ``metrics._summary``, and G, the number of distinct labels (label -1 removed).
    """
    kept = gl != -1  # label -1 is junk for every query
    dist, gl, gc = dist[:, kept], gl[kept], gc[kept]
    labels, group = np.unique(gl, return_inverse=True)
    order = np.argsort(group, kind="stable")  # gallery columns grouped by label
    starts = np.searchsorted(group[order], np.arange(len(labels)))
    nq, ng = dist.shape
    idx_bits = max(1, (ng - 1).bit_length())
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(repeats)]
    pos = np.zeros((repeats, nq), np.int64)
    valid, own_cam = np.zeros(nq, bool), np.zeros((nq, 1), bool)
    for lo in range(0, nq, _DRAW_BLOCK):
        q = slice(lo, min(lo + _DRAW_BLOCK, nq))
        same = gl[None, :] == ql[q, None]
        junk = same & (gc[None, :] == qc[q, None])
        good = same & ~junk
        valid[q], own_cam[q, 0] = good.any(axis=1), junk.any(axis=1)
        for r, rng in enumerate(rngs):
            picked = _draw_per_query(rng, junk, group, order, starts, idx_bits)
            pos[r, q] = _positions(dist[q], picked, good)
    if not valid.any():
        _no_true_match(ql, own_cam)
    num_good = valid.astype(np.int64)
    runs = []
    for p in pos:
        inv = np.where(valid, 1.0 / np.maximum(p, 1), 0.0)
        top = (valid & (p == 1)).astype(np.float64)
        runs.append((np.where(valid, p, 1), inv, inv, num_good, top, top))
    return runs, len(labels)


def _draw_per_query(rng, removed, group, order, starts, idx_bits) -> np.ndarray:
    """[b, ng] bool: per query row, one uniformly random entry of each label among the
    entries not ``removed`` (none of a label whose entries are all removed).

    Each (row, entry) gets a unique 64-bit key, random high bits over the entry's index;
    the entry with the smallest key of its label (among the entries not removed) is kept.
    """
    b, ng = removed.shape
    keys = rng.integers(0, 2 ** (64 - idx_bits), size=(b, ng), dtype=np.uint64)
    keys = (keys << np.uint64(idx_bits)) | np.arange(ng, dtype=np.uint64)
    keys[removed] = np.iinfo(np.uint64).max
    smallest = np.minimum.reduceat(keys[:, order], starts, axis=1)  # [b, labels]
    return (keys == smallest[:, group]) & ~removed


def _positions(dist, picked, good) -> np.ndarray:
    """[b] 1-based position of each row's one picked true match among its picked entries
    (stable order: distance, then gallery index); 0 where no true match was picked.

    dist: [b, ng] float32. picked, good: [b, ng] bool.
    """
    match = picked & good
    j = np.argmax(match, axis=1)
    rows = np.arange(len(j))
    dj = dist[rows, j][:, None]
    cols = np.arange(dist.shape[1])[None, :]
    before = picked & ((dist < dj) | ((dist == dj) & (cols < j[:, None])))
    return np.where(match.any(axis=1), 1 + before.sum(axis=1), 0)


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
