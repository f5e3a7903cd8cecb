"""SDML (Qi et al., ICML 2009) on the built-in synthetic re-id data (or a .npz).

Run:
  python -m warca_jax.main --config=warca_jax/configs/sdml.py --workdir=/tmp/sdml

Variants (``--config=warca_jax/configs/sdml.py:<arg>``):
  default       metric-learn 0.7.0's SDML_Supervised values (balance_param 0.5,
                sparsity_param 0.01, identity prior, 20 C^2 pairs of each kind) with the
                loss matrix normalized (each kind of pair averaged, scaled to the prior):
                P is then positive definite whatever the number of pairs.
  metric_learn  metric-learn's loss matrix too (the pairs' sum, as in the paper): on
                re-identification data the dissimilar pairs outnumber the similar ones and
                P's diagonal is negative, so that the problem has no minimiser and ``fit``
                refuses it (naming the largest balance_param that works).
  small         the default on shrunk data, for smoke tests.
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "metric_learn", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the SDML config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "sdml"
    # eta in P = M_0^-1 + eta K (metric-learn's balance_param: 0.5; the paper's eta).
    c.method.balance_param = 0.5
    # alpha, the l1 weight on the off-diagonal of M (metric-learn's sparsity_param: 0.01,
    # passed to scikit-learn's graphical_lasso as its alpha; the paper's lambda).
    c.method.sparsity_param = 0.01
    # K from the pairs: 'normalized' (each kind averaged, scaled by its largest eigenvalue
    # relative to the prior: P definite for balance_param < 1; this project's) or 'sum'
    # (sum_pairs y (x_a - x_b)(x_a - x_b)^T, the paper's and metric-learn's).
    c.method.loss_matrix = "normalized"
    # M_0: 'identity' (metric-learn's default) or 'covariance' (M_0^-1 = the covariance of
    # the training features, metric-learn's option; refused when singular).
    c.method.prior = "identity"
    # similar (and as many dissimilar) pairs drawn from the labels; 0: 20 C^2 for C
    # identities (metric-learn's SDML_Supervised), capped by the pairs that exist.
    c.method.num_constraints = 0
    c.method.rho = 1.0  # ADMM's first penalty (Boyd et al. 2011), then balanced by residuals.
    c.method.max_iter = 2000  # ADMM iterations at most.
    # stop when the duality gap <= tol * max(1, |f|) and the relative primal residual
    # <= tol (scikit-learn's graphical_lasso: absolute gap 1e-4; 1e-5 leaves the matrix
    # about 1e-3 from the optimum, and float32 still resolves it).
    c.method.tol = 1e-5
    c.method.log_every = 20  # ADMM iterations per logged history row (and jitted chunk).
    if arg == "metric_learn":
        c.method.loss_matrix = "sum"
    elif arg == "small":
        c.method.max_iter = 500
    c.lock()
    return c
