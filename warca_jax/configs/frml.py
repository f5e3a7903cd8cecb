"""FRML (Lim & Lanckriet, ICML 2014): WARP loss, rank-r Mahalanobis metric, Riemannian SGD.

Run:
  python -m warca_jax.main --config=warca_jax/configs/frml.py --workdir=/tmp/frml

Variants (``--config=warca_jax/configs/frml.py:<arg>``):
  default  rank 40 metric on the default data.
  small    shrunk data and iterations, for smoke tests.
"""

import ml_collections

from warca_jax.configs import common


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the FRML config for variant ``arg``."""
    if arg not in ("default", "small"):
        raise ValueError(f"unknown variant {arg!r}; expected default or small")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "frml"
    c.method.dim = 40  # rank r of M = U diag(s) U^T (the output dimension of W).
    c.method.lam = 1e-2  # weight of the L2 regulariser lam/2 ||M||_F^2 (0: none).
    c.method.margin = 1.0  # gamma of the hinge, in squared Mahalanobis distance.
    c.method.weighting = "harmonic"  # WARP rank weighting L(r): 'harmonic' or 'uniform'.
    c.method.sampler = "exact"  # violator rank: 'exact' count or 'wsabie' estimate.
    c.method.candidate_pool = 0  # random candidates shared by a step (0: all training points).
    c.method.batch_size = 256  # pairs per minibatch.
    c.method.num_iters = 500  # Riemannian SGD steps.
    c.method.learning_rate = 3e-3  # constant step size eta (scale with 1 / ||x_i - x_j||^2).
    c.method.log_every = 100  # steps between history rows.
    if arg == "small":
        c.method.dim = 16
        c.method.batch_size = 128
        c.method.num_iters = 200
        c.method.log_every = 50
    c.lock()
    return c
