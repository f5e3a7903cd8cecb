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
    """Returns the mmc config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("mmc", arg, small=arg == "small")
