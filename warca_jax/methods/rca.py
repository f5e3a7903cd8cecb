"""RCA: relevant component analysis (Bar-Hillel, Hertz, Shental & Weinshall, JMLR 2005).

Side information is a set of chunklets: small groups of points known to share a label.
From a labelled training set they are drawn as metric-learn's ``RCA_Supervised`` draws
them (``n_chunks`` disjoint groups of ``chunk_size`` same-label samples,
``constraints.chunklets``, from ``np.random.default_rng(seed)``). With m_j the mean of
chunklet j and p the number of points in chunklets, the within-chunklet covariance is
(paper, eq. 1 / Algorithm 1)

    C = 1/p sum_j sum_{i in j} (x_ji - m_j)(x_ji - m_j)^T,

and RCA whitens it: W = C^{-1/2}, i.e. the Mahalanobis matrix M = C^{-1}, which is also
the maximum-likelihood metric of Gaussian classes with a shared covariance (paper,
section 4). The closed form is computed in float64 NumPy, once per fit.

Singular C. With p - #chunklets degrees of freedom (100 for metric-learn's 100 pairs) C
is singular whenever D exceeds them (or a feature is constant), and metric-learn's
``RCA`` then returns NaN (it only warns). Here a ridge is always added:
C' = C + reg * trace(C) / D * I (``cfg.reg``, relative to C's mean eigenvalue), so that
M = C'^{-1} exists; the directions no chunklet varies along get the largest weight
1 / (reg * trace(C) / D).

Dimensionality (``cfg.dim`` < D), as metric-learn's ``n_components`` and the paper's RCA
with dimensionality reduction (section 2.3, a constrained Fisher discriminant): keep the
``dim`` directions that maximise total over within-chunklet variance, the top
generalized eigenvectors V of S v = lambda C' v, where S is the covariance of the points
in chunklets (as metric-learn estimates it; ridge ``reg`` too), normalised so that
V^T C' V = I. Then W = V^T: [dim, D] whitens C' within that subspace and
M = V V^T = A (A^T C' A)^{-1} A^T for any basis A of it (metric-learn's formula).
``dim = 0`` (the default, metric-learn's ``n_components=None``) keeps D: W = C'^{-1/2}.
"""

from __future__ import annotations

import ml_collections
import numpy as np

from warca_jax.maths import linalg
from warca_jax.methods import Method, checks, constraints, model_checks
from warca_jax.metric import Metric


