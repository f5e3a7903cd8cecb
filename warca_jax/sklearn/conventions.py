"""scikit-learn's conventions for the estimators: input checks, tags, dims, ``n_iter_``.

What ``sklearn.utils.estimator_checks.check_estimator`` asks of an estimator, in one place
(the base, module ``base``, calls these):

* ``check_x``: X through scikit-learn's own ``validate_data``, so its words for sparse,
  complex, object, 1-D ("Reshape your data"), empty or non-finite data, and for a feature
  count or names other than ``fit``'s (``n_features_in_``, ``feature_names_in_``); a dense
  real array comes out, float32 kept and anything else as float64;
* ``tags``: a transformer that requires y, whose ``transform`` keeps float64 and float32;
  only non-negative features for a chi2 kernel (``positive_only``); no transformer at all
  for a learner whose metric embeds nothing (``EmbeddingsOnly``);
* ``fit_dim``: a ``dim`` at the learner's default that the data cannot take becomes the
  most they allow (``methods.dim_bound``, the main job's rule), logged; a ``dim`` the user
  set is left to the learner's own check, which refuses it in one line;
* ``n_iter``: the iterations a fit ran, for learners with a ``max_iter``.
"""

from __future__ import annotations

import functools
import types

import numpy as np
from absl import logging as absl_logging
from sklearn.utils.validation import check_non_negative, validate_data

from warca_jax import methods
from warca_jax.metric import EMBEDDING_KINDS

# float32 features stay float32 (the learners compute in it); any other real dtype: float64
FLOATS = (np.float64, np.float32)
# kernels that take only non-negative features (histograms): scikit-learn's positive_only
POSITIVE_KERNELS = ("chi2", "chi2_rbf")


class NoEmbeddingError(ValueError, AttributeError):
    """The learned distance is no Euclidean distance after an embedding: the estimator has
    no ``transform`` (an AttributeError, so ``hasattr`` is False), and calling it anyway is
    a ValueError, as any bad call."""


class EmbeddingsOnly:
    """A method (``transform``, ``fit_transform``) there only where the estimator embeds
    (``embeds``); elsewhere reading it raises ``NoEmbeddingError`` saying why, as
    scikit-learn's ``available_if`` hides a method (whose AttributeError would not)."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn
        check_embeds(obj)
        return types.MethodType(self.fn, obj)


def _kinds(est) -> tuple[str, ...] | None:
    """The metric kinds the estimator's fit may learn (None: an unknown method)."""
    if hasattr(est, "metric_"):
        return (est.metric_.kind,)
    try:
        return methods.get(est._method_and_params()[0]).kinds
    except ValueError:  # an unknown method: fit says so
        return None


def embeds(est) -> bool:
    """Whether the fitted metric (before ``fit``: any its method learns) embeds X."""
    kinds = _kinds(est)
    return kinds is None or any(kind in EMBEDDING_KINDS for kind in kinds)


def check_embeds(est) -> None:
    """NoEmbeddingError where ``est`` has no embedding (``embeds``), naming its metric."""
    if embeds(est):
        return
    metric = getattr(est, "metric_", None)
    who = (metric.name if metric is not None else "") or type(est).__name__
    raise NoEmbeddingError(
        f"{who} learns a {'/'.join(_kinds(est))!r} metric, which has no embedding whose "
        "Euclidean distance is the learned one, so no transform; use pairwise_distances(X, Y) "
        "instead"
    )


def tags(est, tags):
    """``est``'s scikit-learn tags (module docstring) on top of ``tags``, the mixins'."""
    tags.target_tags.required = True
    tags.input_tags.positive_only = _positive_only(est)
    if embeds(est):
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
    else:
        tags.transformer_tags = None  # no transform
    return tags


def _positive_only(est) -> bool:
    return str(est._method_and_params()[1].get("kernel")) in POSITIVE_KERNELS


def check_x(est, X, *, reset: bool = False) -> np.ndarray:
    """X checked as scikit-learn checks it (module docstring); ``reset`` (``fit``) records
    its feature count and names and needs two samples, otherwise they are compared and
    ``check_signs`` runs too (``fit`` runs it once the labels are checked)."""
    if reset:
        return validate_data(est, X, dtype=FLOATS, ensure_min_samples=2)
    return check_signs(est, validate_data(est, X, reset=False, dtype=FLOATS))


def check_signs(est, x: np.ndarray) -> np.ndarray:
    """``x``, or scikit-learn's "Negative values in data" for a chi2 kernel's negative one."""
    if _positive_only(est):
        kernel = est._method_and_params()[1]["kernel"]
        whom = f"{type(est).__name__} with kernel={kernel!r}, which needs features >= 0"
        check_non_negative(x, whom)
    return x


def fit_dim(est, cfg, num_features: int, codes: np.ndarray, *, explicit: bool) -> None:
    """Lowers ``cfg.dim`` to the most the data allow where it is the learner's default
    (not ``explicit``) and they cannot take it (``methods.dim_bound``), logged."""
    dim = cfg.get("dim")
    if explicit or isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
        return  # set by the user, or no D' (0: the full dimension)
    learner = methods.get(cfg.name)
    cap, what = methods.dim_bound(learner, cfg, num_features, [codes], seed=est.seed)
    if 1 <= cap < dim:
        cfg.dim = cap
        absl_logging.info(
            "%s: dim = %d, %s (the default, %d, exceeds it; dim=... sets it: a value the "
            "data cannot take is refused)",
            type(est).__name__,
            cap,
            what,
            dim,
        )


def n_iter(history: list[dict], cfg) -> int:
    """The iterations a fit ran: its last history row's ``step`` (else ``cfg.max_iter``)."""
    steps = [row["step"] for row in history if "step" in row]
    return int(steps[-1]) if steps else int(cfg.max_iter)
