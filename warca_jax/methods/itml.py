"""ITML: information-theoretic metric learning (Davis, Kulis, Jain, Sra & Dhillon, ICML 2007).

Learns a Mahalanobis matrix A (d_A(x, y) = (x - y)^T A (x - y), the paper's distance) as
close as possible to a prior A_0 in LogDet divergence, under distance constraints with
slack (paper, eq. 4.1 and Section 3.2):

    min_{A >= 0, xi}  D_ld(A, A_0) + gamma * D_ld(diag(xi), diag(xi_0))
    s.t.  d_A(x_i, x_j) <= xi_c(i,j)  for similar (i, j),
          d_A(x_i, x_j) >= xi_c(i,j)  for dissimilar (i, j),

with D_ld(A, A_0) = tr(A A_0^-1) - log det(A A_0^-1) - D, and xi_0 = u (the 5th
percentile of the distances) for similar pairs and l (the 95th) for dissimilar ones.

Algorithm 1 of the paper, cyclic Bregman projections: for each constraint c in turn, with
v = x_i - x_j, p = v^T A v and delta = +1 (similar) or -1 (dissimilar),

    alpha   = min(lambda_c, delta * gamma / (gamma + 1) * (1 / p - 1 / xi_c))
    beta    = delta * alpha / (1 - delta * alpha * p)
    xi_c   <- 1 / (1 / xi_c + delta * alpha / gamma)
    lambda_c <- lambda_c - alpha
    A      <- A + beta * (A v)(A v)^T

a rank-one update (A^-1 <- A^-1 - delta alpha v v^T by Sherman-Morrison) that keeps A
positive definite (alpha p < 1 for similar, alpha p > -1 for dissimilar). The constants are
those of the exact Bregman projection onto v^T A v = xi_c (the authors' released code and
metric-learn: gamma / (gamma + 1), where the paper's printed Algorithm 1 reads delta / 2
and gamma / xi_c); ``tests/methods/test_itml.py`` checks one sweep against a dense NumPy
projection written with A^-1 and the projected constraint holding with equality. The
dual variables lambda >= 0 start at 0, A at A_0.

Stopping (the authors' code, metric-learn): after each sweep over all constraints,
conv = ||lambda - lambda_old||_1 / (||lambda||_2 + ||lambda_old||_2) (0 when both are 0:
no constraint was ever violated); stop when conv < ``tol`` or after ``max_iter`` sweeps.

Constraints come from labels as metric-learn's ``ITML_Supervised`` draws them:
``num_constraints`` similar and as many dissimilar pairs (default 20 C^2 for C labels,
capped by the pairs that exist), similar ones first in each sweep. A pair of identical
points (v = 0) constrains nothing and is dropped. The bounds u, l are percentiles of
the distances between the points the constraints touch (at most 2,000 of them, drawn by
the seed): squared Euclidean distances, the distance the constraints bound (the paper),
or plain Euclidean distances as metric-learn 0.7.0 takes them (``bounds="euclidean"``).

The sweep is a ``lax.scan`` over the constraints (O(D^2) per constraint; A is the carry,
each lambda_c and xi_c a scanned input and output), and up to
``log_every`` sweeps run in one jitted ``lax.while_loop`` that stops at convergence; the
chunks go through ``learner_loop.run_in_chunks``, one history row each: ``loss`` (the
objective above), ``logdet_div``, ``slack_div``, ``conv`` (what the rule tests),
``violated`` (the share of constraints breaking their original bound u or l) and
``active`` (constraints with lambda > 0); the last row's ``stopped`` says why training
ended.
"""

