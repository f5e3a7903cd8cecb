"""The CUHK03 study's losses, its pairwise loss (eq. 6) and triplet hinge (eq. 7), and its
triplet mining: what ``warca_jax.methods.study_sgd`` optimises (its docstring says how).

Both losses take the linear map L: [D', D] (the study's A = L^T L), with the squared
distance d_L(x_i, x_j) = ||L (x_i - x_j)||^2 of its eq. 1-2, plus a ``penalties.penalty``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from warca_jax.maths import penalties, sampling


def _sq_dists(e: jax.Array) -> jax.Array:
    """All squared distances between the rows of e: [n, D'] -> [n, n]."""
    sq = jnp.sum(e * e, axis=1)
    return sq[:, None] + sq[None, :] - 2.0 * e @ e.T


def pairwise_loss(
    proj: jax.Array, x: jax.Array, labels: jax.Array, *, lam: float, penalty: str
) -> jax.Array:
    """The study's eq. 6 on the pairs of a minibatch, its two sides averaged, plus a penalty.

    mean_{i<j, y_i = y_j} d_L(x_i, x_j) - mean_{y_i != y_j} d_L(x_i, x_j) + lam R(L),
    with d_L(x_i, x_j) = ||L (x_i - x_j)||^2 and R a ``penalties.penalty``.

    Args:
      proj: [D', D] the map L.
      x: [B, D] samples. labels: [B] their identities.
      lam: penalty weight. penalty: ``penalties.PENALTIES``.

    Returns:
      scalar loss (a side with no pair contributes 0).
    """
    d = _sq_dists(x @ proj.T)
    same = labels[:, None] == labels[None, :]
    pos = same & ~jnp.eye(x.shape[0], dtype=bool)
    pos_mean = jnp.sum(jnp.where(pos, d, 0.0)) / jnp.maximum(jnp.sum(pos), 1)
    neg_mean = jnp.sum(jnp.where(same, 0.0, d)) / jnp.maximum(jnp.sum(~same), 1)
    return pos_mean - neg_mean + lam * penalties.penalty(proj, kind=penalty)


def triplet_loss(
    proj: jax.Array,
    xa: jax.Array,
    xp: jax.Array,
    xn: jax.Array,
    weights: jax.Array,
    *,
    margin: float,
    lam: float,
    penalty: str,
) -> jax.Array:
    """The study's eq. 7, averaged over triplets, plus a penalty.

    sum_t w_t [margin + d_L(a_t, p_t) - d_L(a_t, n_t)]_+ / sum_t w_t + lam R(L).

    Args:
      proj: [D', D] the map L.
      xa, xp, xn: [T, D] anchors, positives (same identity), negatives.
      weights: [T] 1 for a real triplet, 0 for a placeholder.
      margin: the margin, 1 in the study. lam, penalty: as in ``pairwise_loss``.
    """
    ep, en = (xa - xp) @ proj.T, (xa - xn) @ proj.T
    hinge = jnp.maximum(margin + jnp.sum(ep * ep, 1) - jnp.sum(en * en, 1), 0.0)
    mean = jnp.sum(weights * hinge) / jnp.maximum(jnp.sum(weights), 1.0)
    return mean + lam * penalties.penalty(proj, kind=penalty)


@functools.partial(jax.jit, static_argnames=("num_random", "block"))
def mine_triplets(key, emb, table: sampling.PairTable, *, num_random: int, block: int = 1024):
    """The study's triplet set: per anchor the hardest triplet and ``num_random`` random ones.

    Hardest: the farthest sample of the anchor's identity and the closest of another,
    found in blocks of ``block`` anchors (an [block, N] distance matrix at a time).

    Args:
      key: PRNG key of the random triplets.
      emb: [N, D'] embedded training samples (L x).
      table: ``sampling.make_pair_table`` of their labels.
      num_random: random triplets per anchor.

    Returns:
      (a, p, n, valid): [N (1 + num_random)] int32 indices and float32 weights, 0 (and
      p = a) for an anchor that is the only sample of its identity.
    """
    n = emb.shape[0]
    sq = jnp.sum(emb * emb, axis=1)
    rows = jnp.minimum(jnp.arange(-(-n // block) * block), n - 1).reshape(-1, block)

    def hardest(r):
        d = sq[r][:, None] + sq[None, :] - 2.0 * emb[r] @ emb.T
        same = table.labels[r][:, None] == table.labels[None, :]
        other = r[:, None] != jnp.arange(n)[None, :]
        hp = jnp.argmax(jnp.where(same & other, d, -jnp.inf), axis=1)
        return hp, jnp.argmin(jnp.where(same, jnp.inf, d), axis=1)

    hp, hn = (v.reshape(-1)[:n] for v in jax.lax.map(hardest, rows))
    u, v = jax.random.uniform(key, (2, num_random, n))
    c, start = table.count[None, :], table.start[None, :]
    shift = 1 + jnp.minimum(jnp.floor(u * (c - 1)).astype(jnp.int32), jnp.maximum(c - 2, 0))
    rp = table.order[start + (table.pos[None, :] + shift) % c]
    r = jnp.minimum(jnp.floor(v * (n - c)).astype(jnp.int32), n - c - 1)
    rn = table.order[jnp.where(r < start, r, r + c)]  # skips the anchor's identity block
    anchors = jnp.tile(jnp.arange(n, dtype=jnp.int32), num_random + 1)
    valid = jnp.tile((table.count >= 2).astype(jnp.float32), num_random + 1)
    pos = jnp.concatenate([hp[None].astype(jnp.int32), rp]).reshape(-1)
    neg = jnp.concatenate([hn[None].astype(jnp.int32), rn]).reshape(-1)
    return anchors, jnp.where(valid > 0, pos, anchors), neg, valid
