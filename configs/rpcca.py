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
    """Returns the rpcca config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/rpcca.py)."""
    c = defaults.experiment_config(
        "rpcca", arg, histogram=arg == "chi2", small=arg == "small", lock=False
    )
    m = c.method
    # 'none' (linear L) or the kernel of the kernel form (chi2_rbf: the paper's rPCCA-chi2)
    m.kernel = "chi2_rbf" if arg == "chi2" else "none"
    m.dim = 16 if arg == "small" else 40  # D', the output dimension
    m.beta = 3.0  # sharpness of the generalised logistic loss l_beta
    m.lam = 1e-2  # L2 penalty lam ||L||_F^2 (or lam tr(A K A^T)) against the pair losses' sum
    # the step's units: 'curvature' (1 / the largest eigenvalue of the pairs' second moment)
    # or 'features' (the step as it is, on features rescaled to unit mean squared distance)
    m.lr_units = "features" if arg == "large" else "curvature"
    m.learning_rate = 100.0 if arg == "large" else 4.0  # the gradient-descent step
    m.num_iters = {"small": 200, "large": 300}.get(arg, 30000)  # the cap on steps
    m.batch_size = 4096 if arg == "large" else 0  # pairs per step (0: full batch)
    c.lock()
    return c
