"""k-means (k-means++ or random initialisation, then Lloyd iterations, one jitted ``lax.scan``).

Shared by the k-means + nearest-neighbour search (``metric.KMeansMetric``, learner
``kmeans_nn``) and SCML's basis construction (``methods.scml``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

INITS = ("kmeans++", "random")
_BLOCK = 1024  # gallery rows per block of the assignment step


def sq_dist_to_centres(x: jax.Array, centres: jax.Array) -> jax.Array:
    """[n, k] squared Euclidean distances, in row blocks of x (lax.map) when n is large."""
    hi = jax.lax.Precision.HIGHEST
    cc = jnp.sum(centres * centres, axis=1)

    def block(xs):
        xx = jnp.sum(xs * xs, axis=1)
        return jnp.maximum(
            xx[:, None] + cc[None, :] - 2.0 * jnp.dot(xs, centres.T, precision=hi), 0
        )

    n, d = x.shape
    if n <= _BLOCK:  # one block: no loop for XLA to compile
        return block(x)
    nb = -(-n // _BLOCK)
    xb = jnp.pad(x, ((0, nb * _BLOCK - n), (0, 0))).reshape(nb, _BLOCK, d)
    return jax.lax.map(block, xb).reshape(nb * _BLOCK, -1)[:n]


def _init_centres(key: jax.Array, x: jax.Array, k: int, init: str) -> jax.Array:
    n = x.shape[0]
    if init == "random":
        return x[jax.random.choice(key, n, (k,), replace=False)]
    # k-means++ (Arthur & Vassilvitskii 2007): each new centre drawn with probability
    # proportional to the squared distance to the nearest centre chosen so far.
    first = jax.random.randint(jax.random.fold_in(key, 0), (), 0, n)
    centres = jnp.zeros((k, x.shape[1]), x.dtype).at[0].set(x[first])
    closest = sq_dist_to_centres(x, x[first][None])[:, 0]

    def add(c, state):
        centres, closest = state
        logits = jnp.where(closest > 0, jnp.log(jnp.where(closest > 0, closest, 1.0)), -jnp.inf)
        # All points on a centre already (duplicates): fall back to a uniform draw.
        logits = jnp.where(jnp.any(closest > 0), logits, jnp.zeros_like(logits))
        pick = jax.random.categorical(jax.random.fold_in(key, c), logits)
        new = sq_dist_to_centres(x, x[pick][None])[:, 0]
        return centres.at[c].set(x[pick]), jnp.minimum(closest, new)

    centres, _ = jax.lax.fori_loop(1, k, add, (centres, closest))
    return centres


@functools.partial(jax.jit, static_argnames=("num_clusters", "iterations", "init"))
def kmeans(
    key: jax.Array, x: jax.Array, *, num_clusters: int, iterations: int, init: str = "kmeans++"
) -> tuple[jax.Array, jax.Array]:
    """Lloyd's k-means.

    Args:
      key: PRNG key of the initialisation.
      x: [n, d] points (n >= num_clusters).
      num_clusters: k.
      iterations: Lloyd iterations (assign, then move each centre to its points' mean;
        a centre left with no point stays where it was).
      init: 'kmeans++' or 'random' (k distinct points).

    Returns:
      (centres [k, d], assignment [n] int32 of x to the final centres).
    """
    x = jnp.asarray(x, jnp.float32)
    centres = _init_centres(key, x, num_clusters, init)

    def lloyd(centres, _):
        assign = jnp.argmin(sq_dist_to_centres(x, centres), axis=1)
        sums = jax.ops.segment_sum(x, assign, num_segments=num_clusters)
        counts = jax.ops.segment_sum(jnp.ones(x.shape[0]), assign, num_segments=num_clusters)
        moved = sums / jnp.maximum(counts, 1.0)[:, None]
        return jnp.where(counts[:, None] > 0, moved, centres), None

    centres, _ = jax.lax.scan(lloyd, centres, None, length=iterations)
    return centres, jnp.argmin(sq_dist_to_centres(x, centres), axis=1).astype(jnp.int32)
