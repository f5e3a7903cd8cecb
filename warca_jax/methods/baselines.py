"""Baselines without learning, and the plain Mahalanobis distance.

* ``nn``: nearest neighbours under a fixed distance, ``cfg.distance`` one of
  euclidean, manhattan, cosine (the study's kNN with three distances, its section 4.1)
  and chi2 (histograms): an ``identity`` Metric.
* ``kernel_nn``: nearest neighbours under the feature-space distance of a kernel,
  sqrt(k(x, x) + k(y, y) - 2 k(x, y)) (the study's kernel method: chi2, Gaussian/RBF,
  Laplacian; chi2-RBF as well): a ``kernel_distance`` Metric. A bandwidth
  ``cfg.kernel_gamma <= 0`` is chosen on the training features (``kernels.default_gamma``).
* ``mahalanobis``: d(x, y)^2 = (x - y)^T inv(C) (x - y) (the study's eq. 3) with C the
  covariance of the training features (``covariance='features'``), or of the
  differences of same-identity pairs (``'within_class'``: the intra-personal covariance
  of ``_covariance.pair_covariances``), ridge-regularised so it always exists: a ``linear``
  Metric W with W^T W = inv(C).
"""

from __future__ import annotations

import ml_collections
import numpy as np

from warca_jax.maths import kernels, linalg
from warca_jax.methods import Method, checks, model_checks
from warca_jax.methods._covariance import pair_covariances
from warca_jax.metric import Metric

NN_DISTANCES = ("euclidean", "manhattan", "cosine", "chi2")
COVARIANCES = ("features", "within_class")


def _check_non_negative(x: np.ndarray, what: str) -> None:
    if np.any(x < 0):
        raise ValueError(
            f"{what} needs non-negative features (histograms); "
            f"{int(np.sum(np.any(x < 0, axis=1)))} training rows have negative entries "
            f"(min {float(x.min()):.4g})"
        )


# ----------------------------------------------------------------------------- nn
def _check_nn(cfg, data: checks.TrainingData) -> None:
    """The distance name; chi2 needs non-negative features."""
    if checks.check_choice(cfg, "distance", NN_DISTANCES) == "chi2":
        _check_non_negative(data.x, "the chi2 distance")


# Nothing is learned, so one identity with two images is not needed. Every distance of
# NN_DISTANCES ranks features times a positive factor as it ranks the features.
validate_nn = checks.validator("nn", _check_nn, min_identities=0)


def fit_nn(features, labels, cfg):
    """Nearest neighbours under ``cfg.distance``: an identity Metric, empty history."""
    data = validate_nn(features, labels, cfg)
    metric = Metric(
        "identity",
        data.x.shape[1],
        distance=cfg.distance,
        name=f"nn_{cfg.distance}",
        feature_scale=data.scale,
    )
    return model_checks.check_model(metric, method="nn", features=features), []


# ----------------------------------------------------------------------------- kernel_nn
def _check_kernel_nn(cfg, data: checks.TrainingData) -> None:
    """The kernel name, its bandwidth and, for the chi2 family, non-negative features."""
    kernel = checks.check_choice(cfg, "kernel", kernels.KERNELS)
    checks.check_number(cfg, "kernel_gamma", low=0, note="; 0: from the data")
    kernels.check_kernel_input(data.x, kernel)
    if cfg.kernel_gamma <= 0 and kernels.needs_gamma(kernel) and data.x.shape[0] < 2:
        raise ValueError(
            f"choosing the {kernel} bandwidth needs two training rows; got "
            f"{data.x.shape[0]}, give gamma explicitly"
        )


validate_kernel_nn = checks.validator("kernel_nn", _check_kernel_nn, min_identities=0)


def fit_kernel_nn(features, labels, cfg):
    """Nearest neighbours under a kernel's feature-space distance; empty history.

    Returns:
      (kernel_distance Metric with the kernel and its bandwidth, []).
    """
    data = validate_kernel_nn(features, labels, cfg)
    x = data.x
    if cfg.kernel_gamma > 0:  # the bandwidth given for the user's features, for the rescaled ones
        gamma = kernels.gamma_for_scaled(cfg.kernel, float(cfg.kernel_gamma), data.scale)
    else:
        gamma = kernels.default_gamma(x, cfg.kernel)
    metric = Metric(
        "kernel_distance",
        x.shape[1],
        kernel=cfg.kernel,
        gamma=gamma,
        name=f"kernel_nn_{cfg.kernel}",
        feature_scale=data.scale,
    )
    hint = f"the bandwidth {gamma} of the {cfg.kernel} kernel is not usable; give kernel_gamma"
    return model_checks.check_model(metric, method="kernel_nn", features=features, hint=hint), []


