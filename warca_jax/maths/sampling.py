"""Pair sampling and violator search for WARCA (paper section 3.3).

Step 1 draws (i, j) uniformly from S (eq. 3), the ordered pairs of distinct samples of
the same label. Step 2 draws k uniformly among the violators of (i, j), the
samples of another label (T_{y_i}, eq. 4) with gamma + d_ij - d_ik > 0, and estimates
rank^gamma_ij (eq. 14), the number of violators, which sets the weight L(rank_ij).

The violator test and the distances are the loss's own (``warca_jax.maths.losses``):
``find_violators`` flags a candidate where ``losses.margin_violation`` (gamma + xi_ijk,
eq. 13) is positive, the argument whose positive part is the hinge of
``losses.triplet_hinge``; the WARCA step gives it d_ij from ``losses.distance`` and d_ik
from ``losses.candidate_distances`` (eq. 5, 17).

Both samplers compare each anchor with every candidate: all N training
points, or a random pool of C of them shared by the minibatch (``pool``).
On one device the B x C comparison is cheaper than gathering per-pair
random candidates, so both do it and differ in how they estimate the rank:

* ``exact``: count the violators among the candidates. With all N points the
  count is rank_ij itself; with a pool it is scaled by |T_y| / (negatives in
  the pool), an unbiased estimate.
* ``wsabie``: the WSABIE estimate floor((|T_y| - 1) / t), where t is the number
  of negatives WSABIE draws (uniformly, with replacement) until the first
  violator. t is drawn from its law, the geometric law with success
  probability (violators / negatives among the candidates), which is the same
  random variable as the sequential loop without the loop; a pair whose t
  exceeds ``max_tries`` gets no update, as in WSABIE with a cap.

In both, k is drawn uniformly among the violating candidates (the first
violator met by sequential sampling is such a draw): a uniform integer r below
the violator count picks the r-th violator, so one random number per pair is
drawn, not one per candidate.

Everything here is outside the gradient: indices, ranks and weights are
returned through ``jax.lax.stop_gradient`` by the callers' design (they are
integers or derived from integer counts).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.extend.random as jax_random_ext
import jax.numpy as jnp
import numpy as np

from warca_jax.maths import losses

SAMPLERS = ("exact", "wsabie")


class PairTable(NamedTuple):
    """Index tables to draw same-label pairs uniformly in O(1) per pair.

    Attributes:
      labels: [N] int32 labels.
      order: [N] int32 sample indices sorted by label (stable).
      start: [N] int32 position in ``order`` where the class of sample i starts.
      count: [N] int32 size of the class of sample i.
      pos: [N] int32 position of sample i inside its class in ``order``.
      own_start: [N] int32 where the block of samples that cannot pair with i starts,
        as a position inside its class in ``order``: i itself (``pos``), or with cameras
        the first sample of i's class and camera (``make_pair_table``'s ``cams``).
      own_count: [N] int32 the size of that block (1 without cameras); the partners of
        i are the other ``count - own_count`` members of its class.
      alias_prob, alias: [N] Walker alias table of the anchor distribution,
        P(i) proportional to count_i - 1 (its number of positive partners):
        draw a column c uniformly, keep it with probability alias_prob[c],
        else take alias[c]; O(1) per draw.
      num_negatives: [N] float32 |T_{y_i}| = N - count_i (T_y of eq. 4).
    """

    labels: jax.Array
    order: jax.Array
    start: jax.Array
    count: jax.Array
    pos: jax.Array
    own_start: jax.Array
    own_count: jax.Array
    alias_prob: jax.Array
    alias: jax.Array
    num_negatives: jax.Array


def make_pair_table(labels: np.ndarray, cams: np.ndarray | None = None) -> PairTable:
    """Builds the ``PairTable`` of a label vector (NumPy, once per fit).

    Without ``cams``, S holds every ordered pair of distinct samples of one label (eq. 3).
    With ``cams`` ([N] camera ids), S holds only the pairs of one label seen by two
    different cameras (cross-camera positives, the pairs a re-id test ranks); the
    negatives T_y are the same. Samples are ordered by (label, camera), so the
    same-camera block of a sample is contiguous inside its class and its partners are
    the rest of the class.

    Raises:
      ValueError: ``cams`` of another length than ``labels``; or no positive pair: no
        label with two or more samples (with ``cams``: seen by two cameras).
    """
    labels = np.asarray(labels)
    n = labels.shape[0]
    _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    if cams is None:
        order = np.argsort(labels, kind="stable")
    else:
        cams = np.asarray(cams).reshape(-1)
        if cams.shape[0] != n:
            raise ValueError(f"cams has {cams.shape[0]} entries for {n} labels; expected one each")
        _, cam_ids = np.unique(cams, return_inverse=True)
        order = np.lexsort((cam_ids, inverse))  # by label, then camera (stable)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    count = counts[inverse]
    start = starts[inverse]
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n) - start[order]
    if cams is None:
        own_start, own_count = pos, np.ones(n, np.int64)
    else:
        # blocks of equal (label, camera) along ``order``
        key = inverse[order] * (int(cam_ids.max()) + 1) + cam_ids[order]
        first = np.concatenate([[True], key[1:] != key[:-1]])
        block_id = np.cumsum(first) - 1
        block_start = np.flatnonzero(first)
        block_size = np.diff(np.concatenate([block_start, [n]]))
        own_start, own_count = np.empty(n, np.int64), np.empty(n, np.int64)
        own_start[order] = block_start[block_id] - start[order]
        own_count[order] = block_size[block_id]
    partners = (count - own_count).astype(np.float64)
    if partners.sum() == 0:
        raise ValueError(
            "no positive pairs: every identity has a single sample; WARCA needs at least "
            "one identity with two or more samples"
            if cams is None
            else "no cross-camera positive pairs: no identity is seen by two cameras; "
            "train on all same-identity pairs (positives='all') or check the cams"
        )
    prob, alias = _alias_table(partners)
    return PairTable(
        labels=jnp.asarray(inverse, jnp.int32),
        order=jnp.asarray(order, jnp.int32),
        start=jnp.asarray(start, jnp.int32),
        count=jnp.asarray(count, jnp.int32),
        pos=jnp.asarray(pos, jnp.int32),
        own_start=jnp.asarray(own_start, jnp.int32),
        own_count=jnp.asarray(own_count, jnp.int32),
        alias_prob=jnp.asarray(prob, jnp.float32),
        alias=jnp.asarray(alias, jnp.int32),
        num_negatives=jnp.asarray(n - count, jnp.float32),
    )


def _alias_table(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias method: (keep probability, alias) per column for P ~ weights."""
    n = len(weights)
    scaled = weights * (n / weights.sum())
    prob = np.ones(n)
    alias = np.arange(n)
    small = list(np.nonzero(scaled < 1.0)[0])
    large = list(np.nonzero(scaled >= 1.0)[0])
    while small and large:
        lo, hi = small.pop(), large.pop()
        prob[lo], alias[lo] = scaled[lo], hi
        scaled[hi] += scaled[lo] - 1.0
        (small if scaled[hi] < 1.0 else large).append(hi)
    return prob, alias


