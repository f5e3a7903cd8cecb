"""NFST: the null Foley-Sammon transform, linear and kernel.

Zhang, Xiang and Gong, "Learning a Discriminative Null Space for Person Re-identification",
CVPR 2016. With S_w, S_b and S_t = S_w + S_b the within-class, between-class and total
scatter of the training data, NFST's directions w satisfy

    w^T S_w w = 0   and   w^T S_b w > 0,

the null space of S_w inside the range of S_t (a direction outside the range carries no
training variance at all). Along them every training image of a person lands on its
person's mean: Foley-Sammon's ratio w^T S_b w / w^T S_w w is infinite, the best a
discriminant can reach. It exists in the small-sample case the paper requires: when the
N training images span N - 1 dimensions (fewer images than features, or any kernel with a
full-rank kernel matrix), rank S_t = N - 1 and rank S_w = N - c for c people, so the null
space has c - 1 dimensions (the paper's section 3). The metric is the Euclidean distance
between projections onto it.

Computed in closed form (the paper's kernel derivation; the linear form is the same
computation with the linear kernel):

1. the range of S_t: the eigenpairs (Lambda, V) of the centred kernel matrix H K H
   (linear: of the centred Gram matrix X~ X~^T, the squared singular values and left
   singular vectors of the centred features X~), those below ``span_rtol`` times the
   largest left out; the training data's coordinates in that orthonormal basis are
   Z = V Lambda^(1/2) ([N, r]);
2. S_w in those coordinates is Z_w^T Z_w, Z_w the rows of Z less their person's mean row;
   its null space is spanned by the right singular vectors B ([r, m]) of Z_w whose singular
   value is at most ``null_rtol`` times the largest;
3. the map: A = B^T Lambda^(-1/2) V^T, [m, N], applied to a point's kernel column k(X, x)
   (kernel form; V's columns are orthogonal to the constant vector, so the centring of a
   new point's column shifts every projection alike and is left out), or W = A X~, [m, D]
   (linear form).

NFST has no iterations and draws nothing; its output dimension is the null space's (c - 1
in the small-sample case), not a setting.
"""

from __future__ import annotations

import ml_collections
import numpy as np

from warca_jax.maths import kernels
from warca_jax.methods import Method, checks, model_checks
from warca_jax.metric import Metric


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an NFST config that cannot run on this training data."""
    kernel = checks.check_choice(cfg, "kernel", kernels.KERNELS, also=("none",))
    checks.check_number(cfg, "kernel_gamma", low=0, note="; 0: from the data")
    checks.check_number(cfg, "span_rtol", low=0, high=1, low_open=True, high_open=True)
    checks.check_number(cfg, "null_rtol", low=0, high=1, low_open=True, high_open=True)
    n, d = data.x.shape
    num_ids = len(np.unique(data.y))
    if kernel == "none" and n - num_ids >= d:
        raise ValueError(
            f"NFST's linear form needs the small-sample case, fewer training images than "
            f"features plus identities (N - #identities < D), so that the within-class "
            f"scatter has a null space: got N - #identities = {n} - {num_ids} = "
            f"{n - num_ids} >= D = {d}; use a kernel form (kernel='rbf' or 'chi2_rbf')"
        )
    if kernel != "none":
        kernels.check_kernel_input(data.x, kernel)


# NFST depends on the features' scale only through the kernel's bandwidth, which follows it
# (kernel_gamma 0), so features too small or too large for float32 are rescaled.
validate = checks.validator("NFST", check_config)


def centred_kernel_eigenpairs(gram: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """(Lambda [r] descending, V [N, r]): the eigenpairs of H K H (float64) whose eigenvalue
    exceeds ``rtol`` times the largest; H = I - 1 1^T / N centres K's rows and columns."""
    k = np.asarray(gram, np.float64)
    k = k - k.mean(axis=0, keepdims=True)
    k = k - k.mean(axis=1, keepdims=True)
    k = (k + k.T) / 2.0
    vals, vecs = np.linalg.eigh(k)
    keep = vals > rtol * max(vals.max(), 0.0)
    return vals[keep][::-1], vecs[:, keep][:, ::-1]


