"""SDML: sparse distance metric learning (Qi, Tang, Zha, Chua & Zhang, ICML 2009).

An l1-penalised log-determinant problem, a graphical lasso (paper, eq. 7-9):

    min_{M > 0}  f(M) = tr(M P) - log det M + alpha * sum_{i != j} |M_ij|

with P = M_0^-1 + eta * K, the prior's inverse plus the pairs' loss matrix. As in the paper
and metric-learn's ``SDML_Supervised`` (``loss_matrix="sum"``),
K = sum_pairs y_ab (x_a - x_b)(x_a - x_b)^T, y = +1 for a similar pair and -1 for a
dissimilar one, eta = ``balance_param`` and alpha = ``sparsity_param``; the diagonal is not
penalised (scikit-learn's ``graphical_lasso``, which metric-learn calls on P).

``loss_matrix="normalized"`` (this project's default) averages each kind of pair and
scales K by its largest eigenvalue relative to the prior,
K = (mean_similar dd^T - mean_dissimilar dd^T) / ||M_0^1/2 K' M_0^1/2||_2, so that
P is positive definite for every ``balance_param`` < 1 and does not grow with the number
of pairs. With metric-learn's sum, the few similar pairs of re-identification data are
outweighed by the dissimilar ones: the diagonal of P is negative, and then f falls without
bound along e_i e_i^T (no minimiser; ``fit`` refuses it, naming the largest
``balance_param`` for which P is positive definite).

Solver: ADMM (Boyd et al. 2011, section 6.5) on M = Z with the scaled dual U:

    Theta <- Q diag(theta) Q^T,  Q diag(l) Q^T = rho (Z - U) - P,
             theta_i = (l_i + sqrt(l_i^2 + 4 rho)) / (2 rho)
    Z     <- soft-threshold of the off-diagonal of Theta + U at alpha / rho
    U     <- U + Theta - Z

with residual balancing of rho (x2 / /2 when one residual exceeds ten times the other).
Theta is positive definite by construction, and rho U is a dual point: its off-diagonal
lies in [-alpha, alpha] and its diagonal is 0, so g = log det(P + rho U) + D, when
P + rho U is positive definite, bounds the optimum from below (the dual of the problem is
max log det W + D over W = P + Lambda, |Lambda_ij| <= alpha, Lambda_ii = 0).

Stopping: the duality gap f(Theta) - g <= ``tol`` * max(1, |f(Theta)|) and the relative
primal residual ||Theta - Z||_F / max(||Theta||_F, ||Z||_F) <= ``tol``, or ``max_iter``
iterations. Up to ``log_every`` iterations run in one jitted ``lax.while_loop``; each
chunk is a history row of ``learner_loop.run_in_chunks``: ``loss`` (f(Theta)), ``dual`` (g),
``gap`` (-1 while P + rho U is not yet positive definite), ``primal_res``, ``dual_res``
(rho ||Z - Z_old||_F, relative) and ``nonzero`` (the share of non-zero off-diagonal
entries of Z; rho itself is not logged: it stayed at ``cfg.rho`` in every run measured,
a constant column); the last row's ``stopped`` says why. The metric is Z (sparse)
with its eigenvalues clipped at 0. ``tests/methods/test_sdml.py`` checks the solution against the
problem's optimality conditions and against ``sklearn.covariance.graphical_lasso``.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from warca_jax.maths import linalg
from warca_jax.methods import Method, checks, learner_loop, model_checks
from warca_jax.methods._covariance import invertible_covariance
from warca_jax.methods.constraints import label_pairs
from warca_jax.metric import Metric

PRIORS = ("identity", "covariance")
LOSS_MATRICES = ("normalized", "sum")
_HI = jax.lax.Precision.HIGHEST


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an SDML config that cannot run on this data."""
    if data.x.shape[1] < 2:
        raise ValueError(
            f"SDML needs at least 2 feature dimensions, got n_features = {data.x.shape[1]}"
        )
    checks.check_choice(cfg, "loss_matrix", LOSS_MATRICES)
    if cfg.loss_matrix == "normalized":
        checks.check_number(
            cfg, "balance_param", low=0, high=1, high_open=True, note="; P definite below 1"
        )
    else:
        checks.check_number(cfg, "balance_param", low=0)
    checks.check_number(cfg, "sparsity_param", low=0, note="; the l1 weight alpha")
    checks.check_number(cfg, "num_constraints", low=0, integer=True, note="; 0: 20 C^2")
    checks.check_choice(cfg, "prior", PRIORS)
    checks.check_number(cfg, "rho", low=0, low_open=True, note="; ADMM's first penalty")
    checks.check_numbers(cfg, ("max_iter", "log_every"), low=1, integer=True)
    checks.check_number(cfg, "tol", low=0, low_open=True)
    if cfg.prior == "covariance":
        prior_inverse(data.x, "covariance")  # a singular covariance is refused here


