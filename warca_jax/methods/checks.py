"""The checks every learner makes before any work: its training data and its hyperparameters.

* ``training_data(features, labels, method=...)``: features a 2-D, non-empty array of
  finite real numbers, not all the same vector, labels one finite integer identity per
  row, enough identities with two or more images; returns float32 features, int64 labels
  and the power of two the features were scaled by (see below). Every learner's
  ``validate`` calls it, so that bad data is a ``ValueError`` naming the problem, the same
  for every learner.
* ``validator(method, check_config, ...)``: a learner's ``validate``, declared in a line:
  the data through ``training_data``, then ``check_config(cfg, data)``.
* ``check_number(cfg, field, ...)``: a hyperparameter of the ``method`` config section
  is a finite number (or an integer) in its range; the message names the field
  (``method.lam must be >= 0 (a finite number); got nan``); ``check_numbers`` for several
  fields with the same range, ``check_choice`` for a name among choices.
* ``new_config(method, variant, variants)``: the start of every learner's
  ``default_config``.

The scale of the features. float32, which every learner computes in, holds squared
distances only between about 1e-38 and 3e38, and products of four features (covariances
of covariances, Gram matrices of Gram matrices) over a narrower range still: features of
size 1e-30 (squared distances 1e-60) underflow to zero, features of size 1e30 overflow.
``training_data`` measures the size of the features, the root mean squared row norm, in
float64 on the host. Within ``SAFE_SIZE`` (2^-20 to 2^20) nothing is done. Outside it:

* a learner whose result does not depend on the features' scale (``scale_free=True``:
  WARCA with its ``normalize="msd"``, KISSME, XQDA, LFDA, MLAPG, rPCCA, SVMML, the
  Mahalanobis distance and the no-learning baselines) gets the features times an exact
  power of two that brings their size to about 1 (a multiplication that loses nothing),
  and returns a ``Metric`` whose ``feature_scale`` applies the same factor, so that it
  takes the user's features. The result is the one of features of ordinary size.
* a learner with a margin or step fixed in the features' units (LMNN, FRML, the study's
  SGD, WARCA with ``normalize="none"``) refuses the features with a message naming their
  size: there its margin is below float32's resolution of the distances, or far above
  all of them, and rescaling would change the problem it solves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import ml_collections
import numpy as np

from warca_jax.data.dataset_arrays import feature_matrix, integer_ids
from warca_jax.maths import kernels

# The root mean squared row norm of the features within which they are used as they are.
SAFE_SIZE = (2.0**-20, 2.0**20)
# Rows read at once: a memory-mapped array is never copied whole, and a float64 block of
# 2,048-d features stays near 128 MiB.
_BLOCK_ROWS = 8192


class TrainingData(NamedTuple):
    """Checked training data.

    Attributes:
      x: [N, D] float32 features, times ``scale``.
      y: [N] int64 identity labels.
      scale: the exact power of two ``x`` was multiplied by (1.0 for features of ordinary
        size); a learner folds it into its Metric's ``feature_scale``.
    """

    x: np.ndarray
    y: np.ndarray
    scale: float


def _scan(x) -> tuple[int, bool, float]:
    """(NaN and inf count, whether two rows differ, sum of squares in float64) of x, one
    pass block by block."""
    bad, distinct, total = 0, False, 0.0
    first = np.asarray(x[:1])
    for b0 in range(0, x.shape[0], _BLOCK_ROWS):
        xb = np.asarray(x[b0 : b0 + _BLOCK_ROWS])
        if xb.dtype.kind == "f":
            bad += int(np.sum(~np.isfinite(xb)))
        distinct = distinct or bool(np.any(xb != first))
        if not bad:
            xb = xb.astype(np.float64)
            total += float(np.sum(xb * xb))
    return bad, distinct, total


def feature_size(x) -> float:
    """The root mean squared row norm sqrt(mean_i ||x_i||^2), in float64, block by block."""
    return math.sqrt(_scan(x)[2] / max(x.shape[0], 1))


def power_of_two_scale(size: float) -> float:
    """2^-round(log2(size)): the exact factor that brings ``size`` (> 0) to [2^-0.5, 2^0.5]."""
    return math.ldexp(1.0, -round(math.log2(size)))


def training_data(
    features,
    labels,
    *,
    method: str,
    min_identities: int = 2,
    scale_free: bool = True,
    scale_note: str = "",
) -> TrainingData:
    """Validates a learner's training features and labels before any work.

    Args:
      features: [N, D] training features: real numbers (integers or floats), finite.
      labels: [N] identity labels: integers, or floats with whole values.
      method: the learner's name, for the messages.
      min_identities: identities with two or more images the learner needs.
      scale_free: the learner's result does not depend on the features' scale, so that
        features too small or too large for float32 are rescaled by a power of two
        (module docstring); otherwise they are refused.
      scale_note: why the learner depends on the scale, for the refusal's message.

    Returns:
      ``TrainingData`` (float32 features times ``scale``, int64 labels, ``scale``).

    Raises:
      ValueError: features not 2-D, empty, not real numbers or with NaN or inf; labels of
        the wrong length, not integers or not finite; too few identities with two or more
        images; every sample the same vector (a learner that needs identities); features
        of a size float32 cannot train on for a learner that depends on the scale.
    """
    x = feature_matrix(features, allow_empty=True)
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(
            f"features are empty (shape {x.shape}): {method} needs training samples with at "
            "least one dimension"
        )
    y = integer_ids(labels, "labels", x.shape[0], f"the features have {x.shape[0]} rows")
    bad, distinct, total = _scan(x)
    if bad:
        raise ValueError(f"features hold {bad} NaN or inf values; expected finite values")
    _, counts = np.unique(y, return_counts=True)
    if np.sum(counts >= 2) < min_identities or len(counts) < 2:
        raise ValueError(
            f"{method} needs at least {min_identities} identities with two or more images; "
            f"found {int(np.sum(counts >= 2))} identities with two or more of {len(counts)}"
        )
    if min_identities > 0 and not distinct and x.shape[0] > 1:
        raise ValueError(
            f"all {x.shape[0]} training samples are the same feature vector"
            + (" (all zeros)" if not np.any(x[:1]) else "")
            + f": {method} has nothing to learn from"
        )
    size = math.sqrt(total / x.shape[0])
    if size == 0.0 or SAFE_SIZE[0] <= size <= SAFE_SIZE[1]:
        # no copy of float32 (or memory-mapped) data
        return TrainingData(x.astype(np.float32, copy=False), y, 1.0)
    if not scale_free:
        raise ValueError(
            f"{method} cannot train on features of this scale: their root mean squared norm "
            f"is {size:.3g}, outside [{SAFE_SIZE[0]:.3g}, {SAFE_SIZE[1]:.3g}] where float32 "
            f"training is reliable{scale_note}; rescale them (e.g. divide by {size:.3g})"
        )
    scale = power_of_two_scale(size)
    out = np.empty(x.shape, np.float32)
    for b0 in range(0, x.shape[0], _BLOCK_ROWS):
        out[b0 : b0 + _BLOCK_ROWS] = np.asarray(x[b0 : b0 + _BLOCK_ROWS], np.float64) * scale
    return TrainingData(out, y, scale)


def _bound(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _condition(low, high, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return (
            f"in {'(' if low_open else '['}{_bound(low)}, {_bound(high)}{')' if high_open else ']'}"
        )
    if low is not None:
        if low == 0 and low_open:
            return "positive"
        return f"{'>' if low_open else '>='} {_bound(low)}"
    if high is not None:
        return f"{'<' if high_open else '<='} {_bound(high)}"
    return ""


def is_real(value) -> bool:
    """Whether ``value`` is a real number, a Python or NumPy int or float and not a bool:
    what ``check_number`` accepts before it looks at the range."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def check_number(
    cfg,
    field: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
    note: str = "",
    label: str = "",
):
    """Returns ``cfg.<field>`` when it is a finite number (an integer) in range.

    Args:
      cfg: a config's ``method`` section (a ConfigDict or any object with the field).
      field: the hyperparameter's name.
      low, high: bounds (None: none); ``low_open`` / ``high_open`` exclude them.
      integer: the value must be a whole number (ints, or floats with whole values, are
        accepted and returned as int).
      note: a remark after the kind of number in the message, e.g. "; 0: no cap".
      label: how the message names the field (default: ``field``).

    Raises:
      ValueError: ``method.<field> must be <range> (a finite number<note>); got <value>``.
    """
    value = getattr(cfg, field)
    kind = "an integer" if integer else "a finite number"
    cond = _condition(low, high, low_open, high_open)
    ok = is_real(value) and math.isfinite(value) and (not integer or float(value).is_integer())
    if ok:
        ok = (low is None or (value > low if low_open else value >= low)) and (
            high is None or (value < high if high_open else value <= high)
        )
    if not ok:
        what = f"{cond} ({kind}{note})" if cond else f"{kind}{note}"
        raise ValueError(f"method.{label or field} must be {what}; got {value!r}")
    return int(value) if integer else value


