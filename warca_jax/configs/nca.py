"""NCA (Goldberger et al., NIPS 2004) on the built-in synthetic re-id data (or a .npz).

Run:
  python -m warca_jax.main --config=warca_jax/configs/nca.py --workdir=/tmp/nca

Variants (``--config=warca_jax/configs/nca.py:<arg>``):
  default  full-rank L (metric-learn's n_components=None) on the default data.
  small    shrunk data and iterations, for smoke tests.
  large    for 7,368 x 2,048 problems: L: [128, D] from PCA.

metric-learn 0.7.0 runs at most 100 L-BFGS-B iterations (max_iter=100, tol=None); here
optax's L-BFGS takes at most as many on the same objective (or Adam, optimizer='adam'),
stopping early when the loss stopped changing (benchmarks/bench_nca_vs_metric_learn.py
compares the two).
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "small", "large")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the NCA config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "nca"
    # output dimension D' of L (0: D, a square L initialised at the identity, as
    # metric-learn's n_components=None; < D: the top D' principal directions).
    c.method.dim = 0
    # 'lbfgs': L-BFGS (memory 10) with a zoom line search, as metric-learn's L-BFGS-B;
    # 'adam': Adam at learning_rate (raise num_iters: Adam stalls on NCA's plateaus sooner
    # and needs some hundreds of steps; see benchmarks/bench_nca_vs_metric_learn.py).
    c.method.optimizer = "lbfgs"
    c.method.num_iters = 100  # full-batch steps at most (metric-learn's max_iter=100).
    c.method.learning_rate = 1e-2  # Adam's first step (L starts at the identity: entries ~1).
    # Adam's step: 'cosine' falls from learning_rate to 0 over num_iters, so that the last
    # iterate settles; 'constant' keeps learning_rate. (L-BFGS's step is its line search's.)
    c.method.schedule = "cosine"
    # stop early when the loss's relative change over the last tol_window logged rows is at
    # most tol (0: run all num_iters steps); the last history row says why training stopped.
    # 0: NCA's objective has long flat stretches that L-BFGS leaves again (on digits: no
    # change from step 20 to 90, then +0.2%), so the default runs all num_iters steps;
    # e.g. 1e-7 (float32 round-off of a loss of size 1) stops on a flat stretch.
    c.method.tol = 0.0
    c.method.tol_window = 2  # logged rows (of log_every steps) the change is taken over.
    c.method.log_every = 10  # steps per history row (one jitted chunk).
    c.method.block_size = 512  # rows of the [block, N] softmax formed at once.
    if arg == "small":
        c.method.num_iters = 30
    elif arg == "large":  # L: [128, D] from PCA, so each step costs N D 128, not N D^2.
        c.method.dim = 128
    c.lock()
    return c