# P's scale follows the features' (the prior is the identity): features too small or too
# large for float32 are refused, not rescaled.
validate = checks.validator(
    "SDML", check_config, scale_free=False, scale_note=" (SDML's prior is in the features' units)"
)


def prior_inverse(x: np.ndarray, prior: str) -> np.ndarray:
    """M_0^-1 in float64: the identity, or the covariance of the features (M_0 = its inverse).

    Raises:
      ValueError: prior "covariance" with a singular covariance (M_0 must be definite).
    """
    if prior == "identity":
        return np.eye(x.shape[1])
    return invertible_covariance(x)


def relative_eigenvalues(k: np.ndarray, prior_inv: np.ndarray) -> np.ndarray:
    """The eigenvalues of M_0^1/2 K M_0^1/2, i.e. of K relative to M_0^-1 (ascending)."""
    c = np.linalg.cholesky(prior_inv)
    ci = np.linalg.inv(c)
    return np.linalg.eigvalsh(ci @ k @ ci.T)


def lasso_input(x, y, cfg, rng) -> np.ndarray:
    """P = M_0^-1 + balance_param * K [D, D] (float64) from pairs drawn from the labels.

    Raises:
      ValueError: P has a diagonal entry <= 0: the problem has no minimiser.
    """
    num = int(cfg.num_constraints) or 20 * np.unique(y).shape[0] ** 2
    pairs = label_pairs(y, num, rng)
    x = np.asarray(x, np.float64)
    ds = x[pairs.similar[:, 0]] - x[pairs.similar[:, 1]]
    dd = x[pairs.dissimilar[:, 0]] - x[pairs.dissimilar[:, 1]]
    prior_inv = prior_inverse(x, cfg.prior)
    if cfg.loss_matrix == "sum":
        k = ds.T @ ds - dd.T @ dd
    else:
        k = ds.T @ ds / max(len(ds), 1) - dd.T @ dd / max(len(dd), 1)
    w = relative_eigenvalues(k, prior_inv)
    if cfg.loss_matrix == "normalized":
        k, w = k / np.abs(w).max(), w / np.abs(w).max()
    p = prior_inv + cfg.balance_param * k
    bad = np.diag(p) <= 0
    if bad.any():
        largest = -1.0 / w.min()
        raise ValueError(
            f"SDML's matrix P = prior^-1 + balance_param * K has {int(bad.sum())} diagonal "
            f"entries <= 0 (smallest {np.diag(p).min():.4g}; {len(ds)} similar, {len(dd)} "
            "dissimilar pairs): the l1-penalised log-det problem has no minimiser; lower "
            f"method.balance_param (now {cfg.balance_param:g}) below {largest:.3g}, where P is "
            "positive definite, or use loss_matrix 'normalized'"
        )
    if w.min() * cfg.balance_param <= -1.0:
        logging.warning("SDML: P is not positive definite; the problem may have no minimiser")
    return p


class AdmmState(NamedTuple):
    """ADMM's iterate: Z (the sparse estimate), the scaled dual U and the penalty rho."""

    z: jax.Array
    u: jax.Array
    rho: jax.Array


