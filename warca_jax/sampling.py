"""Pair sampling and violator search for WARCA (paper section 3.3).

Step 1 draws (i, j) uniformly from S, the ordered pairs of distinct samples of
the same label. Step 2 draws k uniformly among the violators of (i, j), the
samples of another label with gamma + d_ij - d_ik > 0, and estimates
rank_ij, the number of violators, which sets the weight L(rank_ij).

Two samplers are offered, both vectorised over the minibatch:

* ``exact``: compare each anchor with every candidate (all N training points,
  or a random pool of C shared by the minibatch), count the violators and draw
  k uniformly among them. With all N points the count is rank_ij itself; with
  a pool it is scaled by |T_y| / (negatives in the pool). Work: B x C.
* ``wsabie``: the WSABIE procedure. Each pair draws negatives uniformly (with
  replacement) one at a time until one violates; the tries t give the estimate
  rank_ij ~ floor((|T_y| - 1) / t) and the violator met is k. Here the first
  ``max_tries`` draws of every pair are made at once and the first violator
  among them is taken; a pair with none in ``max_tries`` draws gets no update,
  as in WSABIE with a cap. Work: B x max_tries, independent of N.

Everything here is outside the gradient: indices, ranks and weights are
returned through ``jax.lax.stop_gradient`` by the callers' design (they are
integers or derived from integer counts).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

SAMPLERS = ("exact", "wsabie")


class PairTable(NamedTuple):
    """Index tables to draw same-label pairs uniformly in O(1) per pair.

    Attributes:
      labels: [N] int32 labels.
      order: [N] int32 sample indices sorted by label (stable).
      start: [N] int32 position in ``order`` where the class of sample i starts.
      count: [N] int32 size of the class of sample i.
      pos: [N] int32 position of sample i inside its class in ``order``.
      anchor_cdf: [N] float32 cumulative probability of drawing i as anchor,
        proportional to count_i - 1 (its number of positive partners).
      num_negatives: [N] float32 |T_{y_i}| = N - count_i.
    """

    labels: jax.Array
    order: jax.Array
    start: jax.Array
    count: jax.Array
    pos: jax.Array
    anchor_cdf: jax.Array
    num_negatives: jax.Array


def make_pair_table(labels: np.ndarray) -> PairTable:
    """Builds the ``PairTable`` of a label vector (NumPy, once per fit).

    Raises:
      ValueError: if no label has two or more samples (no positive pair).
    """
    labels = np.asarray(labels)
    n = labels.shape[0]
    order = np.argsort(labels, kind="stable")
    _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    count = counts[inverse]
    start = starts[inverse]
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n) - start[order]
    partners = (count - 1).astype(np.float64)
    if partners.sum() == 0:
        raise ValueError(
            "no positive pairs: every identity has a single sample; WARCA needs at least "
            "one identity with two or more samples")
    cdf = np.cumsum(partners) / partners.sum()
    return PairTable(
        labels=jnp.asarray(inverse, jnp.int32),
        order=jnp.asarray(order, jnp.int32),
        start=jnp.asarray(start, jnp.int32),
        count=jnp.asarray(count, jnp.int32),
        pos=jnp.asarray(pos, jnp.int32),
        anchor_cdf=jnp.asarray(cdf, jnp.float32),
        num_negatives=jnp.asarray(n - count, jnp.float32),
    )


def sample_pairs(key: jax.Array, table: PairTable, batch_size: int) -> tuple[jax.Array, jax.Array]:
    """Draws ``batch_size`` ordered pairs (i, j), i != j, y_i = y_j, uniformly from S.

    i is drawn with probability (count_i - 1) / |S|, then j uniformly among the
    count_i - 1 other members of its class.

    Returns:
      (i [B], j [B]) int32 indices.
    """
    k1, k2 = jax.random.split(key)
    n = table.labels.shape[0]
    u = jax.random.uniform(k1, (batch_size,))
    i = jnp.minimum(jnp.searchsorted(table.anchor_cdf, u, side="right"), n - 1)
    c = table.count[i]
    shift = 1 + jax.random.randint(k2, (batch_size,), 0, jnp.maximum(c - 1, 1))
    j = table.order[table.start[i] + (table.pos[i] + shift) % c]
    return i.astype(jnp.int32), j


class Violators(NamedTuple):
    """Result of the violator search for a minibatch of pairs.

    Attributes:
      index: [B] int32 index of the sampled violator k among the candidates.
      rank: [B] float32 estimated rank_ij (0 where no violator was found).
      found: [B] bool whether a violator was found.
    """

    index: jax.Array
    rank: jax.Array
    found: jax.Array


def pairwise_dist(a: jax.Array, c: jax.Array) -> jax.Array:
    """Euclidean distances between rows, [B, D'] x [C, D'] -> [B, C], NaN-free."""
    sq = jnp.sum(a * a, 1)[:, None] + jnp.sum(c * c, 1)[None, :] - 2.0 * a @ c.T
    return jnp.sqrt(jnp.maximum(sq, 0.0))


def _select_nth(mask: jax.Array, r: jax.Array, *, width: int = 32) -> jax.Array:
    """Column of the r-th (0-based) True entry of each row of mask [B, C].

    Two levels (counts per block of ``width`` columns, then inside one block)
    instead of a cumulative sum over C, which XLA's CPU backend runs slowly.
    """
    b, c = mask.shape
    nb = -(-c // width)
    blocks = jnp.pad(mask, ((0, 0), (0, nb * width - c))).reshape(b, nb, width)
    per_block = jnp.sum(blocks, axis=2, dtype=jnp.int32)
    cum = jnp.cumsum(per_block, axis=1)
    blk = jnp.minimum(jnp.sum(cum <= r[:, None], axis=1), nb - 1)
    before = jnp.take_along_axis(cum - per_block, blk[:, None], 1)[:, 0]
    inner = jnp.take_along_axis(blocks, blk[:, None, None], 1)[:, 0]
    pos = jnp.argmax(jnp.cumsum(inner, axis=1, dtype=jnp.int32) > (r - before)[:, None], axis=1)
    return blk * width + pos


def exact_violators(
    key: jax.Array,
    anchors: jax.Array,
    d_ij: jax.Array,
    cand_emb: jax.Array,
    negative: jax.Array,
    num_negatives: jax.Array,
    *,
    margin: float,
) -> Violators:
    """Counts the violators among all candidates and draws one uniformly.

    Args:
      key: PRNG key.
      anchors: [B, D'] anchor embeddings.
      d_ij: [B] distances of the pairs.
      cand_emb: [C, D'] candidate embeddings.
      negative: [B, C] bool, candidate has a label other than the anchor's.
      num_negatives: [B] |T_{y_i}|, negatives of the anchor in the training set.
      margin: gamma.

    Returns:
      ``Violators`` with index into the C candidates.
    """
    d_ik = pairwise_dist(anchors, cand_emb)
    violating = negative & (margin + d_ij[:, None] - d_ik > 0)
    count = jnp.sum(violating, axis=1, dtype=jnp.int32)
    r = jnp.floor(jax.random.uniform(key, count.shape) * count).astype(jnp.int32)
    index = _select_nth(violating, jnp.minimum(r, jnp.maximum(count - 1, 0)))
    in_pool = jnp.maximum(jnp.sum(negative, axis=1, dtype=jnp.int32), 1)
    found = count > 0
    rank = jnp.where(found, count * (num_negatives / in_pool), 0.0)
    return Violators(index.astype(jnp.int32), rank.astype(jnp.float32), found)


def wsabie_violators(
    key: jax.Array,
    anchors: jax.Array,
    anchor_labels: jax.Array,
    d_ij: jax.Array,
    cand_emb: jax.Array,
    cand_labels: jax.Array,
    num_negatives: jax.Array,
    *,
    margin: float,
    max_tries: int,
) -> Violators:
    """WSABIE sequential sampling, ``max_tries`` draws per pair made at once.

    Draws that hit the anchor's own label are rejected (not counted as tries),
    so the tries are uniform draws from the negatives.

    Args:
      key: PRNG key.
      anchors: [B, D'] anchor embeddings.
      anchor_labels: [B] labels of the anchors.
      d_ij: [B] distances of the pairs.
      cand_emb: [C, D'] candidate embeddings.
      cand_labels: [C] candidate labels.
      num_negatives: [B] |T_{y_i}|.
      margin: gamma.
      max_tries: draws per pair.

    Returns:
      ``Violators`` with index into the C candidates.
    """
    if max_tries < 1:
        raise ValueError(f"the wsabie sampler needs max_tries >= 1, got {max_tries}")
    b = anchors.shape[0]
    draws = jax.random.randint(key, (b, max_tries), 0, cand_emb.shape[0])
    negative = cand_labels[draws] != anchor_labels[:, None]
    diff = anchors[:, None, :] - cand_emb[draws]
    d_ik = jnp.sqrt(jnp.sum(diff * diff, axis=-1))
    violating = negative & (margin + d_ij[:, None] - d_ik > 0)
    first = jnp.argmax(violating, axis=1)
    found = jnp.any(violating, axis=1)
    tries = jnp.sum(negative & (jnp.arange(max_tries)[None, :] <= first[:, None]), axis=1)
    rank = jnp.where(found, jnp.floor((num_negatives - 1) / jnp.maximum(tries, 1)), 0.0)
    index = jnp.take_along_axis(draws, first[:, None], 1)[:, 0]
    return Violators(index.astype(jnp.int32), rank.astype(jnp.float32), found)
