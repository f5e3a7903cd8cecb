"""SVMML: locally-adaptive decision functions (Li et al., CVPR 2013, "LADF").

On PCA-reduced features (``pca_variance`` of the variance, 0.95 as the WARCA
paper did, or ``pca_dim`` components), whitened (every component scaled to
variance 1/p: mean squared norm 1), a second-order decision function on pairs
(paper eq. 5),

    f(x, z) = 1/2 x^T A x + 1/2 z^T A z - x^T B z + c^T (x + z) + b,

which joins a Mahalanobis distance and a threshold that adapts to where the
pair lies: A = B = 2 M, c = 0, b = -t gives (x - z)^T M (x - z) - t. We use f
as a dissimilarity (f < 0: same identity, so that f ranks a gallery like a
distance; the paper's f is our -f) and learn it as an L2-SVM on pairs:

    min lam/2 (||A||_F^2 + ||B||_F^2 + ||c||^2)
        + mean_{same} [1 + f]_+^2 + mean_{different} [1 - f]_+^2,  A, B PSD,

the two classes weighted equally. Pairs: every same-label pair of the training
set and ``neg_ratio`` times as many different-label pairs (all of them when
there are no more, else drawn uniformly, seeded). The paper solves the dual
with a QP solver; we solve this convex primal by accelerated projected gradient
(FISTA with gradient restart; A and B projected on the PSD cone each step) with
the step 1/L from a bound on the gradient's Lipschitz constant, and stop when
the projected-gradient (KKT) residual is below ``tol``.

Why this form (measurements, with their commands: docs/methods.md#svmml): Adam followed
by a PSD projection did not converge on the non-smooth hinge, so the loss is the squared
hinge and the solver FISTA with a KKT stop; a Frobenius penalty weighs all directions alike
only when they have equal variance, so the kept PCA components are whitened; and more
different-label pairs (``neg_ratio``) helped, the class balancing keeping it a two-class
mean.

The paper's number came from the authors' released trainer, which does not solve the
problem above: ``solver="released"`` (``svmml:released``, ``svmml_released``) reproduces
it: logistic loss on all pairs, no c, no PSD, lam ~0, unwhitened PCA, started at the
Euclidean A = B = I and stopped after a fixed number of nonlinear-CG iterations, early
stopping being its regulariser (its ``num_iters`` was chosen on held-out training
identities).

On faces (ORL), where 95% PCA keeps few dimensions and the learned per-sample terms
1/2 z^T A z + c^T z shift every gallery item alike, SVMML stays below Euclidean distance.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from warca_jax.maths import linalg
from warca_jax.methods import Method, checks, learner_loop, svmml_released
from warca_jax.metric import SvmmlMetric
from warca_jax.metric.kinds import half_quad_lin as _half_quad_lin


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


def svmml_loss(params, x, i, j, dissimilar, *, lam):
    """The regularised, class-balanced squared-hinge pair SVM objective (module docstring).

    Args:
      params: (A [p, p], B [p, p], c [p], b []).
      x: [N, p] reduced features; i, j: [P] indices of the pairs.
      dissimilar: [P] bool, the pair's identities differ.
      lam: regularisation weight.
    """
    y = jnp.where(dissimilar, 1.0, -1.0)
    margin = jnp.maximum(1.0 - y * pair_decisions(params, x, i, j), 0.0) ** 2
    n_dis = jnp.maximum(jnp.sum(dissimilar), 1)
    n_sim = jnp.maximum(jnp.sum(~dissimilar), 1)
    data = jnp.sum(jnp.where(dissimilar, margin / n_dis, margin / n_sim))
    a, b, c, _ = params
    return data + 0.5 * lam * (jnp.sum(a * a) + jnp.sum(b * b) + jnp.sum(c * c))


def loss_and_grad(params, x, i, j, dissimilar, *, lam):
    """``svmml_loss`` and its gradient in closed form, through dense [N, N] pair matrices.

    f is linear in (A, B, c, b); with g_p = dF/df_p, u_n the sum of g_p over the pairs that
    hold sample n and S [N, N] the g_p at (i_p, j_p): dA = 1/2 X^T diag(u) X + lam A,
    dB = -X^T S X + lam B, dc = X^T u + lam c, db = sum_p g_p. Two [N, N] x [N, p] products
    a step, where reverse-mode through ``pair_decisions`` gathers and scatters [P, p] rows
    (several times slower on a CPU at P ~ 10^5); ``fit`` takes it up to ``DENSE_MAX_N``.

    Returns:
      (F, (dA, dB, dc, db)).
    """
    a, b, c, bias = params
    n = x.shape[0]
    h = _half_quad_lin(x, a, c)
    f = h[i] + h[j] - ((x @ b) @ x.T)[i, j] + bias
    y = jnp.where(dissimilar, 1.0, -1.0)
    slack = jnp.maximum(1.0 - y * f, 0.0)
    n_dis, n_sim = (jnp.maximum(jnp.sum(m), 1) for m in (dissimilar, ~dissimilar))
    weight = jnp.where(dissimilar, 1.0 / n_dis, 1.0 / n_sim)
    reg = 0.5 * lam * (jnp.sum(a * a) + jnp.sum(b * b) + jnp.sum(c * c))
    g = -2.0 * weight * y * slack  # dF / df_p
    u = jnp.zeros(n, x.dtype).at[i].add(g).at[j].add(g)
    s = jnp.zeros((n, n), x.dtype).at[i, j].add(g)
    grads = (
        0.5 * (x.T * u) @ x + lam * a,
        -(x.T @ s) @ x + lam * b,
        x.T @ u + lam * c,
        jnp.sum(g),
    )
    return jnp.sum(weight * slack**2) + reg, grads


# The closed form's two [N, N] float32 matrices: 2 x 4 N^2 bytes, 1.15 GB at this N.
DENSE_MAX_N = 12_000


def gradient_fn(lam: float, dense: bool):
    """(F, grad F) of ``svmml_loss``: ``loss_and_grad`` when ``dense`` (``fit``: N up to
    ``DENSE_MAX_N``), else reverse-mode through ``pair_decisions``."""
    if dense:
        return functools.partial(loss_and_grad, lam=lam)
    return jax.value_and_grad(functools.partial(svmml_loss, lam=lam))


def _psd(m):
    w, v = jnp.linalg.eigh(0.5 * (m + m.T))
    return (v * jnp.maximum(w, 0.0)) @ v.T


def project(params):
    """The projection on the feasible set: A and B on the PSD cone, c and b free."""
    a, b, c, bias = params
    return _psd(a), _psd(b), c, bias


def lipschitz_bound(x, i, j, dissimilar, lam) -> float:
    """An upper bound on the Lipschitz constant of ``svmml_loss``'s gradient.

    f is linear in the parameters, f = <psi_ij, theta>, and the squared hinge has second
    derivative at most 2, so the data term's Hessian is at most 2 sum_class mean_class
    psi psi^T, whose norm is at most its trace: 2 sum_class mean_class ||psi||^2, with
    ||psi||^2 = ||(x x^T + z z^T) / 2||_F^2 + ||x z^T||_F^2 + ||x + z||^2 + 1.
    """
    x = np.asarray(x, np.float64)
    xi, xj = x[i], x[j]
    ni, nj, dot = np.sum(xi * xi, 1), np.sum(xj * xj, 1), np.sum(xi * xj, 1)
    psi2 = 0.25 * (ni**2 + nj**2 + 2 * dot**2) + ni * nj + ni + nj + 2 * dot + 1.0
    dis = np.asarray(dissimilar, bool)
    total = sum(psi2[m].mean() for m in (dis, ~dis) if m.any())
    return 2.0 * float(total) + float(lam)


def projected_gradient_residual(params, x, i, j, dissimilar, *, lam, step, dense) -> float:
    """||theta - P(theta - step grad F(theta))|| / step: 0 exactly at the constrained optimum.

    The optimality (KKT) measure of the PSD-constrained problem; ``fit`` reports it in every
    history row (``residual``) and stops once it is below ``cfg.tol``. In float32 it
    levels off near 1e-4 (rounding of the parameters, divided by the step). ``dense``: the
    gradient's arrangement (``gradient_fn``), the fit's own.
    """
    step = jnp.float32(step)
    return float(_residual(params, x, i, j, dissimilar, step, lam=float(lam), dense=dense))


@functools.partial(jax.jit, static_argnames=("lam", "dense"))
def _residual(params, x, i, j, dissimilar, step, *, lam, dense):
    _, g = gradient_fn(lam, dense)(params, x, i, j, dissimilar)
    moved = project(jax.tree.map(lambda p, d: p - step * d, params, g))
    sq = sum(jnp.sum((p - m) ** 2) for p, m in zip(params, moved, strict=True))
    return jnp.sqrt(sq) / step


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an SVMML config that cannot run on this data."""
    top = min(data.x.shape)
    checks.check_number(cfg, "pca_variance", low=0, high=1, low_open=True)
    checks.check_number(cfg, "pca_dim", integer=True)
    note = "0: by pca_variance; at most min(N, D)"
    checks.check_range(cfg.pca_dim, 0, top, what="pca_dim", note=note)
    checks.check_number(cfg, "neg_ratio", low=0, low_open=True)
    checks.check_number(cfg, "lam", low=0, low_open=True)
    checks.check_number(cfg, "tol", low=0)
    solver = checks.check_choice(cfg, "solver", SOLVERS)
    if not isinstance(cfg.whiten, bool):
        raise ValueError(f"method.whiten must be True or False; got {cfg.whiten!r}")
    note = "; 0: the start, A = B = I" if solver == "released" else ""
    checks.check_number(cfg, "num_iters", low=int(solver != "released"), integer=True, note=note)
    checks.check_number(cfg, "log_every", low=1, integer=True)
    n = data.x.shape[0]
    if solver == "released" and n > RELEASED_MAX_N:
        raise ValueError(
            f"solver 'released' forms N x N pair matrices (8 N^2 bytes each): N = {n} "
            f"training samples is over its limit of {RELEASED_MAX_N}; use solver 'fista'"
        )