def admm_step(state: AdmmState, p, alpha) -> tuple[AdmmState, dict]:
    """One ADMM iteration (module docstring) and its measures.

    Args:
      state: Z, U [D, D] and rho. p: [D, D] the symmetric P. alpha: the l1 weight.

    Returns:
      (the next state, dict: loss f(Theta), dual g, gap, feasible, primal_res, dual_res,
      converged measures).
    """
    z, u, rho = state
    d = p.shape[0]
    off = 1.0 - jnp.eye(d, dtype=p.dtype)
    lam, q = jnp.linalg.eigh(rho * (z - u) - p)
    root = jnp.sqrt(lam * lam + 4.0 * rho)
    # (l + root) / (2 rho), written so that a large negative l loses no digits
    theta = jnp.where(lam >= 0, (lam + root) / (2.0 * rho), 2.0 / (root - lam))
    big_theta = jnp.dot(q * theta, q.T, precision=_HI)
    big_theta = (big_theta + big_theta.T) / 2
    a = big_theta + u
    z_new = a - off * jnp.clip(a, -alpha / rho, alpha / rho)
    u = a - z_new
    r = jnp.linalg.norm(big_theta - z_new)
    s = rho * jnp.linalg.norm(z_new - z)
    scale = jnp.maximum(jnp.maximum(jnp.linalg.norm(big_theta), jnp.linalg.norm(z_new)), 1e-30)
    f = jnp.sum(p * big_theta) - jnp.sum(jnp.log(theta)) + alpha * jnp.sum(off * jnp.abs(big_theta))
    w_eig = jnp.linalg.eigvalsh(p + off * jnp.clip(rho * u, -alpha, alpha))
    feasible = w_eig[0] > 0
    g = jnp.sum(jnp.log(jnp.where(feasible, w_eig, 1.0))) + d
    # residual balancing (Boyd et al. 2011, eq. 3.13); U is scaled by the inverse change
    factor = jnp.where(r > 10.0 * s, 2.0, jnp.where(s > 10.0 * r, 0.5, 1.0))
    stats = {
        "loss": f,
        "dual": jnp.where(feasible, g, f),
        "gap": jnp.where(feasible, f - g, -1.0),
        "primal_res": r / scale,
        "dual_res": s / scale,
    }
    return AdmmState(z_new, u / factor, rho * factor), stats


def is_converged(stats: dict, tol) -> jax.Array:
    """The stopping rule: a dual-feasible gap <= tol max(1, |f|), primal residual <= tol."""
    gap_ok = (stats["gap"] >= 0) & (stats["gap"] <= tol * jnp.maximum(1.0, jnp.abs(stats["loss"])))
    return gap_ok & (stats["primal_res"] <= tol)


@jax.jit
def admm_iterations(state: AdmmState, p, alpha, tol, length):
    """Up to ``length`` ADMM iterations, stopping at the first that ``is_converged``.

    Returns:
      (state, iterations run, the last iteration's stats, converged).
    """
    zero = jnp.zeros((), p.dtype)
    init_stats = {k: zero for k in ("loss", "dual", "gap", "primal_res", "dual_res")}

    def more(carry):
        _, k, _, done = carry
        return (k < length) & ~done

    def step(carry):
        state, k, _, _ = carry
        state, stats = admm_step(state, p, alpha)
        return state, k + 1, stats, is_converged(stats, tol)

    return jax.lax.while_loop(more, step, (state, jnp.int32(0), init_stats, jnp.bool_(False)))


def objective(m, p, alpha) -> float:
    """f(M) = tr(M P) - log det M + alpha sum_{i != j} |M_ij| in float64 (inf unless M > 0)."""
    m, p = np.asarray(m, np.float64), np.asarray(p, np.float64)
    sign, logdet = np.linalg.slogdet(m)
    if sign <= 0:
        return np.inf
    off = np.abs(m).sum() - np.abs(np.diag(m)).sum()
    return float(np.sum(m * p) - logdet + alpha * off)


