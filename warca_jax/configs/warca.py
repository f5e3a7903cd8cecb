"""WARCA on the built-in synthetic re-id data (or a user's .npz).

Run:
  python -m warca_jax.main --config=warca_jax/configs/warca.py --workdir=/tmp/warca

Variants (``--config=warca_jax/configs/warca.py:<arg>``):
  linear   primal WARCA, W: [D', D], on real-valued features (the default).
  chi2     kernel WARCA with the chi2-RBF kernel on the histogram variant of
           the synthetic data (the paper's WARCA-chi2).
  kernel   kernel WARCA with the linear kernel (the paper's WARCA-L as the
           authors' release runs it).
  small    a shrunk linear run for smoke tests (few iterations, 2 splits).
  orl      a real run: the 2,580-d colour + LBP descriptor of the ORL faces in
           data/orl_faces of this repository (40 people x 10 images; images 1-5 are camera 0 and
           6-10 camera 1), 10 random splits of 20 training / 20 test people, kernel
           WARCA with the chi2 kernel. Point data.path elsewhere to run another copy.

Override any field on the command line, e.g.
  --config.method.lam=1e-3 --config.method.kernel=rbf --config.data.name=npz
  --config.data.path=features.npz
"""

import os

import ml_collections

from warca_jax.configs import common

# The ORL faces shipped in the repository (data/orl_faces; see data/README.md), wherever
# it is run from.
ORL_PATH = os.path.normpath(
    os.path.join(os.path.dirname(__file__), "..", "..", "data", "orl_faces")
)
VARIANTS = ("linear", "chi2", "kernel", "small", "orl")


def get_config(arg: str = "linear") -> ml_collections.ConfigDict:
    """Returns the WARCA config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(histogram=arg == "chi2", small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "warca"
    c.method.kernel = "none"  # 'none' (primal W) or linear | rbf | chi2 | chi2_rbf | laplacian.
    c.method.kernel_gamma = 0.0  # kernel bandwidth (0: 1 / mean training distance).
    # 'none': the exact N x N kernel; 'nystroem': linear WARCA on the Nystroem features of
    # num_landmarks random training points (an approximation of the kernel, for N too
    # large for an N x N matrix; memory N x num_landmarks).
    c.method.kernel_approx = "none"
    c.method.num_landmarks = 2000  # Nystroem landmarks (kernel_approx='nystroem').
    c.method.dim = 40  # output dimension D' (paper: 200 Market-1501, 100 VIPeR, 40 others).
    # penalty weight lambda (eq. 10-12). 1e-4 in the primal form, 1e-3 in the kernel form:
    # with the margin of 1 against features of unit mean squared distance, W must stretch
    # the projected distances to several margins, and lambda = 1e-2 holds it near
    # orthonormal (on VIPeR's 2,580-d descriptor, D' = 100: negatives at a projected mean
    # squared distance of 1.9, 38% of triplets inside the margin, 17.7 rank-1; at 1e-4:
    # 6.1, 2%, 25.3). benchmarks/bench_real_defaults.py and RESULTS.md ("Defaults on real
    # descriptors") have the measurements on VIPeR, ORL and the synthetic data.
    c.method.lam = 1e-4
    c.method.penalty = "aon"  # 'aon' ||W W^T - I||^2, 'frobenius' ||W||^2 or 'none'.
    c.method.penalty_mode = "coupled"  # penalty before Adam ('coupled') or after ('decoupled').
    c.method.margin = 1.0  # gamma of the hinge, fixed at 1 in the paper.
    c.method.weighting = "harmonic"  # rank weighting L(r): 'harmonic' or 'uniform'.
    c.method.sampler = "exact"  # 'exact': count violators among all candidates;
    #                             'wsabie': draw negatives until one violates, rank (|T|-1)/tries.
    c.method.candidate_pool = 0  # random candidates shared by a step (0: all training points).
    c.method.max_tries = 0  # wsabie: give up after this many tries (0: no cap).
    c.method.batch_size = 512  # pairs per minibatch.
    c.method.num_iters = 2000  # Adam iterations.
    c.method.learning_rate = 1e-2  # Adam step size eta (its peak with schedule='cosine').
    # 'cosine': the step falls from learning_rate to 0 over num_iters; 'constant'.
    c.method.schedule = "cosine"
    # 'msd': features (or the kernel matrix) divided by their mean squared distance between
    # training points, so that any positive multiple of the input learns the same metric
    # (the Metric carries the factor); 'none': the margin of 1 against the raw scale.
    c.method.normalize = "msd"
    c.method.gradient = "closed_form"  # 'closed_form' (eq. 20-24) or 'autodiff'.
    c.method.preconditioned = True  # kernel form: K^-1 preconditioned update (eq. 23-25).
    c.method.log_every = 100  # steps between lines of metrics.jsonl.
    # devices of the training mesh (0: all of jax.devices(), on every host); the features
    # are split by rows over them, the minibatch work and gradient reduced across them.
    c.method.num_devices = 0

    if arg in ("chi2", "kernel", "orl"):
        # The kernel form: 1e-4 over-fits the synthetic histograms (67.3 rank-1 against
        # 74.0 at 1e-3), while VIPeR's chi2-RBF runs are flat from 1e-4 to 1e-3 (36.1, 35.9)
        # and fall at 1e-2 (29.1).
        c.method.lam = 1e-3
    if arg == "chi2":
        c.method.kernel = "chi2_rbf"
    elif arg == "kernel":
        c.method.kernel = "linear"
    elif arg == "orl":
        c.data.name = "orl"
        c.data.path = ORL_PATH
        c.data.descriptor = "color_lbp"
        c.method.kernel = "chi2"
    elif arg == "small":
        c.method.dim = 16
        c.method.batch_size = 128
        c.method.num_iters = 200
        c.method.log_every = 50
    c.lock()
    return c
