"""LFDA (local Fisher discriminant analysis), linear or kernel, on the synthetic data.

Run:
  python -m experiments.main --config=configs/lfda.py --workdir=/tmp/lfda

Variants (``--config=configs/lfda.py:<arg>``):
  linear   linear LFDA, W: [dim, D] (Pedagadi et al., CVPR 2013; the default).
  chi2     kernel LFDA with the chi2 kernel on the histogram variant of the
           synthetic data (the WARCA paper's LFDA-chi2; Xiong et al., ECCV 2014).
  small    a shrunk linear run for smoke tests (2 splits, 60 identities).

Override any field on the command line, e.g.
  --config.method.knn=3 --config.method.reg=1e-2 --config.method.kernel=rbf
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("linear", "chi2", "small")


def get_config(arg: str = "linear") -> ml_collections.ConfigDict:
    """Returns the lfda config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the library's
    (warca_jax/methods/lfda.py)."""
    c = defaults.experiment_config(
        "lfda", arg, histogram=arg == "chi2", small=arg == "small", lock=False
    )
    m = c.method
    # 'none' (linear W) or the kernel of the kernel form: exp(-gamma chi2(x, y)) for chi2
    m.kernel = "chi2_rbf" if arg == "chi2" else "none"
    m.dim = 16 if arg == "small" else 40  # the output dimension
    m.knn = 7  # neighbour setting the local scale (Sugiyama 2007: 7)
    # ridge on the within-class scatter: reg times S_w's mean non-zero eigenvalue ('rank';
    # 0.18: Xiong's oLFDA) or reg * trace / its size ('dims'; 1e-2: Xiong's kLFDA, trace / N)
    m.reg = 1e-2 if arg == "chi2" else 0.18
    m.reg_scale = "dims" if arg == "chi2" else "rank"
    # eigenvectors scaled by sqrt(eigenvalue) ('weighted'), 'orthonormalized' or raw ('plain')
    m.embedding = "plain" if arg == "chi2" else "weighted"
    c.lock()
    return c
