"""Mahalanobis distance with an inverse covariance (the study's "squared Mahalanobis").

Run:
  python -m warca_jax.main --config=warca_jax/configs/mahalanobis.py --workdir=/tmp/mahalanobis

Variants (``--config=warca_jax/configs/mahalanobis.py:<arg>``):
  features      inverse covariance of the training features (the default, the study's
                method; it ignores labels and does worse than Euclidean there and here).
  within_class  inverse covariance of the differences of same-identity pairs.
  small         a shrunk run for smoke tests (60 identities, 2 splits).
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("features", "within_class", "small")


def get_config(arg: str = "features") -> ml_collections.ConfigDict:
    """Returns the Mahalanobis config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "mahalanobis"
    # 'features': covariance of the features; 'within_class': of same-identity differences.
    c.method.covariance = "within_class" if arg == "within_class" else "features"
    c.method.reg = 1e-6  # ridge reg * trace(C) / D on C's diagonal (a warning if it matters).
    c.lock()
    return c
