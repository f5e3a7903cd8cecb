"""The CUHK03 study's pairwise SGD optimiser (its eq. 6).

Run:
  python -m experiments.main --config=configs/pairwise_sgd.py --workdir=/tmp/pairwise_sgd

Variants (``--config=configs/pairwise_sgd.py:<arg>``):
  default  L: [D, D] from the identity, plain SGD, the study's validation schedule.
  study    the study's own settings (learning rate 1e-3, batch 50, 100 epochs, 100
           validation identities: needs data with more than 100 training identities).
  small    a shrunk run for smoke tests (60 identities, 2 splits, few epochs).
  large    for 7,368 x 2,048 problems: L: [128, D], 20 epochs, step 1e-4, 100 validation identities.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "study", "small", "large")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the pairwise_sgd config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("pairwise_sgd", arg, small=arg == "small")
