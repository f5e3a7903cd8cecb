"""LSML: metric learning from relative comparisons by minimising squared residual.

Liu, Mu & Ji, "Metric learning from relative comparisons by minimizing squared
residual", ICDM 2012. The side information is a set of Q quadruplets (a, b, c, d) that
say d(a, b) < d(c, d). From labels they are drawn as metric-learn's ``LSML_Supervised``
draws them: Q similar and Q dissimilar pairs (``constraints.label_pairs`` from
``np.random.default_rng(seed)``; Q = ``n_constraints``, 0 for metric-learn's default
20 * #classes^2, capped by the pairs that exist), quadruplet q = (similar q, dissimilar q).

With d_M(x, y) = sqrt((x - y)^T M (x - y)), v = x_a - x_b, u = x_c - x_d and uniform
weights w_q = 1/Q (metric-learn normalises the weights to sum 1), LSML minimises over
M > 0 (paper, eq. 3 and 7)

    f(M) = sum_q w_q [d_M(a_q, b_q) - d_M(c_q, d_q)]_+^2 + lam * D_ld(M, M0),
    D_ld(M, M0) = tr(M0^{-1} M) - log det(M0^{-1} M) - D,

the squared residual of the violated comparisons plus the log-det divergence to the
prior M0: the identity (``prior = "identity"``, metric-learn 0.7.0's default) or the
inverse covariance of the points in the quadruplets (``"covariance"``, the paper's and
older metric-learn's choice; ridge ``prior_reg * trace / D`` on the covariance). lam = 1
as in metric-learn. (metric-learn's regulariser tr(M0^{-1} M) - log det M differs from
D_ld by the constant log det M0^{-1} + D.) The gradient, in closed form (``lsml_grad``;
s_v = d_M(a, b), s_u = d_M(c, d), over the violated quadruplets s_v > s_u):

    grad f = sum_q w_q [(1 - s_u / s_v) v v^T + (1 - s_v / s_u) u u^T]
             + lam (M0^{-1} - M^{-1}).

(metric-learn's ``_gradient`` leaves out the weights w_q, so its direction is not its
objective's gradient; its step-size search still decreases the objective.)

Optimiser: natural-gradient descent from M = M0 (the gradient G preconditioned by the
affine-invariant metric of PD matrices: direction -M G M, so that the iterates do not
depend on a linear change of the features, where plain gradient steps crawl through the
condition number of M0, e.g. of an inverse-covariance prior), with a backtracking line
search: the step t starts at twice the last accepted one (1 at first) and is halved until
f(M - t M G M) <= f(M) - 1e-4 t <G, M G M> and f falls, a matrix that is not positive
definite (no Cholesky factor) counting as f = inf; so the loss falls at every step and M
stays PD. It stops (``stopped`` in the last
history row) when ||grad f||_F <= ``tol`` (metric-learn's rule and default 1e-3), when
no step size gives a decrease (the loss is at float32 resolution; metric-learn also
stops when no step of its grid decreases it), or after ``max_iter`` steps (1,000, as
metric-learn). The learned metric is returned as W with W^T W = M.

``tol`` is absolute, as metric-learn's, while the gradient's residual term scales with the
squared pair distances: on the synthetic histogram variant (configs/lsml.py with
--config.data.synthetic.histogram=True) the gradient norm is below ``tol`` after the
first step, the fit stops there and ranks as Euclidean distance does. The stop message
then says that the start met tol and to lower tol or rescale the features; the rule is kept
for parity with metric-learn (benchmarks/RESULTS.md, LSML).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from warca_jax.maths import linalg
from warca_jax.methods import Method, checks, constraints, learner_loop
from warca_jax.metric import Metric

PRIORS = ("identity", "covariance")
ARMIJO = 1e-4  # sufficient-decrease constant of the line search
MAX_HALVINGS = 50  # step halvings before a step counts as giving no decrease
STATUS = ("running", "converged", "no decrease")


class LsmlState(NamedTuple):
    """The iterate, its gradient and loss, the last step size, the steps taken and the
    status (an index of ``STATUS``)."""

    m: jax.Array
    grad: jax.Array
    loss: jax.Array
    step_size: jax.Array
    step: jax.Array
    status: jax.Array


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an LSML config that cannot run on this data."""
    checks.check_number(cfg, "n_constraints", low=0, integer=True, note="; 0: 20 * classes^2")
    checks.check_choice(cfg, "prior", PRIORS)
    checks.check_number(cfg, "prior_reg", low=0, note="; ridge on the covariance prior")
    checks.check_number(cfg, "lam", low=0, low_open=True)
    checks.check_number(cfg, "tol", low=0, note="; 0: no gradient-norm stop")
    checks.check_numbers(cfg, ("max_iter", "log_every"), low=1, integer=True)


