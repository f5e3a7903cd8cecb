"""LSML (Liu, Mu & Ji, ICDM 2012): squared residual of relative comparisons + log-det prior.

Run:
  python -m experiments.main --config=configs/lsml.py --workdir=/tmp/lsml

Variants (``--config=configs/lsml.py:<arg>``):
  default     metric-learn 0.7.0's LSML_Supervised defaults: 20 * classes^2 quadruplets
              (capped by the similar pairs that exist), identity prior, lam = 1,
              tol = 1e-3 on the gradient norm, at most 1,000 steps.
  covariance  the paper's prior: M0 = the inverse covariance of the quadruplets' points.
  small       a shrunk run for smoke tests (60 identities, 2 splits, 100 steps).

The quadruplets are drawn from the seed as metric-learn's LSML_Supervised draws them
(warca_jax/methods/constraints.py): same seed, same metric.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "covariance", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the lsml config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("lsml", arg, small=arg == "small")
