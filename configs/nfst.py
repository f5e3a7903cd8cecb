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
    """Returns the nfst config for variant ``arg``: the library's defaults on the data."""
    if arg == "lomo":
        c = defaults.experiment_config("nfst", "rbf", lock=False)
        c.data.descriptor = "lomo"
        c.lock()
        return c
    return defaults.experiment_config("nfst", arg, histogram=arg == "chi2")