def null_space_map(gram: np.ndarray, labels, *, span_rtol: float, null_rtol: float):
    """A: [m, N], the null Foley-Sammon directions on kernel columns (module docstring,
    steps 1-3).

    Raises:
      ValueError: the within-class scatter has no null space in the range of the total
        scatter (every direction of the training data varies within a person).
    """
    labels = np.asarray(labels)
    vals, vecs = centred_kernel_eigenpairs(gram, span_rtol)
    if not len(vals):
        raise ValueError("NFST: the training kernel matrix is constant after centring")
    z = vecs * np.sqrt(vals)[None, :]  # [N, r] coordinates in the range of S_t
    _, inverse = np.unique(labels, return_inverse=True)
    counts = np.bincount(inverse).astype(np.float64)
    means = np.zeros((len(counts), z.shape[1]))
    np.add.at(means, inverse, z)
    z_w = z - (means / counts[:, None])[inverse]
    _, s, vt = np.linalg.svd(z_w, full_matrices=True)
    rank = int(np.sum(s > null_rtol * max(s.max(initial=0.0), np.finfo(float).tiny)))
    null = vt[rank:].T  # [r, m]
    if null.shape[1] == 0:
        raise ValueError(
            f"NFST: the within-class scatter has no null space in the span of the "
            f"{z.shape[1]} training directions (rank {rank}); NFST needs the small-sample "
            f"case: use a kernel form, or fewer training images per identity"
        )
    return (null / np.sqrt(vals)[:, None]).T @ vecs.T


def fit(features, labels, cfg):
    """Learns an NFST metric in closed form (arguments and errors: ``warca_jax.methods``).

    Returns:
      (Metric, []): kind "linear" with W: [m, D], or kind "kernel" with A: [m, N]; m is
      the null space's dimension (c - 1 for c training identities in the small-sample case).
    """
    x, y, scale = validate(features, labels, cfg)
    opts = dict(span_rtol=float(cfg.span_rtol), null_rtol=float(cfg.null_rtol))
    if cfg.kernel == "none":
        x64 = np.asarray(x, np.float64)
        xc = x64 - x64.mean(axis=0)
        proj = null_space_map(xc @ xc.T, y, **opts) @ xc
        support, gamma = None, 1.0
    else:
        kernel_gamma = kernels.gamma_for_scaled(cfg.kernel, cfg.kernel_gamma, scale)
        gram, gamma = kernels.gram_matrix(x, kernel=cfg.kernel, gamma=kernel_gamma)
        if not np.all(np.isfinite(np.asarray(gram))):
            raise FloatingPointError("NFST: the training kernel matrix has non-finite entries")
        proj, support = null_space_map(np.asarray(gram), y, **opts), x
    metric = Metric(
        kind="linear" if cfg.kernel == "none" else "kernel",
        input_dim=x.shape[1],
        projection=proj.astype(np.float32),
        support=support,
        kernel=cfg.kernel,
        gamma=float(gamma),
        name="nfst",
        feature_scale=scale,
    )
    model_checks.check_model(metric, method="NFST", features=features, hint="use a kernel form")
    return metric, []


# rbf: the authors' kernel NFST (an RBF kernel, its bandwidth from the data); linear: the
# linear form (small-sample case only); chi2: the chi2-RBF kernel of the paper's chi2 methods
VARIANTS = ("rbf", "linear", "chi2")


def default_config(variant: str = "rbf") -> ml_collections.ConfigDict:
    """The defaults of ``nfst``: what configs/nfst.py starts from."""
    m = checks.new_config("nfst", variant, VARIANTS)
    # 'none' (linear W) or linear | rbf | chi2 | chi2_rbf | laplacian.
    m.kernel = {"rbf": "rbf", "linear": "none", "chi2": "chi2_rbf"}[variant]
    m.kernel_gamma = 0.0  # kernel bandwidth (0: 1 / the mean training distance).
    # eigenvalues of the centred kernel matrix at most span_rtol times the largest are
    # taken as zero (the float32 kernel matrix's rounding, about 1e-7 relative, lies below)
    m.span_rtol = 1e-6
    # singular values of the within-class coordinates at most null_rtol times the largest
    # span the null space (exact zeros up to float64 rounding in the small-sample case)
    m.null_rtol = 1e-8
    return m


METHODS = {"nfst": Method(fit, validate, default_config, VARIANTS, kinds=("linear", "kernel"))}
