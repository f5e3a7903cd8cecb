"""SDML (Qi et al., ICML 2009) on the built-in synthetic re-id data (or a .npz).

Run:
  python -m experiments.main --config=configs/sdml.py --workdir=/tmp/sdml

Variants (``--config=configs/sdml.py:<arg>``):
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

from warca_jax.runs import defaults

VARIANTS = ("default", "metric_learn", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the sdml config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/sdml.py)."""
    c = defaults.experiment_config("sdml", arg, small=arg == "small", lock=False)
    m = c.method
    m.balance_param = 0.5  # eta in P = M_0^-1 + eta K (the paper's eta)
    m.sparsity_param = 0.01  # alpha, the l1 weight on M's off-diagonal (the paper's lambda)
    # K from the pairs: 'normalized' (each kind averaged, scaled to the prior) or 'sum'
    # (the pairs' sum, the paper's and metric-learn's)
    m.loss_matrix = "sum" if arg == "metric_learn" else "normalized"
    m.prior = "identity"  # M_0: 'identity' or 'covariance' (the training features')
    m.num_constraints = 0  # similar (and as many dissimilar) pairs; 0: 20 C^2 for C ids
    m.max_iter = 500 if arg == "small" else 2000  # ADMM iterations at most
    c.lock()
    return c
