"""WARCA's config and input checks: everything refused before any work."""

from __future__ import annotations

import ml_collections
import numpy as np
from absl import logging

from warca_jax.data import dataset_arrays
from warca_jax.maths import device_mesh, kernels, losses, optim, penalties, sampling
from warca_jax.methods import checks
from warca_jax.methods.warca import inputs

GRADIENTS = ("closed_form", "autodiff")
KERNEL_APPROX = ("none", "nystroem")
NORMALIZE = ("msd", "none")
POSITIVES = ("cross_camera", "all")
SCHEDULES = ("cosine", "constant")
# in the compiled step's ``Hyperparams`` argument, not in the program (``step.Hyperparams``)
TUNABLE = ("lam", "learning_rate")
# The default hyperparameters: the ``method`` section of a config file (configs/warca.py
# starts from them). linear: the primal W: [D', D]; chi2: the kernel form with the chi2-RBF
# kernel (the paper's WARCA-chi2); kernel: the kernel form with the linear kernel (the
# paper's WARCA-L as the authors' release runs it); small: a shrunk primal run.
VARIANTS = ("linear", "chi2", "kernel", "small")


def default_config(variant: str = "linear") -> ml_collections.ConfigDict:
    """The default hyperparameters of ``warca`` for ``variant`` (one of ``VARIANTS``).

    Returned unlocked, so that a config file or a caller can change fields before locking.
    """
    checks.check_variant("warca's default config", variant, VARIANTS)
    m = ml_collections.ConfigDict()
    m.name = "warca"
    m.kernel = "none"  # 'none' (primal W) or linear | rbf | chi2 | chi2_rbf | laplacian.
    m.kernel_gamma = 0.0  # kernel bandwidth (0: 1 / mean training distance).
    # 'none': the exact N x N kernel; 'nystroem': linear WARCA on the Nystroem features of
    # num_landmarks random training points (an approximation of the kernel, for N too
    # large for an N x N matrix; memory N x num_landmarks).
    m.kernel_approx = "none"
    m.num_landmarks = 2000  # Nystroem landmarks (kernel_approx='nystroem').
    m.dim = 40  # output dimension D' (paper: 200 Market-1501, 100 VIPeR, 40 others).
    # penalty weight lambda (eq. 11, 12, 18: lambda / 2 times the penalty of eq. 10), the
    # same in both forms. It must leave W free to stretch far enough to reach the margin of
    # 1, and how far depends on the data (docs/penalty.md). None: chosen per fit from
    # ``lam_grid`` on ``lam_val_fraction`` of the training identities held out (``lam_select``:
    # the weakest penalty within one standard error of the best held-out mAP), at one fit
    # per grid point; a number: exactly that lambda (the grid is not used).
    m.lam = ml_collections.config_dict.placeholder(float)
    m.lam_grid = (1e-5, 1e-4, 1e-3, 1e-2)
    m.lam_val_fraction = 0.2
    m.penalty = "aon"  # 'aon' ||W W^T - I||^2 (eq. 10), 'frobenius' ||W||^2 or 'none'.
    m.penalty_mode = "coupled"  # penalty before Adam ('coupled') or after ('decoupled').
    m.margin = 1.0  # gamma of the hinge, fixed at 1 in the paper.
    m.weighting = "harmonic"  # rank weighting L(r): 'harmonic' or 'uniform'.
    m.sampler = "exact"  # 'exact': count violators among all candidates;
    #                      'wsabie': draw negatives until one violates, rank (|T|-1)/tries.
    m.candidate_pool = 0  # random candidates shared by a step (0: all training points).
    m.max_tries = 0  # wsabie: give up after this many tries (0: no cap).
    # the positive pairs S: 'cross_camera', the same-identity pairs seen by two different
    # cameras, when ``fit`` is given the cameras (all pairs without them); 'all', every
    # same-identity pair (eq. 3).
    m.positives = "cross_camera"
    m.batch_size = 512  # pairs per minibatch.
    m.num_iters = 2000  # Adam iterations.
    m.learning_rate = 1e-2  # Adam step size eta (its peak with schedule='cosine').
    # 'cosine': the step falls from learning_rate to 0 over num_iters; 'constant'.
    m.schedule = "cosine"
    # 'msd': features (or the kernel matrix) divided by their mean squared distance between
    # training points, so that any positive multiple of the input learns the same metric
    # (the Metric carries the factor); 'none': the margin of 1 against the raw scale.
    m.normalize = "msd"
    m.gradient = "closed_form"  # 'closed_form' (eq. 20-24) or 'autodiff'.
    m.preconditioned = True  # kernel form: K^-1 preconditioned update (eq. 23-25).
    m.log_every = 100  # steps between lines of metrics.jsonl.
    # devices of the training mesh (0: all of jax.devices(), on every host); the features
    # are split by rows over them, the minibatch work and gradient reduced across them.
    m.num_devices = 0
    # the initial W: 'pca', the training data's top D' principal axes (kernel principal
    # axes in the kernel form), with W W^T = I; 'random', random orthonormal rows (a
    # Gaussian A in the kernel form). Where the hinge reaches zero on a small training set,
    # the directions it never moved stay as they started; on the whole datasets the two
    # starts tie (measurements: docs/methods.md#what-warca-needs-beyond-the-paper).
    m.init = "pca"
    # the primal form on no more training images than features (N <= D: the 2,580-d colour
    # + LBP descriptor on VIPeR's 632 training images; LOMO's 26,960): W = W' B, B an
    # orthonormal basis [k, D] of the span of the centred training features and W' [D', k]
    # trained on their coordinates. The training distances and the penalty are W's (every
    # difference of training points lies in the span), a step costs about k / D of the
    # full form's, and W has no part outside the span, which the training data never see
    # (Adam's per-coordinate steps put one there in the full form). Used when k >= D'.
    m.span = True

    if variant == "chi2":
        m.kernel = "chi2_rbf"
    elif variant == "kernel":
        m.kernel = "linear"
    elif variant == "small":
        m.dim = 16
        m.batch_size = 128
        m.num_iters = 200
        m.log_every = 50
    return m