# With the identity prior the objective mixes distances in the features' units with
# log det M, so features too small or too large for float32 are refused, not rescaled.
validate = checks.validator(
    "LSML", check_config, scale_free=False, scale_note=" (LSML's prior is in the features' units)"
)


def draw_quadruplets(labels, num: int, rng: np.random.Generator) -> np.ndarray:
    """[Q, 4] quadruplets (a, b, c, d): (a, b) a similar pair, (c, d) a dissimilar one.

    ``num`` (0: 20 * #classes^2, metric-learn's default) similar and dissimilar pairs are
    drawn by ``constraints.label_pairs``; Q is the smaller of the two counts drawn.
    """
    labels = np.asarray(labels)
    num = num or 20 * np.unique(labels).shape[0] ** 2
    pairs = constraints.label_pairs(labels, num, rng)
    q = min(pairs.similar.shape[0], pairs.dissimilar.shape[0])
    return np.concatenate([pairs.similar[:q], pairs.dissimilar[:q]], axis=1)


def _logdet(m: jax.Array) -> jax.Array:
    """log det M by Cholesky: inf-free, NaN for a matrix that is not positive definite."""
    chol = jnp.linalg.cholesky(m)
    return 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))


def lsml_terms(m, v, u, prior_inv, prior_logdet, *, lam):
    """(loss, squared residual, log-det divergence, violated fraction) of f(M).

    Args:
      m: [D, D] symmetric M.
      v, u: [Q, D] differences x_a - x_b (similar) and x_c - x_d (dissimilar).
      prior_inv: [D, D] M0^{-1}; prior_logdet: log det M0^{-1}.
      lam: weight of the divergence.

    The loss is +inf where M is not positive definite.
    """
    dv = jnp.sum((v @ m) * v, axis=1)
    du = jnp.sum((u @ m) * u, axis=1)
    resid = jnp.sqrt(jnp.maximum(dv, 0.0)) - jnp.sqrt(jnp.maximum(du, 0.0))
    violated = resid > 0
    hinge = jnp.mean(jnp.where(violated, resid, 0.0) ** 2)
    div = jnp.sum(prior_inv * m) - _logdet(m) - prior_logdet - m.shape[0]
    loss = hinge + lam * div
    return jnp.where(jnp.isnan(loss), jnp.inf, loss), hinge, div, jnp.mean(violated)


def lsml_loss(m, v, u, prior_inv, prior_logdet, *, lam):
    """f(M) (module docstring); see ``lsml_terms``."""
    return lsml_terms(m, v, u, prior_inv, prior_logdet, lam=lam)[0]


def lsml_grad(m, v, u, prior_inv, prior_logdet, *, lam):
    """Closed-form gradient of ``lsml_loss`` in M: [D, D] (module docstring), and the loss.

    The residual part is V^T diag(c_v) V + U^T diag(c_u) U with c_v = w (1 - s_u / s_v),
    c_u = w (1 - s_v / s_u) on violated quadruplets, 0 elsewhere (s_u = 0 there means
    u = 0 for a PD M, whose outer product is 0).
    """
    q = v.shape[0]
    sv = jnp.sqrt(jnp.maximum(jnp.sum((v @ m) * v, axis=1), 0.0))
    su = jnp.sqrt(jnp.maximum(jnp.sum((u @ m) * u, axis=1), 0.0))
    violated = sv > su
    resid = jnp.where(violated, sv - su, 0.0) / q
    cv = resid / jnp.where(violated, sv, 1.0)
    cu = -resid / jnp.where(su > 0, su, 1.0)
    eye = jnp.eye(m.shape[0], dtype=m.dtype)
    m_inv = jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(m), True), eye)
    grad = (v * cv[:, None]).T @ v + (u * cu[:, None]).T @ u + lam * (prior_inv - m_inv)
    loss = lsml_loss(m, v, u, prior_inv, prior_logdet, lam=lam)
    return 0.5 * (grad + grad.T), loss


