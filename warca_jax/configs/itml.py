"""ITML (Davis et al., ICML 2007) on the built-in synthetic re-id data (or a .npz).

Run:
  python -m warca_jax.main --config=warca_jax/configs/itml.py --workdir=/tmp/itml

Variants (``--config=warca_jax/configs/itml.py:<arg>``):
  default  metric-learn 0.7.0's ITML_Supervised defaults (gamma 1, tol 1e-3, at most
           1,000 sweeps, 20 C^2 constraints of each kind, identity prior), with the paper's
           bounds: percentiles of squared distances.
  small    a shrunk run for smoke tests (60 identities, 2 splits, fewer constraints).

Every sweep projects A onto each constraint once (O(D^2) each): the cost of a sweep is
O(P D^2) for P constraints, so cap num_constraints on large training sets.
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the ITML config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "itml"
    # slack trade-off: weight of D_ld(diag xi, diag xi_0) against D_ld(A, A_0)
    # (paper's gamma; metric-learn: 1.0). Larger: harder constraints.
    c.method.gamma = 1.0
    # similar (and as many dissimilar) pairs drawn from the labels; 0: 20 C^2 for C
    # identities (metric-learn's ITML_Supervised), capped by the pairs that exist.
    c.method.num_constraints = 0
    # A_0: 'identity' (metric-learn's default) or 'covariance' (inverse covariance of the
    # training features, metric-learn's option; refused when singular).
    c.method.prior = "identity"
    # what the bounds are percentiles of: 'squared' distances, the d_A the constraints bound
    # (the paper), or plain 'euclidean' distances (metric-learn 0.7.0).
    c.method.bounds = "squared"
    c.method.lower_percentile = 5.0  # u, the similar pairs' bound (paper, metric-learn: 5).
    c.method.upper_percentile = 95.0  # l, the dissimilar pairs' bound (paper, metric-learn: 95).
    c.method.max_iter = 1000  # sweeps over all constraints at most (metric-learn: 1000).
    # stop after a sweep whose dual change ||lam - lam_old||_1 / (||lam|| + ||lam_old||) is
    # below tol (the authors' code, metric-learn: 1e-3); 0: run max_iter sweeps.
    c.method.tol = 1e-3
    c.method.log_every = 10  # sweeps per logged history row (and per jitted chunk).
    if arg == "small":
        c.method.num_constraints = 2000
        c.method.max_iter = 100
    c.lock()
    return c
