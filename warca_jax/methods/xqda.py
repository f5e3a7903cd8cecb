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
``cfg.dim``. Sigma_I gets a ridge ``cfg.reg * trace(Sigma_I) / D`` (the paper: an absolute
lambda = 0.001; the default is below).

Both covariances are computed without enumerating the O(N^2) pairs (the paper's
eq. 19-20): ``_covariance.pair_covariances`` needs only X^T X, per-class sums and counts.
By default (``pairs="all"``) every ordered pair (i, j) with i != j counts, a same-camera
pair as well. With ``pairs="cross_camera"`` and the training cameras (``fit(..., cams=)``,
as the pipeline passes them) the pairs are those of two cameras, as the original's two
views (gallery camera against probe camera). That costs on the small real subsets of data/
and gains nothing beyond the spread on the whole VIPeR, so it is an option, not the
default. When D >= N the data are first reduced, losslessly, to the span of the centred
training features (the paper's QR step; ``linalg.span_basis``, through the [N, N] Gram
matrix). ``basis="svd"`` takes the original code's subspace (the left singular vectors of
inv(Sigma_I) Sigma_E with singular value > 1) instead of the generalised eigenvectors of
eq. 14-15.

The default ridge, ``reg`` = 1 relative to trace / D (the mean eigenvalue of Sigma_I,
shrinkage towards a multiple of I), was chosen on the colour + LBP descriptor: with two
images per identity Sigma_I has rank <= N - #ids, and a small relative ridge gives each of
its null directions an eigenvalue > 1 made of the ridge alone, so noise directions are
kept. ``configs/xqda.py:lomo`` holds the original's settings for Liao et al.'s LOMO (an
absolute ridge of 0.001 on the L2-normalised descriptor, cross-camera pairs).
Measurements, with their commands: docs/methods.md#xqda-and-lomo.
"""

from __future__ import annotations

import ml_collections
import numpy as np

from warca_jax.data import dataset_arrays
from warca_jax.maths import linalg
from warca_jax.methods import Method, checks, model_checks
from warca_jax.methods._covariance import pair_covariances
from warca_jax.metric import Metric


def reduce_to_span(x: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """Lossless reduction to the span of the centred rows when D >= N (``linalg.span_basis``,
    through the [N, N] Gram matrix: seconds for LOMO's 26,960 dims).

    Returns:
      (components [k, D] or None when no reduction is needed, reduced x [N, k] or x).
    """
    if x.shape[1] < x.shape[0]:
        return None, x
    mean, comps = linalg.span_basis(x)
    return comps, (x - mean) @ comps.T


RIDGES = ("relative", "absolute")  # reg times trace(Sigma_I) / D, or reg as it is
PAIRS = ("cross_camera", "all")  # pairs of two cameras (given the cameras), or every pair
BASES = ("generalized", "svd")  # the paper's eigenvectors, or the original code's SVD


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an XQDA config that cannot run on this data."""
    d = data.x.shape[1]
    checks.check_number(cfg, "dim", integer=True)
    note = "0: every eigenvalue > 1; at most the input dimension"
    checks.check_range(cfg.dim, 0, d, what="dim", note=note)
    for field, choices in (("ridge", RIDGES), ("pairs", PAIRS), ("basis", BASES)):
        if field in cfg:  # absent in configs written before they existed: the defaults
            checks.check_choice(cfg, field, choices)
    ridge = cfg.get("ridge", "relative")
    checks.check_number(cfg, "reg", low=0, low_open=True, note=f"; ridge on Sigma_I ({ridge})")


# XQDA does not depend on the features' scale.
validate = checks.validator("XQDA", check_config)


def xqda_projection(
    sigma_i: np.ndarray,
    sigma_e: np.ndarray,
    *,
    dim: int,
    reg: float,
    relative: bool = True,
    basis: str = "generalized",
) -> tuple[np.ndarray, np.ndarray]:
    """The XQDA subspace and metric from the two covariances.

    Args:
      sigma_i, sigma_e: [D, D] intra- and extra-personal covariances.
      dim: cap on the subspace dimension (0: no cap beyond eigenvalue > 1).
      reg: ridge on Sigma_I: ``reg * trace(Sigma_I) / D`` when ``relative``, else ``reg``.
      basis: "generalized": W holds the top generalised eigenvectors of (Sigma_E, Sigma_I)
        with eigenvalue > 1 (the paper's eq. 14-15); "svd": the original code's, the left
        singular vectors of inv(Sigma_I) Sigma_E with singular value > 1 (orthonormal).

    Returns:
      (L [r, D] with L^T L = W M W^T, the eigenvalues [r] kept).
    """
    d = sigma_i.shape[0]
    ridge = reg * max(np.trace(sigma_i), 1e-300) / d if relative else reg
    # Warns only when the ridge-regularised covariance is still (near) singular (tiny reg):
    # a ridge of the order of the mean eigenvalue is meant, not a sign of trouble.
    sigma_i = linalg.regularise(sigma_i + ridge * np.eye(d), what="XQDA intra-personal covariance")
    if basis == "svd":
        evecs, evals, _ = np.linalg.svd(np.linalg.solve(sigma_i, sigma_e))
    else:
        try:
            evals, evecs = linalg.generalized_eigh(sigma_e, sigma_i, dim=d)
        except np.linalg.LinAlgError:
            raise ValueError(
                f"XQDA: the intra-personal covariance plus its ridge ({ridge:.3g}) is not "
                "positive definite in floating point; raise reg (ridge='relative' scales it "
                "with the features)"
            ) from None
    if not evals[0] > 1.0:  # then M = inv(W^T S_I W) - inv(W^T S_E W) is negative: no metric
        raise ValueError(
            f"XQDA found no direction in which the differences between identities vary more "
            f"than those within one (largest generalised eigenvalue {evals[0]:.3g}, not > 1): "
            "the labels do not separate these features; check that they belong together"
        )
    r = int(np.sum(evals > 1.0))  # at least 1: evals[0] > 1 above
    if dim > 0:
        r = min(r, dim)
    w = evecs[:, :r]
    m = np.linalg.inv(w.T @ sigma_i @ w) - np.linalg.inv(w.T @ sigma_e @ w)
    return linalg.psd_factor(linalg.psd_project(m)).astype(np.float64) @ w.T, evals[:r]


def _views(cams, y, cfg) -> np.ndarray | None:
    """The camera ids XQDA's pairs are drawn across, or None for every pair: ``cfg.pairs``
    is "all", no cameras were given, or no identity is seen by two cameras."""
    if cams is None or cfg.get("pairs", "all") == "all":
        return None
    cams = dataset_arrays.integer_ids(cams, "cams", len(y), f"the features have {len(y)} rows")
    key = np.unique(np.stack([y, cams]), axis=1)[0]  # one entry per (identity, camera)
    return cams if len(key) > len(np.unique(key)) else None


def fit(features, labels, cfg, *, cams=None):
    """Learns an XQDA metric in closed form (arguments and errors: ``warca_jax.methods``).

    ``cams`` ([N] camera ids, optional): with ``cfg.pairs = "cross_camera"`` the pairs are
    those of two cameras, as the original's two views; otherwise, or without cameras,
    every pair.

    Returns:
      (linear Metric with projection [r, D], empty history).
    """
    x, y, scale = validate(features, labels, cfg)
    views = _views(cams, y, cfg)
    comps, xr = reduce_to_span(x)
    sigma_i, sigma_e = pair_covariances(xr, y, views)
    relative = cfg.get("ridge", "relative") == "relative"
    reg = cfg.reg if relative else cfg.reg * scale**2  # absolute: in the features' units
    basis = cfg.get("basis", "generalized")
    proj, _ = xqda_projection(
        sigma_i, sigma_e, dim=cfg.dim, reg=reg, relative=relative, basis=basis
    )
    if comps is not None:
        proj = proj @ comps  # the centring of the reduction cancels in differences
    metric = Metric(
        "linear", x.shape[1], projection=proj.astype(np.float32), name="xqda", feature_scale=scale
    )
    model_checks.check_model(metric, method="XQDA", features=features, hint="raise reg")
    return metric, []


VARIANTS = ("default", "small")  # small: the same (XQDA is fast)


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``xqda``: what configs/xqda.py starts from."""
    m = checks.new_config("xqda", variant, VARIANTS)
    m.dim = 0  # cap on the subspace dimension (0: every eigenvalue > 1, as the paper).
    m.reg = 1.0  # ridge reg * trace(Sigma_I) / D on Sigma_I: the mean eigenvalue
    #              (xqda.py docstring; 1e-3 kept 315 noise directions on VIPeR).
    m.ridge = "relative"  # "absolute": the ridge is reg itself (the original's 0.001)
    m.pairs = "all"  # every pair; "cross_camera": pairs of two cameras, given the cameras
    #                  (the original's; it cost on the small real subsets, docstring)
    m.basis = "generalized"  # the paper's eq. 14-15; "svd": the original code's (docstring)
    return m


METHODS = {"xqda": Method(fit, validate, default_config, VARIANTS)}
