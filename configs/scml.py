"""SCML (Shi, Bellet & Sha, AAAI 2014): sparse non-negative weights on rank-one LDA bases.

Run:
  python -m experiments.main --config=configs/scml.py --workdir=/tmp/scml

Variants (``--config=configs/scml.py:<arg>``):
  default  metric-learn 0.7.0's SCML_Supervised defaults: triplets from 3 same-label and
           10 other-label nearest neighbours, 'lda' basis of min(20 D, 2 N r - 1) bases,
           beta 1e-5, gamma 5e-3, 10,000 steps of 10 triplets, F checked every 500.
  small    a shrunk run for smoke tests (60 identities, 2 splits, 2,000 steps).

The triplets are every (anchor, genuine, impostor) combination, as metric-learn's
generate_knntriplets (warca_jax/methods/constraints.py); the basis's k-means and the
minibatches are drawn from the seed: same seed, same metric.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the scml config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/scml.py)."""
    c = defaults.experiment_config("scml", arg, small=arg == "small", lock=False)
    m = c.method
    m.k_genuine = 3  # same-label nearest neighbours per anchor
    m.k_impostor = 10  # other-label nearest neighbours per anchor
    m.n_basis = 0  # rank-one bases of the 'lda' basis (0: min(20 D, 2 N r - 1))
    m.beta = 1e-5  # weight of ||w||_1
    m.gamma = 5e-3  # RDA-AdaGrad's gamma, the inverse step scale
    m.max_iter = 2000 if arg == "small" else 10000  # stochastic steps
    m.batch_size = 10  # triplets per step
    c.lock()
    return c
