"""k-means + nearest neighbours: the study's second baseline (its section 4.2).

The gallery is clustered with k-means (k-means++ or random initialisation from
the seed, then Lloyd iterations, one jitted ``lax.scan``); each query is assigned to
its nearest cluster centre and searched, by Euclidean distance, only among the
gallery entries of that cluster. Nothing is learned from the training set:
``fit`` returns a ``KMeansMetric`` whose ``pairwise_distances(q, g)`` does the
clustering of g.

Ranking of the entries a query does not search: they come after every entry of its
own cluster, ordered by the distance from the query to their cluster's centre
(k distances per query, no gallery distance), ties in gallery order. Their returned
"distance" is ``offset + ||q - centre||`` with ``offset`` larger than every in-cluster
distance, so the matrix stays finite and the evaluation ranks it as described.

``search_cost(q, g)`` gives the fraction of query-gallery distances computed
against brute force (about 1 / num_clusters for balanced clusters; the k
query-centre distances per query and the clustering itself come on top).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from warca_jax import distances, training
from warca_jax.methods import Method, _checks
from warca_jax.metric import Metric

INITS = ("kmeans++", "random")
_BLOCK = 1024  # gallery rows per block of the assignment step


def _sq_dist_to_centres(x: jax.Array, centres: jax.Array) -> jax.Array:
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
    closest = _sq_dist_to_centres(x, x[first][None])[:, 0]

    def add(c, state):
        centres, closest = state
        logits = jnp.where(closest > 0, jnp.log(jnp.where(closest > 0, closest, 1.0)), -jnp.inf)
        # All points on a centre already (duplicates): fall back to a uniform draw.
        logits = jnp.where(jnp.any(closest > 0), logits, jnp.zeros_like(logits))
        pick = jax.random.categorical(jax.random.fold_in(key, c), logits)
        new = _sq_dist_to_centres(x, x[pick][None])[:, 0]
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
        assign = jnp.argmin(_sq_dist_to_centres(x, centres), axis=1)
        sums = jax.ops.segment_sum(x, assign, num_segments=num_clusters)
        counts = jax.ops.segment_sum(jnp.ones(x.shape[0]), assign, num_segments=num_clusters)
        moved = sums / jnp.maximum(counts, 1.0)[:, None]
        return jnp.where(counts[:, None] > 0, moved, centres), None

    centres, _ = jax.lax.scan(lloyd, centres, None, length=iterations)
    return centres, jnp.argmin(_sq_dist_to_centres(x, centres), axis=1).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class KMeansMetric(Metric):
    """Euclidean search restricted to the query's nearest k-means cluster of the gallery.

    Attributes:
      num_clusters: k, clusters of the gallery.
      iterations: Lloyd iterations.
      seed: seed of the initialisation (same seed, same clusters).
      init: 'kmeans++' or 'random'.
    """

    KIND = "kmeans"
    num_clusters: int = 1
    iterations: int = 20
    seed: int = 0
    init: str = "kmeans++"

    def transform(self, x: np.ndarray, *, block_size: int = 4096) -> np.ndarray:
        """The search runs in input space: x itself ([n, D] float32, times ``feature_scale``),
        checked."""
        del block_size
        return self.scaled_features(x).astype(np.float32)

    def clusters(self, q: np.ndarray, g: np.ndarray):
        """(centres [k, D], gallery assignment [ng], query assignment [nq], query-centre
        distances [nq, k]) for query q: [nq, D] and gallery g: [ng, D]."""
        q, g = self.transform(q), self.transform(g)
        if not 1 <= self.num_clusters <= g.shape[0]:
            raise ValueError(
                f"num_clusters must be in [1, {g.shape[0]}] (the gallery size), "
                f"got {self.num_clusters}"
            )
        centres, g_assign = kmeans(
            jax.random.PRNGKey(self.seed),
            jnp.asarray(g),
            num_clusters=self.num_clusters,
            iterations=self.iterations,
            init=self.init,
        )
        q_cent = jnp.sqrt(_sq_dist_to_centres(jnp.asarray(q), centres))
        q_assign = jnp.argmin(q_cent, axis=1)
        return centres, np.asarray(g_assign), np.asarray(q_assign), np.asarray(q_cent)

    def pairwise_distances(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """[nq, ng] distances: Euclidean within the query's cluster, larger outside it.

        Only the distances between each query and the members of its own cluster
        are computed (cluster by cluster, with the same blocked routine as plain
        Euclidean search); see the module docstring for the order of the rest.
        """
        q, g = self.transform(x), self.transform(y)
        _, g_assign, q_assign, q_cent = self.clusters(q, g)
        rows_of = [np.flatnonzero(q_assign == c) for c in range(self.num_clusters)]
        cols_of = [np.flatnonzero(g_assign == c) for c in range(self.num_clusters)]
        # Every cluster is padded to the same shapes (rows to a multiple of a power-of-two
        # block, columns to the largest cluster), so that one compiled program serves all.
        width = max(len(c) for c in cols_of)
        block = min(256, 1 << (max(len(r) for r in rows_of) - 1).bit_length())
        out = np.zeros((q.shape[0], g.shape[0]), np.float32)
        inside = np.zeros(out.shape, bool)
        for rows, cols in zip(rows_of, cols_of, strict=True):
            if rows.size and cols.size:
                d = distances.pairwise_distances(
                    distances.pad_rows(q[rows], -(-rows.size // block) * block),
                    distances.pad_rows(g[cols], width),
                    distance="euclidean",
                    block_size=block,
                )
                out[np.ix_(rows, cols)] = np.asarray(d)[: rows.size, : cols.size]
                inside[np.ix_(rows, cols)] = True
        if inside.all():
            return out
        offset = np.float32(out.max() + 1.0)
        return np.where(inside, out, offset + q_cent[:, g_assign]).astype(np.float32)

    def search_cost(self, x: np.ndarray, y: np.ndarray) -> float:
        """Fraction of the nq * ng query-gallery distances that the search needs.

        Nominal: ``pairwise_distances`` pads every cluster to the largest one so that one
        compiled program serves them all, which computes (and discards) some more.
        """
        _, g_assign, q_assign, _ = self.clusters(x, y)
        sizes = np.bincount(g_assign, minlength=self.num_clusters)
        return float(sizes[q_assign].sum()) / (len(q_assign) * len(g_assign))


def check_config(cfg, data: _checks.TrainingData) -> None:
    """The cluster count, iterations and init (the gallery size is checked when the
    gallery is searched)."""
    del data
    _checks.check_number(cfg, "num_clusters", low=1, integer=True)
    _checks.check_number(cfg, "iterations", low=0, integer=True)
    _checks.check_choice(cfg, "init", INITS)


# k-means clusters features times a positive factor as it clusters the features.
validate = _checks.validator("kmeans_nn", check_config, min_identities=0)


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False):
    """Returns the k-means search as a ``KMeansMetric`` (nothing is learned; empty history)."""
    del log_fn, progress
    x, _, scale = validate(features, labels, cfg)
    metric = KMeansMetric(
        "kmeans",
        x.shape[1],
        num_clusters=int(cfg.num_clusters),
        iterations=int(cfg.iterations),
        seed=int(seed),
        init=cfg.init,
        name="kmeans_nn",
        feature_scale=scale,
    )
    return training.check_model(metric, method="kmeans_nn"), []


METHODS = {"kmeans_nn": Method(fit=fit, validate=validate)}
