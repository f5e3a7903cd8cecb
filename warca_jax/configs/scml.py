"""SCML (Shi, Bellet & Sha, AAAI 2014): sparse non-negative weights on rank-one LDA bases.

Run:
  python -m warca_jax.main --config=warca_jax/configs/scml.py --workdir=/tmp/scml

Variants (``--config=warca_jax/configs/scml.py:<arg>``):
  default  metric-learn 0.7.0's SCML_Supervised defaults: triplets from 3 same-label and
           10 other-label nearest neighbours, 'lda' basis of min(20 D, 2 N r - 1) bases,
           beta 1e-5, gamma 5e-3, 10,000 steps of 10 triplets, F checked every 500.
  small    a shrunk run for smoke tests (60 identities, 2 splits, 2,000 steps).

The triplets are every (anchor, genuine, impostor) combination, as metric-learn's
generate_knntriplets (warca_jax/methods/_constraints.py); the basis's k-means and the
minibatches are drawn from the seed: same seed, same metric.
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the SCML config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "scml"
    c.method.k_genuine = 3  # same-label nearest neighbours per anchor (metric-learn: 3).
    c.method.k_impostor = 10  # other-label nearest neighbours per anchor (metric-learn: 10).
    # rank-one bases of the 'lda' basis (0: metric-learn's default min(20 D, 2 N r - 1),
    # r = min(#classes - 1, D)); fewer when local LDAs have fewer directions.
    c.method.n_basis = 0
    c.method.kmeans_iters = 20  # Lloyd iterations of the basis's k-means (metric-learn:
    #                             scikit-learn's KMeans, best of n_init=10 runs).
    c.method.beta = 1e-5  # weight of ||w||_1 (metric-learn: beta=1e-5).
    c.method.gamma = 5e-3  # RDA-AdaGrad's gamma, the inverse step scale (metric-learn: 5e-3).
    c.method.max_iter = 10000  # stochastic steps (metric-learn's SCML_Supervised: 10000).
    c.method.output_iter = 500  # steps between evaluations of F on all triplets (one
    #                             history row; the best w is kept; metric-learn: 500).
    c.method.batch_size = 10  # triplets per step (metric-learn: 10).
    # stop early when the best F improved by at most tol (relative) over the last
    # output_iter steps (0: run max_iter steps, as metric-learn).
    c.method.tol = 0.0
    if arg == "small":
        c.method.max_iter = 2000
    c.lock()
    return c
