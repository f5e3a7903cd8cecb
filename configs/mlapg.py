"""MLAPG (logistic metric learning by accelerated proximal gradient) on the synthetic data.

Run:
  python -m experiments.main --config=configs/mlapg.py --workdir=/tmp/mlapg

Variants (``--config=configs/mlapg.py:<arg>``):
  default  full-rank Mahalanobis M on the synthetic features (Liao & Li, ICCV 2015).
  small    a shrunk run for smoke tests (2 splits, 60 identities, few iterations).
  large    for 7,368 x 2,048 problems: PCA to 64 dims, 50 iterations.

Override any field on the command line, e.g.
  --config.method.pca_dim=100 --config.method.max_iters=100 --config.method.dim=40
"""

import ml_collections

from warca_jax import defaults

VARIANTS = ("default", "small", "large")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the mlapg config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("mlapg", arg, small=arg == "small")
