"""LFDA (local Fisher discriminant analysis), linear or kernel, on the synthetic data.

Run:
  python -m experiments.main --config=configs/lfda.py --workdir=/tmp/lfda

Variants (``--config=configs/lfda.py:<arg>``):
  linear   linear LFDA, W: [dim, D] (Pedagadi et al., CVPR 2013; the default).
  chi2     kernel LFDA with the chi2 kernel on the histogram variant of the
           synthetic data (the WARCA paper's LFDA-chi2; Xiong et al., ECCV 2014).
  small    a shrunk linear run for smoke tests (2 splits, 60 identities).

Override any field on the command line, e.g.
  --config.method.knn=3 --config.method.reg=1e-2 --config.method.kernel=rbf
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("linear", "chi2", "small")


def get_config(arg: str = "linear") -> ml_collections.ConfigDict:
    """Returns the lfda config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("lfda", arg, histogram=arg == "chi2", small=arg == "small")
