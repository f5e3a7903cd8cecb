"""RCA (Bar-Hillel et al., JMLR 2005): whitening by the within-chunklet covariance.

Run:
  python -m experiments.main --config=configs/rca.py --workdir=/tmp/rca

Variants (``--config=configs/rca.py:<arg>``):
  default  metric-learn's RCA_Supervised defaults: 100 chunklets of 2 same-label samples,
           full-rank M = C'^{-1}.
  reduced  the paper's RCA with dimensionality reduction: W: [40, D] (constrained Fisher
           discriminant, then whitening in that subspace).
  small    a shrunk run for smoke tests (60 identities, 2 splits; 40 chunklets, since the
           30 training identities x 4 images allow at most 60 pairs).

The chunklets are drawn from the seed as metric-learn's RCA_Supervised draws them
(warca_jax/methods/constraints.py); a data set that cannot supply ``n_chunks`` of them
is refused with the number it allows.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "reduced", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the rca config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/rca.py)."""
    c = defaults.experiment_config("rca", arg, small=arg == "small", lock=False)
    m = c.method
    m.n_chunks = 40 if arg == "small" else 100  # chunklets drawn from the labels
    m.chunk_size = 2  # same-label samples per chunklet
    # output dimension (0: D, W = C'^{-1/2}); < D: the dim directions of largest total /
    # within-chunklet variance (the paper's section 2.3)
    m.dim = 40 if arg == "reduced" else 0
    m.reg = 1e-3  # ridge reg * trace(C) / D on the within-chunklet covariance C
    c.lock()
    return c
