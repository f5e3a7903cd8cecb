"""metric-learn's face of a learned ``Metric``: its linear map, pair distances, a point metric.

What the estimators' ``components_``, ``get_mahalanobis_matrix()``, ``pair_distance``,
``pair_score`` and ``get_metric()`` return, with metric-learn 0.7.0's meaning
(``metric_learn.base_metric.MahalanobisMixin``):

* ``linear_map(metric)``: L [D', D] with ``transform(x) == x @ L.T`` (up to float32), the
  projection times the metric's ``input_scale`` and ``feature_scale``; ``feature_scale`` I
  for an identity metric. Only a metric whose distance is the Euclidean one after that map
  has one; any other (a kernel, a kernel's distance, cosine, chi2, SVMML, k-means) raises
  ``NoLinearMapError``, an ``AttributeError`` that says why.
* ``pair_distances(metric, pairs)``: the learned distance of each pair of ``pairs``
  [n, 2, D], float64. With a linear map: ``||L (a - b)||`` in float64 (metric-learn's
  value); otherwise the metric's own ``pairwise_distances`` of the pair, so the distance the
  evaluation ranks with. The k-means search of ``kmeans_nn`` has none: its distance depends
  on the gallery's clusters.
* ``PointDistance(metric)``: ``(u, v) -> distance`` between two 1-D arrays, picklable, for
  scikit-learn's ``KNeighborsClassifier(metric=...)``.
"""

from __future__ import annotations

import numpy as np

from warca_jax.metric import EMBEDDING_KINDS, Metric

_BLOCK = 256  # pairs per [block, block] distance matrix of a metric without a map


class NoLinearMapError(AttributeError):
    """A metric whose distance is not a Euclidean distance after a linear map of the features."""


def has_linear_map(metric: Metric) -> bool:
    """Whether ``linear_map`` gives the metric's map (its distance is ||L (x - y)||)."""
    return metric.kind in ("linear", "identity") and metric.distance == "euclidean"


def linear_map(metric: Metric) -> np.ndarray:
    """L [D', D] float64 with ``transform(x) == x @ L.T`` and distance ``||L (x - y)||``.

    Raises:
      NoLinearMapError: the metric's distance is not of that form; the message says why.
    """
    if not has_linear_map(metric):
        raise NoLinearMapError(
            f"the {metric.name or metric.kind} metric has no linear map (components_): "
            f"{_why(metric)}"
        )
    if metric.kind == "identity":
        return float(metric.feature_scale) * np.eye(metric.input_dim)
    scale = float(metric.input_scale) * float(metric.feature_scale)  # feature_scale: 2**k
    return np.asarray(metric.projection, np.float64) * scale


def _why(metric: Metric) -> str:
    if metric.kind == "kernel":
        return (
            f"it embeds x through its {metric.kernel} kernel with the support vectors, "
            "k(x, support) @ A.T, not through a matrix times x; use transform(X)"
        )
    if metric.kind == "kernel_distance":
        return f"its distance is that of the {metric.kernel} kernel's feature space"
    if metric.kind in ("identity", "linear"):
        return f"it ranks with the {metric.distance} distance, not the Euclidean one"
    return f"a {metric.kind!r} metric's distance is not a Euclidean distance after a map"


def embed_linear(metric: Metric, x: np.ndarray) -> np.ndarray:
    """x @ L.T in x's precision for a metric with a linear map (``has_linear_map``); an
    identity metric's is x times its feature scale, no [D, D] identity formed."""
    if metric.kind == "identity":
        return x * float(metric.feature_scale)
    return x @ linear_map(metric).T


def check_pairs(metric: Metric, pairs) -> np.ndarray:
    """``pairs`` as a finite float64 [n, 2, D] array; ValueError naming what is wrong."""
    p = np.asarray(pairs)
    if p.dtype.kind not in "biuf":
        raise ValueError(f"pairs must hold real numbers, got dtype {p.dtype}")
    if p.ndim != 3 or p.shape[1] != 2 or p.shape[2] != metric.input_dim:
        raise ValueError(
            f"pairs must be an [n, 2, {metric.input_dim}] array (n pairs of two samples), "
            f"got shape {p.shape}"
        )
    p = p.astype(np.float64)
    if not np.all(np.isfinite(p)):
        raise ValueError(f"pairs hold {int(np.sum(~np.isfinite(p)))} NaN or inf values")
    return p


def pair_distances(metric: Metric, pairs) -> np.ndarray:
    """[n] float64 learned distances of ``pairs`` [n, 2, D] (module docstring)."""
    p = check_pairs(metric, pairs)
    a, b = p[:, 0], p[:, 1]
    if has_linear_map(metric):
        return np.linalg.norm(embed_linear(metric, a - b), axis=1)
    if metric.kind == "kmeans":
        raise ValueError(
            f"{metric.name or 'kmeans_nn'} searches the query's k-means cluster of a gallery, "
            "so two samples alone have no distance under it; use pairwise_distances(X, Y)"
        )
    if len(p) == 0:
        return np.zeros(0)
    if metric.kind in EMBEDDING_KINDS and metric.distance == "euclidean":
        ea = metric.transform(a).astype(np.float64)
        return np.linalg.norm(ea - metric.transform(b), axis=1)
    # Any other distance: the metric's own, the diagonal of [block, block] matrices.
    out = [
        np.diagonal(np.asarray(metric.pairwise_distances(a[s : s + _BLOCK], b[s : s + _BLOCK])))
        for s in range(0, len(p), _BLOCK)
    ]
    return np.concatenate(out).astype(np.float64)


class PointDistance:
    """The learned distance between two samples, ``(u, v) -> float`` (``get_metric()``).

    For scikit-learn's ``metric=`` arguments (``KNeighborsClassifier``, ``NearestNeighbors``,
    ``pairwise_distances``): u and v are 1-D arrays of the metric's input dimension.
    Picklable (it holds the ``Metric``), so that ``n_jobs`` can ship it to workers.
    """

    def __init__(self, metric: Metric):
        self.metric = metric

    def __call__(self, u, v) -> float:
        u, v = np.asarray(u), np.asarray(v)
        if u.ndim != 1 or v.ndim != 1:
            raise ValueError(f"the metric takes two 1-D samples, got shapes {u.shape}, {v.shape}")
        return float(pair_distances(self.metric, np.stack([u, v])[None])[0])

    def __repr__(self) -> str:
        return f"PointDistance({self.metric.name or self.metric.kind})"
