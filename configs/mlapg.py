"""MLAPG (logistic metric learning by accelerated proximal gradient) on the synthetic data.

Run:
  python -m experiments.main --config=configs/mlapg.py --workdir=/tmp/mlapg

Variants (``--config=configs/mlapg.py:<arg>``):
  default  full-rank Mahalanobis M on the synthetic features (Liao & Li, ICCV 2015).
  small    a shrunk run for smoke tests (2 splits, 60 identities, few iterations).
  large    for 7,368 x 2,048 problems: PCA to 64 dims, 50 iterations.
  lomo     on the LOMO descriptor (``data.descriptor=lomo``), the original's reduction: the
           whole span of the training images (its QR step; ``pca_dim`` above the number of
           training images), not the default's 256 PCA dims, which cost 16 rank-1 points on
           VIPeR (benchmarks/RESULTS.md). Give the images with e.g. --config.data.name=viper
           --config.data.path=PATH/VIPeR (benchmarks/RESULTS.md has the table, from the
           retired bench_table3.py).

Override any field on the command line, e.g.
  --config.method.pca_dim=100 --config.method.max_iters=100 --config.method.dim=40
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "small", "large", "lomo")
SPAN = 1 << 16  # a pca_dim above any training set's size here: PCA keeps its whole span


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the mlapg config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for the variants both have, every other field
    the library's (warca_jax/methods/mlapg.py)."""
    base = {"lomo": "default"}.get(arg, arg)  # the library's variant
    c = defaults.experiment_config("mlapg", base, small=arg == "small", lock=False)
    m = c.method
    # PCA to this many dims first when D is larger (0: never; SPAN: the whole span)
    m.pca_dim = {"large": 64, "lomo": SPAN}.get(arg, 256)
    m.dim = 0  # keep the top dim directions of M in W (0: all of its rank)
    m.max_iters = 50 if arg in ("small", "large") else 300  # APG iterations at most
    m.tol = 1e-4  # stop when |F_t - F_t-1| <= tol |F_t-1| (the authors' code: 1e-4)
    m.init_step = 256.0  # initial step 1 / L on unit-scale features (authors: 2^8)
    if arg == "lomo":
        c.data.descriptor = "lomo"
    c.lock()
    return c
