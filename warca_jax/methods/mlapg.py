"""MLAPG: logistic metric learning by accelerated proximal gradient (Liao & Li, ICCV 2015).

Liao & Li, "Efficient PSD constrained asymmetric metric learning for person
re-identification", ICCV 2015. A Mahalanobis M >= 0 minimises

  F(M) = sum_{i != j} w_ij log(1 + exp(y_ij (d_M(x_i, x_j) - mu))),
  d_M(x_i, x_j) = (x_i - x_j)^T M (x_i - x_j),

with y_ij = +1 for same-label pairs and -1 otherwise, and the asymmetric weights
w_ij = 1 / #positive pairs or 1 / #negative pairs, so both sets weigh the same.
mu is the mean pair distance at M = I (as the authors' code sets it).

The gradient over all N^2 pairs is sum_ij t_ij (x_i - x_j)(x_i - x_j)^T
= 2 X^T (diag(T 1) - T) X with t_ij = w_ij y_ij sigma(y_ij (d_ij - mu)): [N, N] and
[D, D] work, no [pairs, D] differences. Each iteration (their APG algorithm) takes a
Nesterov extrapolation V, a step M = Proj_PSD(V - grad F(V) / L) (eigendecomposition),
and backtracks L <- gamma L until F(M) <= F(V) + <grad, M - V> + L/2 ||M - V||^2; it
stops when the relative change of F is below ``tol``. ``fit`` runs these iterations as
``ReducedAPG`` (through K = X M X^T, and only the eigenpairs of the smaller of the
positive and negative parts) and ``mlapg_plain.make_step`` is their plain form, which the
tests hold it to.

Features are PCA-reduced to ``pca_dim`` first when D is larger (and to at most the span
of the training images when D exceeds their number, as the original's QR step; a
``pca_dim`` above N keeps that whole span, ``configs/mlapg.py:lomo``), and rescaled so that
the mean squared pair distance is 1 (mu = 1), which makes the initial step 1/L
independent of the data's units; both are folded back into the returned W.

``pca_dim`` sets much of the result on wide descriptors (docs/methods.md, MLAPG).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import scipy.linalg

from warca_jax.maths import linalg
from warca_jax.methods import Method, checks, learner_loop
from warca_jax.metric import Metric


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an MLAPG config that cannot run on this data."""
    d = data.x.shape[1]
    checks.check_number(cfg, "pca_dim", low=0, integer=True, note="; 0: no PCA")
    checks.check_number(cfg, "dim", low=0, integer=True, note="; 0: the full rank of M")
    reduced = min(d, cfg.pca_dim) if cfg.pca_dim else d
    if cfg.dim > reduced:
        raise ValueError(
            f"output dim must be at most {reduced} (input dims after PCA), got {cfg.dim}"
        )
    checks.check_numbers(cfg, ("max_iters", "log_every", "max_backtracks"), low=1, integer=True)
    checks.check_number(cfg, "init_step", low=0, low_open=True, note="; 1 / initial L")
    checks.check_number(cfg, "backtrack_factor", low=1, low_open=True)
    checks.check_number(cfg, "tol", low=0)


# MLAPG rescales the features itself: its result does not depend on their scale.
validate = checks.validator("MLAPG", check_config)


