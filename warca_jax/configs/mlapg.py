"""MLAPG (logistic metric learning by accelerated proximal gradient) on the synthetic data.

Run:
  python -m warca_jax.main --config=warca_jax/configs/mlapg.py --workdir=/tmp/mlapg

Variants (``--config=warca_jax/configs/mlapg.py:<arg>``):
  default  full-rank Mahalanobis M on the synthetic features (Liao & Li, ICCV 2015).
  small    a shrunk run for smoke tests (2 splits, 60 identities, few iterations).
  large    for 7,368 x 2,048 problems: PCA to 64 dims, 50 iterations.

Override any field on the command line, e.g.
  --config.method.pca_dim=100 --config.method.max_iters=100 --config.method.dim=40
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "small", "large")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the MLAPG config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "mlapg"
    c.method.pca_dim = 256  # PCA to this many dims first when D is larger (0: never); M is
    #                         [D, D] and every iteration eigendecomposes it.
    c.method.dim = 0  # keep the top dim directions of M in W (0: all of its rank).
    c.method.max_iters = 300  # APG iterations at most (the authors' code: 300).
    c.method.tol = 1e-4  # stop when |F_t - F_t-1| <= tol |F_t-1| (the authors' code: 1e-4).
    c.method.init_step = 256.0  # initial step 1 / L on unit-scale features (authors: 2^8).
    c.method.backtrack_factor = 2.0  # L <- factor * L while the step fails the bound (gamma).
    c.method.max_backtracks = 50  # backtracking tries per iteration at most.
    c.method.log_every = 10  # iterations between lines of metrics.jsonl.
    if arg == "small":
        c.method.max_iters = 50
    elif arg == "large":  # every iteration touches all N^2 pairs on pca_dim dims.
        c.method.pca_dim = 64
        c.method.max_iters = 50
    c.lock()
    return c