def make_chunk(lam: float) -> tuple[Callable, Callable]:
    """Jitted ``chunk(state, v, u, prior_inv, prior_logdet, tol, length)``: ``length`` steps
    (no-ops once the status is not "running") in one ``lax.scan``; and the jitted
    ``lsml_grad`` that starts it."""

    def step(state: LsmlState, data):
        v, u, prior_inv, prior_logdet, tol = data
        loss_at = functools.partial(
            lsml_loss, v=v, u=u, prior_inv=prior_inv, prior_logdet=prior_logdet, lam=lam
        )

        def descend(state: LsmlState) -> LsmlState:
            # the natural-gradient direction -M G M: invariant to linear maps of the
            # features, a descent direction (<G, M G M> > 0 for M > 0)
            direction = -state.m @ state.grad @ state.m
            direction = 0.5 * (direction + direction.T)
            slope = jnp.vdot(state.grad, direction)

            def insufficient(carry):
                t, f_new, k = carry
                armijo = f_new <= state.loss + ARMIJO * t * slope
                return ~(armijo & (f_new < state.loss)) & (k < MAX_HALVINGS)

            def halve(carry):
                t, _, k = carry
                return 0.5 * t, loss_at(state.m + 0.5 * t * direction), k + 1

            t0 = jnp.where(state.step == 0, 1.0, 2.0 * state.step_size)
            t, f_new, _ = jax.lax.while_loop(
                insufficient, halve, (t0, loss_at(state.m + t0 * direction), jnp.int32(0))
            )
            ok = (f_new <= state.loss + ARMIJO * t * slope) & (f_new < state.loss)
            new_m = jnp.where(ok, state.m + t * direction, state.m)
            new_m = 0.5 * (new_m + new_m.T)
            grad, loss = lsml_grad(new_m, v, u, prior_inv, prior_logdet, lam=lam)
            converged = jnp.linalg.norm(grad) <= tol
            status = jnp.where(ok, jnp.where(converged, 1, 0), 2).astype(jnp.int32)
            step_size = jnp.where(ok, t, state.step_size)
            return LsmlState(new_m, grad, loss, step_size, state.step + 1, status)

        state = jax.lax.cond(state.status == 0, descend, lambda s: s, state)
        return state, {}

    def chunk(state, v, u, prior_inv, prior_logdet, tol, length):
        data = (v, u, prior_inv, prior_logdet, tol)
        state, _ = learner_loop.scan_steps(lambda s, _: step(s, data), state, length=length)
        _, hinge, div, violated = lsml_terms(state.m, v, u, prior_inv, prior_logdet, lam=lam)
        metrics = {
            "loss": state.loss,
            "residual": hinge,
            "divergence": div,
            "violated_frac": violated,
            "grad_norm": jnp.linalg.norm(state.grad),
            "step_size": state.step_size,
        }
        return state, metrics

    return jax.jit(chunk, static_argnums=6), jax.jit(functools.partial(lsml_grad, lam=lam))


def prior(x: np.ndarray, quads: np.ndarray, kind: str, reg: float) -> np.ndarray:
    """M0^{-1} [D, D] float64: I, or the covariance of the points in the quadruplets (as
    metric-learn estimates it) plus ``reg * trace / D`` on its diagonal."""
    d = x.shape[1]
    if kind == "identity":
        return np.eye(d)
    pts = np.asarray(x, np.float64)[np.unique(quads)]
    cov = np.atleast_2d(np.cov(pts, rowvar=False))
    cov = cov + reg * max(np.trace(cov) / d, 1e-300) * np.eye(d)
    if np.linalg.eigvalsh(cov)[0] <= 0:
        raise ValueError(
            "LSML's covariance prior is singular (the points of the quadruplets span fewer "
            f"than {d} dimensions); raise method.prior_reg or use prior='identity'"
        )
    return cov


def objective(m, x, quads, prior_inv, *, lam: float = 1.0) -> dict:
    """f(M) and its parts on quadruplets [Q, 4] of x: [N, D] (float32), for comparisons."""
    xj = jnp.asarray(x, jnp.float32)
    v, u = xj[quads[:, 0]] - xj[quads[:, 1]], xj[quads[:, 2]] - xj[quads[:, 3]]
    pinv = np.asarray(prior_inv, np.float64)
    logdet = float(np.linalg.slogdet(pinv)[1])
    loss, hinge, div, viol = lsml_terms(
        jnp.asarray(m, jnp.float32), v, u, jnp.asarray(pinv, jnp.float32), logdet, lam=lam
    )
    return {
        "loss": float(loss),
        "residual": float(hinge),
        "divergence": float(div),
        "violated_frac": float(viol),
    }


