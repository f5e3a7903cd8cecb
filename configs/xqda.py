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
    """Returns the xqda config for variant ``arg``: the library's defaults on the data."""
    if arg == "lomo":
        c = defaults.experiment_config("xqda", "default", lock=False)
        c.data.descriptor = "lomo"
        c.method.ridge, c.method.reg, c.method.pairs = "absolute", 1e-3, "cross_camera"
        c.lock()
        return c
    return defaults.experiment_config("xqda", arg, small=arg == "small")
