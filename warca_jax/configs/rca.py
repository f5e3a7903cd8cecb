"""RCA (Bar-Hillel et al., JMLR 2005): whitening by the within-chunklet covariance.

Run:
  python -m warca_jax.main --config=warca_jax/configs/rca.py --workdir=/tmp/rca

Variants (``--config=warca_jax/configs/rca.py:<arg>``):
  default  metric-learn's RCA_Supervised defaults: 100 chunklets of 2 same-label samples,
           full-rank M = C'^{-1}.
  reduced  the paper's RCA with dimensionality reduction: W: [40, D] (constrained Fisher
           discriminant, then whitening in that subspace).
  small    a shrunk run for smoke tests (60 identities, 2 splits; 40 chunklets, since the
           30 training identities x 4 images allow at most 60 pairs).

The chunklets are drawn from the seed as metric-learn's RCA_Supervised draws them
(warca_jax/methods/_constraints.py); a data set that cannot supply ``n_chunks`` of them
is refused with the number it allows.
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "reduced", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the RCA config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "rca"
    c.method.n_chunks = 100  # chunklets drawn from the labels (metric-learn: n_chunks=100).
    c.method.chunk_size = 2  # same-label samples per chunklet (metric-learn: chunk_size=2).
    # output dimension (0: D, W = C'^{-1/2}, metric-learn's n_components=None); < D: the
    # dim directions of largest total / within-chunklet variance (paper, section 2.3).
    c.method.dim = 0
    # ridge reg * trace(C) / D on the within-chunklet covariance C (and on the total one
    # when dim < D), so that M = C'^{-1} exists when C is singular (D above the chunklets'
    # degrees of freedom, or a constant feature), where metric-learn returns NaN.
    c.method.reg = 1e-3
    if arg == "reduced":
        c.method.dim = 40
    elif arg == "small":
        c.method.n_chunks = 40
    c.lock()
    return c
