"""The host sort: ranks of same-identity entries in a precomputed distance matrix.

The engine of ``evaluate_distances``. A jitted function turns each ``(distance, gallery
index)`` pair of a block of query rows into one 64-bit key ordered exactly as the stable
order (row | float bits | index), NumPy sorts the keys on the host (XLA's CPU sort is much
slower) and the rank of each same-identity entry comes from a binary search. Memory: ~16 *
b * ng bytes per block of b queries.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from warca_jax.maths.distances import pad_rows


def _sort_keys(dist: jax.Array, *, idx_bits: int) -> jax.Array:
    """64-bit keys (as uint32 pairs) ordering each row stably by distance.

    key = row << (32 + idx_bits) | monotone_bits(dist) << idx_bits | gallery index, so one
    flat sort of a block orders rows, then distances, then gallery index. dist: [b, g] ->
    [b, g, 2] uint32 in native byte order of a uint64.
    """
    # -0.0 ties with +0.0. On the bits: a float compare would see subnormals as zero (XLA on
    # a CPU flushes them), and they must keep their order.
    u = jax.lax.bitcast_convert_type(dist.astype(jnp.float32), jnp.uint32)
    u = jnp.where(u == jnp.uint32(0x80000000), jnp.uint32(0), u)
    u = jnp.where(u >> 31 != 0, ~u, u | jnp.uint32(0x80000000))  # float order as uint order
    b, g = dist.shape
    row = jnp.arange(b, dtype=jnp.uint32)[:, None]
    col = jnp.arange(g, dtype=jnp.uint32)[None, :]
    high = (row << idx_bits) | (u >> (32 - idx_bits))
    low = (u << idx_bits) | col
    pair = (low, high) if sys.byteorder == "little" else (high, low)
    return jnp.stack(pair, axis=-1)


_dist_keys = jax.jit(_sort_keys, static_argnames="idx_bits")


def _sort_ranks(dist: np.ndarray, kept: np.ndarray, block_size: int) -> tuple[Callable, int]:
    """The sort ranking of the kept columns of a distance matrix, block by block.

    Args:
      dist: [nq, ng] float32 distances (checked: ``checks._check_dist``).
      kept: [ng] bool, the gallery columns ranked (label not -1; at least one).
      block_size: queries per block wanted.

    Returns:
      ``block_ranks(queries, same, present) -> finish`` for ``blocks._evaluate_blocks``
      (``finish()`` returns the [b, k] int64 ranks; ``present`` is not needed: absent slots
      get the rank of column ``same``, which the metrics ignore), and the queries per block:
      ``block_size``, capped so that row | float bits | index fits 64 bits.
    """
    g = int(kept.sum())
    idx_bits = max(1, (g - 1).bit_length())

    def block_ranks(queries, same, present):
        b = same.shape[0]
        block = pad_rows(dist[queries][:, kept], b)
        pending = _dist_keys(jnp.asarray(block), idx_bits=idx_bits)

        def finish() -> np.ndarray:
            keys = np.asarray(pending).view(np.uint64).reshape(b, g)
            sorted_keys = np.sort(keys.ravel())
            rank = np.searchsorted(sorted_keys, np.take_along_axis(keys, same, axis=1))
            return rank - np.arange(b)[:, None] * g

        return finish

    return block_ranks, min(block_size, 2 ** (32 - idx_bits))
