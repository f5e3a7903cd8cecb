"""XQDA (Liao et al., CVPR 2015): cross-view quadratic discriminant analysis.

Run:
  python -m experiments.main --config=configs/xqda.py --workdir=/tmp/xqda

Variants (``--config=configs/xqda.py:<arg>``):
  default  the subspace of every generalised eigenvalue > 1 (the paper's choice).
  small    a shrunk run for smoke tests (60 identities, 2 splits).

Cap the subspace with e.g. --config.method.dim=16.
"""

import ml_collections

from warca_jax import defaults

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the xqda config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("xqda", arg, small=arg == "small")