def step_bits(key: jax.Array, step: jax.Array, size: int) -> jax.Array:
    """``size`` random uint32 words for training step ``step``, from one threefry call.

    Word w of step t is threefry_2x32(key, (t, w)): a 64-bit counter, so no two
    (step, word) pairs share randomness and the words of step t do not depend on
    how steps are grouped into jitted calls. One threefry instance per step
    instead of a fold_in, splits and several draws keeps XLA's compile time down
    (each threefry instance in a jitted step adds to the CPU compile time).

    Args:
      key: a PRNG key (raw uint32[2] or typed).
      step: scalar step index.
      size: number of words.

    Returns:
      [size] uint32.
    """
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    half = -(-size // 2)
    count = jnp.concatenate(
        [jnp.full((half,), step, jnp.uint32), jnp.arange(half, dtype=jnp.uint32)]
    )
    return jax_random_ext.threefry_2x32(key, count)[:size]


def to_uniform(bits: jax.Array) -> jax.Array:
    """Uniform floats in [0, 1) from uint32 words (23 random mantissa bits)."""
    return jax.lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32) - 1.0


def to_indices(bits: jax.Array, n: int) -> jax.Array:
    """Indices uniform in [0, n) from uint32 words (modulo bias below n / 2^32)."""
    return (bits % jnp.uint32(n)).astype(jnp.int32)


def sample_pairs(bits: jax.Array, table: PairTable) -> tuple[jax.Array, jax.Array]:
    """Draws ordered pairs (i, j), i != j, y_i = y_j, uniformly from S (eq. 3).

    i is drawn with probability (its number of partners) / |S| from the alias table
    (bits[0] picks the column, bits[1] decides between it and its alias), then j
    uniformly among its partners (bits[2]): the count_i - 1 other members of its class,
    or with a camera-aware table the members of its class seen by another camera. They
    lie after i's own block in the class's cyclic order, so j is the r-th sample after it.

    Args:
      bits: [3, B] uint32 random words.
      table: the ``PairTable`` of the labels.

    Returns:
      (i [B], j [B]) int32 indices.
    """
    n = table.labels.shape[0]
    col = to_indices(bits[0], n)
    i = jnp.where(to_uniform(bits[1]) < table.alias_prob[col], col, table.alias[col])
    c, own = table.count[i], table.own_count[i]
    v = to_uniform(bits[2])
    r = jnp.minimum(jnp.floor(v * (c - own)).astype(jnp.int32), jnp.maximum(c - own - 1, 0))
    j = table.order[table.start[i] + (table.own_start[i] + own + r) % c]
    return i, j


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