from __future__ import annotations

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
BOUNDS = ("squared", "euclidean")
# Points whose pairwise distances give the bounds: all of them up to this many, else a
# random subset (2,000 points: about 2 million distances, percentiles to 3 digits).
_BOUND_POINTS = 2000
_HI = jax.lax.Precision.HIGHEST


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an ITML config that cannot run on this data."""
    checks.check_number(cfg, "gamma", low=0, low_open=True, note="; slack trade-off")
    checks.check_numbers(cfg, ("max_iter", "log_every"), low=1, integer=True)
    checks.check_number(cfg, "tol", low=0, note="; 0: run all max_iter sweeps")
    checks.check_number(cfg, "num_constraints", low=0, integer=True, note="; 0: 20 C^2")
    checks.check_choice(cfg, "prior", PRIORS)
    checks.check_choice(cfg, "bounds", BOUNDS)
    checks.check_number(cfg, "lower_percentile", low=0, high=100)
    checks.check_number(cfg, "upper_percentile", low=0, high=100)
    if cfg.lower_percentile > cfg.upper_percentile:
        raise ValueError(
            f"method.lower_percentile ({cfg.lower_percentile:g}) must not exceed "
            f"method.upper_percentile ({cfg.upper_percentile:g})"
        )
    if cfg.prior == "covariance":
        prior_matrices(data.x, "covariance")  # a singular covariance is refused here


# ITML's bounds are distances and its prior the identity: the result depends on the
# features' scale, so features too small or too large for float32 are refused.
validate = checks.validator(
    "ITML", check_config, scale_free=False, scale_note=" (ITML's prior is in the features' units)"
)


def prior_matrices(x: np.ndarray, prior: str) -> tuple[np.ndarray, np.ndarray]:
    """(A_0, A_0^-1) in float64: the identity, or the inverse covariance of the features.

    Raises:
      ValueError: prior "covariance" with a singular covariance (A_0 must be definite).
    """
    d = x.shape[1]
    if prior == "identity":
        return np.eye(d), np.eye(d)
    cov = invertible_covariance(x)
    return np.linalg.inv(cov), cov


def distance_bounds(x, pairs, *, bounds: str, percentiles, rng) -> tuple[float, float]:
    """(u, l): the lower and upper ``percentiles`` of the distances between the points
    in ``pairs`` ([P, 2] indices), squared Euclidean or Euclidean; 0 becomes 1e-9."""
    pts = np.unique(pairs)
    if pts.shape[0] > _BOUND_POINTS:
        pts = np.sort(rng.choice(pts, _BOUND_POINTS, replace=False))
    z = np.asarray(x[pts], np.float64)
    sq = np.sum(z * z, axis=1)
    dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * z @ z.T, 0.0)
    dist = dist[np.triu_indices(z.shape[0], k=1)]
    if bounds == "euclidean":
        dist = np.sqrt(dist)
    lower, upper = np.percentile(dist, percentiles)
    return max(float(lower), 1e-9), max(float(upper), 1e-9)


def projection_sweep(a, lam, xi, v, delta, gamma):
    """One cyclic sweep of Bregman projections over every constraint (Algorithm 1).

    Args:
      a: [D, D] the current A (symmetric positive definite).
      lam: [P] dual variables (>= 0). xi: [P] current slack bounds.
      v: [P, D] constraint differences x_i - x_j. delta: [P] +1 similar, -1 dissimilar.
      gamma: slack trade-off (> 0).

    Returns:
      (A, lambda, xi) after projecting onto each constraint in order.
    """
    gp = gamma / (gamma + 1.0)

    def project(a, constraint):
        # each constraint's lambda_c and xi_c are touched only by its own projection, so
        # they are scanned inputs and outputs; only A is carried
        vc, dc, lc, xc = constraint
        u = jnp.dot(a, vc, precision=_HI)
        p = jnp.dot(vc, u, precision=_HI)
        alpha = jnp.minimum(lc, dc * gp * (1.0 / p - 1.0 / xc))
        beta = dc * alpha / (1.0 - dc * alpha * p)
        xc = 1.0 / (1.0 / xc + dc * alpha / gamma)
        # beta * (u u^T): the same product at (i, j) and (j, i), so A stays symmetric
        return a + beta * (u[:, None] * u[None, :]), (lc - alpha, xc)

    a, (lam, xi) = jax.lax.scan(project, a, (v, delta, lam, xi))
    return a, lam, xi


def lambda_change(lam, lam_old):
    """The convergence measure ||lam - lam_old||_1 / (||lam||_2 + ||lam_old||_2), 0 / 0 = 0."""
    norms = jnp.linalg.norm(lam) + jnp.linalg.norm(lam_old)
    change = jnp.sum(jnp.abs(lam - lam_old))
    return jnp.where(norms > 0, change / jnp.where(norms > 0, norms, 1.0), 0.0)


@jax.jit
def sweeps(a, lam, xi, v, delta, gamma, tol, length):
    """Up to ``length`` sweeps, stopping after the first whose ``lambda_change`` < tol.

    Returns:
      (A, lambda, xi, sweeps run, the last sweep's change).
    """

    def more(state):
        return (state[3] < length) & (state[4] >= tol)

    def sweep(state):
        a, lam, xi, k, _ = state
        a, new, xi = projection_sweep(a, lam, xi, v, delta, gamma)
        return a, new, xi, k + 1, lambda_change(new, lam)

    init = (a, lam, xi, jnp.int32(0), jnp.asarray(jnp.inf, a.dtype))
    return jax.lax.while_loop(more, sweep, init)


@jax.jit
def constraint_distances(a: jax.Array, v: jax.Array) -> jax.Array:
    """d_A of every constraint, v_c^T A v_c: [P] for A [D, D] and v [P, D]."""
    return jnp.sum(jnp.dot(v, a, precision=_HI) * v, axis=1)


def check_definite(a: np.ndarray, *, sweeps: int, gamma: float) -> None:
    """Raises ``TrainingDivergedError`` when A is no longer positive definite.

    In exact arithmetic every projection keeps A definite; in float32 A's smallest
    eigenvalues are lost once its condition number nears 1e7, which (nearly) infeasible
    constraints under a large ``gamma`` (hard constraints) drive it to.
    """
    try:
        np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise model_checks.TrainingDivergedError(
            f"ITML's A lost positive definiteness in float32 after {sweeps} sweeps: the "
            f"constraints are (nearly) infeasible at gamma = {gamma:g} and A's condition "
            "number went beyond float32's; lower gamma (softer constraints)"
        ) from None


def objective(a, xi, xi0, prior_inv, gamma) -> dict:
    """The ITML objective D_ld(A, A_0) + gamma D_ld(diag xi, diag xi_0), in float64.

    Args:
      a: [D, D] A. xi, xi0: [P] current and original bounds. prior_inv: [D, D] A_0^-1.
      gamma: slack trade-off.

    Returns:
      dict of floats: ``loss``, ``logdet_div`` (D_ld(A, A_0)), ``slack_div``.
    """
    a, prior_inv = np.asarray(a, np.float64), np.asarray(prior_inv, np.float64)
    prod = a @ prior_inv
    sign, logdet = np.linalg.slogdet(prod)
    logdet_div = float(np.trace(prod) - logdet - a.shape[0]) if sign > 0 else np.inf
    r = np.asarray(xi, np.float64) / np.asarray(xi0, np.float64)
    slack_div = float(np.sum(r - np.log(r) - 1.0))
    return {
        "loss": logdet_div + gamma * slack_div,
        "logdet_div": logdet_div,
        "slack_div": slack_div,
    }


def constraint_measures(a, lam, v, delta, bounds) -> dict:
    """``violated``: the share of constraints breaking their bound (u, l) under A;
    ``active``: the number with lambda > 0."""
    p = np.asarray(constraint_distances(a, v))
    u, low = bounds
    violated = float(np.mean(np.where(delta > 0, p > u, p < low)))
    return {"violated": violated, "active": int(np.sum(np.asarray(lam) > 0))}


def itml_constraints(x, y, cfg, rng):
    """(v [P, D] float32, delta [P], xi_0 [P]): similar pairs first, then dissimilar ones,
    pairs of identical points dropped, and the bounds (u, l) they were given."""
    num = int(cfg.num_constraints) or 20 * np.unique(y).shape[0] ** 2
    pairs = label_pairs(y, num, rng)
    u, low = distance_bounds(
        x,
        np.concatenate([pairs.similar, pairs.dissimilar]),
        bounds=cfg.bounds,
        percentiles=(float(cfg.lower_percentile), float(cfg.upper_percentile)),
        rng=rng,
    )
    idx = np.concatenate([pairs.similar, pairs.dissimilar])
    v = x[idx[:, 0]] - x[idx[:, 1]]
    delta = np.repeat([1.0, -1.0], [len(pairs.similar), len(pairs.dissimilar)])
    keep = np.any(v != 0, axis=1)
    xi0 = np.where(delta > 0, u, low)[keep]
    return v[keep].astype(np.float32), delta[keep].astype(np.float32), xi0, (u, low)


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None):
    """Learns an ITML metric from pairs drawn from the labels (arguments and errors:
    ``warca_jax.methods``).

    ``seed`` draws the constraints (and the points the bounds are measured on); a history
    row every ``log_every`` sweeps.

    Returns:
      (linear Metric with W^T W = A, history rows: step (sweeps), loss, logdet_div,
      slack_div, conv, violated, active, seconds; the last row's ``stopped``).
    """
    x, y, _ = validate(features, labels, cfg)
    loop = learner_loop.Loop.start("ITML", features, log_fn, progress, callback)
    v, delta, xi0, (u, low) = itml_constraints(x, y, cfg, np.random.default_rng(seed))
    a0, prior_inv = prior_matrices(x, cfg.prior)
    vj, dj = jnp.asarray(v), jnp.asarray(delta)
    state = [jnp.asarray(a0, jnp.float32), jnp.zeros(len(v), jnp.float32)]
    state.append(jnp.asarray(xi0, jnp.float32))
    gamma, tol = float(cfg.gamma), float(cfg.tol)
    logging.info("ITML: %d constraints, bounds u=%.4g l=%.4g", len(v), u, low)

    def advance(done, length):
        a, lam, xi, k, conv = sweeps(*state, vj, dj, gamma, tol, length)
        state[:] = [a, lam, xi]
        k, conv = int(k), float(conv)
        check_definite(np.asarray(a, np.float64), sweeps=done + k, gamma=gamma)
        row = objective(a, xi, xi0, prior_inv, gamma)
        row.update(conv=conv, **constraint_measures(a, lam, vj, delta, (u, low)))
        converged, stopped = conv < tol, None
        if converged:
            stopped = f"converged: conv {conv:.3g} < tol {tol:g} after {done + k} sweeps"
        elif done + k >= cfg.max_iter:
            stopped = f"max_iter reached: {cfg.max_iter} sweeps, conv {conv:.3g} >= tol {tol:g}"
        return learner_loop.Chunk(row, k, stop=converged, stopped=stopped)

    def make_metric(a) -> Metric:
        proj = linalg.psd_factor(np.asarray(a, np.float64))
        return Metric(kind="linear", input_dim=x.shape[1], projection=proj, name="itml")

    return loop.fit(
        advance,
        lambda: make_metric(state[0]),
        num_iters=int(cfg.max_iter),
        chunk=int(cfg.log_every),
        hint=f"lower gamma (now {gamma:g})",
    )


VARIANTS = ("default", "small")  # small: 2,000 constraints, 100 sweeps at most


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``itml``: what configs/itml.py starts from."""
    m = checks.new_config("itml", variant, VARIANTS)
    # slack trade-off: weight of D_ld(diag xi, diag xi_0) against D_ld(A, A_0)
    # (paper's gamma; metric-learn: 1.0). Larger: harder constraints.
    m.gamma = 1.0
    # similar (and as many dissimilar) pairs drawn from the labels; 0: 20 C^2 for C
    # identities (metric-learn's ITML_Supervised), capped by the pairs that exist.
    m.num_constraints = 0
    # A_0: 'identity' (metric-learn's default) or 'covariance' (inverse covariance of the
    # training features, metric-learn's option; refused when singular).
    m.prior = "identity"
    # what the bounds are percentiles of: 'squared' distances, the d_A the constraints bound
    # (the paper), or plain 'euclidean' distances (metric-learn 0.7.0).
    m.bounds = "squared"
    m.lower_percentile = 5.0  # u, the similar pairs' bound (paper, metric-learn: 5).
    m.upper_percentile = 95.0  # l, the dissimilar pairs' bound (paper, metric-learn: 95).
    m.max_iter = 1000  # sweeps over all constraints at most (metric-learn: 1000).
    # stop after a sweep whose dual change ||lam - lam_old||_1 / (||lam|| + ||lam_old||) is
    # below tol (the authors' code, metric-learn: 1e-3); 0: run max_iter sweeps.
    m.tol = 1e-3
    m.log_every = 10  # sweeps per logged history row (and per jitted chunk).
    if variant == "small":
        m.num_constraints = 2000
        m.max_iter = 100
    return m


METHODS = {"itml": Method(fit, validate, default_config, VARIANTS)}
