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
    """Returns the triplet_sgd config for variant ``arg``: the settings a reader asks about
    spelled here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/study_sgd.py)."""
    c = defaults.experiment_config("triplet_sgd", arg, small=arg == "small", lock=False)
    m = c.method
    m.dim = 128 if arg == "large" else 0  # D', the output dimension of L (0: D, A = L^T L)
    m.margin = 1.0  # margin of the hinge (the study: 1)
    m.num_random = 1  # random triplets per anchor beside its hardest one
    m.learning_rate = 1e-3  # SGD step size (the study: 1e-3)
    m.batch_size = 50  # triplets per minibatch
    m.num_epochs = 20 if arg in ("small", "large") else 100  # passes over the training samples
    # identities held out for validation (the study: ~100)
    m.num_val_ids = {"study": 100, "large": 100, "small": 6}.get(arg, 20)
    c.lock()
    return c
