"""Test rank-1 against training time of WARCA and rPCCA (paper section 4.5, Fig. 3).

Run:
  python -m experiments.training_time --config=configs/training_time.py \\
      --workdir=/tmp/tt

Variants (``--config=configs/training_time.py:<arg>``):
  synthetic  the built-in synthetic data (200 identities x 4 images, 64-d), 3 splits,
             linear WARCA (2,000 Adam steps) and linear rPCCA (1,000 gradient steps), test
             rank-1 every 100 and 50 steps (the default).
  small      a shrunk run for tests: 60 identities, 2 splits, 16-d maps, 100 steps each.
  viper      Fig. 3 on VIPeR from its images (give the folder holding cam_a/ and cam_b/
             with --config.data.path): the 2,580-d colour + LBP descriptor and the kernel
             forms of Table 2, WARCA-chi2 (configs/warca.py:chi2) against rPCCA-chi2
             (configs/rpcca.py:chi2), D' = 100, 3 of the loader's 316 / 316 splits.
  cuhk01     the same on CUHK01 (the folder holding campus/; the loader's protocol,
             D' = 40).

Both methods train on the same splits (split s with seed ``seed + s``). After every
``log_every`` steps the metric learned so far is evaluated on the split's query/gallery;
that evaluation is not counted as training time. Every method's ``num_iters`` must be a
multiple of its ``log_every`` so that all splits are sampled at the same steps.

The sections ``warca`` and ``rpcca`` are the ``method`` sections of configs/warca.py and
configs/rpcca.py (their fields are documented there); switch either to its kernel form
with e.g. --config.warca.kernel=chi2_rbf --config.rpcca.kernel=chi2
--config.data.synthetic.histogram=True.

Override any field on the command line, e.g.
  --config.warca.num_iters=4000 --config.rpcca.learning_rate=3.0 --config.data.num_splits=5
"""

import ml_collections

from warca_jax.methods import checks
from warca_jax.runs import defaults

VARIANTS = ("synthetic", "small", "viper", "cuhk01")
DIMS = {"viper": 100, "cuhk01": 40}  # the paper's output dimension (section 4.2)


def get_config(arg: str = "synthetic") -> ml_collections.ConfigDict:
    """Returns the training-time config for variant ``arg``."""
    checks.check_variant("the training-time study", arg, VARIANTS)
    small = arg == "small"
    # seed (split s is trained with seed + s), data, eval and progress: warca_jax/runs/defaults.py.
    c = defaults.base_config(small=small)
    c.data.num_splits = 2 if small else 3  # splits both methods are trained on.

    if arg in DIMS:  # the kernel forms of Table 2 on the images' colour + LBP histograms
        c.data.name = arg
        c.data.path = ""  # the dataset's folder: --config.data.path
        c.data.descriptor = "color_lbp"
        c.warca = defaults.method_config("warca:chi2")
        c.rpcca = defaults.method_config("rpcca:chi2")
        c.warca.dim = c.rpcca.dim = DIMS[arg]
        c.rpcca.log_every = 50
        # a fixed number of steps, so that every split is sampled at the same steps: the
        # 1,000 of the figure in docs/studies.md (rPCCA's default trains on to convergence,
        # up to 30,000; set num_iters to follow it further)
        c.rpcca.num_iters, c.rpcca.tol = 1000, 0.0
        c.eval.baseline = True
        c.lock()
        return c
    # WARCA's method section (configs/warca.py): linear, 2,000 Adam steps, rank-1 sampled
    # every log_every = 100 steps.
    c.warca = defaults.method_config("warca:small" if small else "warca:linear")
    # rPCCA's method section (configs/rpcca.py): linear, full-batch gradient descent,
    # 1,000 steps, rank-1 sampled every log_every = 50 steps.
    c.rpcca = defaults.method_config("rpcca:small" if small else "rpcca:linear")
    c.rpcca.num_iters, c.rpcca.tol = 1000, 0.0  # fixed steps: every split sampled alike
    if small:
        c.warca.num_iters = c.rpcca.num_iters = 100
        c.warca.log_every = c.rpcca.log_every = 20
    else:
        c.rpcca.log_every = 50
    c.eval.baseline = True  # also record Euclidean rank-1 on each split (a flat reference).
    c.lock()
    return c