RELEASED_MAX_N = 12_000  # 1.2 GB per N x N float64 matrix of the released trainer
SOLVERS = ("fista", "released")  # the stated problem solved; the authors' released trainer

# SVMML rescales the features itself: its result does not depend on their scale.
validate = checks.validator("SVMML", check_config)


def make_pairs(labels: np.ndarray, *, neg_ratio: float, seed: int):
    """All same-label pairs (i < j) and neg_ratio times as many different-label pairs: all of
    them (i < j) when there are no more than that, else that many drawn uniformly (seeded).

    Returns:
      (i [P], j [P], dissimilar [P] bool), int32 indices.
    """
    labels = np.asarray(labels)
    n = len(labels)
    iu, ju = np.triu_indices(n, k=1)
    same = labels[iu] == labels[ju]
    pi, pj = iu[same], ju[same]
    want = int(np.ceil(neg_ratio * len(pi)))
    if want >= len(iu) - len(pi):
        ni, nj = iu[~same], ju[~same]
    else:
        rng = np.random.default_rng(seed)
        ni, nj = rng.integers(0, n, (2, 4 * want + 16))
        keep = labels[ni] != labels[nj]
        ni, nj = ni[keep][:want], nj[keep][:want]
    i = np.concatenate([pi, ni]).astype(np.int32)
    j = np.concatenate([pj, nj]).astype(np.int32)
    dis = np.concatenate([np.zeros(len(pi), bool), np.ones(len(ni), bool)])
    return i, j, dis


