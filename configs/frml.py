"""FRML (Lim & Lanckriet, ICML 2014): WARP loss, rank-r Mahalanobis metric, Riemannian SGD.

Run:
  python -m experiments.main --config=configs/frml.py --workdir=/tmp/frml

Variants (``--config=configs/frml.py:<arg>``):
  default  rank 40 metric on the default data.
  small    shrunk data and iterations, for smoke tests.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the frml config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("frml", arg, small=arg == "small")
