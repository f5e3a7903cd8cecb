"""SVMML (Li et al., CVPR 2013): locally-adaptive decision functions on PCA-reduced features.

Run:
  python -m experiments.main --config=configs/svmml.py --workdir=/tmp/svmml

Variants (``--config=configs/svmml.py:<arg>``):
  default  95% of the variance kept by PCA, as the WARCA paper did.
  small    shrunk data and iterations, for smoke tests.
  large    for 7,368 x 2,048 problems: PCA to 256 dims, 3 negatives per positive, 200 steps.
  released the trainer the LADF authors released, which the WARCA paper ran (its Table 2
           SVMML column): logistic loss on all pairs from the Euclidean start A = B = I,
           no whitening, no PSD constraint, no c term, lam 1e-6, stopped after a fixed
           number of nonlinear-CG iterations (warca_jax/methods/svmml_released.py).
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "small", "large", "released")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the svmml config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("svmml", arg, small=arg == "small")
