"""Local Fisher discriminant analysis (LFDA), linear and kernel.

Sugiyama, "Dimensionality reduction of multimodal labeled data by local Fisher
discriminant analysis", JMLR 2007; applied to re-identification by Pedagadi et
al. (CVPR 2013) and kernelised for it by Xiong et al. (ECCV 2014).

Affinity (Sugiyama's local scaling, after Zelnik-Manor & Perona):
A_ij = exp(-||x_i - x_j||^2 / (s_i s_j)), s_i the distance of x_i to its knn-th
nearest neighbour *within its class*. A class with n_c <= knn images uses its farthest
member (knn clipped to n_c - 1, as Sugiyama's code and metric-learn do); a singleton
class has no pairs and contributes nothing.

Weights (Sugiyama 2007), for i, j in the same class c, with n the number of samples:
W^w_ij = A_ij / n_c and W^b_ij = A_ij (1/n - 1/n_c); across classes W^w_ij = 0 and
W^b_ij = 1/n. The scatter matrices 1/2 sum_ij W_ij (x_i - x_j)(x_i - x_j)^T are
X^T (diag(W 1) - W) X (a graph Laplacian), so no pair is enumerated.

Solution: the top ``dim`` generalized eigenvectors of S^b v = lambda S^w v with
S^w regularised by ``reg * trace(S^w) / r`` on its diagonal, r = min(D, N - #classes) (its
mean non-zero eigenvalue; ``reg_scale``), so that two images per identity (VIPeR: S^w of
rank N / 2) still works. Embedding ``weighted``
(Sugiyama's default) scales each eigenvector by sqrt(lambda).

Kernel form (kernel LFDA, Sugiyama 2007): the same weights with kernel-space distances
k_ii + k_jj - 2 k_ij, scatter K L K in the span of the training kernel columns,
and A: [dim, N] with W = A Phi(X)^T.

Defaults, and why (measurements, with their commands: docs/methods.md#lfda). The linear
form keeps Sugiyama's weighted embedding with a ridge of ``reg`` = 0.18 (Xiong et al.'s
oLFDA) times S^w's mean non-zero eigenvalue (``reg_scale='rank'``): relative to trace / D
instead, the ridge is far smaller than S^w's eigenvalues where most of the D dimensions are
its null space (two images per identity) and leaves that null space to noise. The kernel
variant ``:chi2`` is Xiong et al.'s kLFDA, the paper's baseline code: plain eigenvectors
(with two images per identity K L_w K is far from full rank, and sqrt(lambda) weighting
lets a few directions dominate) and a ridge of 0.01 relative to trace / N.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from warca_jax.maths import kernels, linalg
from warca_jax.methods import Method, checks, model_checks
from warca_jax.metric import Metric

EMBEDDINGS = ("weighted", "orthonormalized", "plain")
REG_SCALES = ("rank", "dims")  # the ridge's r: min(D, N - #classes), or D


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an LFDA config that cannot run on this training data."""
    kernel = checks.check_kernel_and_dim(cfg, data)
    try:
        checks.check_number(cfg, "knn", low=1, integer=True)
    except ValueError:
        raise ValueError(f"knn must be an integer >= 1 (Sugiyama: 7), got {cfg.knn!r}") from None
    checks.check_number(cfg, "reg", low=0, note="; ridge on the within-class scatter")
    checks.check_choice(cfg, "reg_scale", REG_SCALES)
    checks.check_number(cfg, "kernel_gamma", low=0, note="; 0: from the data")
    checks.check_choice(cfg, "embedding", EMBEDDINGS)
    if "span" in cfg:  # configs written before the field solved in all D dimensions
        checks.check_bool(cfg, "span")
    if kernel != "none":
        kernels.check_kernel_input(data.x, kernel)


# Classes smaller than knn + 1 are accepted: their local scale uses the farthest member of
# the class (module docstring). LFDA does not depend on the features' scale (its affinity
# is locally scaled): features too small or too large for float32 are rescaled.
validate = checks.validator("LFDA", check_config)


@functools.partial(jax.jit, static_argnames="knn")
def local_affinity(sqdist: jax.Array, labels: jax.Array, *, knn: int) -> jax.Array:
    """Local-scaling affinity within classes (Sugiyama 2007), zero across classes.

    Args:
      sqdist: [N, N] squared distances.
      labels: [N] class labels.
      knn: neighbour that sets the local scale (clipped to n_c - 1 in small classes).

    Returns:
      [N, N] symmetric affinity A.
    """
    n = sqdist.shape[0]
    sqdist = jnp.maximum(sqdist, 0.0)
    same = labels[:, None] == labels[None, :]
    class_size = jnp.sum(same, axis=1)
    # The knn + 1 smallest within-class distances of each row; entry 0 is the point itself.
    nearest = -jax.lax.top_k(-jnp.where(same, sqdist, jnp.inf), min(knn, n - 1) + 1)[0]
    kth = jnp.minimum(knn, class_size - 1)
    sigma = jnp.sqrt(jnp.take_along_axis(nearest, kth[:, None], axis=1)[:, 0])
    scale = sigma[:, None] * sigma[None, :]
    ok = same & (scale > 0)
    return jnp.where(ok, jnp.exp(-sqdist / jnp.where(ok, scale, 1.0)), 0.0)


