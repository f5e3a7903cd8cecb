"""The CUHK03 study's triplet SGD optimiser (its eq. 7, hardest plus random triplets).

Run:
  python -m warca_jax.main --config=warca_jax/configs/triplet_sgd.py --workdir=/tmp/triplet_sgd

Variants (``--config=warca_jax/configs/triplet_sgd.py:<arg>``):
  default  L: [D, D] from the identity, plain SGD, the study's validation schedule.
  study    the study's own settings (learning rate 1e-3, batch 50, 100 epochs, 100
           validation identities: needs data with more than 100 training identities).
  small    a shrunk run for smoke tests (60 identities, 2 splits, few epochs).
  large    for 7,368 x 2,048 problems: L: [128, D], 20 epochs, 100 validation identities.
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "study", "small", "large")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the triplet_sgd config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "triplet_sgd"
    c.method.dim = 0  # output dimension D' of L (0: D, the study's full A = L^T L).
    c.method.init = "identity"  # 'identity' (the study's A_init = I) or 'orthonormal' (random).
    c.method.margin = 1.0  # margin of the hinge (the study: 1).
    c.method.num_random = 1  # random triplets per anchor beside its hardest one.
    c.method.lam = 0.0  # penalty weight (0: eq. 7 alone, as the study).
    c.method.penalty = "none"  # 'none', 'aon' lam/2 ||L L^T - I||^2 or 'frobenius' lam/2 ||L||^2.
    c.method.learning_rate = 1e-3  # SGD step size (the study: 1e-3).
    c.method.momentum = 0.0  # SGD momentum (0: plain SGD, as the study).
    c.method.batch_size = 50  # triplets per minibatch.
    c.method.num_epochs = 100  # passes over the training triplets (the study: 100).
    c.method.val_every = 10  # epochs between validation costs (the study: 10).
    c.method.lr_decay = 0.5  # learning rate factor when the validation cost rises (halved).
    c.method.num_val_ids = 20  # identities held out for validation (the study: ~100 of 767;
    #                            20 of the 100 training identities of the synthetic data).
    if arg in ("study", "large"):
        c.method.num_val_ids = 100
    if arg == "large":  # L: [128, D]: the AON penalty and each step cost D 128^2, not D^3.
        c.method.dim = 128
        c.method.num_epochs = 20
        c.method.val_every = 5
    elif arg == "small":
        c.method.num_epochs = 20
        c.method.num_val_ids = 6
    c.lock()
    return c