def max_chunklets(labels: np.ndarray, size: int) -> int:
    """The most disjoint chunklets of ``size`` same-label samples ``labels`` allow."""
    counts = np.unique(np.asarray(labels), return_counts=True)[1]
    return int(np.sum(counts // size))


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an RCA config that cannot run on this data."""
    d = data.x.shape[1]
    checks.check_number(cfg, "chunk_size", low=2, integer=True)
    checks.check_number(cfg, "n_chunks", low=1, integer=True)
    most = max_chunklets(data.y, int(cfg.chunk_size))
    if cfg.n_chunks > most:
        raise ValueError(
            f"method.n_chunks = {cfg.n_chunks} chunklets of chunk_size = {cfg.chunk_size} "
            f"same-label samples cannot be drawn: these labels allow at most {most}; lower "
            "n_chunks or chunk_size"
        )
    checks.check_number(cfg, "dim", integer=True)
    checks.check_range(cfg.dim, 0, d, what="output dim", note=f"0: D = {d}")
    checks.check_number(cfg, "reg", low=0, low_open=True, note="; ridge relative to trace / D")


# RCA's metric scales as 1 / scale^2 with the features, so the ranking does not depend on
# their scale: features too small or too large for float32 are rescaled.
validate = checks.validator("RCA", check_config)


def chunklet_covariances(x: np.ndarray, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Within-chunklet covariance C and covariance S of the points in chunklets.

    Args:
      x: [N, D] features.
      chunks: [N] chunklet index of every sample, -1 for none.

    Returns:
      (C [D, D], S [D, D]) float64: C = 1/p sum_j sum_i (x_ji - m_j)(x_ji - m_j)^T (eq. 1)
      and S the (unbiased) covariance of the p points in chunklets.
    """
    inside = chunks >= 0
    xc, c = np.asarray(x, np.float64)[inside], chunks[inside]
    num = int(c.max()) + 1
    sums = np.zeros((num, xc.shape[1]))
    np.add.at(sums, c, xc)
    centred = xc - (sums / np.bincount(c, minlength=num)[:, None])[c]
    within = centred.T @ centred / xc.shape[0]
    dev = xc - xc.mean(axis=0)
    total = dev.T @ dev / max(xc.shape[0] - 1, 1)
    return within, total


def ridge(s: np.ndarray, reg: float) -> np.ndarray:
    """s + reg * trace(s) / D * I (trace 0: reg * I)."""
    d = s.shape[0]
    scale = np.trace(s) / d if np.trace(s) > 0 else 1.0
    return s + reg * scale * np.eye(d)


def rca_projection(within: np.ndarray, total: np.ndarray, *, dim: int, reg: float) -> np.ndarray:
    """W [dim, D] with W^T W = M, RCA's metric (module docstring).

    Args:
      within: [D, D] within-chunklet covariance C.
      total: [D, D] covariance of the points in chunklets (used when dim < D).
      dim: output dimension, 1..D.
      reg: relative ridge on C (and S).
    """
    d = within.shape[0]
    c = ridge(within, reg)
    if dim == d:
        w, v = np.linalg.eigh((c + c.T) / 2)
        return (v / np.sqrt(w)[None, :]) @ v.T  # symmetric C'^{-1/2}
    _, vecs = linalg.generalized_eigh(ridge(total, reg), c, dim=dim)
    return vecs.T


def fit(features, labels, cfg, *, seed=0):
    """Learns an RCA metric in closed form (arguments and errors: ``warca_jax.methods``;
    too few chunklets included is a ``ValueError`` too).

    ``seed`` draws the chunklets.

    Returns:
      (linear Metric with W: [dim or D, D], empty history).
    """
    x, y, scale = validate(features, labels, cfg)
    chunks = constraints.chunklets(
        y, int(cfg.n_chunks), int(cfg.chunk_size), np.random.default_rng(seed)
    )
    within, total = chunklet_covariances(x, chunks)
    dim = int(cfg.dim) or x.shape[1]
    proj = rca_projection(within, total, dim=dim, reg=float(cfg.reg)).astype(np.float32)
    metric = Metric("linear", x.shape[1], projection=proj, name="rca", feature_scale=scale)
    model_checks.check_model(metric, method="RCA", features=features, hint="raise reg")
    return metric, []


VARIANTS = ("default", "reduced", "small")  # reduced: 40 dims; small: 40 chunklets


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``rca``: what configs/rca.py starts from."""
    m = checks.new_config("rca", variant, VARIANTS)
    m.n_chunks = 100  # chunklets drawn from the labels (metric-learn: n_chunks=100).
    m.chunk_size = 2  # same-label samples per chunklet (metric-learn: chunk_size=2).
    # output dimension (0: D, W = C'^{-1/2}, metric-learn's n_components=None); < D: the
    # dim directions of largest total / within-chunklet variance (paper, section 2.3).
    m.dim = 0
    # ridge reg * trace(C) / D on the within-chunklet covariance C (and on the total one
    # when dim < D), so that M = C'^{-1} exists when C is singular (D above the chunklets'
    # degrees of freedom, or a constant feature), where metric-learn returns NaN.
    m.reg = 1e-3
    if variant == "reduced":
        m.dim = 40
    elif variant == "small":
        m.n_chunks = 40
    return m


METHODS = {"rca": Method(fit, validate, default_config, VARIANTS)}
