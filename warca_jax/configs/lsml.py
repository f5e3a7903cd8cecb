"""LSML (Liu, Mu & Ji, ICDM 2012): squared residual of relative comparisons + log-det prior.

Run:
  python -m warca_jax.main --config=warca_jax/configs/lsml.py --workdir=/tmp/lsml

Variants (``--config=warca_jax/configs/lsml.py:<arg>``):
  default     metric-learn 0.7.0's LSML_Supervised defaults: 20 * classes^2 quadruplets
              (capped by the similar pairs that exist), identity prior, lam = 1,
              tol = 1e-3 on the gradient norm, at most 1,000 steps.
  covariance  the paper's prior: M0 = the inverse covariance of the quadruplets' points.
  small       a shrunk run for smoke tests (60 identities, 2 splits, 100 steps).

The quadruplets are drawn from the seed as metric-learn's LSML_Supervised draws them
(warca_jax/methods/_constraints.py): same seed, same metric.
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "covariance", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the LSML config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "lsml"
    # quadruplets (similar pair, dissimilar pair) drawn from the labels; 0: metric-learn's
    # default 20 * classes^2, capped by the similar (and dissimilar) pairs that exist.
    c.method.n_constraints = 0
    # prior M0 of the log-det divergence, and the starting point: 'identity' (metric-learn
    # 0.7.0's default) or 'covariance' (inverse covariance of the quadruplets' points, the
    # paper's and older metric-learn's choice).
    c.method.prior = "identity"
    c.method.prior_reg = 1e-6  # ridge prior_reg * trace / D on the covariance prior.
    c.method.lam = 1.0  # weight of the log-det divergence (metric-learn: 1, no parameter).
    c.method.tol = 1e-3  # stop when ||grad f||_F <= tol (metric-learn: tol=1e-3; 0: never).
    c.method.max_iter = 1000  # gradient steps at most (metric-learn: max_iter=1000).
    c.method.log_every = 50  # steps per logged history row.
    if arg == "covariance":
        c.method.prior = "covariance"
    elif arg == "small":
        c.method.max_iter = 100
        c.method.log_every = 20
    c.lock()
    return c