def check_numbers(cfg, fields: tuple[str, ...], **bounds) -> None:
    """``check_number`` of each of ``fields`` with the same ``bounds``."""
    for field in fields:
        check_number(cfg, field, **bounds)


def check_bool(cfg, field: str) -> None:
    """Raises ValueError unless ``cfg.<field>`` is True or False."""
    value = getattr(cfg, field)
    if not isinstance(value, bool):
        raise ValueError(f"{field} must be True or False, got {value!r}")


def check_choice(cfg, field: str, choices: tuple[str, ...], *, also: tuple[str, ...] = ()):
    """Returns ``cfg.<field>`` when it is one of ``choices`` (or of ``also``, e.g. 'none').

    Raises:
      ValueError: ``unknown <field> <value>; expected [<also> or ]one of <choices>``.
    """
    value = getattr(cfg, field)
    if value in also or value in choices:
        return value
    extra = "".join(f"{a!r} or " for a in also)
    raise ValueError(f"unknown {field} {value!r}; expected {extra}one of {choices}")


def check_variant(what: str, variant, variants: tuple[str, ...]) -> str:
    """``variant`` when it is one of ``variants``, the named variants of ``what`` (a learner's
    default config, or a config file's ``get_config``); ValueError naming them otherwise."""
    if variant not in variants:
        raise ValueError(f"unknown variant {variant!r} of {what}; expected one of {variants}")
    return variant


