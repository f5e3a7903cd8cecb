"""A learned metric (``Metric``, module ``base``) and the kinds learners add (``kinds``).

See ``base``'s docstring: the kinds, saving and loading.
"""

from warca_jax.metric.base import (
    EMBEDDING_KINDS,
    DamagedModelError,
    Metric,
    NonFiniteEmbeddingError,
    NonFiniteMetricError,
)
from warca_jax.metric.kinds import KMeansMetric, SvmmlMetric

__all__ = [
    "EMBEDDING_KINDS",
    "DamagedModelError",
    "KMeansMetric",
    "Metric",
    "NonFiniteEmbeddingError",
    "NonFiniteMetricError",
    "SvmmlMetric",
]