# ----------------------------------------------------------------------------- mahalanobis
def _check_mahalanobis(cfg, data: checks.TrainingData) -> None:
    """The covariance option and its ridge; a covariance needs two rows."""
    checks.check_choice(cfg, "covariance", COVARIANCES)
    checks.check_number(cfg, "reg", low=0, low_open=True, note="; ridge relative to trace / D")
    if data.x.shape[0] < 2:
        raise ValueError(f"a covariance needs at least two training rows; got {data.x.shape[0]}")


# The features covariance needs no labels, but within-class differences need pairs.
validate_mahalanobis = checks.validator(
    "mahalanobis",
    _check_mahalanobis,
    min_identities=lambda cfg: 2 if cfg.covariance == "within_class" else 0,
)


def covariance(x: np.ndarray, labels: np.ndarray, *, kind: str) -> np.ndarray:
    """[D, D] float64 covariance of the features or of same-identity differences."""
    if kind == "within_class":
        return pair_covariances(x, labels)[0]
    xc = np.asarray(x, np.float64) - np.mean(x, axis=0, dtype=np.float64)
    return xc.T @ xc / (x.shape[0] - 1)


def fit_mahalanobis(features, labels, cfg):
    """W with W^T W = inv(C + ridge): a linear Metric [D, D], empty history."""
    x, y, scale = validate_mahalanobis(features, labels, cfg)
    cov = covariance(x, y, kind=cfg.covariance)
    what = f"the {cfg.covariance} covariance"
    precision = np.linalg.inv(linalg.regularise(cov, eps=cfg.reg, what=what))
    metric = Metric(
        "linear",
        x.shape[1],
        projection=linalg.psd_factor(precision),
        name="mahalanobis",
        feature_scale=scale,
    )
    hint = "the inverse covariance is not usable; raise reg"
    return model_checks.check_model(metric, method="mahalanobis", features=features, hint=hint), []


# ---------------------------------------------------------------- default configs
# The ``method`` sections that configs/nn.py, kernel_nn.py and mahalanobis.py start from.
NN_VARIANTS = ("euclidean", "manhattan", "cosine", "chi2", "small")
KERNEL_NN_VARIANTS = ("chi2", "chi2_rbf", "rbf", "laplacian", "small")
MAHALANOBIS_VARIANTS = ("features", "within_class", "small")


def nn_config(variant: str = "euclidean") -> ml_collections.ConfigDict:
    """``nn``'s defaults: the variant names the distance (``small``: Euclidean)."""
    m = checks.new_config("nn", variant, NN_VARIANTS)
    # euclidean | manhattan | cosine | chi2 (chi2 needs non-negative features).
    m.distance = "euclidean" if variant == "small" else variant
    return m


def kernel_nn_config(variant: str = "chi2") -> ml_collections.ConfigDict:
    """``kernel_nn``'s defaults: the variant names the kernel (``small``: chi2)."""
    m = checks.new_config("kernel_nn", variant, KERNEL_NN_VARIANTS)
    # linear | rbf | chi2 | chi2_rbf | laplacian (the chi2 family needs non-negative features).
    m.kernel = "chi2" if variant == "small" else variant
    # bandwidth (0: 1 / mean training distance of the kernel's distance).
    m.kernel_gamma = 0.0
    return m


def mahalanobis_config(variant: str = "features") -> ml_collections.ConfigDict:
    """``mahalanobis``'s defaults: the variant names the covariance (``small``: features)."""
    m = checks.new_config("mahalanobis", variant, MAHALANOBIS_VARIANTS)
    # 'features': covariance of the features; 'within_class': of same-identity differences.
    m.covariance = "within_class" if variant == "within_class" else "features"
    m.reg = 1e-6  # ridge reg * trace(C) / D on C's diagonal (a warning if it matters).
    return m


METHODS = {
    "nn": Method(fit_nn, validate_nn, nn_config, NN_VARIANTS, kinds=("identity",)),
    "kernel_nn": Method(
        fit_kernel_nn,
        validate_kernel_nn,
        kernel_nn_config,
        KERNEL_NN_VARIANTS,
        kinds=("kernel_distance",),
    ),
    "mahalanobis": Method(
        fit_mahalanobis, validate_mahalanobis, mahalanobis_config, MAHALANOBIS_VARIANTS
    ),
}
