"""FRML (Lim & Lanckriet, ICML 2014): WARP loss, rank-r Mahalanobis metric, Riemannian SGD.

Run:
  python -m experiments.main --config=configs/frml.py --workdir=/tmp/frml

Variants (``--config=configs/frml.py:<arg>``):
  default  rank 40 metric on the default data.
  small    shrunk data and iterations, for smoke tests.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the frml config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the library's
    (warca_jax/methods/frml.py)."""
    c = defaults.experiment_config("frml", arg, small=arg == "small", lock=False)
    m = c.method
    m.dim = 16 if arg == "small" else 40  # rank r of M = U diag(s) U^T (W's output dimension)
    m.lam = 1e-2  # weight of the L2 regulariser lam/2 ||M||_F^2 (0: none)
    m.margin = 1.0  # gamma of the hinge, in squared Mahalanobis distance
    m.weighting = "harmonic"  # WARP rank weighting L(r): 'harmonic' or 'uniform'
    m.learning_rate = 3e-3  # constant step size eta of the Riemannian SGD
    m.num_iters = 200 if arg == "small" else 500  # Riemannian SGD steps
    m.batch_size = 128 if arg == "small" else 256  # pairs per minibatch
    c.lock()
    return c
