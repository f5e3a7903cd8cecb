"""MMC (Xing et al., NIPS 2002) from labels, as metric-learn's MMC_Supervised, on the
built-in synthetic re-id data (or a .npz).

Run:
  python -m experiments.main --config=configs/mmc.py --workdir=/tmp/mmc

Variants (``--config=configs/mmc.py:<arg>``):
  default  the full-matrix form with metric-learn 0.7.0's MMC_Supervised defaults.
  small    shrunk data, fewer tries and the exact projection, for smoke tests.

Every try costs D x D eigendecompositions (one per projection round) and a pass over the
pairs; for D in the thousands, reduce the features first (e.g. PCA).
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the mmc config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/mmc.py)."""
    c = defaults.experiment_config("mmc", arg, small=arg == "small", lock=False)
    m = c.method
    # similar pairs drawn from the labels, and as many dissimilar ones (0: 20 C^2, capped)
    m.num_constraints = 0
    m.max_iter = 30 if arg == "small" else 100  # tries (steps kept or undone) at most
    m.tol = 1e-6  # stop when the relative step alpha falls below tol (metric-learn: 1e-6)
    m.init_step = 0.1  # the first step, relative to ||A||_F (metric-learn: 0.1)
    # 'alternating': the paper's (and metric-learn's) projections in turn; 'exact': the
    # nearest point of their intersection, by bisection
    m.projection = "exact" if arg == "small" else "alternating"
    c.lock()
    return c
