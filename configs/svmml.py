"""SVMML (Li et al., CVPR 2013): locally-adaptive decision functions on PCA-reduced features.

Run:
  python -m experiments.main --config=configs/svmml.py --workdir=/tmp/svmml

Variants (``--config=configs/svmml.py:<arg>``):
  default  95% of the variance kept by PCA, as the WARCA paper did.
  small    shrunk data and iterations, for smoke tests.
  large    for 7,368 x 2,048 problems: PCA to 256 dims, 3 negatives per positive, 200 steps.
"""

import ml_collections

from warca_jax import defaults

VARIANTS = ("default", "small", "large")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the svmml config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("svmml", arg, small=arg == "small")
