"""MMC (Xing et al., NIPS 2002) from labels, as metric-learn's MMC_Supervised, on the
built-in synthetic re-id data (or a .npz).

Run:
  python -m warca_jax.main --config=warca_jax/configs/mmc.py --workdir=/tmp/mmc

Variants (``--config=warca_jax/configs/mmc.py:<arg>``):
  default  the full-matrix form with metric-learn 0.7.0's MMC_Supervised defaults.
  small    shrunk data, fewer tries and the exact projection, for smoke tests.

Every try costs D x D eigendecompositions (one per projection round) and a pass over the
pairs; for D in the thousands, reduce the features first (e.g. PCA).
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the MMC config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "mmc"
    # similar pairs drawn from the labels, and as many dissimilar ones (0: 20 C^2 with C
    # the number of identities, metric-learn's n_constraints=None; capped by the pairs
    # that exist); drawn from the seed.
    c.method.num_constraints = 0
    c.method.max_iter = 100  # tries (steps kept or undone) at most (metric-learn: 100).
    # stop when the relative step alpha falls below tol (metric-learn's MMC_Supervised:
    # 1e-6 on ||alpha M|| / ||A||; 0: run max_iter tries).
    c.method.tol = 1e-6
    # the first step, relative to ||A||_F (metric-learn: 0.1 in absolute units; grown by 5%
    # after each kept step, halved after each undone one, as there).
    c.method.init_step = 0.1
    # 'alternating': the paper's (and metric-learn's) projections onto {f(A) <= 1} and the
    # PSD cone in turn, until f(A) <= 1 + proj_tol (metric-learn: 0.01) or max_proj rounds
    # (metric-learn: 10,000); 'exact': the nearest point of their intersection, by
    # bisection on its one Lagrange multiplier (tens of eigendecompositions, not thousands).
    c.method.projection = "alternating"
    c.method.proj_tol = 0.01
    c.method.max_proj = 10000
    c.method.log_every = 10  # tries per history row.
    c.method.block_size = 8192  # pairs whose distances are formed at once.
    if arg == "small":  # the exact projection: seconds, not a minute, per split
        c.method.max_iter = 30
        c.method.projection = "exact"
    c.lock()
    return c
