"""Re-identification evaluation: distances, CMC, mAP, mINP and AUC.

The protocol is the Market-1501 / CUHK03 one. For every query, gallery entries of the same
identity *and* the same camera are junk and removed, and gallery entries labelled ``-1``
are always removed. Label ``0`` (distractors) is an ordinary negative. The ranking is a
stable sort on distance: equal distances keep gallery order. A query with no true match
left in the gallery is skipped and counted in ``num_skipped``.

Implementation: queries are processed in padded row blocks. A jitted JAX function computes
the block's distances and turns each ``(distance, gallery index)`` pair into one 64-bit
sort key whose order is exactly the stable order (row | float bits | index). The keys are
sorted on the host with NumPy's SIMD sort (XLA's CPU sort is ~20x slower), the rank of every
same-identity gallery entry is found by binary search, and a second jitted function reduces
these ranks to first-match position, AP and INP per query. Only the same-identity entries
(at most a few dozen per query) are ever gathered, so no ``[nq, ng]`` array is kept.
"""

from __future__ import annotations

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np

from warca_jax.distances import (  # noqa: F401  (DISTANCES, pairwise_distances re-exported)
    DISTANCES,
    block_distances,
    check_features,
    pad_rows,
    pairwise_distances,
    row_block,
    sq_norms,
)

_RANKS = (1, 5, 10, 20)


# ----------------------------------------------------------------------------- ranking
def _sort_keys(dist: jax.Array, *, idx_bits: int) -> jax.Array:
    """64-bit keys (as uint32 pairs) ordering each row stably by distance.

    key = row << (32 + idx_bits) | monotone_bits(dist) << idx_bits | gallery index, so one
    flat sort of a block orders rows, then distances, then gallery index. dist: [b, g] ->
    [b, g, 2] uint32 in native byte order of a uint64.
    """
    dist = jnp.where(dist == 0, 0.0, dist).astype(jnp.float32)  # -0.0 ties with +0.0
    u = jax.lax.bitcast_convert_type(dist, jnp.uint32)
    u = jnp.where(u >> 31 != 0, ~u, u | jnp.uint32(0x80000000))  # float order as uint order
    b, g = dist.shape
    row = jnp.arange(b, dtype=jnp.uint32)[:, None]
    col = jnp.arange(g, dtype=jnp.uint32)[None, :]
    high = (row << idx_bits) | (u >> (32 - idx_bits))
    low = (u << idx_bits) | col
    pair = (low, high) if sys.byteorder == "little" else (high, low)
    return jnp.stack(pair, axis=-1)


@functools.partial(jax.jit, static_argnames=("metric", "idx_bits"))
def _feature_keys(x, y, xx, yy, *, metric, idx_bits):
    return _sort_keys(block_distances(x, y, xx, yy, metric=metric), idx_bits=idx_bits)


_dist_keys = jax.jit(_sort_keys, static_argnames="idx_bits")


@jax.jit
def _query_stats(rank, good, junk):
    """Per-query metrics from the ranks of the same-identity entries.

    Args:
      rank: [b, k] int32 0-based rank of each same-identity gallery entry among all
        gallery entries (label -1 already removed), in stable distance order.
      good: [b, k] bool, true match (same identity, other camera).
      junk: [b, k] bool, same identity and same camera (removed from the ranking).

    Returns:
      first: [b] 1-based position of the first true match after junk removal.
      ap: [b] average precision. inp: [b] inverse negative penalty. num_good: [b].
    """
    before = rank[:, None, :] < rank[:, :, None]  # [b, j, k]: entry k ranks before j
    pos = rank + 1 - jnp.sum(before & junk[:, None, :], axis=-1)
    hits = 1 + jnp.sum(before & good[:, None, :], axis=-1)
    num_good = jnp.sum(good, axis=1)
    first = jnp.min(jnp.where(good, pos, jnp.iinfo(jnp.int32).max), axis=1)
    ap = jnp.sum(jnp.where(good, hits / pos, 0.0), axis=1) / jnp.maximum(num_good, 1)
    inp = num_good / jnp.maximum(jnp.max(jnp.where(good, pos, 0), axis=1), 1)
    return first, ap, inp, num_good


# ----------------------------------------------------------------------------- protocol
def _check_ids(name: str, a, n: int, what: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"{name} must be 1-D with one entry per {what} ({n}), got shape {a.shape}")
    if not (np.issubdtype(a.dtype, np.integer) or np.all(np.equal(np.mod(a, 1), 0))):
        raise ValueError(f"{name} must hold integers, got dtype {a.dtype}")
    return a.astype(np.int64)


