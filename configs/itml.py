"""ITML (Davis et al., ICML 2007) on the built-in synthetic re-id data (or a .npz).

Run:
  python -m experiments.main --config=configs/itml.py --workdir=/tmp/itml

Variants (``--config=configs/itml.py:<arg>``):
  default  metric-learn 0.7.0's ITML_Supervised defaults (gamma 1, tol 1e-3, at most
           1,000 sweeps, 20 C^2 constraints of each kind, identity prior), with the paper's
           bounds: percentiles of squared distances.
  small    a shrunk run for smoke tests (60 identities, 2 splits, fewer constraints).

Every sweep projects A onto each constraint once (O(D^2) each): the cost of a sweep is
O(P D^2) for P constraints, so cap num_constraints on large training sets.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the itml config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the library's
    (warca_jax/methods/itml.py)."""
    c = defaults.experiment_config("itml", arg, small=arg == "small", lock=False)
    m = c.method
    m.gamma = 1.0  # slack trade-off (the paper's gamma); larger: harder constraints
    # similar (and as many dissimilar) pairs drawn from the labels; 0: 20 C^2 for C identities
    m.num_constraints = 2000 if arg == "small" else 0
    m.prior = "identity"  # A_0: 'identity' or 'covariance' (inverse training covariance)
    m.lower_percentile = 5.0  # u, the similar pairs' bound (a percentile of distances)
    m.upper_percentile = 95.0  # l, the dissimilar pairs' bound (a percentile of distances)
    m.max_iter = 100 if arg == "small" else 1000  # sweeps over all constraints at most
    m.tol = 1e-3  # stop when a sweep's relative dual change is below tol (0: max_iter sweeps)
    c.lock()
    return c
