"""The CUHK03 study's triplet SGD optimiser (its eq. 7, hardest plus random triplets).

Run:
  python -m experiments.main --config=configs/triplet_sgd.py --workdir=/tmp/triplet_sgd

Variants (``--config=configs/triplet_sgd.py:<arg>``):
  default  L: [D, D] from the identity, plain SGD, the study's validation schedule.
  study    the study's own settings (learning rate 1e-3, batch 50, 100 epochs, 100
           validation identities: needs data with more than 100 training identities).
  small    a shrunk run for smoke tests (60 identities, 2 splits, few epochs).
  large    for 7,368 x 2,048 problems: L: [128, D], 20 epochs, 100 validation identities.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "study", "small", "large")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the triplet_sgd config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("triplet_sgd", arg, small=arg == "small")
