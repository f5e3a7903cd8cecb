"""XQDA (Liao et al., CVPR 2015): cross-view quadratic discriminant analysis.

Run:
  python -m experiments.main --config=configs/xqda.py --workdir=/tmp/xqda

Variants (``--config=configs/xqda.py:<arg>``):
  default  the subspace of every generalised eigenvalue > 1 (the paper's choice).
  small    a shrunk run for smoke tests (60 identities, 2 splits).
  lomo     the original's settings on the LOMO descriptor (``data.descriptor=lomo``): a ridge
           of 0.001 on Sigma_I (``method.ridge='absolute'``, for the L2-normalised
           descriptor; the default's relative ridge was chosen on the colour + LBP one) and
           the pairs of two cameras. Give the images with e.g. --config.data.name=viper
           --config.data.path=PATH/VIPeR (benchmarks/RESULTS.md has the table, from the
           retired bench_table3.py).

Cap the subspace with e.g. --config.method.dim=16.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "small", "lomo")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the xqda config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for the variants both have, every other field
    the library's (warca_jax/methods/xqda.py)."""
    base = {"lomo": "default"}.get(arg, arg)  # the library's variant
    c = defaults.experiment_config("xqda", base, small=arg == "small", lock=False)
    m = c.method
    m.dim = 0  # cap on the subspace dimension (0: every eigenvalue > 1, as the paper)
    m.reg = 1e-3 if arg == "lomo" else 1.0  # the ridge on Sigma_I
    # "relative": the ridge is reg * trace(Sigma_I) / D; "absolute": reg itself (the original's)
    m.ridge = "absolute" if arg == "lomo" else "relative"
    # "all": every pair; "cross_camera": pairs of two cameras (the original's)
    m.pairs = "cross_camera" if arg == "lomo" else "all"
    m.basis = "generalized"  # the paper's eq. 14-15; "svd": the original code's
    if arg == "lomo":
        c.data.descriptor = "lomo"
    c.lock()
    return c
