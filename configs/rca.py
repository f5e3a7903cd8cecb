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
    """Returns the rca config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("rca", arg, small=arg == "small")
