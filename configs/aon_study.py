"""The AON vs Frobenius study (paper section 4.4, Fig. 2) with linear WARCA.

Run:
  python -m experiments.aon_study --config=configs/aon_study.py \\
      --workdir=/tmp/aon_study

Variants (``--config=configs/aon_study.py:<arg>``):
  synthetic  the built-in synthetic data (200 identities x 4 images, 64-d, identity in an
             8-d subspace), 3 splits, the paper's lambda grid 1e-8..1 and eta grid
             1e-3..1 (the default; a few minutes on 2 CPU cores).
  small      a shrunk run for tests and the notebook: 60 identities, 2 splits, 3 lambdas,
             2 step sizes, 100 iterations of a 16-d map (well under 30 s).
  viper      the paper's Fig. 2: VIPeR from its images (give the folder holding cam_a/ and
             cam_b/ with --config.data.path), the LOMO descriptor, WARCA as
             the kernel form with the linear kernel (D' = 100, which is linear WARCA
             restricted to the span of the training images, the paper's form), 3 of the
             loader's 316 / 316 splits, the paper's lambda and eta grids.
  cuhk01     the same on CUHK01 (the folder holding campus/; D' = 40, the loader's
             protocol, 3 splits), for panel (e).
  orl        the same on the ORL faces of this repository (data/orl_faces; D' = 40,
             3 splits), for panel (e).

Panel (e), rank-1 on several datasets: run the studies of the other datasets first, each
in its own workdir, and name those workdirs in study.compare_workdirs, e.g.
  python -m experiments.aon_study --config=configs/aon_study.py:orl --workdir=/tmp/aon_orl
  python -m experiments.aon_study --config=configs/aon_study.py:viper \\
      --workdir=/tmp/aon_viper --config.data.path=PATH/VIPeR \\
      --config.study.compare_workdirs="('/tmp/aon_orl',)"

For every penalty in ``study.penalties``, every lambda in ``study.lams`` and every split,
linear WARCA (the ``method`` section, configs/warca.py) is trained at the step size
``method.learning_rate``; then for every eta in ``study.etas`` at the penalty's best
lambda (or at ``study.eta_lam``). Only ``penalty``, ``lam`` and ``learning_rate`` change
between runs, so the runs of one penalty share one compiled training program.

Why these data: the synthetic identity lives in 8 of the 64 input dimensions while the
learned map has 40 output rows (configs/warca.py's default), so most rows of W get no
support from the ranking loss; how a penalty treats those rows is exactly what the
condition number of W shows (AON keeps them orthonormal, Frobenius shrinks them).
What the synthetic data show (default variant): as lambda grows Frobenius drives the condition
number up by orders of magnitude while AON drives it to about 1, as in the paper's Fig. 2a;
but the rows Frobenius shrinks carry no identity here, so its rank-1 does not fall (it
rises slightly), unlike the paper's Fig. 2b on VIPeR. AON's robustness to the step size
(Fig. 2c) does show: at eta = 1 Frobenius at its best lambda loses most of its rank-1.
Point ``data`` at real features (e.g. --config.data.name=npz --config.data.path=f.npz, or
--config.data.name=orl --config.data.path=<orl_faces folder>) to run the study on them.

Override any field on the command line, e.g.
  --config.study.lams='(1e-6,1e-3,1.0)' --config.study.eta_lam=1e-3
  --config.data.num_splits=5 --config.method.num_iters=2000
"""

import os

import ml_collections
from ml_collections import config_dict

from warca_jax.methods import checks
from warca_jax.runs import defaults

# The ORL faces shipped in the repository (data/orl_faces; see data/README.md).
ORL_PATH = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "data", "orl_faces"))
VARIANTS = ("synthetic", "small", "viper", "cuhk01", "orl")
REAL = {"viper": (100, 3), "cuhk01": (40, 3), "orl": (40, 3)}  # D' (section 4.2), splits


def get_config(arg: str = "synthetic") -> ml_collections.ConfigDict:
    """Returns the AON-study config for variant ``arg``."""
    checks.check_variant("the AON study", arg, VARIANTS)
    small = arg == "small"
    # seed (split s is trained with seed + s), data, eval and progress: warca_jax/runs/defaults.py.
    c = defaults.base_config(small=small)
    c.data.num_splits = 2 if small else 3  # splits the study averages over.
    if arg in REAL:
        return _real(c, arg)

    # Linear WARCA as configs/warca.py documents it, with 1,000 Adam iterations (rank-1 on
    # the synthetic data is within a point of the 2,000-iteration value) so that the 72
    # runs of the default grid take a few minutes. penalty, lam and learning_rate are set
    # per run by the study; the values here are the defaults of a single run.
    method_variant = "small" if small else "linear"
    c.method = defaults.method_config(f"warca:{method_variant}")
    c.method.num_iters = 100 if small else 1000
    if small:  # the program of configs/training_time.py:small's WARCA: compiled once in tests
        c.method.log_every = 20

    c.study = ml_collections.ConfigDict()
    # Penalties compared (each one of 'aon', 'frobenius', 'none').
    c.study.penalties = ("aon", "frobenius")
    # Lambda grid of the sweep at eta = method.learning_rate (paper: 1e-8, 1e-7, ..., 1).
    c.study.lams = (
        (1e-6, 1e-2, 1.0) if small else (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    )
    # Step-size grid of the eta sweep (paper Fig. 2c: 1e-3 .. 1).
    c.study.etas = (1e-2, 1e-1) if small else (1e-3, 1e-2, 1e-1, 1.0)
    # Lambda of the eta sweep. None: each penalty at its own best lambda of the lambda
    # sweep (highest mean test rank-1 over splits, the smaller lambda on a tie), as the
    # paper's Fig. 2c; a number: both penalties at that lambda.
    c.study.eta_lam = config_dict.placeholder(float)
    # Ranks kept in the JSON files (the CMC curves).
    c.study.cmc_ranks = 100

    c.eval.baseline = True  # also report Euclidean rank-1 on each split (results table).
    c.study.compare_workdirs = ()  # finished studies whose datasets join panel (e).
    c.lock()
    return c


def _real(c: ml_collections.ConfigDict, arg: str) -> ml_collections.ConfigDict:
    """The study on a real dataset's LOMO descriptors (variants viper, cuhk01, orl)."""
    dim, splits = REAL[arg]
    c.data.name = arg
    c.data.path = ORL_PATH if arg == "orl" else ""  # VIPeR, CUHK01: --config.data.path
    c.data.descriptor = "lomo"
    c.data.num_splits = splits
    # the kernel form with the linear kernel (linear WARCA in the training images' span).
    c.method = defaults.method_config("warca:kernel")
    c.method.dim = dim
    c.study = ml_collections.ConfigDict()
    c.study.penalties = ("aon", "frobenius")
    c.study.lams = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    c.study.etas = (1e-3, 1e-2, 1e-1, 1.0)
    c.study.eta_lam = config_dict.placeholder(float)
    c.study.cmc_ranks = 100
    c.study.compare_workdirs = ()
    c.eval.baseline = True
    c.lock()
    return c
