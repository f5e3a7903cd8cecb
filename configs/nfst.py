"""NFST (the null Foley-Sammon transform; Zhang, Xiang and Gong, CVPR 2016), kernel or linear.

Run:
  python -m experiments.main --config=configs/nfst.py --workdir=/tmp/nfst

Variants (``--config=configs/nfst.py:<arg>``):
  rbf      kernel NFST with the RBF kernel, its bandwidth from the data (the authors'
           form; the default).
  linear   the linear form, W: [c - 1, D]; it needs fewer training images than features
           plus identities (the small-sample case), which the built-in data are not, so
           give it real images, e.g. --config.data.name=viper --config.data.path=PATH/VIPeR.
  chi2     kernel NFST with the chi2-RBF kernel on the histogram variant of the
           synthetic data (the kernel of the WARCA paper's chi2 methods).
  lomo     kernel NFST (RBF) on the LOMO descriptor (``data.descriptor=lomo``), the
           authors' VIPeR setting; give the images with e.g. --config.data.name=viper
           --config.data.path=PATH/VIPeR.

The output dimension is the null space's (c - 1 for c training identities), not a setting.
Override a field on the command line, e.g. --config.method.kernel=chi2_rbf
--config.method.kernel_gamma=0.5.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("rbf", "linear", "chi2", "lomo")


def get_config(arg: str = "rbf") -> ml_collections.ConfigDict:
    """Returns the nfst config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for the variants both have, every other field
    the library's (warca_jax/methods/nfst.py)."""
    base = {"lomo": "rbf"}.get(arg, arg)  # the library's variant
    c = defaults.experiment_config("nfst", base, histogram=arg == "chi2", lock=False)
    m = c.method
    # 'none' (linear W) or linear | rbf | chi2 | chi2_rbf | laplacian
    m.kernel = {"rbf": "rbf", "linear": "none", "chi2": "chi2_rbf", "lomo": "rbf"}[arg]
    m.kernel_gamma = 0.0  # kernel bandwidth (0: 1 / the mean training distance)
    if arg == "lomo":
        c.data.descriptor = "lomo"
    c.lock()
    return c
