"""SVMML: locally-adaptive decision functions (Li et al., CVPR 2013, "LADF").

On PCA-reduced features (``pca_variance`` of the variance, 0.95 as the WARCA
paper did, or ``pca_dim`` components), a second-order decision function on
pairs (paper eq. 5),

    f(x, z) = 1/2 x^T A x + 1/2 z^T A z - x^T B z + c^T (x + z) + b,

which joins a Mahalanobis distance and a threshold that adapts to where the
pair lies: A = B = 2 M, c = 0, b = -t gives (x - z)^T M (x - z) - t. We use f
as a dissimilarity (f < 0: same identity, so that f ranks a gallery like a
distance; the paper's f is our -f) and learn it as an SVM on pairs:

    min lam/2 (||A||_F^2 + ||B||_F^2 + ||c||^2)
        + mean_{same} ell(1 + f) + mean_{different} ell(1 - f),  A, B PSD,

with ell the hinge [.]_+ or its square, the two classes weighted equally
(there are far more different pairs). Pairs: every same-label pair of the
training set and ``neg_ratio`` times as many different-label pairs drawn
uniformly (seeded). The paper solves the dual with a QP solver; we solve the
primal by full-batch Adam (jitted, a ``lax.scan`` of steps) with A and B
projected on the PSD cone after every step (projected gradient): the
constraints are the paper's, the solver differs. The PCA input is scaled by
one scalar so that the mean squared norm is 1, which makes the default step
size work on any data scale.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from warca_jax import linalg, training
from warca_jax.methods import Method, _checks
from warca_jax.metric import Metric

LOSSES = ("hinge", "squared_hinge")


@dataclasses.dataclass(frozen=True)
class SvmmlMetric(Metric):
    """The SVMML decision function as a dissimilarity (kind ``svmml``).

    Attributes (besides ``Metric``'s):
      mean: [D] PCA mean.
      components: [p, D] PCA components, scaled (reduced x = (x - mean) @ components.T).
      a_mat, b_mat: [p, p] PSD matrices A and B.
      c_vec: [p] linear term c.
      bias: the offset b.
    """

    KIND = "svmml"
    mean: np.ndarray | None = None
    components: np.ndarray | None = None
    a_mat: np.ndarray | None = None
    b_mat: np.ndarray | None = None
    c_vec: np.ndarray | None = None
    bias: float = 0.0

    @property
    def output_dim(self) -> int:
        return int(self.components.shape[0])

    def transform(self, x: np.ndarray, *, block_size: int = 4096) -> np.ndarray:
        """The PCA-reduced features [n, p] the decision function reads."""
        del block_size
        x = self.scaled_features(x)
        return ((x - self.mean) @ self.components.T).astype(np.float32)

    def pairwise_distances(self, x: np.ndarray, y: np.ndarray, *, block_size: int = 1024):
        """[n, m] values of f(x_a, y_b), computed in row blocks of x (smaller: more similar)."""
        xr, yr = jnp.asarray(self.transform(x)), jnp.asarray(self.transform(y))
        params = tuple(jnp.asarray(v) for v in (self.a_mat, self.b_mat, self.c_vec))
        hy = _half_quad_lin(yr, params[0], params[2])
        out = [
            np.asarray(_block_f(xr[s : s + block_size], yr, hy, *params[:3], self.bias))
            for s in range(0, xr.shape[0], block_size)
        ]
        return np.concatenate(out) if out else np.zeros((0, yr.shape[0]), np.float32)


def _half_quad_lin(x, a, c):
    """1/2 x^T A x + c^T x per row: [n]."""
    return 0.5 * jnp.sum((x @ a) * x, axis=1) + x @ c


@jax.jit
def _block_f(xb, yr, hy, a, b, c, bias):
    return _half_quad_lin(xb, a, c)[:, None] + hy[None, :] - (xb @ b) @ yr.T + bias


def decision(params, xi, xj):
    """f(x_i, x_j) for paired rows: params = (A, B, c, b); xi, xj: [P, p] -> [P]."""
    a, b, c, bias = params
    return _half_quad_lin(xi, a, c) + _half_quad_lin(xj, a, c) - jnp.sum((xi @ b) * xj, 1) + bias


def pair_decisions(params, x, i, j):
    """f(x_i, x_j) for index pairs, without gathering [P, p] rows for the quadratic terms.

    The per-sample terms 1/2 x^T A x + c^T x and the rows of X B are computed once for
    the N samples ([N, p] work) and the P pairs only gather them: O(N p^2 + P p) instead
    of O(P p^2), which is what makes the full-batch objective affordable (P ~ 10^5).

    Args:
      params: (A [p, p], B [p, p], c [p], b []).
      x: [N, p] reduced features. i, j: [P] int indices of the pairs.

    Returns:
      [P] decision values, equal to ``decision(params, x[i], x[j])``.
    """
    a, b, c, bias = params
    h = _half_quad_lin(x, a, c)
    xb = x @ b
    return h[i] + h[j] - jnp.sum(xb[i] * x[j], axis=1) + bias


def svmml_loss(params, x, i, j, dissimilar, *, lam, loss="hinge"):
    """The regularised, class-balanced pair SVM objective (module docstring).

    Args:
      params: (A [p, p], B [p, p], c [p], b []).
      x: [N, p] reduced features; i, j: [P] indices of the pairs.
      dissimilar: [P] bool, the pair's identities differ.
      lam: regularisation weight.
      loss: ``hinge`` or ``squared_hinge``.
    """
    y = jnp.where(dissimilar, 1.0, -1.0)
    margin = jnp.maximum(1.0 - y * pair_decisions(params, x, i, j), 0.0)
    if loss == "squared_hinge":
        margin = margin**2
    n_dis = jnp.maximum(jnp.sum(dissimilar), 1)
    n_sim = jnp.maximum(jnp.sum(~dissimilar), 1)
    data = jnp.sum(jnp.where(dissimilar, margin / n_dis, margin / n_sim))
    a, b, c, _ = params
    return data + 0.5 * lam * (jnp.sum(a * a) + jnp.sum(b * b) + jnp.sum(c * c))


def _psd(m):
    w, v = jnp.linalg.eigh(0.5 * (m + m.T))
    return (v * jnp.maximum(w, 0.0)) @ v.T


def check_config(cfg, data: _checks.TrainingData) -> None:
    """Raises ValueError for an SVMML config that cannot run on this data."""
    top = min(data.x.shape)
    _checks.check_number(cfg, "pca_variance", low=0, high=1, low_open=True)
    _checks.check_number(cfg, "pca_dim", integer=True)
    note = "0: by pca_variance; at most min(N, D)"
    _checks.check_range(cfg.pca_dim, 0, top, what="pca_dim", note=note)
    _checks.check_numbers(cfg, ("neg_ratio", "learning_rate"), low=0, low_open=True)
    _checks.check_number(cfg, "lam", low=0)
    _checks.check_numbers(cfg, ("num_iters", "log_every"), low=1, integer=True)
    _checks.check_choice(cfg, "loss", LOSSES)


# SVMML rescales the features itself: its result does not depend on their scale.
validate = _checks.validator("SVMML", check_config)


def make_pairs(labels: np.ndarray, *, neg_ratio: float, seed: int):
    """All same-label pairs (i < j) and neg_ratio times as many random different-label pairs.

    Returns:
      (i [P], j [P], dissimilar [P] bool), int32 indices.
    """
    labels = np.asarray(labels)
    n = len(labels)
    iu, ju = np.triu_indices(n, k=1)
    same = labels[iu] == labels[ju]
    pi, pj = iu[same], ju[same]
    rng = np.random.default_rng(seed)
    want = int(np.ceil(neg_ratio * len(pi)))
    ni, nj = rng.integers(0, n, (2, 4 * want + 16))
    keep = labels[ni] != labels[nj]
    ni, nj = ni[keep][:want], nj[keep][:want]
    i = np.concatenate([pi, ni]).astype(np.int32)
    j = np.concatenate([pj, nj]).astype(np.int32)
    dis = np.concatenate([np.zeros(len(pi), bool), np.ones(len(ni), bool)])
    return i, j, dis


def make_chunk(lam: float, loss: str, learning_rate: float):
    """``tx`` and the jitted ``chunk(params, opt_state, x, i, j, dis, length)``.

    Built once per setting through ``training.compiled``.
    """
    tx = optax.adam(learning_rate)
    grad_fn = jax.value_and_grad(functools.partial(svmml_loss, lam=lam, loss=loss))

    def chunk(params, opt_state, x, i, j, dis, length):
        def step(carry, _):
            params, opt_state = carry
            value, g = grad_fn(params, x, i, j, dis)
            updates, opt_state = tx.update(g, opt_state, params)
            a, b, c, bias = optax.apply_updates(params, updates)
            return ((_psd(a), _psd(b), c, bias), opt_state), {"loss": value}

        (params, opt_state), metrics = training.scan_steps(step, (params, opt_state), length=length)
        return params, opt_state, metrics

    return tx, jax.jit(chunk, static_argnums=6)


def fit(
    features,
    labels,
    cfg,
    *,
    seed: int = 0,
    log_fn: Callable[[dict], None] | None = None,
    progress: bool = False,
    callback: Callable[[dict, SvmmlMetric], dict | None] | None = None,
) -> tuple[SvmmlMetric, list[dict]]:
    """Learns an SVMML decision function.

    Args:
      features: [N, D] training features.
      labels: [N] identity labels.
      cfg: the config's ``method`` section (warca_jax/configs/svmml.py).
      seed: seed of the sampled different-label pairs; same seed, same result.
      log_fn: called with each history row (every ``cfg.log_every`` steps).
      progress: show a progress bar.
      callback: called as ``callback(row, metric)`` after every logged chunk with the
        decision function learned so far (to evaluate it during training); its time is not counted
        in the rows' ``seconds``, and a dict it returns is merged into the row
        (``training.run_in_chunks``).

    Returns:
      (SvmmlMetric, history rows: step, loss (mean over the chunk), seconds).

    Raises:
      ValueError: bad data or config, before any work.
      training.TrainingDivergedError: training diverged, or a non-finite model.
    """
    x, y, feature_scale = validate(features, labels, cfg)
    t0 = time.perf_counter()
    mean, comps = linalg.pca(x, variance=float(cfg.pca_variance), max_dim=int(cfg.pca_dim) or None)
    xr = (x - mean) @ comps.T
    scale = float(np.sqrt(np.mean(np.sum(xr * xr, axis=1))))
    comps = comps / max(scale, 1e-30)
    xr = jnp.asarray(xr / max(scale, 1e-30), jnp.float32)
    i, j, dis = make_pairs(y, neg_ratio=float(cfg.neg_ratio), seed=seed)
    p = comps.shape[0]
    params = (jnp.zeros((p, p)), jnp.zeros((p, p)), jnp.zeros((p,)), jnp.zeros(()))
    tx, chunk = training.compiled(make_chunk, float(cfg.lam), cfg.loss, float(cfg.learning_rate))
    opt_state = tx.init(params)
    ij = (jnp.asarray(i), jnp.asarray(j), jnp.asarray(dis))

    def advance(done, length):
        nonlocal params, opt_state
        params, opt_state, metrics = chunk(params, opt_state, xr, *ij, length)
        return metrics

    def make_metric(params) -> SvmmlMetric:
        a, b, c, bias = (np.asarray(v) for v in params)
        return SvmmlMetric(
            kind="svmml",
            input_dim=x.shape[1],
            name="svmml",
            mean=mean,
            components=comps.astype(np.float32),
            a_mat=a,
            b_mat=b,
            c_vec=c,
            bias=float(bias),
            feature_scale=feature_scale,
        )

    hint = f"lower learning_rate (now {cfg.learning_rate:g})"
    history = training.run_in_chunks(
        advance,
        num_iters=cfg.num_iters,
        chunk=cfg.log_every,
        method="SVMML",
        log_fn=log_fn,
        progress=progress,
        t0=t0,
        on_chunk=None if callback is None else lambda row: callback(row, make_metric(params)),
        # the objective at the start (A = B = 0, c = b = 0: every margin 1) is 2
        reference_loss=2.0,
        hint=hint,
    )
    metric = make_metric(params)
    return training.check_model(metric, method="SVMML", hint=hint), history


METHODS = {"svmml": Method(fit=fit, validate=validate, takes_callback=True)}
