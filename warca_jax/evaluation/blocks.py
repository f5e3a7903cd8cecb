"""The protocol block by block: same-identity entries, query blocks, then the metrics.

``_evaluate_blocks`` is shared by both ranking engines: it drops gallery label -1, finds
each query's same-identity entries (true matches and junk), orders the queries so that a
block has few slots and shares its entries, asks the engine for the block's ranks (the next
block is dispatched before a block is finished, so the device works while the host
reduces), and reduces the ranks (``metrics``). Memory: O(nq * k) per-query arrays, k the
most same-identity entries of a query.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from warca_jax.evaluation.checks import _no_true_match
from warca_jax.evaluation.metrics import NUM_STATS, _query_stats, _summary
from warca_jax.maths.distances import pad_rows


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


def _evaluate_blocks(block_ranks, ql, qc, gl, gc, *, block_size, max_rank) -> dict:
    """Ranks every query block and reduces the ranks to the metrics.

    Args:
      block_ranks: ``(queries, same, present) -> finish``; queries: [<= b] query indices,
        same: [b, k] indices (into the gallery without label -1) of their same-identity
        entries, present: [b, k] bool real slots (rows padded to b); ``finish()`` returns
        the [b, k] 0-based ranks. The next block is dispatched before a block is finished.
      ql, qc, gl, gc: protocol ids. block_size: queries per block. max_rank: CMC length.
    """
    kept = gl != -1  # label -1 is junk for every query: drop it up front
    gl, gc = gl[kept], gc[kept]
    same, good, junk = _same_identity_table(ql, qc, gl, gc)
    if not good.any():
        _no_true_match(ql, junk)
    per_query = _rank_blocks(block_ranks, ql, same, good, junk, block_size, ranked=len(gl) > 0)
    return _summary(*per_query, g=len(gl), max_rank=max_rank)


def _rank_blocks(block_ranks, ql, same, good, junk, block_size, *, ranked) -> list:
    """Per-query ``_query_stats`` outputs (first, ap, inp, num_good, map_r, r_prec), in
    query order.

    ranked: whether any gallery entry is left to rank (else no block is dispatched).
    """
    nq = len(ql)
    # Queries with as many same-identity entries, of one identity, side by side: a block
    # then has few slots and shares its same-identity rows. Results go back to query order.
    order = np.lexsort((ql, (good | junk).sum(axis=1)))
    b = max(1, min(block_size, nq))
    stats, pending = [], None
    for start in range(0, nq if ranked else 0, b):
        queries = order[start : start + b]
        same_b, good_b, junk_b = (pad_rows(a[queries], b) for a in (same, good, junk))
        finish = block_ranks(queries, same_b, good_b | junk_b)
        if pending is not None:  # the device works on this block while the host finishes
            stats.append(_finish_block(*pending))
        pending = (finish, len(queries), good_b, junk_b)
    if pending is not None:
        stats.append(_finish_block(*pending))
    per_query = [np.zeros(0)] * NUM_STATS
    if stats:  # back to query order
        per_query = [np.empty_like(a, shape=nq) for a in stats[0]]
        for out, parts in zip(per_query, zip(*stats, strict=True), strict=True):
            out[order] = np.concatenate(parts)
    return per_query


def _finish_block(finish: Callable, n: int, good: np.ndarray, junk: np.ndarray) -> list:
    """The first n rows of ``_query_stats`` of a block, once its ranks are finished."""
    out = _query_stats(jnp.asarray(finish(), jnp.int32), jnp.asarray(good), jnp.asarray(junk))
    return [np.asarray(o)[:n] for o in out]