def new_config(method: str, variant, variants: tuple[str, ...]) -> ml_collections.ConfigDict:
    """A learner's ``default_config`` start: ``variant`` checked against ``variants``
    (``check_variant``), then an unlocked ConfigDict whose ``name`` is ``method``."""
    check_variant(f"{method}'s default config", variant, variants)
    cfg = ml_collections.ConfigDict()
    cfg.name = method
    return cfg


def check_range(value: int, low: int, high: int, *, what: str, note: str = "") -> None:
    """Raises ``<what> must be in [low, high] (<note>), got <value>`` outside the range."""
    if not low <= value <= high:
        raise ValueError(
            f"{what} must be in [{low}, {high}]{f' ({note})' if note else ''}, got {value}"
        )


def validator(
    method: str | None,
    check_config: Callable[[Any, TrainingData], None],
    *,
    scale_free: bool = True,
    scale_note: str = "",
    min_identities: int | Callable[[Any], int] = 2,
) -> Callable:
    """A learner's ``validate(features, labels, cfg) -> TrainingData``, before any work.

    The data through ``training_data`` (``method``, None for the config's ``name``;
    ``scale_free``; ``scale_note``, in which ``{name}`` is the method's name; and
    ``min_identities``, or a function of the config that gives it), then the
    hyperparameters through ``check_config(cfg, data)``, which raises ``ValueError``
    naming the field (``check_number``, ``check_choice``, ``check_range``).
    """

    def validate(features, labels, cfg) -> TrainingData:
        name = cfg.name if method is None else method
        need = min_identities(cfg) if callable(min_identities) else min_identities
        data = training_data(
            features,
            labels,
            method=name,
            min_identities=need,
            scale_free=scale_free,
            scale_note=scale_note.format(name=name),
        )
        check_config(cfg, data)
        return data

    validate.__doc__ = (
        f"Checks {method or 'the method'}'s training data and config before any work "
        "(ValueError naming the problem); returns the checked ``TrainingData``."
    )
    return validate


def check_kernel_and_dim(cfg, data: TrainingData) -> str:
    """``kernel`` (one of ``kernels.KERNELS`` or "none") and an output ``dim`` within the
    form's rank: the training samples for a kernel form, the input dimensions for a
    linear one. Returns the kernel."""
    n, d = data.x.shape
    kernel = check_choice(cfg, "kernel", kernels.KERNELS, also=("none",))
    check_number(cfg, "dim", integer=True)
    what = "training samples" if kernel != "none" else "input dimensions"
    check_range(cfg.dim, 1, n if kernel != "none" else d, what="output dim", note=what)
    return kernel
