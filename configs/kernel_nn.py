"""Nearest neighbours under a kernel's feature-space distance (the study's kernel method).

The distance is sqrt(k(x, x) + k(y, y) - 2 k(x, y)); nothing is learned.

Run:
  python -m experiments.main --config=configs/kernel_nn.py --workdir=/tmp/kernel_nn

Variants (``--config=configs/kernel_nn.py:<arg>``):
  chi2       additive chi2 kernel on the histogram variant of the synthetic data (the
             default; the study's best kernel).
  chi2_rbf   exp(-gamma chi2(x, y)) on the histogram variant.
  rbf        Gaussian kernel exp(-gamma ||x - y||^2) (ranks exactly as Euclidean does).
  laplacian  exp(-gamma ||x - y||_1) (ranks exactly as Manhattan does).
  small      a shrunk chi2 run for smoke tests (60 identities, 2 splits).
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("chi2", "chi2_rbf", "rbf", "laplacian", "small")


def get_config(arg: str = "chi2") -> ml_collections.ConfigDict:
    """Returns the kernel_nn config for variant ``arg``: the settings a reader asks about
    spelled here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/baselines.py)."""
    c = defaults.experiment_config(
        "kernel_nn",
        arg,
        histogram=arg in ("chi2", "chi2_rbf", "small"),
        small=arg == "small",
        lock=False,
    )
    m = c.method
    # linear | rbf | chi2 | chi2_rbf | laplacian (the chi2 family needs non-negative features)
    m.kernel = "chi2" if arg == "small" else arg
    m.kernel_gamma = 0.0  # bandwidth (0: 1 / mean training distance of the kernel's distance)
    c.lock()
    return c