def _stopped(state: LsmlState, cfg) -> str | None:
    status, step = int(state.status), int(state.step)
    gnorm = float(jnp.linalg.norm(state.grad))
    if status == 1:
        done = f"converged: gradient norm {gnorm:.3g} <= tol {cfg.tol:g} at step {step}"
        if step <= 1:  # tol is absolute (metric-learn's rule): small features meet it at once
            done += (
                "; the start M0 met tol, so the metric is M0's: the gradient scales with the "
                "squared pair distances, so on features this small lower tol or rescale them"
            )
        return done
    if status == 2:
        return (
            f"no decrease: no step size lowers the loss (float32 resolution) at step {step}, "
            f"gradient norm {gnorm:.3g}"
        )
    if step >= cfg.max_iter:
        return (
            f"max_iter reached: {cfg.max_iter} steps, gradient norm {gnorm:.3g} > tol {cfg.tol:g}"
        )
    return None


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None):
    """Learns an LSML metric (arguments and errors: ``warca_jax.methods``).

    ``seed`` draws the quadruplets; a history row every ``log_every`` steps.

    Returns:
      (linear Metric with W^T W = M, [D, D]; history rows: step, loss, residual,
      divergence, violated_frac, grad_norm, step_size, seconds; the last row's
      ``stopped`` says why training ended).
    """
    x, y, _ = validate(features, labels, cfg)
    loop = learner_loop.Loop.start("LSML", features, log_fn, progress, callback)
    quads = draw_quadruplets(y, int(cfg.n_constraints), np.random.default_rng(seed))
    pinv64 = prior(x, quads, cfg.prior, float(cfg.prior_reg))
    m0 = np.linalg.inv(pinv64)
    xj = jnp.asarray(x)
    v, u = xj[quads[:, 0]] - xj[quads[:, 1]], xj[quads[:, 2]] - xj[quads[:, 3]]
    pinv, pld = jnp.asarray(pinv64, jnp.float32), float(np.linalg.slogdet(pinv64)[1])
    lam = float(cfg.lam)
    m = jnp.asarray((m0 + m0.T) / 2, jnp.float32)
    chunk, grad_fn = learner_loop.compiled(make_chunk, lam)
    tol = jnp.float32(cfg.tol)
    grad, loss = grad_fn(m, v, u, pinv, pld)
    zero = jnp.zeros((), jnp.float32)
    state = LsmlState(m, grad, loss, zero, jnp.int32(0), jnp.int32(0))

    def advance(done, length):
        nonlocal state
        before = int(state.step)
        state, metrics = chunk(state, v, u, pinv, pld, tol, length)
        return learner_loop.Chunk(
            metrics,
            int(state.step) - before,
            stop=int(state.status) != 0,
            stopped=_stopped(state, cfg),
        )

    def make_metric(m) -> Metric:
        w = linalg.psd_factor(np.asarray(m, np.float64))
        return Metric(kind="linear", input_dim=x.shape[1], projection=w, name="lsml")

    return loop.fit(
        advance,
        lambda: make_metric(state.m),
        num_iters=int(cfg.max_iter),
        chunk=int(cfg.log_every),
        reference_loss=float(loss),
        hint="check the features (LSML's line search keeps the loss falling)",
    )


VARIANTS = ("default", "covariance", "small")  # covariance: the covariance prior; small: 100 steps


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``lsml``: what configs/lsml.py starts from."""
    m = checks.new_config("lsml", variant, VARIANTS)
    # quadruplets (similar pair, dissimilar pair) drawn from the labels; 0: metric-learn's
    # default 20 * classes^2, capped by the similar (and dissimilar) pairs that exist.
    m.n_constraints = 0
    # prior M0 of the log-det divergence, and the starting point: 'identity' (metric-learn
    # 0.7.0's default) or 'covariance' (inverse covariance of the quadruplets' points, the
    # paper's and older metric-learn's choice).
    m.prior = "identity"
    m.prior_reg = 1e-6  # ridge prior_reg * trace / D on the covariance prior.
    m.lam = 1.0  # weight of the log-det divergence (metric-learn: 1, no parameter).
    m.tol = 1e-3  # stop when ||grad f||_F <= tol (metric-learn: tol=1e-3; 0: never).
    m.max_iter = 1000  # gradient steps at most (metric-learn: max_iter=1000).
    m.log_every = 50  # steps per logged history row.
    if variant == "covariance":
        m.prior = "covariance"
    elif variant == "small":
        m.max_iter = 100
        m.log_every = 20
    return m


METHODS = {"lsml": Method(fit, validate, default_config, VARIANTS)}