def _check_protocol(ql, gl, qc, gc, nq: int, ng: int, max_rank):
    if max_rank is not None and (not isinstance(max_rank, int | np.integer) or max_rank < 1):
        raise ValueError(f"max_rank must be a positive int or None, got {max_rank!r}")
    return (
        _check_ids("query_labels", ql, nq, "query"),
        _check_ids("gallery_labels", gl, ng, "gallery entry"),
        _check_ids("query_cams", qc, nq, "query"),
        _check_ids("gallery_cams", gc, ng, "gallery entry"),
    )


def _same_identity_table(ql, qc, gl, gc):
    """Gallery indices of each query's identity, padded: ([nq, k] idx, good, junk)."""
    order = np.argsort(gl, kind="stable")
    sorted_gl = gl[order]
    lo = np.searchsorted(sorted_gl, ql, side="left")
    count = np.searchsorted(sorted_gl, ql, side="right") - lo
    k = max(int(count.max(initial=0)), 1)
    slot = np.arange(k)
    present = slot[None, :] < count[:, None]
    idx = (
        order[np.clip(lo[:, None] + slot[None, :], 0, max(len(gl) - 1, 0))]
        if len(gl)
        else (np.zeros((len(ql), k), np.int64))
    )
    same_cam = gc[idx] == qc[:, None] if len(gl) else present
    return idx.astype(np.int64), present & ~same_cam, present & same_cam


def _evaluate_blocks(block_keys, nq, ql, qc, gl, gc, *, block_size, max_rank) -> dict:
    """Runs the blocked ranking; ``block_keys(start, rows, idx_bits)`` gives [rows, g, 2]."""
    kept = np.flatnonzero(gl != -1)  # label -1 is junk for every query: drop it up front
    gl, gc = gl[kept], gc[kept]
    g = len(kept)
    same, good, junk = _same_identity_table(ql, qc, gl, gc)
    idx_bits = max(1, (g - 1).bit_length())
    b = max(1, min(block_size, 2 ** (32 - idx_bits), nq))
    stats = []
    pending = block_keys(0, b, idx_bits) if nq and g else None
    for start in range(0, nq if g else 0, b):
        keys = np.asarray(pending).view(np.uint64).reshape(b, g)
        if start + b < nq:  # dispatch the next block so XLA works while NumPy sorts
            pending = block_keys(start + b, b, idx_bits)
        sorted_keys = np.sort(keys.ravel())
        rows = slice(start, start + b)
        blk_same = pad_rows(same[rows], b)
        rank = np.searchsorted(sorted_keys, np.take_along_axis(keys, blk_same, axis=1))
        rank = rank - np.arange(b)[:, None] * g
        out = _query_stats(
            jnp.asarray(rank, jnp.int32),
            jnp.asarray(pad_rows(good[rows], b)),
            jnp.asarray(pad_rows(junk[rows], b)),
        )
        stats.append([np.asarray(o)[: min(b, nq - start)] for o in out])
    first, ap, inp, num_good = (
        [np.concatenate(s) for s in zip(*stats, strict=True)] if stats else [np.zeros(0)] * 4
    )
    valid = num_good > 0
    num_valid = int(valid.sum())
    if num_valid == 0:
        raise ValueError("no query has a true match in the gallery; cannot compute metrics")
    hist = np.bincount(first[valid] - 1, minlength=g)[:g]
    cmc_full = 100.0 * np.cumsum(hist) / num_valid
    max_rank = g if max_rank is None else int(max_rank)
    cmc = cmc_full[np.minimum(np.arange(max_rank), g - 1)]
    result = {"cmc": cmc}
    for r in _RANKS:
        result[f"rank{r}"] = float(cmc_full[min(r, g) - 1])
    result.update(
        mAP=float(100.0 * ap[valid].mean()),
        mINP=float(100.0 * inp[valid].mean()),
        AUC=float(cmc_full.mean()),
        num_queries=int(nq),
        num_valid=num_valid,
        num_skipped=int(nq - num_valid),
    )
    return result


