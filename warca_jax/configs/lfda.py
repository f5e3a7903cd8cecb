"""LFDA (local Fisher discriminant analysis), linear or kernel, on the synthetic data.

Run:
  python -m warca_jax.main --config=warca_jax/configs/lfda.py --workdir=/tmp/lfda

Variants (``--config=warca_jax/configs/lfda.py:<arg>``):
  linear   linear LFDA, W: [dim, D] (Pedagadi et al., CVPR 2013; the default).
  chi2     kernel LFDA with the chi2 kernel on the histogram variant of the
           synthetic data (the WARCA paper's LFDA-chi2; Xiong et al., ECCV 2014).
  small    a shrunk linear run for smoke tests (2 splits, 60 identities).

Override any field on the command line, e.g.
  --config.method.knn=3 --config.method.reg=1e-2 --config.method.kernel=rbf
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("linear", "chi2", "small")


def get_config(arg: str = "linear") -> ml_collections.ConfigDict:
    """Returns the LFDA config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(histogram=arg == "chi2", small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "lfda"
    c.method.kernel = "none"  # 'none' (linear W) or linear | rbf | chi2 | chi2_rbf | laplacian.
    c.method.kernel_gamma = 0.0  # kernel bandwidth (0: 1 / mean training distance).
    c.method.dim = 40  # output dimension (WARCA paper: 200 Market-1501, 100 VIPeR, 40 others).
    c.method.knn = 7  # neighbour setting the local scale (Sugiyama 2007: 7); clipped to the
    #                   class size - 1 in classes with fewer than knn + 1 images.
    c.method.reg = 0.18  # ridge reg * trace(S_w) / D on the within-class scatter, so that two
    #                      images per identity (S_w singular) still works. 0.18 = Xiong's oLFDA
    #                      (1 - beta) S_w + beta tr(S_w)/D I with beta = 0.15 (lfda.py docstring:
    #                      VIPeR 12.2 -> 21.3 rank-1, synthetic 85.0 -> 87.8, ORL 90.7 -> 89.7).
    c.method.embedding = "weighted"  # eigenvectors scaled by sqrt(eigenvalue) ('weighted',
    #                                  Sugiyama's default), 'orthonormalized' or 'plain'.
    if arg == "chi2":
        # The protocol's chi2 kernel for the paper's three chi2 methods: exp(-gamma chi2(x, y)),
        # gamma = 1 / mean training chi2 distance (kernel_gamma = 0).
        c.method.kernel = "chi2_rbf"
        # Xiong et al.'s kLFDA (the paper's LFDA-chi2 baseline): ridge beta = 0.01 relative to
        # trace / N and raw ('plain') generalised eigenvectors. The weighted embedding lets the
        # few largest eigenvalues (directions near the null space of K L_w K, rank <= N - #ids)
        # dominate: VIPeR 25.5 -> 34.5 rank-1 with 'plain' (lfda.py docstring).
        c.method.reg = 1e-2
        c.method.embedding = "plain"
    elif arg == "small":
        c.method.dim = 16
    c.lock()
    return c
