"""XQDA (Liao et al., CVPR 2015): cross-view quadratic discriminant analysis.

Run:
  python -m warca_jax.main --config=warca_jax/configs/xqda.py --workdir=/tmp/xqda

Variants (``--config=warca_jax/configs/xqda.py:<arg>``):
  default  the subspace of every generalised eigenvalue > 1 (the paper's choice).
  small    a shrunk run for smoke tests (60 identities, 2 splits).

Cap the subspace with e.g. --config.method.dim=16.
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the XQDA config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "xqda"
    c.method.dim = 0  # cap on the subspace dimension (0: every eigenvalue > 1, as the paper).
    c.method.reg = 1.0  # ridge reg * trace(Sigma_I) / D on Sigma_I: the mean eigenvalue
    #                     (xqda.py docstring; 1e-3 kept 315 noise directions on VIPeR).
    c.lock()
    return c
