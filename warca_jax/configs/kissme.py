"""KISSME (Koestinger et al., CVPR 2012): M = inv(C_same) - inv(C_diff) after PCA.

Run:
  python -m warca_jax.main --config=warca_jax/configs/kissme.py --workdir=/tmp/kissme

Variants (``--config=warca_jax/configs/kissme.py:<arg>``):
  default  PCA to 95% of the variance, every negative pair (closed form).
  sampled  C_diff from 10,000 random different-identity pairs, drawn from the seed.
  small    a shrunk run for smoke tests (60 identities, 2 splits).
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "sampled", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the KISSME config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "kissme"
    c.method.pca_variance = 0.95  # fraction of variance PCA keeps (the paper's setting).
    c.method.pca_dim = 0  # cap on the PCA dimension (0: none).
    c.method.num_negative_pairs = 0  # different-identity pairs sampled for C_diff (0: all).
    c.method.reg = 1e-6  # ridge reg * trace / D on C_same and C_diff (a warning if it matters).
    if arg == "sampled":
        c.method.num_negative_pairs = 10_000
    c.lock()
    return c