def make_chunk(lam: float, dense: bool):
    """The jitted ``chunk(state, x, i, j, dis, step, length)`` of accelerated projected
    gradient (FISTA with the gradient restart of O'Donoghue & Candes 2015).

    ``state`` is (params, extrapolated params, momentum t); the gradient is
    ``gradient_fn(lam, dense)``'s. Built once per (``lam``, ``dense``) through
    ``learner_loop.compiled``.
    """
    grad_fn = gradient_fn(lam, dense)

    def chunk(state, x, i, j, dis, step, length):
        def one(carry, _):
            params, ext, t = carry
            value, g = grad_fn(ext, x, i, j, dis)
            new = project(jax.tree.map(lambda p, d: p - step * d, ext, g))
            # restart the momentum when it points uphill
            uphill = sum(jnp.sum(d * (n - p)) for d, n, p in zip(g, new, params, strict=True)) > 0
            t_next = jnp.where(uphill, 1.0, 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * t * t)))
            w = jnp.where(uphill, 0.0, (t - 1.0) / t_next)
            ext = jax.tree.map(lambda n, p: n + w * (n - p), new, params)
            return (new, ext, t_next), {"loss": value}

        return learner_loop.scan_steps(one, state, length=length)

    return jax.jit(chunk, static_argnums=6)


