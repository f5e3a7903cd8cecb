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
    """Returns the lsml config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/lsml.py)."""
    c = defaults.experiment_config("lsml", arg, small=arg == "small", lock=False)
    m = c.method
    # quadruplets drawn from the labels (0: metric-learn's 20 * classes^2, capped)
    m.n_constraints = 0
    # prior M0 of the log-det divergence and the start: 'identity' (metric-learn 0.7.0's)
    # or 'covariance' (inverse covariance of the quadruplets' points, the paper's)
    m.prior = "covariance" if arg == "covariance" else "identity"
    m.lam = 1.0  # weight of the log-det divergence (metric-learn: 1)
    m.tol = 1e-3  # stop when ||grad f||_F <= tol (metric-learn: 1e-3; 0: never)
    m.max_iter = 100 if arg == "small" else 1000  # gradient steps at most
    c.lock()
    return c