def _check_names(cfg) -> None:
    """Raises ValueError for a config naming an option that does not exist (``normalize``
    is checked by ``validate``, before the data it scales)."""
    for field, allowed in (
        ("penalty_mode", optim.PENALTY_MODES),  # the order of optim.make_optimizer's parts
        ("penalty", penalties.PENALTIES),
        ("gradient", GRADIENTS),
        ("sampler", sampling.SAMPLERS),
        ("weighting", losses.WEIGHTINGS),
        ("schedule", SCHEDULES),
        ("kernel_approx", KERNEL_APPROX),
        ("positives", POSITIVES),
        ("init", inputs.INITS),
    ):
        checks.check_choice(cfg, field, allowed)


def at_lam(cfg, lam: float, *, learning_rate: float | None = None) -> ml_collections.ConfigDict:
    """A locked copy of ``cfg`` that trains at penalty weight ``lam`` (and step size
    ``learning_rate``, where given): the one way to make a WARCA config at another lambda
    (the lambda rule's fits, a grid's points, the protocol's cross-validated choice). Its
    ``lam_grid`` is emptied: with ``lam`` a number the rule does not run, and the config
    written with the run says so. The values set are checked as the config's own are
    (``_check_lam``; ``learning_rate`` > 0): ValueError naming the field."""

    def number(value):  # a float where it is a real number, else as given (refused below)
        return float(value) if checks.is_real(value) else value

    out = cfg.copy_and_resolve_references()
    out.unlock()
    out.lam, out.lam_grid = number(lam), ()
    if learning_rate is not None:
        out.learning_rate = number(learning_rate)
    _check_lam(out)
    checks.check_number(out, "learning_rate", low=0, low_open=True)
    out.lock()
    return out


def _check_lam(cfg) -> None:
    """The one check of WARCA's penalty weight: ``lam`` (None or a number >= 0), its
    ``lam_grid`` and the held-out share that chooses from it; ValueError naming the field."""
    if cfg.lam is not None:
        checks.check_number(cfg, "lam", low=0)
    grid = tuple(cfg.lam_grid)
    for v in grid:
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not (number and np.isfinite(v) and v >= 0):
            raise ValueError(f"lam_grid must hold finite numbers >= 0; got {grid!r}")
    if cfg.lam is not None:
        return
    if not grid:
        raise ValueError(
            "lam is None (chosen from lam_grid on held-out identities) but lam_grid is "
            "empty: give lam a number, or lam_grid its values"
        )
    fraction = cfg.lam_val_fraction
    if not (isinstance(fraction, float) and 0.0 < fraction < 1.0):
        raise ValueError(f"lam_val_fraction must be a float in (0, 1); got {fraction!r}")


