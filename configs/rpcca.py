"""rPCCA (PCCA with an L2 regulariser), linear or kernel, on the synthetic data.

Run:
  python -m experiments.main --config=configs/rpcca.py --workdir=/tmp/rpcca

Variants (``--config=configs/rpcca.py:<arg>``):
  linear   linear rPCCA, L: [dim, D] (the WARCA paper's rPCCA-L; the default).
  chi2     kernel rPCCA with the chi2 kernel on the histogram variant of the
           synthetic data (the WARCA paper's rPCCA-chi2).
  small    a shrunk linear run for smoke tests (2 splits, 60 identities, few steps).
  large    for 7,368 x 2,048 problems: minibatches of 4,096 pairs, 300 steps, step size 100.

Override any field on the command line, e.g.
  --config.method.lam=1e-3 --config.method.learning_rate=0.3 --config.method.kernel=rbf
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("linear", "chi2", "small", "large")


def get_config(arg: str = "linear") -> ml_collections.ConfigDict:
    """Returns the rpcca config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("rpcca", arg, histogram=arg == "chi2", small=arg == "small")