def closer_fraction(d_ij: jax.Array, d_ik: jax.Array, negative: jax.Array) -> jax.Array:
    """Per pair, the fraction of its negative candidates nearer to the anchor than the positive.

    Eq. 7's margin-free rank_ij over the candidates, divided by their number of negatives
    (strictly nearer: a tie d_ik = d_ij, which eq. 7's <= counts, is not counted). A
    margin-free training ranking error (1 - the pair's AUC): unlike the violator count,
    it keeps falling while a model improves when every negative is within the margin.

    Args:
      d_ij: [B] distances of the pairs.
      d_ik: [B, C] distances from each anchor to the candidates.
      negative: [B, C] bool, candidate has a label other than the anchor's.

    Returns:
      [B] fractions in [0, 1] (0 for a pair with no negative candidate).
    """
    closer = jnp.sum(negative & (d_ik < d_ij[:, None]), axis=1, dtype=jnp.int32)
    return closer / jnp.maximum(jnp.sum(negative, axis=1, dtype=jnp.int32), 1)


SELECT_WIDTH = 32  # columns per block of the violator selection (``_select_nth``)


def _select_nth(
    mask: jax.Array, r: jax.Array, *, width: int = SELECT_WIDTH
) -> tuple[jax.Array, jax.Array]:
    """Column of the r-th (0-based) True entry of each row of mask [B, C], and the row counts.

    Two levels (counts per block of ``width`` columns, then inside one block) in a
    single pass over the mask, instead of a cumulative sum over C, which XLA's CPU
    backend runs slowly.

    Args:
      mask: [B, C] bool.
      r: [B] int32, or a callable count -> r (so r may depend on the counts).

    Returns:
      ([B] int32 column, [B] int32 number of True entries).
    """
    b, c = mask.shape
    nb = -(-c // width)
    blocks = jnp.pad(mask, ((0, 0), (0, nb * width - c))).reshape(b, nb, width)
    per_block = jnp.sum(blocks, axis=2, dtype=jnp.int32)
    cum = jnp.cumsum(per_block, axis=1)
    count = cum[:, -1]
    r = r(count) if callable(r) else r
    blk = jnp.minimum(jnp.sum(cum <= r[:, None], axis=1), nb - 1)
    before = jnp.take_along_axis(cum - per_block, blk[:, None], 1)[:, 0]
    inner = jnp.take_along_axis(blocks, blk[:, None, None], 1)[:, 0]
    pos = jnp.argmax(jnp.cumsum(inner, axis=1, dtype=jnp.int32) > (r - before)[:, None], axis=1)
    return (blk * width + pos).astype(jnp.int32), count


def find_violators(
    u: jax.Array,
    d_ij: jax.Array,
    d_ik: jax.Array,
    negative: jax.Array,
    num_negatives: jax.Array,
    *,
    margin: float,
    sampler: str = "exact",
    max_tries: int = 0,
) -> Violators:
    """Draws one violator per pair among the candidates and estimates rank^gamma_ij (eq. 14).

    A candidate k violates where it is negative and ``losses.margin_violation`` (gamma +
    d_ij - d_ik, eq. 13) is positive, i.e. where the loss's hinge on these distances is
    positive (step 2 of section 3.3).

    Args:
      u: [2, B] uniforms in [0, 1) (violator draw, WSABIE tries).
      d_ij: [B] distances of the pairs (WARCA: ``losses.distance``; FRML passes squares).
      d_ik: [B, C] distances from each anchor to the candidates
        (``losses.candidate_distances``).
      negative: [B, C] bool, candidate has a label other than the anchor's.
      num_negatives: [B] |T_{y_i}|, negatives of the anchor in the training set.
      margin: gamma.
      sampler: ``exact`` or ``wsabie``.
      max_tries: ``wsabie``: negatives drawn at most before giving up (0: no cap).

    Returns:
      ``Violators`` with index into the C candidates.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; expected one of {SAMPLERS}")
    u, v = u[0], u[1]
    violating = negative & (losses.margin_violation(d_ij[:, None], d_ik, margin=margin) > 0)
    index, count = _select_nth(
        violating, lambda n: jnp.minimum(jnp.floor(u * n), jnp.maximum(n - 1, 0)).astype(jnp.int32)
    )
    found = count > 0
    in_pool = jnp.maximum(jnp.sum(negative, axis=1, dtype=jnp.int32), 1)
    if sampler == "exact":
        rank = count * (num_negatives / in_pool)
    else:
        p = count / in_pool
        v = jnp.maximum(1.0 - v, 1e-12)  # in (0, 1]
        log_q = jnp.log1p(-jnp.minimum(p, 1.0 - 1e-7))
        tries = jnp.where(p >= 1.0, 1.0, 1.0 + jnp.floor(jnp.log(v) / log_q))
        if max_tries > 0:
            found = found & (tries <= max_tries)
        rank = jnp.floor((num_negatives - 1) / tries)
    rank = jnp.where(found, rank, 0.0)
    return Violators(index, rank.astype(jnp.float32), found)
