"""Constraints drawn from labels, shared by the learners that train on pairs or triplets.

The weakly supervised learners (ITML, MMC, SDML, LSML, RCA, SCML) learn from side
information: similar / dissimilar pairs, quadruplets, chunklets or triplets. From a
labelled training set they draw it here, as metric-learn's ``*_Supervised`` classes do
(same-label pairs are similar, different-label pairs dissimilar), with numpy's
``Generator`` so that the same seed draws the same constraints:

* ``label_pairs``: ``num`` similar and ``num`` dissimilar index pairs, without repeats;
* ``chunklets``: disjoint groups of ``size`` same-label samples (RCA);
* ``nearest_by_label``: each point's k nearest same- or different-label points, in row
  blocks (LMNN's targets and impostors, SCML's triplets);
* ``knn_triplets``: (anchor, one of its k nearest same-label points, one of its k
  nearest different-label points), every combination.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class LabelPairs(NamedTuple):
    """Similar and dissimilar index pairs, [P, 2] int each."""

    similar: np.ndarray
    dissimilar: np.ndarray


def label_pairs(labels, num: int, rng: np.random.Generator) -> LabelPairs:
    """``num`` distinct similar (same-label) and ``num`` distinct dissimilar index pairs.

    Each pair (i, j) has i != j and is drawn by picking i uniformly among the samples that
    have a partner and j uniformly among its partners; repeats (as unordered pairs) are
    drawn again. The counts are capped by the number of such pairs that exist.

    Raises:
      ValueError: no label has two samples (no similar pair) or every sample has one label.
    """
    labels = np.asarray(labels)
    n = labels.shape[0]
    sizes = np.unique(labels, return_counts=True)[1]
    num_similar = int(np.sum(sizes * (sizes - 1) // 2))
    num_dissimilar = n * (n - 1) // 2 - num_similar
    if num_similar == 0:
        raise ValueError("no label has two samples, so there is no similar pair to learn from")
    if num_dissimilar == 0:
        raise ValueError("every sample has the same label: there is no dissimilar pair")
    return LabelPairs(
        _draw_pairs(labels, min(num, num_similar), True, rng),
        _draw_pairs(labels, min(num, num_dissimilar), False, rng),
    )


def _draw_pairs(labels: np.ndarray, num: int, same: bool, rng: np.random.Generator):
    """``num`` distinct unordered pairs (i < j), same-label or different-label ones."""
    n = labels.shape[0]
    if num == 0:
        return np.zeros((0, 2), np.int64)
    order = np.argsort(labels, kind="stable")
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)
    sorted_labels = labels[order]
    first = np.searchsorted(sorted_labels, labels, side="left")
    count = np.searchsorted(sorted_labels, labels, side="right") - first
    partners = count - 1 if same else n - count
    total = int(partners.sum()) // 2
    if total <= 4 * num:  # few pairs exist: enumerate them and pick without replacement
        i, j = np.triu_indices(n, k=1)
        keep = (labels[i] == labels[j]) == same
        pick = rng.choice(total, size=num, replace=False)
        return np.stack([i[keep][pick], j[keep][pick]], axis=1).astype(np.int64)
    anchors = np.flatnonzero(partners > 0)
    seen: set[tuple[int, int]] = set()
    out = np.empty((num, 2), np.int64)
    filled = 0
    while filled < num:
        i = rng.choice(anchors, size=2 * (num - filled) + 16)
        r = np.floor(rng.random(i.shape[0]) * partners[i]).astype(np.int64)
        if same:  # the r-th other member of i's label
            pos = first[i] + r
            pos = pos + (pos >= position[i])
        else:  # the r-th sample outside i's label
            pos = np.where(r < first[i], r, r + count[i])
        for a, b in zip(i.tolist(), order[pos].tolist(), strict=True):
            key = (a, b) if a < b else (b, a)
            if key not in seen:
                seen.add(key)
                out[filled] = key
                filled += 1
                if filled == num:
                    break
    return out


def chunklets(labels, num: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Chunklet index of every sample, -1 for none: ``num`` disjoint same-label groups.

    Each chunklet is ``size`` distinct samples of one label; a label of n_c samples gives
    at most n_c // size of them. Labels are visited in a random order, each giving as
    many chunklets as it can until ``num`` are drawn (RCA's side information).

    Raises:
      ValueError: fewer than ``num`` chunklets can be formed (the maximum is named).
    """
    labels = np.asarray(labels)
    values, codes = np.unique(labels, return_inverse=True)
    members = [np.flatnonzero(codes == c) for c in range(values.shape[0])]
    most = sum(m.shape[0] // size for m in members)
    if most < num:
        raise ValueError(
            f"only {most} chunklets of {size} same-label samples can be formed from these "
            f"labels, {num} asked for; lower the number of chunklets or their size"
        )
    out = np.full(labels.shape[0], -1, np.int64)
    made = 0
    for c in rng.permutation(values.shape[0]):
        picked = rng.permutation(members[c])
        for g in range(picked.shape[0] // size):
            if made == num:
                return out
            out[picked[g * size : (g + 1) * size]] = made
            made += 1
    return out


@functools.partial(jax.jit, static_argnames=("k", "same", "block_size"))
def nearest_by_label(
    z: jax.Array, labels: jax.Array, *, k: int, same: bool, block_size: int
) -> tuple[jax.Array, jax.Array]:
    """Each point's k nearest same-label (others) or different-label points, in row blocks.

    Args:
      z: [N, d] points (embedded in the current metric).
      labels: [N] int labels.
      k: neighbours per point.
      same: same-label neighbours (self excluded) or different-label ones.
      block_size: rows whose [block_size, N] distances are formed at once.

    Returns:
      (index [N, k] int32, valid [N, k] bool): nearest first; ``valid`` is False
      where a point has fewer than k such neighbours.
    """
    n = z.shape[0]
    nb = -(-n // block_size)
    pad = nb * block_size - n
    zp = jnp.pad(z, ((0, pad), (0, 0)))
    lp = jnp.pad(labels, (0, pad))
    sq = jnp.sum(z * z, axis=1)
    cols = jnp.arange(n)

    def block(start):
        zb = jax.lax.dynamic_slice_in_dim(zp, start, block_size)
        lb = jax.lax.dynamic_slice_in_dim(lp, start, block_size)
        dist = jnp.sum(zb * zb, axis=1)[:, None] + sq[None, :] - 2.0 * zb @ z.T
        if same:
            rows = start + jnp.arange(block_size)
            mask = (lb[:, None] == labels[None, :]) & (rows[:, None] != cols[None, :])
        else:
            mask = lb[:, None] != labels[None, :]
        neg, idx = jax.lax.top_k(jnp.where(mask, -dist, -jnp.inf), k)
        return idx.astype(jnp.int32), jnp.isfinite(neg)

    idx, valid = jax.lax.map(block, jnp.arange(nb) * block_size)
    return idx.reshape(-1, k)[:n], valid.reshape(-1, k)[:n]


def knn_triplets(x, labels, *, k_same: int, k_other: int, block_size: int = 512) -> np.ndarray:
    """Triplets [T, 3] (a, b, c): b one of a's k_same nearest same-label points, c one of
    its k_other nearest different-label points (Euclidean, in x), every combination.

    A point with fewer same-label partners than k_same uses all of them; one with none is
    no anchor. Ordered by anchor, then b, then c.
    """
    z = jnp.asarray(x, jnp.float32)
    y = jnp.asarray(labels, jnp.int32)
    n = z.shape[0]
    b, b_ok = nearest_by_label(z, y, k=min(k_same, n - 1), same=True, block_size=block_size)
    c, c_ok = nearest_by_label(z, y, k=min(k_other, n - 1), same=False, block_size=block_size)
    b, b_ok, c, c_ok = (np.asarray(v) for v in (b, b_ok, c, c_ok))
    a = np.broadcast_to(np.arange(n)[:, None, None], (n, b.shape[1], c.shape[1]))
    ok = b_ok[:, :, None] & c_ok[:, None, :]
    bb = np.broadcast_to(b[:, :, None], a.shape)
    cc = np.broadcast_to(c[:, None, :], a.shape)
    return np.stack([a[ok], bb[ok], cc[ok]], axis=1).astype(np.int64)
