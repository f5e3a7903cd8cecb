"""NCA (Goldberger et al., NIPS 2004) on the built-in synthetic re-id data (or a .npz).

Run:
  python -m experiments.main --config=configs/nca.py --workdir=/tmp/nca

Variants (``--config=configs/nca.py:<arg>``):
  default  full-rank L (metric-learn's n_components=None) on the default data.
  small    shrunk data and iterations, for smoke tests.
  large    for 7,368 x 2,048 problems: L: [128, D] from PCA.

metric-learn 0.7.0 runs at most 100 L-BFGS-B iterations (max_iter=100, tol=None); here
optax's L-BFGS takes at most as many on the same objective (or Adam, optimizer='adam'),
stopping early when the loss stopped changing (python -m benchmarks.bench_vs_metric_learn
--learner=nca compares the two).
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "small", "large")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the nca config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/nca.py)."""
    c = defaults.experiment_config("nca", arg, small=arg == "small", lock=False)
    m = c.method
    # output dimension D' of L (0: D, a square L at the identity; < D: top principal dirs)
    m.dim = 128 if arg == "large" else 0
    m.optimizer = "lbfgs"  # 'lbfgs' (as metric-learn's L-BFGS-B) or 'adam'
    m.num_iters = 30 if arg == "small" else 100  # full-batch steps at most
    m.learning_rate = 1e-2  # Adam's first step
    m.tol = 1e-7  # stop when the loss's relative change is at most tol (0: never)
    c.lock()
    return c
