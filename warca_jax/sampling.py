"""Pair sampling and violator search for WARCA (paper section 3.3).

Step 1 draws (i, j) uniformly from S, the ordered pairs of distinct samples of
the same label. Step 2 draws k uniformly among the violators of (i, j), the
samples of another label with gamma + d_ij - d_ik > 0, and estimates
rank_ij, the number of violators, which sets the weight L(rank_ij).

Two rank estimators are offered, both vectorised over the minibatch:

* ``exact``: count the violators among the candidates. With all N training
  points as candidates this is rank_ij itself; with a random candidate pool of
  C points it is the pool count scaled by |T_y| / (negatives in the pool).
* ``wsabie``: the WSABIE estimate floor((|T_y| - 1) / t), where t is the number
  of negatives tried, in a random order, until the first violator. The random
  order is a uniform key per candidate; the violator with the smallest key is
  the first one met, which is also a uniform draw among the violators, so both
  estimators draw k the same way and differ only in the rank.

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
      found: [B] bool whether a violator was found (within max_tries for wsabie).
      count: [B] int32 violators among the candidates.
    """

    index: jax.Array
    rank: jax.Array
    found: jax.Array
    count: jax.Array


def pairwise_dist(a: jax.Array, c: jax.Array) -> jax.Array:
    """Euclidean distances between rows, [B, D'] x [C, D'] -> [B, C], NaN-free."""
    sq = jnp.sum(a * a, 1)[:, None] + jnp.sum(c * c, 1)[None, :] - 2.0 * a @ c.T
    return jnp.sqrt(jnp.maximum(sq, 0.0))


def find_violators(
    key: jax.Array,
    d_ij: jax.Array,
    d_ik: jax.Array,
    negative: jax.Array,
    num_negatives: jax.Array,
    *,
    margin: float,
    sampler: str = "exact",
    max_tries: int = 0,
) -> Violators:
    """Draws one violator per pair and estimates its rank.

    Args:
      key: PRNG key.
      d_ij: [B] distances of the pairs.
      d_ik: [B, C] distances from each anchor to the candidates.
      negative: [B, C] bool, candidate has a label other than the anchor's.
      num_negatives: [B] |T_{y_i}|, negatives of the anchor in the training set.
      margin: gamma.
      sampler: ``exact`` or ``wsabie``.
      max_tries: for ``wsabie``, give up after this many negatives (0: no cap).

    Returns:
      ``Violators``.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; expected one of {SAMPLERS}")
    violating = negative & (margin + d_ij[:, None] - d_ik > 0)
    count = jnp.sum(violating, axis=1)
    keys = jax.random.uniform(key, d_ik.shape)
    index = jnp.argmin(jnp.where(violating, keys, 2.0), axis=1)
    found = count > 0
    if sampler == "exact":
        in_pool = jnp.maximum(jnp.sum(negative, axis=1), 1)
        rank = count * (num_negatives / in_pool)
    else:
        first = jnp.take_along_axis(keys, index[:, None], axis=1)
        tries = jnp.sum(negative & (keys <= first), axis=1)
        if max_tries > 0:
            found = found & (tries <= max_tries)
        rank = jnp.floor((num_negatives - 1) / jnp.maximum(tries, 1))
    rank = jnp.where(found, rank, 0.0)
    return Violators(index.astype(jnp.int32), rank.astype(jnp.float32), found, count)
