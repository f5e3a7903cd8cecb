"""The metric kinds that a learner defines beyond ``base.KINDS``: their own distance.

* ``KMeansMetric`` (kind ``kmeans``, learner ``kmeans_nn``): Euclidean search restricted to
  the query's nearest k-means cluster of the gallery (``methods.kmeans`` has the ranking).
* ``SvmmlMetric`` (kind ``svmml``, learner ``svmml``): the SVMML decision function as a
  dissimilarity (``methods.svmml`` has the model).

Defined here, beside ``Metric``, so that ``Metric.load`` knows every kind without importing
the learners (each subclass registers its ``KIND`` when this module is imported, which
``warca_jax.metric`` does).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from warca_jax.maths import distances
from warca_jax.maths.clustering import INITS, kmeans, sq_dist_to_centres
from warca_jax.metric.base import Metric
from warca_jax.metric.fields import integer, real


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

    def _check_fields(self) -> None:
        """Besides ``Metric``'s: whole numbers of clusters (at least 1) and iterations (at
        least 0), an integer seed and a known initialisation."""
        super()._check_fields()
        for field, low in (("num_clusters", 1), ("iterations", 0), ("seed", None)):
            v = getattr(self, field)
            if not integer(v) or (low is not None and v < low):
                at_least = f" of at least {low}" if low is not None else ""
                raise ValueError(f"field {field!r}: expected an integer{at_least}, got {v!r}")
        if self.init not in INITS:
            raise ValueError(f"field 'init': unknown {self.init!r}; expected one of {INITS}")

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
        q_cent = jnp.sqrt(sq_dist_to_centres(jnp.asarray(q), centres))
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


@dataclasses.dataclass(frozen=True)
class SvmmlMetric(Metric):
    """The SVMML decision function as a dissimilarity (kind ``svmml``).

    Attributes (besides ``Metric``'s):
      mean: [D] PCA mean.
      components: [p, D] PCA components, scaled (reduced x = (x - mean) @ components.T).
      a_mat, b_mat: [p, p] PSD matrices A and B.
      c_vec: [p] linear term c.
      bias: the offset b.
    """

    KIND = "svmml"
    mean: np.ndarray | None = None
    components: np.ndarray | None = None
    a_mat: np.ndarray | None = None
    b_mat: np.ndarray | None = None
    c_vec: np.ndarray | None = None
    bias: float = 0.0

    def _check_fields(self) -> None:
        """Besides ``Metric``'s: the offset is a real number."""
        super()._check_fields()
        if not real(self.bias):
            raise ValueError(f"field 'bias': expected a real number, got {self.bias!r}")

    def _check_shapes(self) -> None:
        """The PCA arrays fit ``input_dim`` (mean [D], components [p, D]) and the decision
        function fits the components (A, B: [p, p], c: [p])."""
        d = self.input_dim
        if np.shape(self.mean) != (d,) or len(np.shape(self.components)) != 2:
            raise ValueError(
                f"an svmml metric's mean of shape {np.shape(self.mean)} and components of shape "
                f"{np.shape(self.components)} do not match its input_dim {d}: expected [{d}] "
                f"and [p, {d}]"
            )
        p = np.shape(self.components)[0]
        if p == 0:
            raise ValueError(
                f"field 'components': shape {np.shape(self.components)} has no rows, so every "
                f"pair would get the same value; expected [p >= 1, {d}]"
            )
        shapes = [np.shape(self.components)[1:], *(np.shape(v) for v in (self.a_mat, self.b_mat))]
        if shapes != [(d,), (p, p), (p, p)] or np.shape(self.c_vec) != (p,):
            raise ValueError(
                f"an svmml metric's components {np.shape(self.components)}, A "
                f"{np.shape(self.a_mat)}, B {np.shape(self.b_mat)} and c {np.shape(self.c_vec)} "
                f"do not fit input_dim {d}: expected [p, {d}], [p, p], [p, p] and [p]"
            )

    @property
    def output_dim(self) -> int:
        return int(self.components.shape[0])

    def transform(self, x: np.ndarray, *, block_size: int = 4096) -> np.ndarray:
        """The PCA-reduced features [n, p] the decision function reads."""
        del block_size
        x = self.scaled_features(x)
        with np.errstate(over="ignore", invalid="ignore"):  # reported, naming the model
            reduced = ((x - self.mean) @ self.components.T).astype(np.float32)
        return self.finite_output(reduced)

    def pairwise_distances(self, x: np.ndarray, y: np.ndarray, *, block_size: int = 1024):
        """[n, m] values of f(x_a, y_b), computed in row blocks of x (smaller: more similar)."""
        xr, yr = jnp.asarray(self.transform(x)), jnp.asarray(self.transform(y))
        params = tuple(jnp.asarray(v) for v in (self.a_mat, self.b_mat, self.c_vec))
        hy = half_quad_lin(yr, params[0], params[2])
        out = [
            np.asarray(_block_f(xr[s : s + block_size], yr, hy, *params[:3], self.bias))
            for s in range(0, xr.shape[0], block_size)
        ]
        return np.concatenate(out) if out else np.zeros((0, yr.shape[0]), np.float32)


def half_quad_lin(x, a, c):
    """1/2 x^T A x + c^T x per row: [n]."""
    return 0.5 * jnp.sum((x @ a) * x, axis=1) + x @ c


@jax.jit
def _block_f(xb, yr, hy, a, b, c, bias):
    return half_quad_lin(xb, a, c)[:, None] + hy[None, :] - (xb @ b) @ yr.T + bias
