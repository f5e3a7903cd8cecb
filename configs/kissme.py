"""KISSME (Koestinger et al., CVPR 2012): M = inv(C_same) - inv(C_diff) after PCA.

Run:
  python -m experiments.main --config=configs/kissme.py --workdir=/tmp/kissme

Variants (``--config=configs/kissme.py:<arg>``):
  default  PCA to 95% of the variance, every negative pair (closed form).
  sampled  C_diff from 10,000 random different-identity pairs, drawn from the seed.
  small    a shrunk run for smoke tests (60 identities, 2 splits).
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "sampled", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the kissme config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("kissme", arg, small=arg == "small")
