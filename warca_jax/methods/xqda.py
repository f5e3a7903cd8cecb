"""XQDA: cross-view quadratic discriminant analysis (Liao et al., CVPR 2015).

The difference x_i - x_j of two images is modelled as zero-mean Gaussian, with
covariance Sigma_I when i and j show the same person (intra-personal) and
Sigma_E when they do not (extra-personal). The log-likelihood ratio of the two
Gaussians in a learned subspace W: [D, r] gives the distance (paper eq. 12)

    d(x, z) = (x - z)^T W (inv(W^T Sigma_I W) - inv(W^T Sigma_E W)) W^T (x - z),

and W maximises the ratio of extra- to intra-personal variance, the generalised
Rayleigh quotient w^T Sigma_E w / w^T Sigma_I w (eq. 14-15): its columns are the
top generalised eigenvectors of (Sigma_E, Sigma_I), those with eigenvalue > 1
(where the pair is more spread across people than within one), capped by
``cfg.dim``. Sigma_I gets a ridge (``linalg.regularise``, ``cfg.reg``), as the
paper's lambda = 0.001.

Both covariances are computed without enumerating the O(N^2) pairs (the paper's
eq. 19-20): ``_covariance.pair_covariances`` needs only X^T X, per-class sums and counts.
``fit`` receives no camera ids, so the "two views" are the training set against
itself: every ordered pair (i, j) with i != j counts, a same-camera pair as well.
When D >= N the data are first reduced, losslessly, to the span of the centred
training features (the paper's QR step).
"""

from __future__ import annotations

import numpy as np

from warca_jax import linalg, training
from warca_jax.methods import Method, _checks
from warca_jax.methods._covariance import pair_covariances
from warca_jax.metric import Metric


def reduce_to_span(x: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """Lossless reduction to the span of the centred rows when D >= N.

    Returns:
      (components [k, D] or None when no reduction is needed, reduced x [N, k] or x).
    """
    if x.shape[1] < x.shape[0]:
        return None, x
    mean, comps = linalg.pca(x, variance=1.0)
    return comps, (x - mean) @ comps.T


def check_config(cfg, data: _checks.TrainingData) -> None:
    """Raises ValueError for an XQDA config that cannot run on this data."""
    d = data.x.shape[1]
    _checks.check_number(cfg, "dim", integer=True)
    note = "0: every eigenvalue > 1; at most the input dimension"
    _checks.check_range(cfg.dim, 0, d, what="dim", note=note)
    _checks.check_number(
        cfg, "reg", low=0, low_open=True, note="; ridge on Sigma_I, relative to its trace / D"
    )


# XQDA does not depend on the features' scale.
validate = _checks.validator("XQDA", check_config)


def xqda_projection(
    sigma_i: np.ndarray, sigma_e: np.ndarray, *, dim: int, reg: float
) -> tuple[np.ndarray, np.ndarray]:
    """The XQDA subspace and metric from the two covariances.

    Args:
      sigma_i, sigma_e: [D, D] intra- and extra-personal covariances.
      dim: cap on the subspace dimension (0: no cap beyond eigenvalue > 1).
      reg: ridge on Sigma_I (relative, see ``linalg.regularise``).

    Returns:
      (L [r, D] with L^T L = W M W^T, the eigenvalues [r] kept).
    """
    sigma_i = linalg.regularise(sigma_i, eps=reg, what="XQDA intra-personal covariance")
    d = sigma_i.shape[0]
    evals, evecs = linalg.generalized_eigh(sigma_e, sigma_i, dim=d)
    r = max(1, int(np.sum(evals > 1.0)))
    if dim > 0:
        r = min(r, dim)
    w = evecs[:, :r]
    m = np.linalg.inv(w.T @ sigma_i @ w) - np.linalg.inv(w.T @ sigma_e @ w)
    return linalg.psd_factor(linalg.psd_project(m)).astype(np.float64) @ w.T, evals[:r]


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False):
    """Learns an XQDA metric (closed form; ``seed``, ``log_fn``, ``progress`` unused).

    Args:
      features: [N, D] training features.
      labels: [N] identity labels.
      cfg: the ``method`` section of warca_jax/configs/xqda.py (``dim``, ``reg``).

    Returns:
      (linear Metric with projection [r, D], empty history).

    Raises:
      ValueError: bad data or config, before any work.
      training.TrainingDivergedError: a non-finite or degenerate result.
    """
    del seed, log_fn, progress
    x, y, scale = validate(features, labels, cfg)
    comps, xr = reduce_to_span(x)
    sigma_i, sigma_e = pair_covariances(xr, y)
    proj, _ = xqda_projection(sigma_i, sigma_e, dim=cfg.dim, reg=cfg.reg)
    if comps is not None:
        proj = proj @ comps  # the centring of the reduction cancels in differences
    metric = Metric(
        "linear", x.shape[1], projection=proj.astype(np.float32), name="xqda", feature_scale=scale
    )
    training.check_model(metric, method="XQDA", features=features, hint="raise reg")
    return metric, []


METHODS = {"xqda": Method(fit=fit, validate=validate)}
