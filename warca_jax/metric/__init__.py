"""A learned metric (``Metric``, module ``base``) and the kinds learners add (``kinds``).

See ``base``'s docstring: the kinds, saving and loading.
"""

from warca_jax.metric.base import (
    EMBEDDING_KINDS,
    KINDS,
    DamagedModelError,
    Metric,
    NonFiniteMetricError,
)
from warca_jax.metric.kinds import KMeansMetric, SvmmlMetric

__all__ = [
    "EMBEDDING_KINDS",
    "KINDS",
    "DamagedModelError",
    "KMeansMetric",
    "Metric",
    "NonFiniteMetricError",
    "SvmmlMetric",
]