def solve(p, alpha, cfg, *, log_fn=None, progress=False, t0=None, on_chunk=None):
    """The graphical lasso of ``p`` [D, D] by ADMM through ``learner_loop.run_in_chunks``.

    Args:
      p: [D, D] P. alpha: the l1 weight. cfg: the ``method`` section (rho, tol, max_iter,
      log_every). log_fn, progress, t0: as ``run_in_chunks`` takes them.
      on_chunk: called as ``on_chunk(row, z)`` after every logged chunk.

    Returns:
      (Z [D, D] float32 numpy, history rows).
    """
    pj = jnp.asarray(p, jnp.float32)
    diag = np.diag(p)
    z0 = jnp.asarray(np.diag(1.0 / diag), jnp.float32)
    state = AdmmState(z0, jnp.zeros_like(z0), jnp.asarray(cfg.rho, jnp.float32))
    tol = float(cfg.tol)

    def advance(done, length):
        nonlocal state
        state, k, stats, converged = admm_iterations(state, pj, float(alpha), tol, length)
        k, row = int(k), {key: float(v) for key, v in jax.device_get(stats).items()}
        z = np.asarray(state.z)
        d = z.shape[0]
        row["nonzero"] = float((np.count_nonzero(z) - np.count_nonzero(np.diag(z))) / (d * d - d))
        stopped = None
        if bool(converged):
            stopped = (
                f"converged: gap {row['gap']:.3g} and primal residual {row['primal_res']:.3g} "
                f"within tol {tol:g} after {done + k} iterations"
            )
        elif done + k >= cfg.max_iter:
            stopped = (
                f"max_iter reached: {cfg.max_iter} iterations, gap {row['gap']:.3g}, primal "
                f"residual {row['primal_res']:.3g} (tol {tol:g})"
            )
        return learner_loop.Chunk(row, k, stop=bool(converged), stopped=stopped)

    history = learner_loop.run_in_chunks(
        advance,
        num_iters=int(cfg.max_iter),
        chunk=int(cfg.log_every),
        method="SDML",
        log_fn=log_fn,
        progress=progress,
        t0=t0,
        on_chunk=None if on_chunk is None else lambda row: on_chunk(row, np.asarray(state.z)),
        hint="lower balance_param (P may have no minimiser) or raise sparsity_param",
    )
    return np.asarray(state.z), history


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None):
    """Learns an SDML metric from pairs drawn from the labels (arguments and errors:
    ``warca_jax.methods``; a P with no minimiser, its diagonal not positive, is a
    ``ValueError`` before the solver).

    ``seed`` draws the pairs; a history row every ``log_every`` ADMM iterations.

    Returns:
      (linear Metric with W^T W = Z, clipped to PSD; history rows: step, loss, dual, gap,
      primal_res, dual_res, nonzero, seconds; the last row's ``stopped``).
    """
    x, y, _ = validate(features, labels, cfg)
    t0 = time.perf_counter()
    p = lasso_input(x, y, cfg, np.random.default_rng(seed))

    def make_metric(z) -> Metric:
        proj = linalg.psd_factor(np.asarray(z, np.float64))
        return Metric(kind="linear", input_dim=x.shape[1], projection=proj, name="sdml")

    hook = None if callback is None else lambda row, z: callback(row, make_metric(z))
    z, history = solve(
        p, float(cfg.sparsity_param), cfg, log_fn=log_fn, progress=progress, t0=t0, on_chunk=hook
    )
    metric = make_metric(z)
    return model_checks.check_model(metric, method="SDML", features=features), history


VARIANTS = ("default", "metric_learn", "small")  # metric_learn: its loss matrix (sum)


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``sdml``: what configs/sdml.py starts from."""
    m = checks.new_config("sdml", variant, VARIANTS)
    m.balance_param = 0.5  # eta in P = M_0^-1 + eta K (metric-learn: 0.5; the paper's eta).
    # alpha, the l1 weight on the off-diagonal of M (metric-learn's sparsity_param: 0.01,
    # passed to scikit-learn's graphical_lasso as its alpha; the paper's lambda).
    m.sparsity_param = 0.01
    # K from the pairs: 'normalized' (each kind averaged, scaled by its largest eigenvalue
    # relative to the prior: P definite for balance_param < 1; this project's) or 'sum'
    # (sum_pairs y (x_a - x_b)(x_a - x_b)^T, the paper's and metric-learn's).
    m.loss_matrix = "normalized"
    # M_0: 'identity' (metric-learn's default) or 'covariance' (M_0^-1 = the covariance of
    # the training features, metric-learn's option; refused when singular).
    m.prior = "identity"
    # similar (and as many dissimilar) pairs drawn from the labels; 0: 20 C^2 for C
    # identities (metric-learn's SDML_Supervised), capped by the pairs that exist.
    m.num_constraints = 0
    m.rho = 1.0  # ADMM's first penalty (Boyd et al. 2011), then balanced by residuals.
    m.max_iter = 2000  # ADMM iterations at most.
    # stop when the duality gap <= tol * max(1, |f|) and the relative primal residual
    # <= tol (scikit-learn's graphical_lasso: absolute gap 1e-4; 1e-5 leaves the matrix
    # about 1e-3 from the optimum, and float32 still resolves it).
    m.tol = 1e-5
    m.log_every = 20  # ADMM iterations per logged history row (and jitted chunk).
    if variant == "metric_learn":
        m.loss_matrix = "sum"
    elif variant == "small":
        m.max_iter = 500
    return m


METHODS = {"sdml": Method(fit, validate, default_config, VARIANTS)}