@jax.jit
def lfda_laplacians(affinity: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Laplacians L = diag(W 1) - W of the within and between weights (Sugiyama 2007).

    Args:
      affinity: [N, N] local affinity (zero across classes).
      labels: [N].

    Returns:
      (L_w, L_b), [N, N] each, so that S^w = X^T L_w X and S^b = X^T L_b X.
    """
    n = affinity.shape[0]
    same = labels[:, None] == labels[None, :]
    class_size = jnp.sum(same, axis=1, keepdims=True).astype(affinity.dtype)
    w_w = jnp.where(same, affinity / class_size, 0.0)
    w_b = jnp.where(same, affinity * (1.0 / n - 1.0 / class_size), 1.0 / n)

    def lap(w):
        return jnp.diag(jnp.sum(w, axis=1)) - w

    return lap(w_w), lap(w_b)


def local_scatter(x, labels, *, knn: int) -> tuple[np.ndarray, np.ndarray]:
    """Local within- and between-class scatter matrices S^w, S^b: [D, D] each (float64).

    Args:
      x: [N, D] features.
      labels: [N].
      knn: the local-scaling neighbour.
    """
    x = np.asarray(x, np.float64)
    x = x - x.mean(axis=0)  # rows of L sum to 0: centring changes nothing but rounding
    xj = jnp.asarray(x, jnp.float32)
    sq = jnp.sum(xj * xj, axis=1)
    hi = jax.lax.Precision.HIGHEST
    sqdist = sq[:, None] + sq[None, :] - 2.0 * jnp.dot(xj, xj.T, precision=hi)
    lw, lb = lfda_laplacians(local_affinity(sqdist, jnp.asarray(labels), knn=knn), labels)
    lw, lb = np.asarray(lw, np.float64), np.asarray(lb, np.float64)
    return x.T @ lw @ x, x.T @ lb @ x


def kernel_local_scatter(gram, labels, *, knn: int) -> tuple[np.ndarray, np.ndarray]:
    """K L_w K and K L_b K: [N, N] each (float64), with kernel-space distances."""
    k = jnp.asarray(gram, jnp.float32)
    diag = jnp.diag(k)
    sqdist = diag[:, None] + diag[None, :] - 2.0 * k
    lw, lb = lfda_laplacians(local_affinity(sqdist, jnp.asarray(labels), knn=knn), labels)
    k64 = np.asarray(gram, np.float64)
    return k64 @ np.asarray(lw, np.float64) @ k64, k64 @ np.asarray(lb, np.float64) @ k64


def ridge_rank(d: int, num_samples: int, num_classes: int, reg_scale: str) -> int:
    """The r of the ridge reg tr(S^w) / r: D ("dims"), or ("rank") the most non-zero
    eigenvalues S^w can have, min(D, N - #classes) (at least 1)."""
    if reg_scale == "dims":
        return d
    return max(1, min(d, num_samples - num_classes))


def solve(s_w: np.ndarray, s_b: np.ndarray, *, dim: int, reg: float, embedding: str, rank=None):
    """Top ``dim`` directions of S^b v = lambda (S^w + reg tr(S^w)/r I) v: [D, dim], r =
    ``rank`` (``ridge_rank``; None: D).

    Raises:
      FloatingPointError: non-finite scatter matrices.
    """
    if not (np.all(np.isfinite(s_w)) and np.all(np.isfinite(s_b))):
        raise FloatingPointError("LFDA scatter matrices have non-finite entries")
    d = s_w.shape[0]
    ridge = reg * max(np.trace(s_w), 1e-300) / (rank or d)
    # Warns only when the ridge-regularised scatter is still (near) singular, e.g. reg = 0.
    s_w = linalg.regularise(s_w + ridge * np.eye(d), what="LFDA within-class scatter")
    vals, vecs = linalg.generalized_eigh(s_b, s_w, dim=dim)
    if embedding == "weighted":
        vecs = vecs * np.sqrt(np.maximum(vals, 0.0))[None, :]
    elif embedding == "orthonormalized":
        vecs, _ = np.linalg.qr(vecs)
    return vecs


def fit(features, labels, cfg):
    """Learns an LFDA metric in closed form (arguments and errors: ``warca_jax.methods``).

    Returns:
      (Metric, []): kind "linear" with W: [dim, D], or kind "kernel" with A: [dim, N].
    """
    x, y, scale = validate(features, labels, cfg)
    y_idx = np.unique(y, return_inverse=True)[1]
    span = None
    if cfg.kernel == "none":
        # With N <= D both scatters live in the span of the centred training features (the
        # Laplacians' rows sum to 0) and the ridge is isotropic, so the generalised
        # eigenvectors with non-zero eigenvalue lie in it: the same problem on its k <= N - 1
        # coordinates, lifted back to D (used when k >= dim, as the top dim need).
        if cfg.get("span", False):
            span = linalg.training_span(x, min_dim=int(cfg.dim))
        feats = x if span is None else span.coords(x, dtype=np.float64)
        s_w, s_b = local_scatter(feats, y_idx, knn=int(cfg.knn))
        support, gamma = None, 1.0
    else:
        kernel_gamma = kernels.gamma_for_scaled(cfg.kernel, cfg.kernel_gamma, scale)
        gram, gamma = kernels.gram_matrix(x, kernel=cfg.kernel, gamma=kernel_gamma)
        s_w, s_b = kernel_local_scatter(gram, y_idx, knn=int(cfg.knn))
        support = x
    # the ridge's D: the input's (linear, in the span too) or N (kernel)
    d = x.shape[1] if cfg.kernel == "none" else x.shape[0]
    rank = ridge_rank(d, x.shape[0], int(y_idx.max()) + 1, cfg.reg_scale)
    opts = dict(dim=cfg.dim, reg=float(cfg.reg), embedding=cfg.embedding, rank=rank)
    proj = solve(s_w, s_b, **opts).T
    if span is not None:
        proj = span.lift(proj, dtype=np.float64)
    metric = Metric(
        kind="linear" if cfg.kernel == "none" else "kernel",
        input_dim=x.shape[1],
        projection=proj.astype(np.float32),
        support=support,
        kernel=cfg.kernel,
        gamma=float(gamma),
        name="lfda",
        feature_scale=scale,
    )
    model_checks.check_model(metric, method="LFDA", features=features, hint="raise reg")
    return metric, []


VARIANTS = ("linear", "chi2", "small")  # chi2: kLFDA with the chi2-RBF kernel


def default_config(variant: str = "linear") -> ml_collections.ConfigDict:
    """The defaults of ``lfda``: what configs/lfda.py starts from."""
    m = checks.new_config("lfda", variant, VARIANTS)
    m.kernel = "none"  # 'none' (linear W) or linear | rbf | chi2 | chi2_rbf | laplacian.
    m.kernel_gamma = 0.0  # kernel bandwidth (0: 1 / mean training distance).
    m.dim = 40  # output dimension (WARCA paper: 200 Market-1501, 100 VIPeR, 40 others).
    m.knn = 7  # neighbour setting the local scale (Sugiyama 2007: 7); clipped to the
    #            class size - 1 in classes with fewer than knn + 1 images.
    # ridge reg * trace(S_w) / r on the within-class scatter, so that two images per
    # identity (S_w singular) still works. r = min(D, N - #classes), the most non-zero
    # eigenvalues S_w can have ('rank'; 'dims': r = D): the ridge is reg times S_w's mean
    # non-zero eigenvalue, whether S_w is full rank (D = 64: the same as r = D) or has a
    # null space of 88% of its dimensions (VIPeR: D = 2,580, N - #classes = 316). reg =
    # 0.18 is Xiong's oLFDA (1 - beta) S_w + beta tr(S_w)/D I with beta = 0.15
    # (measurements: docs/methods.md#lfda).
    m.reg = 0.18
    m.reg_scale = "rank"
    m.embedding = "weighted"  # eigenvectors scaled by sqrt(eigenvalue) ('weighted',
    #                           Sugiyama's default), 'orthonormalized' or 'plain'.
    # The linear form with no more training images than features solves in the span of the
    # centred training features (``linalg.Span``): the same eigenvectors from a k <= N - 1
    # square problem instead of D. False: the D x D problem.
    m.span = True
    if variant == "chi2":
        # The protocol's chi2 kernel for the paper's three chi2 methods: exp(-gamma chi2(x, y)),
        # gamma = 1 / mean training chi2 distance (kernel_gamma = 0).
        m.kernel = "chi2_rbf"
        # Xiong et al.'s kLFDA (the paper's LFDA-chi2 baseline): ridge beta = 0.01 relative to
        # trace / N and raw ('plain') generalised eigenvectors. The weighted embedding lets the
        # few largest eigenvalues (directions near the null space of K L_w K, rank <= N - #ids)
        # dominate (measurements: docs/methods.md#lfda).
        m.reg = 1e-2
        m.reg_scale = "dims"  # Xiong's kLFDA: relative to trace / N
        m.embedding = "plain"
    elif variant == "small":
        m.dim = 16
    return m


METHODS = {"lfda": Method(fit, validate, default_config, VARIANTS, kinds=("linear", "kernel"))}
