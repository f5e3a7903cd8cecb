"""k-reciprocal re-ranking (Zhong, Zheng, Cao and Li, CVPR 2017), blocked over rows.

The re-ranked distance of query i and gallery entry j is

    d*(i, j) = (1 - lambda) * d_J(i, j) + lambda * d(i, j),

over the N = nq + ng probes and gallery entries together:

- d: the original distance, squared and divided by its row maximum (row i of the stacked
  matrix ``[[q_q, q_g], [q_g.T, g_g]]`` is taken as its column i, as in the authors' code
  and torchreid's ``re_ranking``: the same for symmetric matrices).
- N(i, k): the k + 1 nearest of i (itself included). R(i, k) = {j in N(i, k) : i in N(j, k)},
  the k-reciprocal set. R*(i) = R(i, k1) united with every R(c, round(k1 / 2)), c in
  R(i, k1), that shares more than 2/3 of its entries with R(i, k1).
- V(i, j) = exp(-d(i, j)) / sum over R*(i), on R*(i) (zero elsewhere); then the local
  query expansion V(i) <- mean of V(j) over the k2 nearest j of i (skipped when k2 = 1).
- d_J(i, j) = 1 - sum_k min(V(i, k), V(j, k)) / sum_k max(V(i, k), V(j, k)), computed as
  the authors' code does, 1 - s / (2 - s) with s the sum of minima: the same whenever the
  rows of V sum to 1, i.e. unless some R*(i) is empty (possible only for a distance matrix
  whose diagonal is not its row minimum; such a row of V is zero).

The default k1 = 20, k2 = 6, lambda = 0.3 are the paper's. Ties in the neighbour lists are
broken by the smaller index (the reference implementations break them arbitrarily).

Memory (``block`` rows of the N x N distances at a time; nothing N x N is held): besides the
inputs and the [nq, ng] float32 output, O(block * N) for one block of distance rows and
its partial sort, O(N * k1) neighbour indices, and the sparse V: O(N * k1 * k1 / 2)
entries at most (typically a few dozen per row). The Jaccard step of a query block expands
each query's entries over the rows sharing them: O(block * nnz_row * nnz_column) pairs.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np
import scipy.sparse as sp

from warca_jax.evaluation.multi_shot import evaluate_distances
from warca_jax.evaluation.single_shot import single_shot_evaluate_distances
from warca_jax.maths.distances import blocked_distances, scaled_features

K1, K2, LAMBDA = 20, 6, 0.3  # the paper's defaults
BLOCK = 1024  # rows of the N x N distances per block


def k_reciprocal(
    q_g: jax.typing.ArrayLike,
    q_q: jax.typing.ArrayLike,
    g_g: jax.typing.ArrayLike,
    *,
    k1: int = K1,
    k2: int = K2,
    lambda_: float = LAMBDA,
    block: int = BLOCK,
) -> np.ndarray:
    """Re-ranked [nq, ng] float32 distances of given distance matrices (module docstring).

    Args:
      q_g: [nq, ng], q_q: [nq, nq], g_g: [ng, ng] distances (not squared: they are squared
        here, as in the paper's code), finite and non-negative.
      k1, k2: neighbourhood sizes (k1 >= 1, 1 <= k2 <= nq + ng). lambda_: weight of the
        original distance, in [0, 1]. block: rows per block.
    """
    q_g, q_q, g_g = (np.asarray(a) for a in (q_g, q_q, g_g))
    nq, ng = q_g.shape
    if q_q.shape != (nq, nq) or g_g.shape != (ng, ng):
        raise ValueError(
            f"q_q must be [{nq}, {nq}] and g_g [{ng}, {ng}] for q_g of shape {q_g.shape}, "
            f"got {q_q.shape} and {g_g.shape}"
        )

    def rows(lo: int, hi: int) -> np.ndarray:  # columns lo:hi of the stacked matrix
        parts = []
        if lo < nq:
            a, b = lo, min(hi, nq)
            parts.append(np.concatenate([q_q[:, a:b].T, q_g[a:b]], axis=1))
        if hi > nq:
            a, b = max(lo, nq) - nq, hi - nq
            parts.append(np.concatenate([q_g[:, a:b].T, g_g[:, a:b].T], axis=1))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    return _rerank(rows, nq, ng, k1=k1, k2=k2, lambda_=lambda_, block=block)


def k_reciprocal_features(
    query: jax.typing.ArrayLike,
    gallery: jax.typing.ArrayLike,
    *,
    distance: str = "euclidean",
    k1: int = K1,
    k2: int = K2,
    lambda_: float = LAMBDA,
    block: int = BLOCK,
) -> np.ndarray:
    """Re-ranked [nq, ng] distances of features: ``k_reciprocal`` of their ``distance``
    distances, each block of rows computed when needed (no N x N matrix is ever held).

    The features are rescaled as in ``evaluate`` (a common power of two; the re-ranked
    distances do not change, the original distance being normalised per row).
    """
    x, y, _ = scaled_features(query, gallery, distance, 1)
    both = np.concatenate([x, y])

    def rows(lo: int, hi: int) -> np.ndarray:
        return np.asarray(blocked_distances(both[lo:hi], both, distance=distance, block_size=block))

    return _rerank(rows, len(x), len(y), k1=k1, k2=k2, lambda_=lambda_, block=block)


def evaluate_reranked(
    query_features: jax.typing.ArrayLike,
    gallery_features: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    distance: str = "euclidean",
    k1: int = K1,
    k2: int = K2,
    lambda_: float = LAMBDA,
    single_shot: bool = False,
    repeats: int = 10,
    seed: int = 0,
    max_rank: int | None = None,
) -> dict:
    """The metrics of ``evaluate_distances`` (or, with ``single_shot``, of
    ``single_shot_evaluate_distances``) on the re-ranked distances of features."""
    ids = (query_labels, gallery_labels, query_cams, gallery_cams)
    dist = k_reciprocal_features(
        query_features, gallery_features, distance=distance, k1=k1, k2=k2, lambda_=lambda_
    )
    if single_shot:
        return single_shot_evaluate_distances(
            dist, *ids, repeats=repeats, seed=seed, max_rank=max_rank
        )
    return evaluate_distances(dist, *ids, max_rank=max_rank)


def _check_params(n: int, k1, k2, lambda_, block) -> None:
    for name, value in (("k1", k1), ("k2", k2), ("block", block)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if k2 > n:
        raise ValueError(f"k2 must be at most nq + ng = {n}, got {k2}")
    if not 0.0 <= float(lambda_) <= 1.0:
        raise ValueError(f"lambda_ must be in [0, 1], got {lambda_!r}")


def _normalised(raw: np.ndarray) -> np.ndarray:
    """Rows of the original distance: squared, float32, divided by the row maximum."""
    sq = np.power(raw, 2).astype(np.float32)
    if not np.all(np.isfinite(sq)) or np.any(sq < 0):
        raise ValueError("the distances must be finite (and their squares too)")
    return sq / np.max(sq, axis=1, keepdims=True)


def _rerank(rows: Callable, nq: int, ng: int, *, k1, k2, lambda_, block) -> np.ndarray:
    """The re-ranking of the module docstring; ``rows(lo, hi)``: [hi - lo, N] raw rows."""
    n = nq + ng
    _check_params(n, k1, k2, lambda_, block)
    k1 = min(k1, n - 1)
    kh = int(np.around(k1 / 2.0))
    width = max(k1 + 1, k2)
    # 1. The nearest neighbours of every row, in order (distance, then index).
    near = np.empty((n, width), np.int64)
    for lo in range(0, n, block):
        d = _normalised(rows(lo, min(lo + block, n)))
        part = np.argpartition(d, width - 1, axis=1)[:, :width] if width < n else None
        if part is None:
            part = np.broadcast_to(np.arange(n), d.shape)
        vals = np.take_along_axis(d, part, axis=1)
        order = np.lexsort((part, vals), axis=-1)
        near[lo : lo + len(d)] = np.take_along_axis(part, order, axis=1)
    half = _reciprocal(near, kh, block)  # [N, kh + 1] masks over near[:, :kh + 1]
    # 2. The expanded sets R*(i) and their Gaussian weights, as a sparse V.
    indptr, indices, data = [np.zeros(1, np.int64)], [], []
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        d = _normalised(rows(lo, hi))
        members = _expanded_sets(near, half, lo, hi, k1, kh, n)  # [b, L], n = none
        w = np.exp(-np.take_along_axis(d, np.minimum(members, n - 1), axis=1))
        w = np.where(members < n, w, np.float32(0))
        total = np.sum(w, axis=1, keepdims=True)  # 0 for an empty R*(i): a zero row of V
        w = w / np.where(total > 0, total, np.float32(1))
        keep = members < n
        indices.append(members[keep])
        data.append(w[keep])
        indptr.append(indptr[-1][-1] + np.cumsum(keep.sum(axis=1)))
    v = sp.csr_matrix(
        (np.concatenate(data), np.concatenate(indices), np.concatenate(indptr)), shape=(n, n)
    )
    # 3. Local query expansion: the mean of the k2 nearest rows.
    if k2 != 1:
        cols = near[:, :k2].ravel()
        avg = sp.csr_matrix(
            (np.full(n * k2, 1.0 / k2, np.float32), cols, np.arange(0, n * k2 + 1, k2)),
            shape=(n, n),
        )
        v = (avg @ v).tocsr()
    v.sort_indices()
    # 4. Jaccard distance of the queries to the gallery, and the final mix.
    vc = v.tocsc()
    out = np.empty((nq, ng), np.float32)
    for lo in range(0, nq, block):
        hi = min(lo + block, nq)
        overlap = _min_overlap(v, vc, lo, hi, nq, ng)
        jaccard = (1 - overlap / (2 - overlap)).astype(np.float32)
        d = _normalised(rows(lo, hi))[:, nq:]
        out[lo:hi] = jaccard * np.float32(1 - lambda_) + d * np.float32(lambda_)
    return out


def _reciprocal(near: np.ndarray, k: int, block: int) -> np.ndarray:
    """[N, k + 1] bool: near[i, p] is in R(i, k) (i is among the k + 1 nearest of it)."""
    n = len(near)
    out = np.empty((n, k + 1), bool)
    fwd_all = near[:, : k + 1]
    for lo in range(0, n, block):
        out[lo : lo + block] = _reciprocal_rows(near, fwd_all[lo : lo + block], lo, k)
    return out


def _expanded_sets(near, half, lo, hi, k1, kh, n) -> np.ndarray:
    """[hi - lo, L] int64: the sorted members of R*(i), i in [lo, hi), padded with n."""
    fwd = near[lo:hi, : k1 + 1]
    mine = _reciprocal_rows(near, fwd, lo, k1)  # [b, k1 + 1] R(i, k1)
    cand = near[fwd, : kh + 1]  # [b, k1 + 1, kh + 1]: N(c, kh) of each c in N(i, k1)
    cand_in = half[fwd]  # R(c, kh) as a mask over cand
    shared = (cand[..., None] == fwd[:, None, None, :]) & mine[:, None, None, :]
    shared = shared.any(axis=-1) & cand_in
    count, size = shared.sum(axis=-1), cand_in.sum(axis=-1)
    grows = mine & (count > 2.0 / 3 * size)  # as the authors' code: > 2/3 |R(c, kh)|
    b = hi - lo
    members = np.concatenate(
        [
            np.where(mine, fwd, n),
            np.where(cand_in & grows[..., None], cand, n).reshape(b, -1),
        ],
        axis=1,
    )
    members = np.sort(members, axis=1)
    dup = np.zeros_like(members, bool)
    dup[:, 1:] = members[:, 1:] == members[:, :-1]
    return np.sort(np.where(dup, n, members), axis=1)


def _reciprocal_rows(near, fwd, lo, k) -> np.ndarray:
    """[b, k + 1] bool: fwd[r, p] (the k + 1 nearest of row lo + r) has lo + r among its k + 1
    nearest."""
    back = near[fwd, : k + 1]
    me = np.arange(lo, lo + len(fwd))[:, None, None]
    return (back == me).any(axis=-1)


def _min_overlap(v, vc, lo: int, hi: int, nq: int, ng: int) -> np.ndarray:
    """[hi - lo, ng] float64: sum_k min(V(i, k), V(j, k)), queries i in [lo, hi), gallery j.

    Each entry (i, k) of V meets the entries (j, k) of column k (the inverted index).
    """
    start, stop = v.indptr[lo], v.indptr[hi]
    k = v.indices[start:stop]
    vik = v.data[start:stop]
    row = np.repeat(np.arange(hi - lo), np.diff(v.indptr[lo : hi + 1]))
    count = vc.indptr[k + 1] - vc.indptr[k]
    total = int(count.sum())
    offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
    pos = np.repeat(vc.indptr[k], count) + offset
    j = vc.indices[pos]
    gallery = j >= nq
    pos, j = pos[gallery], j[gallery] - nq
    vals = np.minimum(np.repeat(vik, count)[gallery], vc.data[pos])
    rows_ = np.repeat(row, count)[gallery]
    flat = np.bincount(rows_ * ng + j, weights=vals, minlength=(hi - lo) * ng)
    return flat.reshape(hi - lo, ng)
