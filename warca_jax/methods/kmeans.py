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

import ml_collections

from warca_jax.maths.clustering import INITS
from warca_jax.methods import Method, checks, model_checks
from warca_jax.metric import KMeansMetric


def check_config(cfg, data: checks.TrainingData) -> None:
    """The cluster count, iterations and init (the gallery size is checked when the
    gallery is searched)."""
    del data
    checks.check_number(cfg, "num_clusters", low=1, integer=True)
    checks.check_number(cfg, "iterations", low=0, integer=True)
    checks.check_choice(cfg, "init", INITS)


# k-means clusters features times a positive factor as it clusters the features.
validate = checks.validator("kmeans_nn", check_config, min_identities=0)


def fit(features, labels, cfg, *, seed=0):
    """Returns the k-means search as a ``KMeansMetric`` (nothing is learned; empty history)."""
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
    return model_checks.check_model(metric, method="kmeans_nn", features=features), []


VARIANTS = ("default", "two", "small")  # two: k = 2; small: k = 4, 5 iterations


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``kmeans_nn``: what configs/kmeans.py starts from."""
    m = checks.new_config("kmeans_nn", variant, VARIANTS)
    m.num_clusters = 10  # k; at most the gallery size.
    m.iterations = 20  # Lloyd iterations.
    m.init = "kmeans++"  # 'kmeans++' or 'random' (k distinct gallery points), from the seed.
    if variant == "two":
        m.num_clusters = 2
    elif variant == "small":
        m.num_clusters = 4
        m.iterations = 5
    return m


METHODS = {"kmeans_nn": Method(fit, validate, default_config, VARIANTS, kinds=("kmeans",))}
