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
    """Returns the nca config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("nca", arg, small=arg == "small")
