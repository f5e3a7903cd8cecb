"""SVMML (Li et al., CVPR 2013): locally-adaptive decision functions on PCA-reduced features.

Run:
  python -m warca_jax.main --config=warca_jax/configs/svmml.py --workdir=/tmp/svmml

Variants (``--config=warca_jax/configs/svmml.py:<arg>``):
  default  95% of the variance kept by PCA, as the WARCA paper did.
  small    shrunk data and iterations, for smoke tests.
  large    for 7,368 x 2,048 problems: PCA to 256 dims, 3 negatives per positive, 200 steps.
"""

import ml_collections

from warca_jax.configs import common


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the SVMML config for variant ``arg``."""
    if arg not in ("default", "small", "large"):
        raise ValueError(f"unknown variant {arg!r}; expected default, small or large")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "svmml"
    c.method.pca_variance = 0.95  # share of the variance PCA keeps (used when pca_dim == 0).
    c.method.pca_dim = 0  # PCA components (0: as many as pca_variance needs).
    c.method.neg_ratio = 50.0  # different-label pairs per same-label pair (all if fewer).
    c.method.lam = 1e-3  # weight of lam/2 (||A||^2 + ||B||^2 + ||c||^2), on whitened inputs.
    c.method.num_iters = 2000  # most accelerated projected-gradient steps.
    c.method.tol = 1e-3  # stop once the projected-gradient (KKT) residual is below it.
    c.method.log_every = 100  # steps between history rows (and residual checks).
    if arg == "small":
        c.method.num_iters = 100
        c.method.log_every = 50
    elif arg == "large":  # A and B are [k, k] on k PCA dims: cap k, fewer pairs and steps.
        c.method.pca_dim = 256  # 64 dims lose too much: rank-1 27.8 against Euclidean's 83.8.
        c.method.neg_ratio = 3.0
        c.method.num_iters = 200
    c.lock()
    return c