def pair_weights(labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Signs y_ij and asymmetric weights w_ij over ordered pairs i != j: [N, N] each."""
    n = labels.shape[0]
    same = labels[:, None] == labels[None, :]
    off = ~jnp.eye(n, dtype=bool)
    pos, neg = same & off, ~same
    w = jnp.where(pos, 1.0 / jnp.maximum(jnp.sum(pos), 1), 0.0)
    w = jnp.where(neg, 1.0 / jnp.maximum(jnp.sum(neg), 1), w)
    return jnp.where(same, 1.0, -1.0), w


class ReducedState(NamedTuple):
    """The APG state of ``ReducedAPG``: M_t, M_{t-1}, M_t's rank r, K_t = X M_t X^T and K_{t-1}
    ([N, N]: the pair distances' Gram form), alpha_t, the Lipschitz estimate L and F(M_t)."""

    m: np.ndarray
    m_prev: np.ndarray
    rank: int
    k: np.ndarray
    k_prev: np.ndarray
    alpha: float
    lipschitz: float
    loss: float


def _symmetric(k: np.ndarray) -> np.ndarray:
    """(K + K^T) / 2: a product's K made exactly symmetric, so that every [N, N] term after
    it (distances, T) is symmetric to the bit and nothing downstream transposes."""
    return (k + k.T) * np.float32(0.5)


def _gram_terms(k, sign, weight, mu):
    """F, T = w y sigma(z) and T 1 from a symmetric K = X M X^T (z = y (d - mu)), so that
    grad F = 2 X^T (diag(T 1) - T) X; softplus and sigmoid share one exponential."""
    sq = jnp.diag(k)
    z = sign * (sq[:, None] + sq[None, :] - 2.0 * k - mu)
    e = jnp.exp(-jnp.abs(z))
    loss = jnp.sum(weight * (jnp.maximum(z, 0.0) + jnp.log1p(e)))  # softplus(z)
    t = weight * sign * jnp.where(z >= 0, 1.0, e) / (1.0 + e)  # sigmoid(z)
    return loss, t, jnp.sum(t, axis=1)


_gram_loss = jax.jit(lambda k, sign, weight, mu: _gram_terms(k, sign, weight, mu)[0])
_gram_loss_and_coefficients = jax.jit(_gram_terms)


def psd_factors(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvectors [d, r], eigenvalues [r]) of the positive part of the symmetric ``m``
    (its lower triangle read): ``mlapg_plain.psd_project``'s projection is vecs diag(vals) vecs^T.

    LAPACK's MRRR driver computes only the eigenpairs with eigenvalue in (0, inf), the
    ones the projection keeps, so a low-rank M costs less than the full decomposition.
    """
    vals, vecs = scipy.linalg.eigh(
        m, driver="evr", subset_by_value=(0.0, np.inf), overwrite_a=True, check_finite=False
    )
    return vecs, vals


class ReducedAPG:
    """The APG iteration of ``mlapg_plain.make_step`` (same steps, line search and result up
    to float rounding) in a cheaper arrangement for a large M, on the host (numpy / LAPACK).

    * F and grad F depend on M only through K = X M X^T, and K is linear in M: the
      extrapolated K_V = K_t + beta (K_t - K_{t-1}) costs no product with X.
    * The projection computes the eigenpairs of the smaller side of A = V - grad / L, as
      LAPACK's cost grows with the eigenvectors it returns: while M's rank is above d / 2,
      those of A's negative part, which Proj(A) = A minus it removes (K from K_V,
      X grad X^T and the part's factors); else those of the positive part, Proj(A)
      itself, K = (X E) diag(lambda) (X E)^T. ``side`` forces one ('positive',
      'negative'; 'auto' by the rank), for the tests.
    * The [N, N] elementwise terms (softplus, sigmoid) run jitted; the products run in
      BLAS, whose float32 matrix products are faster on a CPU than XLA's.
    """

    def __init__(self, x, sign, weight, mu: float, factor: float, max_backtracks: int,
                 side: str = "auto"):  # fmt: skip
        self.x, self.side = np.asarray(x, np.float32), side
        self.sign, self.weight, self.mu = sign, weight, mu
        self.factor, self.max_backtracks = factor, max_backtracks

    def start(self, init_step: float) -> ReducedState:
        """The state at M = I (its eigen-factors the identity's)."""
        d = self.x.shape[1]
        eye = np.eye(d, dtype=np.float32)
        k = _symmetric(self.x @ self.x.T)
        loss = float(_gram_loss(k, self.sign, self.weight, self.mu))
        return ReducedState(eye, eye, d, k, k, 0.0, 1.0 / init_step, loss)

    def step(self, state: ReducedState) -> tuple[ReducedState, dict]:
        """One APG iteration: (the next state, {loss, rank, step_size})."""
        x = self.x
        alpha = (1.0 + np.sqrt(1.0 + 4.0 * state.alpha**2)) / 2.0
        beta = np.float32((state.alpha - 1.0) / alpha)
        v = state.m + beta * (state.m - state.m_prev)
        k_v = state.k + beta * (state.k - state.k_prev)
        f_v, t, rows = _gram_loss_and_coefficients(k_v, self.sign, self.weight, self.mu)
        f_v = float(f_v)
        tx = np.asarray(rows)[:, None] * x - np.asarray(t) @ x  # (diag(T 1) - T) X
        grad = 2.0 * (x.T @ tx)
        grad = (grad + grad.T) / 2
        lip, d = state.lipschitz, x.shape[1]
        negative = self.side == "negative" or (self.side == "auto" and 2 * state.rank > d)
        if negative:  # X grad X^T, for K of A = V - grad / L
            xgx = _symmetric((x @ grad) @ x.T)
        for tries in range(self.max_backtracks + 1):
            if tries:
                lip *= self.factor
            a = v - grad / np.float32(lip)
            # the positive part, sum lambda e e^T over A's lambda > 0, or A minus its
            # negative part, A + sum mu e e^T over -A's mu > 0
            vecs, vals = psd_factors(-a if negative else a)
            part, z = (vecs * vals) @ vecs.T, x @ vecs
            k_part = (z * vals) @ z.T
            if negative:
                rank, m_new = d - len(vals), a + part
                k_new = _symmetric(k_v - xgx / np.float32(lip) + k_part)
            else:
                rank, m_new, k_new = len(vals), part, _symmetric(k_part)
            f_new = float(_gram_loss(k_new, self.sign, self.weight, self.mu))
            diff = (m_new - v).astype(np.float64)
            bound = f_v + np.sum(diff * grad) + lip / 2.0 * np.sum(diff * diff)
            if f_new <= bound:
                break
        new = ReducedState(m_new, state.m, rank, k_new, state.k, alpha, lip, f_new)
        return new, {"loss": f_new, "rank": rank, "step_size": 1.0 / lip}


def state_factors(state: ReducedState) -> tuple[np.ndarray, np.ndarray]:
    """(vecs [d, r], vals [r]) with M_t = vecs diag(vals) vecs^T: M_t's top r eigenpairs."""
    d = state.m.shape[0]
    m = state.m.astype(np.float64)
    vals, vecs = scipy.linalg.eigh(m, subset_by_index=(d - state.rank, d - 1))
    return vecs, vals


def factor_from_eigen(vecs: np.ndarray, vals: np.ndarray, dim: int | None = None):
    """W [k, d] (float64), W^T W = vecs diag(vals) vecs^T, largest first, the top ``dim``."""
    order = np.argsort(vals)[::-1][:dim]
    return np.sqrt(vals[order].astype(np.float64))[:, None] * vecs[:, order].T.astype(np.float64)


def _span_coordinates(x: np.ndarray):
    """Coordinates [N, k] of the centred rows of the wide ``x`` [N, D] in an orthonormal
    basis of their span, and ``unfold(w)``: w [r, k] (a map of those coordinates) as the map
    w V [r, D] of the input, V [k, D] the basis.

    The basis is ``linalg.pca(x, variance=1.0)``'s (the Gram matrix's eigenvectors), so the
    coordinates are U S from the [N, N] Gram matrix alone; V = S^-1 U^T (x - mean) is never
    formed (``linalg.pca`` orthonormalises it by a QR of [D, k]), only w V at the end.
    """
    xc = np.asarray(x, np.float64)
    xc = xc - xc.mean(axis=0)
    energy, u = linalg.gram_eigenpairs(xc)  # linalg.pca's directions on wide data
    if not len(energy):
        raise ValueError("MLAPG needs features that are not all identical")
    k = int(np.searchsorted(np.cumsum(energy) / energy.sum(), 1.0 - 1e-12) + 1)  # linalg.pca's
    energy, u = energy[:k], u[:, :k]
    root = np.sqrt(energy)
    return u * root, lambda w: ((w / root) @ u.T) @ xc


def prepared_features(x: np.ndarray, pca_dim: int):
    """PCA to ``pca_dim`` (0: none), centred and scaled to unit mean squared pair distance.

    A ``pca_dim`` of at least N on data wider than N keeps the whole span of the centred
    rows (``_span_coordinates``).

    Returns:
      (features [N, d] float32 as a numpy array, ``unfold``): the features are
      (x - mean) C^T, centred, divided by sqrt(scale) (C [d, D]: PCA components), and
      ``unfold(w)`` for w [r, d] is w C / sqrt(scale) [r, D] float64: the same map of the input.
    """
    n, d = x.shape
    if pca_dim and d > n and pca_dim >= n:  # the whole span of wide data
        xr, unfold = _span_coordinates(x)
    else:
        mean, comps = np.zeros(d, np.float32), np.eye(d, dtype=np.float32)
        if pca_dim and d > min(pca_dim, n):  # wide data: at most its span
            mean, comps = linalg.pca(x, variance=1.0, max_dim=pca_dim)
        xr = (x - mean) @ comps.T
        unfold = lambda w: w @ comps.astype(np.float64)  # noqa: E731
    # Rescale to unit mean squared pair distance: d = 2 (mean ||x||^2 - ||mean x||^2).
    xr = xr - xr.mean(axis=0)
    scale = 2.0 * float(np.mean(np.sum(xr.astype(np.float64) ** 2, axis=1))) * n / (n - 1)
    if not scale > 0:
        raise ValueError("MLAPG needs features that are not all identical")
    feats = np.asarray(xr / np.sqrt(scale), np.float32)
    return feats, lambda w: unfold(np.asarray(w, np.float64) / np.sqrt(scale))


def solver(x: np.ndarray, y: np.ndarray, cfg) -> tuple[ReducedAPG, Callable]:
    """(the ``ReducedAPG`` that ``fit`` runs on the validated training data ``x``, ``y``
    with the method section ``cfg``, ``unfold``: ``prepared_features``')."""
    feats, unfold = prepared_features(x, int(cfg.pca_dim))
    sign, weight = pair_weights(jnp.asarray(np.unique(y, return_inverse=True)[1]))
    # At M = I the mean pair distance is 1 by the rescaling, the authors' mu.
    apg = ReducedAPG(
        feats, sign, weight, mu=1.0, factor=float(cfg.backtrack_factor),
        max_backtracks=int(cfg.max_backtracks),
    )  # fmt: skip
    return apg, unfold


def fit(features, labels, cfg, *, log_fn=None, progress=False, callback=None):
    """Learns an MLAPG metric (arguments and errors: ``warca_jax.methods``).

    Deterministic: it takes no ``seed``. A history row (step, loss, rank, seconds)
    every ``log_every`` iterations and at the last one. The iterations are
    ``ReducedAPG``'s (``mlapg_plain.make_step``'s, arranged for a large M).

    Returns:
      (metric, history): kind "linear", W: [rank or dim, D] with W^T W the learned M.
    """
    x, y, feature_scale = validate(features, labels, cfg)
    apg, unfold = solver(x, y, cfg)
    state = apg.start(float(cfg.init_step))
    f0 = state.loss
    loop = learner_loop.Loop.start("MLAPG", features, log_fn, progress, callback)
    prev = f0
    hint = f"lower init_step (now {cfg.init_step:g}) or check the training data"

    def advance(done, length):
        # One iteration at a time: a chunk ends early when F converged (the relative
        # change below tol: training is over) or is not finite (``run_in_chunks`` refuses
        # it at the step it happened).
        nonlocal state, prev
        for it in range(1, length + 1):
            state, metrics = apg.step(state)
            loss = metrics["loss"]
            converged = abs(loss - prev) <= cfg.tol * abs(prev)
            prev = loss
            if converged or not np.isfinite(loss) or it == length:
                # (the step size 1 / L is not logged: it is init_step until the line
                # search backtracks, which it did in no run measured, a constant column)
                row = {"loss": loss, "rank": metrics["rank"]}
                return learner_loop.Chunk(row, it, stop=converged)

    def make_metric() -> Metric:
        w = factor_from_eigen(*state_factors(state), dim=cfg.dim or None)
        # Fold the rescaling and PCA back: ||W (z - z')|| with z = (x - mean) C^T / sqrt(scale).
        return Metric(
            kind="linear",
            input_dim=x.shape[1],
            projection=unfold(w).astype(np.float32),
            name="mlapg",
            feature_scale=feature_scale,
        )

    return loop.fit(
        advance,
        make_metric,
        num_iters=cfg.max_iters,
        chunk=cfg.log_every,
        # a loss far above F(I) is a divergence
        reference_loss=f0,
        hint=hint,
    )


VARIANTS = ("default", "small", "large")  # small: 50 iterations; large: also 64 PCA dims


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``mlapg``: what configs/mlapg.py starts from."""
    m = checks.new_config("mlapg", variant, VARIANTS)
    m.pca_dim = 256  # PCA to this many dims first when D is larger (0: never); M is
    #                  [D, D] and every iteration eigendecomposes it.
    m.dim = 0  # keep the top dim directions of M in W (0: all of its rank).
    m.max_iters = 300  # APG iterations at most (the authors' code: 300).
    m.tol = 1e-4  # stop when |F_t - F_t-1| <= tol |F_t-1| (the authors' code: 1e-4).
    m.init_step = 256.0  # initial step 1 / L on unit-scale features (authors: 2^8).
    m.backtrack_factor = 2.0  # L <- factor * L while the step fails the bound (gamma).
    m.max_backtracks = 50  # backtracking tries per iteration at most.
    m.log_every = 10  # iterations between lines of metrics.jsonl.
    if variant == "small":
        m.max_iters = 50
    elif variant == "large":  # every iteration touches all N^2 pairs on pca_dim dims.
        m.pca_dim = 64
        m.max_iters = 50
    return m


METHODS = {"mlapg": Method(fit, validate, default_config, VARIANTS)}
