"""WARCA's config and input checks: everything refused before any work."""

from __future__ import annotations

from warca_jax import kernels, losses, optim, sampling
from warca_jax.methods import _checks

GRADIENTS = ("closed_form", "autodiff")
KERNEL_APPROX = ("none", "nystroem")
NORMALIZE = ("msd", "none")
SCHEDULES = ("cosine", "constant")
# in the compiled step's ``Hyperparams`` argument, not in the program (``step.Hyperparams``)
TUNABLE = ("lam", "learning_rate")


def _check_names(cfg) -> None:
    """Raises ValueError for a config naming an option that does not exist."""
    for field, allowed in (
        ("penalty", losses.PENALTIES),
        ("gradient", GRADIENTS),
        ("sampler", sampling.SAMPLERS),
        ("weighting", losses.WEIGHTINGS),
        ("normalize", NORMALIZE),
        ("schedule", SCHEDULES),
        ("kernel_approx", KERNEL_APPROX),
    ):
        value = getattr(cfg, field)
        if value not in allowed:
            raise ValueError(f"unknown {field} {value!r}; expected one of {allowed}")


def check_config(cfg, *, n: int, d: int) -> None:
    """Raises ValueError for a WARCA config that cannot run on N x D training data."""
    if cfg.kernel != "none" and cfg.kernel not in kernels.KERNELS:
        raise ValueError(
            f"unknown kernel {cfg.kernel!r}; expected 'none' or one of {kernels.KERNELS}"
        )
    limit = n if cfg.kernel != "none" else d
    _checks.check_number(cfg, "dim", integer=True)
    if not 1 <= cfg.dim <= limit:
        what = "training samples" if cfg.kernel != "none" else "input dimensions"
        raise ValueError(f"output dim must be in [1, {limit}] ({what}), got {cfg.dim}")
    for name in ("batch_size", "num_iters", "log_every"):
        _checks.check_number(cfg, name, low=1, integer=True)
    _checks.check_number(cfg, "candidate_pool", low=0, integer=True, note="; 0: all")
    _checks.check_number(cfg, "max_tries", low=0, integer=True, note="; 0: no cap")
    _checks.check_number(cfg, "margin", low=0, low_open=True)
    _checks.check_number(cfg, "learning_rate", low=0, low_open=True)
    _checks.check_number(cfg, "lam", low=0)
    _checks.check_number(cfg, "kernel_gamma", low=0, note="; 0: from the data")
    _checks.check_number(cfg, "num_landmarks", integer=True)
    optim.check_hyperparams(
        learning_rate=cfg.learning_rate, lam=cfg.lam, penalty_mode=cfg.penalty_mode
    )
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
    if not isinstance(cfg.num_devices, int) or cfg.num_devices < 0:
        raise ValueError(f"num_devices must be an int >= 0 (0: all), got {cfg.num_devices!r}")
    if cfg.kernel != "none" and cfg.preconditioned and cfg.gradient == "autodiff":
        raise ValueError(
            "autodiff gives the plain kernel gradient, not the K^-1 preconditioned one: "
            "set preconditioned=False or gradient='closed_form'"
        )


def validate(features, labels, cfg) -> _checks.TrainingData:
    """Checks training data and config before any work.

    With ``normalize="msd"`` WARCA does not depend on the features' scale: features too
    small or too large for float32 are multiplied by a power of two (``_checks``), which
    the returned metric's ``feature_scale`` applies again; with ``normalize="none"`` they
    are refused.

    Returns:
      ``_checks.TrainingData``: float32 features (times ``scale``), int64 labels, scale.

    Raises:
      ValueError: NaN/inf, shape mismatches, labels that are not integers, too few
        identities, a config that cannot run on this data, or negative features for a
        chi2 kernel.
    """
    if cfg.normalize not in NORMALIZE:
        raise ValueError(f"unknown normalize {cfg.normalize!r}; expected one of {NORMALIZE}")
    data = _checks.training_data(
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