def check_config(cfg, *, n: int, d: int) -> None:
    """Raises ValueError for a WARCA config that cannot run on N x D training data."""
    checks.check_choice(cfg, "kernel", kernels.KERNELS, also=("none",))
    limit = n if cfg.kernel != "none" else d
    checks.check_number(cfg, "dim", integer=True)
    if not 1 <= cfg.dim <= limit:
        what = "training samples" if cfg.kernel != "none" else "input dimensions"
        raise ValueError(f"output dim must be in [1, {limit}] ({what}), got {cfg.dim}")
    for name in ("batch_size", "num_iters", "log_every"):
        checks.check_number(cfg, name, low=1, integer=True)
    checks.check_number(cfg, "candidate_pool", low=0, integer=True, note="; 0: all")
    checks.check_number(cfg, "max_tries", low=0, integer=True, note="; 0: no cap")
    checks.check_number(cfg, "margin", low=0, low_open=True)
    checks.check_number(cfg, "learning_rate", low=0, low_open=True)
    checks.check_number(cfg, "kernel_gamma", low=0, note="; 0: from the data")
    checks.check_number(cfg, "num_landmarks", integer=True)
    _check_lam(cfg)
    _check_names(cfg)
    if cfg.kernel_approx == "nystroem":
        if cfg.kernel == "none":
            raise ValueError("kernel_approx='nystroem' approximates a kernel: set kernel too")
        if not 1 <= cfg.num_landmarks:
            raise ValueError(f"num_landmarks must be >= 1, got {cfg.num_landmarks}")
        if cfg.dim > min(cfg.num_landmarks, n):
            raise ValueError(
                f"output dim {cfg.dim} exceeds the Nystroem feature dimension "
                f"min(num_landmarks, N) = {min(cfg.num_landmarks, n)}"
            )
    checks.check_bool(cfg, "span")
    device_mesh.check_num_devices(cfg.num_devices)
    if cfg.kernel != "none" and cfg.preconditioned and cfg.gradient == "autodiff":
        raise ValueError(
            "autodiff gives the plain kernel gradient, not the K^-1 preconditioned one: "
            "set preconditioned=False or gradient='closed_form'"
        )


def validate(features, labels, cfg) -> checks.TrainingData:
    """Checks training data and config before any work.

    With ``normalize="msd"`` WARCA does not depend on the features' scale: features too
    small or too large for float32 are multiplied by a power of two (``checks``), which
    the returned metric's ``feature_scale`` applies again; with ``normalize="none"`` they
    are refused.

    Returns:
      ``checks.TrainingData``: float32 features (times ``scale``), int64 labels, scale.

    Raises:
      ValueError: NaN/inf, shape mismatches, labels that are not integers, too few
        identities, a config that cannot run on this data, or negative features for a
        chi2 kernel.
    """
    checks.check_choice(cfg, "normalize", NORMALIZE)  # before the data, which it scales
    data = checks.training_data(
        features,
        labels,
        method="WARCA",
        scale_free=cfg.normalize == "msd",
        scale_note=(
            " (with normalize='none' the margin is in the features' units; "
            "normalize='msd' trains on any scale)"
        ),
    )
    check_config(cfg, n=data.x.shape[0], d=data.x.shape[1])
    if cfg.kernel != "none":
        kernels.check_kernel_input(data.x, cfg.kernel)
    return data


def pair_cams(cams, labels, cfg):
    """The camera ids that restrict WARCA's positive pairs, or None (every pair).

    None without ``cams`` or with ``cfg.positives == "all"``. Cameras under which no
    identity is seen twice across cameras give no cross-camera pair: then every pair,
    with a log line, rather than no training (e.g. one camera, or ids given per image).

    Raises:
      ValueError: ``cams`` that are not [N] integer-valued ids (``data.integer_ids``).
    """
    if cams is None or cfg.positives == "all":
        return None
    cams = dataset_arrays.integer_ids(
        cams, "cams", len(labels), f"the training features have {len(labels)} rows"
    )
    # some identity is seen by two cameras iff it has two distinct (label, camera) pairs
    pairs = np.unique(np.stack([np.asarray(labels).astype(np.int64), cams]), axis=1)
    if np.unique(pairs[0]).size == pairs.shape[1]:
        logging.info("WARCA: no identity is seen by two cameras; training on every pair")
        return None
    return cams
