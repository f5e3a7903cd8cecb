"""Mahalanobis distance with an inverse covariance (the study's "squared Mahalanobis").

Run:
  python -m experiments.main --config=configs/mahalanobis.py --workdir=/tmp/mahalanobis

Variants (``--config=configs/mahalanobis.py:<arg>``):
  features      inverse covariance of the training features (the default, the study's
                method; it ignores labels and does worse than Euclidean there and here).
  within_class  inverse covariance of the differences of same-identity pairs.
  small         a shrunk run for smoke tests (60 identities, 2 splits).
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("features", "within_class", "small")


def get_config(arg: str = "features") -> ml_collections.ConfigDict:
    """Returns the mahalanobis config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("mahalanobis", arg, small=arg == "small")