def whitened_pca(x: np.ndarray, cfg) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, comps, xr): the PCA SVMML learns on, whitened, and the features in it (float64).

    Every kept component gets variance 1/p (mean squared norm 1), so that the Frobenius
    regulariser weighs all directions alike; components without variance (more asked for
    than the data's rank) carry nothing and are dropped. ``comps`` [p, D] includes the
    whitening: ``xr = (x - mean) @ comps.T``. With ``cfg.whiten`` False the kept
    components are left as PCA gives them (the released trainer's input).
    """
    mean, comps = linalg.pca(x, variance=float(cfg.pca_variance), max_dim=int(cfg.pca_dim) or None)
    xr = (x.astype(np.float64) - mean) @ comps.T.astype(np.float64)
    sd = xr.std(axis=0)
    keep = sd > 1e-6 * sd.max()
    sd = sd[keep] * np.sqrt(keep.sum()) if cfg.whiten else np.ones(int(keep.sum()))
    comps = comps[keep] / sd[:, None]
    xr = xr[:, keep] / sd
    return mean, comps, xr


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None):
    """Learns an SVMML decision function (arguments and errors: ``warca_jax.methods``).

    ``seed`` draws the different-label pairs; a history row every ``log_every`` steps; the
    ``callback`` gets the decision function learned so far.

    Returns:
      (SvmmlMetric, history rows: step, loss (mean over the chunk), residual (the
      projected-gradient residual at the chunk's end), seconds; the last row's ``stopped``
      says whether the residual reached ``cfg.tol``).
    """
    x, y, feature_scale = validate(features, labels, cfg)
    loop = learner_loop.Loop.start("SVMML", features, log_fn, progress, callback)
    mean, comps, xr = whitened_pca(x, cfg)

    def make_metric(a, b, c, bias) -> SvmmlMetric:
        a, b, c = (np.asarray(v, np.float32) for v in (a, b, c))
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

    if cfg.solver == "released":
        return svmml_released.fit(xr, y, cfg, loop, make_metric)
    i, j, dis = make_pairs(y, neg_ratio=float(cfg.neg_ratio), seed=seed)
    lam = float(cfg.lam)
    step = 1.0 / lipschitz_bound(xr, i, j, dis, lam)
    xr = jnp.asarray(xr, jnp.float32)
    p = comps.shape[0]
    params = (jnp.zeros((p, p)), jnp.zeros((p, p)), jnp.zeros((p,)), jnp.zeros(()))
    state = (params, params, jnp.ones(()))
    dense = x.shape[0] <= DENSE_MAX_N
    chunk = learner_loop.compiled(make_chunk, lam, dense)
    ij = (jnp.asarray(i), jnp.asarray(j), jnp.asarray(dis))
    tol = float(cfg.tol)

    def advance(done, length):
        nonlocal state
        state, metrics = chunk(state, xr, *ij, jnp.float32(step), length)
        res = projected_gradient_residual(state[0], xr, *ij, lam=lam, step=step, dense=dense)
        metrics = {**metrics, "residual": res}
        if res <= tol:
            why = f"converged: projected-gradient residual {res:.3g} <= tol {tol:g}"
            return learner_loop.Chunk(metrics, length, stop=True, stopped=why)
        if done + length >= cfg.num_iters:
            why = f"num_iters spent: projected-gradient residual {res:.3g} > tol {tol:g}"
            return learner_loop.Chunk(metrics, length, stop=True, stopped=why)
        return metrics

    hint = "raise lam"
    return loop.fit(
        advance,
        lambda: make_metric(*state[0]),
        num_iters=cfg.num_iters,
        chunk=cfg.log_every,
        # the objective at the start (A = B = 0, c = b = 0: every margin 1) is 2
        reference_loss=2.0,
        hint=hint,
    )


# small: 100 steps; large: 256 PCA dims, fewer pairs; released: the authors' released trainer
VARIANTS = ("default", "small", "large", "released")


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``svmml``: what configs/svmml.py starts from."""
    m = checks.new_config("svmml", variant, VARIANTS)
    m.pca_variance = 0.95  # share of the variance PCA keeps (used when pca_dim == 0).
    m.pca_dim = 0  # PCA components (0: as many as pca_variance needs).
    m.neg_ratio = 50.0  # different-label pairs per same-label pair (all if fewer).
    m.lam = 1e-3  # weight of lam/2 (||A||^2 + ||B||^2 + ||c||^2), on whitened inputs.
    m.num_iters = 2000  # most accelerated projected-gradient steps.
    m.tol = 1e-3  # stop once the projected-gradient (KKT) residual is below it.
    m.log_every = 100  # steps between history rows (and residual checks).
    m.solver = "fista"  # "fista": the stated problem, solved; "released": svmml_released.
    m.whiten = True  # whiten the PCA components (False: as PCA gives them).
    if variant == "small":
        m.num_iters = 100
        m.log_every = 50
    elif variant == "large":  # A and B are [k, k] on k PCA dims: cap k, fewer pairs and steps.
        m.pca_dim = 256  # 64 dims lose too much (docs/methods.md#svmml).
        m.neg_ratio = 3.0
        m.num_iters = 200
    elif variant == "released":  # svmml_released: the trainer the WARCA paper ran
        m.solver = "released"  # logistic loss on all pairs, A = B = I start, no PSD, no c
        m.whiten = False
        m.lam = 1e-6  # on A and B (the released code: 1e-8 on A, 1e-6 on B)
        m.num_iters = 100  # nonlinear-CG iterations, chosen on held-out ids
        m.log_every = 50
    return m


METHODS = {"svmml": Method(fit, validate, default_config, VARIANTS, kinds=("svmml",))}