_PROTOCOL_DOC = """
    Junk (same identity and same camera, and every gallery label -1) is removed per query;
    ties in distance are broken by gallery order (stable sort). Queries without a true
    match left are skipped. All rates are percentages in [0, 100]:

    - ``cmc``: [max_rank] numpy array, CMC(r) = % of valid queries whose first true match
      is at position <= r (max_rank defaults to G; beyond G it repeats).
    - ``rank1``, ``rank5``, ``rank10``, ``rank20``: CMC at r (CMC(G) when G < r).
    - ``mAP``: mean over valid queries of AP = mean over true matches of precision at
      their position.
    - ``mINP``: mean of (number of true matches) / (position of the last true match).
    - ``AUC``: normalised area under the CMC curve, mean of CMC(r) for r = 1..G with G the
      number of gallery entries not labelled -1 (paper, Table 2c); 100 iff every first
      match is at rank 1.
    - ``num_queries``, ``num_valid``, ``num_skipped``: ints.
"""


def evaluate(
    query_features: jax.typing.ArrayLike,
    gallery_features: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    metric: str = "euclidean",
    max_rank: int | None = None,
    block_size: int = 256,
) -> dict:
    """Re-id metrics of features under the Market-1501 / CUHK03 protocol.

    Args:
      query_features: [nq, d]. gallery_features: [ng, d].
      query_labels, query_cams: [nq] ints. gallery_labels, gallery_cams: [ng] ints.
      metric: one of ``DISTANCES``.
      max_rank: length of the returned CMC (default: gallery size).
      block_size: queries per jitted block (memory ~ 16 * block_size * ng bytes).

    Returns:
      dict of plain Python numbers and one numpy array:
    """
    x, y = check_features(query_features, gallery_features, metric, block_size)
    ql, gl, qc, gc = _check_protocol(
        query_labels, gallery_labels, query_cams, gallery_cams, len(x), len(y), max_rank
    )
    yj = jnp.asarray(y[gl != -1])
    yy = sq_norms(yj)
    b_max = row_block(block_size, yj.shape[0], yj.shape[1], metric)

    def block_keys(start, rows, idx_bits):
        xb = jnp.asarray(pad_rows(x[start : start + rows], rows))
        return _feature_keys(xb, yj, sq_norms(xb), yy, metric=metric, idx_bits=idx_bits)

    return _evaluate_blocks(block_keys, len(x), ql, qc, gl, gc, block_size=b_max, max_rank=max_rank)


def evaluate_distances(
    dist: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    max_rank: int | None = None,
    block_size: int = 256,
) -> dict:
    """Re-id metrics of a precomputed distance matrix (smaller is closer).

    Distances are cast to float32 before ranking, so ties are float32 ties.

    Args:
      dist: [nq, ng] distances (numpy or jax), finite.
      query_labels, query_cams: [nq] ints. gallery_labels, gallery_cams: [ng] ints.
      max_rank: length of the returned CMC (default: gallery size).
      block_size: queries per jitted block.

    Returns:
      dict of plain Python numbers and one numpy array:
    """
    dist = np.asarray(dist, dtype=np.float32)
    if dist.ndim != 2:
        raise ValueError(f"dist must be 2-D [nq, ng], got shape {dist.shape}")
    if not np.all(np.isfinite(dist)):
        raise ValueError("dist contains NaN or inf; expected finite distances")
    if not isinstance(block_size, int | np.integer) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    ql, gl, qc, gc = _check_protocol(
        query_labels, gallery_labels, query_cams, gallery_cams, *dist.shape, max_rank
    )
    kept = gl != -1

    def block_keys(start, rows, idx_bits):
        block = pad_rows(dist[start : start + rows][:, kept], rows)
        return _dist_keys(jnp.asarray(block), idx_bits=idx_bits)

    return _evaluate_blocks(
        block_keys, dist.shape[0], ql, qc, gl, gc, block_size=block_size, max_rank=max_rank
    )


evaluate.__doc__ += _PROTOCOL_DOC
evaluate_distances.__doc__ += _PROTOCOL_DOC


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
    computed once.

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
    x, y = check_features(query_features, gallery_features, metric, 1)
    _check_protocol(
        query_labels, gallery_labels, query_cams, gallery_cams, len(x), len(y), max_rank
    )
    dist = np.asarray(pairwise_distances(x, y, metric=metric))
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
    if not isinstance(repeats, int | np.integer) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    dist = np.asarray(dist, np.float32)
    if dist.ndim != 2:
        raise ValueError(f"dist must be 2-D [nq, ng], got shape {dist.shape}")
    ql, gl, qc, gc = _check_protocol(
        query_labels, gallery_labels, query_cams, gallery_cams, *dist.shape, max_rank
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
    out["repeats"] = int(repeats)
    return out
