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
    """Returns the kissme config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the library's
    (warca_jax/methods/kissme.py)."""
    c = defaults.experiment_config("kissme", arg, small=arg == "small", lock=False)
    m = c.method
    m.pca_variance = 0.95  # fraction of variance PCA keeps (the paper's setting)
    m.pca_dim = 0  # cap on the PCA dimension (0: none)
    # different-identity pairs sampled for C_diff (0: all)
    m.num_negative_pairs = 10_000 if arg == "sampled" else 0
    m.reg = 1e-6  # ridge reg * trace / D on C_same and C_diff
    c.lock()
    return c
