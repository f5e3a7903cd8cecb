"""MMC: metric learning for clustering with side information (Xing, Ng, Jordan & Russell,
NIPS 2002), trained from labels as metric-learn's ``MMC_Supervised``.

From ``num_constraints`` similar pairs S (same label) and as many dissimilar pairs D
(``constraints.label_pairs``, drawn from ``np.random.default_rng(seed)``), it learns a
PSD Mahalanobis matrix A (paper eq. 3-5):

    max_A  g(A) = sum_{(i,j) in D} ||x_i - x_j||_A
    s.t.   f(A) = sum_{(i,j) in S} ||x_i - x_j||_A^2 <= 1,   A >= 0 (PSD),

with ||d||_A = sqrt(d^T A d). f is linear in A: f(A) = <W, A> with W = sum_S d d^T, so
C1 = {A : f(A) <= 1} is a half-space; C2 is the PSD cone. The paper's algorithm (its
Figure "Full metric"), from A = 100 I / f(I) (metric-learn's start: A = I under its bound
f(A) <= f(I) / 100, which only rescales A; it makes the iterates independent of the
features' scale):

    repeat:  A <- A + alpha (grad g(A))_perp     (the part orthogonal to grad f = W)
             repeat: A <- the projection of A onto C1;  A <- the projection onto C2
             until A is in C1 (within ``proj_tol``) or ``max_proj`` rounds,

with grad g(A) = sum_D d d^T / (2 ||d||_A) and the projections

    onto C1:  A - max(0, <W, A> - 1) / ||W||_F^2 W,
    onto C2:  V max(Lambda, 0) V^T  (A = V Lambda V^T).

The step size follows metric-learn 0.7.0's rule for the paper's unspecified alpha: a
step is kept when the projections succeeded and g grew, and alpha then grows by 5%; a
step that fails is undone and alpha halves. Here the direction has unit Frobenius norm and
alpha is relative to ||A||_F (a step of alpha ||A||_F), so that the algorithm does not
depend on the features' scale. After the projections, A is scaled by min(1, 1 / f(A)) so
that every kept iterate is exactly feasible (f(A) <= 1: the projections stop within
``proj_tol``). Training stops when alpha falls below ``tol`` (metric-learn's test
||alpha M|| / ||A|| < tol) or after ``max_iter`` tries, kept or not; the last history row
says which (``stopped``).

The pair sums are computed without a [P, D] array of differences: with XA = X A,
d^T A d = q_i + q_j - 2 (XA)_i . x_j (q_i = x_i^T A x_i), and sum_p w_p d_p d_p^T =
X^T (diag(deg) X - Y) with Y_i = sum_{p touching i} w_p x_other, in blocks of
``block_size`` pairs. The learned A is returned as a linear Metric W with W^T W = A
(its eigendecomposition, ``linalg.psd_factor``).

The projections onto C1 n C2 (the paper's alternating ones and the exact one) are in
``warca_jax.methods.mmc_projection``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from warca_jax.maths import linalg
from warca_jax.methods import Method, checks, constraints, learner_loop
from warca_jax.methods.mmc_projection import PROJECTIONS, project
from warca_jax.metric import Metric

GROW, SHRINK = 1.05, 0.5  # step factors after a kept / an undone step (metric-learn)


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an MMC config that cannot run on this data."""
    checks.check_number(cfg, "num_constraints", low=0, integer=True, note="; 0: 20 C^2")
    checks.check_numbers(
        cfg, ("max_iter", "max_proj", "log_every", "block_size"), low=1, integer=True
    )
    checks.check_number(cfg, "tol", low=0, note="; 0: run max_iter steps")
    checks.check_numbers(cfg, ("init_step", "proj_tol"), low=0, low_open=True)
    checks.check_choice(cfg, "projection", tuple(PROJECTIONS))


# MMC's optimum does not depend on the features' scale (A scales with 1 / scale^2 and the
# step is relative to ||A||): features outside float32's safe range are rescaled.
validate = checks.validator("MMC", check_config)


class Pairs(NamedTuple):
    """Pair endpoints in blocks: i, j [nb, B] int32, weight [nb, B] (0 on padding)."""

    i: jax.Array
    j: jax.Array
    weight: jax.Array


def pair_blocks(pairs: np.ndarray, block_size: int) -> Pairs:
    """[P, 2] index pairs padded with (0, 0) of weight 0 into blocks of ``block_size``."""
    p = pairs.shape[0]
    b = max(1, min(block_size, p))
    nb = max(1, -(-p // b))
    pad = nb * b - p
    ij = np.concatenate([pairs, np.zeros((pad, 2), pairs.dtype)]).astype(np.int32)
    w = np.concatenate([np.ones(p, np.float32), np.zeros(pad, np.float32)])
    return Pairs(
        jnp.asarray(ij[:, 0].reshape(nb, b)),
        jnp.asarray(ij[:, 1].reshape(nb, b)),
        jnp.asarray(w.reshape(nb, b)),
    )


def pair_sq_dists(a: jax.Array, x: jax.Array, pairs: Pairs) -> jax.Array:
    """d_p^T A d_p [nb, B] for every pair (0 on padding), d_p = x_i - x_j."""
    xa = x @ a
    q = jnp.sum(xa * x, axis=1)

    def block(ijw):
        i, j, w = ijw
        cross = jnp.sum(xa[i] * x[j], axis=1)
        return jnp.where(w > 0, jnp.maximum(q[i] + q[j] - 2.0 * cross, 0.0), 0.0)

    return jax.lax.map(block, pairs)


def weighted_scatter(x: jax.Array, pairs: Pairs, weight: jax.Array) -> jax.Array:
    """sum_p weight_p d_p d_p^T ([D, D]) as X^T (diag(deg) X - Y), block by block."""
    n = x.shape[0]

    def block(carry, ijw):
        y, deg = carry
        i, j, w = ijw
        y = y.at[i].add(w[:, None] * x[j]).at[j].add(w[:, None] * x[i])
        deg = deg.at[i].add(w).at[j].add(w)
        return (y, deg), None

    (y, deg), _ = jax.lax.scan(
        block, (jnp.zeros_like(x), jnp.zeros((n,), x.dtype)), (pairs.i, pairs.j, weight)
    )
    out = x.T @ (deg[:, None] * x - y)
    return (out + out.T) / 2.0


def dissimilar_sum(a: jax.Array, x: jax.Array, dissimilar: Pairs) -> jax.Array:
    """g(A) = sum over dissimilar pairs of ||d||_A (paper eq. 3's objective)."""
    return jnp.sum(jnp.sqrt(pair_sq_dists(a, x, dissimilar)))


def dissimilar_grad(a: jax.Array, x: jax.Array, dissimilar: Pairs) -> tuple[jax.Array, jax.Array]:
    """(grad g(A) = sum_D d d^T / (2 ||d||_A), g(A)).

    ||d||_A is floored at 1e-6 of its mean in the weights, so that a dissimilar pair at
    distance 0 (two equal feature vectors) gives a large weight, not an infinite one.
    """
    dist = jnp.sqrt(pair_sq_dists(a, x, dissimilar))
    mean = jnp.sum(dist) / jnp.maximum(jnp.sum(dissimilar.weight), 1.0)
    w = dissimilar.weight * 0.5 / jnp.maximum(dist, 1e-6 * mean)
    return weighted_scatter(x, dissimilar, w), jnp.sum(dist)


def ascent_direction(grad_g: jax.Array, grad_f: jax.Array) -> jax.Array:
    """(grad g)_perp: grad g without its component along grad f, unit Frobenius norm."""
    perp = grad_g - jnp.vdot(grad_g, grad_f) / jnp.vdot(grad_f, grad_f) * grad_f
    return perp / jnp.sqrt(jnp.vdot(perp, perp))


class MMCState(NamedTuple):
    """A (feasible), its ascent direction, g(A), the relative step alpha."""

    a: jax.Array
    direction: jax.Array
    g: jax.Array
    step: jax.Array


def make_cycle(method: str, proj_tol: float, max_proj: int):
    """One jitted try of the paper's loop: step, project, keep or undo (built once per
    setting through ``learner_loop.compiled``)."""

    def cycle(state: MMCState, x, w, dissimilar):
        norm = jnp.sqrt(jnp.vdot(state.a, state.a))
        trial = state.a + state.step * norm * state.direction
        trial, rounds, ok = project(trial, w, method=method, proj_tol=proj_tol, max_proj=max_proj)
        grad_g, g = dissimilar_grad(trial, x, dissimilar)
        keep = ok & (g > state.g)
        new = MMCState(
            jnp.where(keep, trial, state.a),
            jnp.where(keep, ascent_direction(grad_g, w), state.direction),
            jnp.where(keep, g, state.g),
            state.step * jnp.where(keep, GROW, SHRINK),
        )
        return new, {"kept": keep, "projections": rounds}

    return jax.jit(cycle)


def objective(a, x, similar: np.ndarray, dissimilar: np.ndarray) -> dict:
    """MMC's objective for a PSD matrix A ([D, D]) on the given [P, 2] pairs.

    Returns:
      dict of floats: ``objective`` g(A) / sqrt(f(A)), the value of g at A scaled onto
      f = 1 (so that matrices of any scale compare; the number to compare by),
      ``dissimilar`` g(A), ``similar`` f(A).
    """
    xj = jnp.asarray(x, jnp.float32) - jnp.asarray(np.mean(x, axis=0), jnp.float32)
    aj = jnp.asarray(a, jnp.float32)
    g = float(dissimilar_sum(aj, xj, pair_blocks(np.asarray(dissimilar), 8192)))
    f = float(jnp.sum(pair_sq_dists(aj, xj, pair_blocks(np.asarray(similar), 8192))))
    return {"objective": g / np.sqrt(f), "dissimilar": g, "similar": f}


def draw_pairs(labels: np.ndarray, num_constraints: int, seed: int) -> constraints.LabelPairs:
    """metric-learn's ``MMC_Supervised`` pairs: ``num_constraints`` (0: 20 C^2, C the number
    of labels) similar and as many dissimilar ones, from ``default_rng(seed)``."""
    num = num_constraints or 20 * len(np.unique(labels)) ** 2
    return constraints.label_pairs(labels, num, np.random.default_rng(seed))


class _Tries:
    """An MMC fit between chunks: the data on the device and the state."""

    def __init__(self, x: np.ndarray, pairs: constraints.LabelPairs, cfg):
        bs = int(cfg.block_size)
        self.x = jnp.asarray(x - x.mean(axis=0), jnp.float32)  # differences unchanged
        similar = pair_blocks(pairs.similar, bs)
        self.dissimilar = pair_blocks(pairs.dissimilar, bs)
        self.w = jax.jit(weighted_scatter)(self.x, similar, similar.weight)
        key = (str(cfg.projection), float(cfg.proj_tol), int(cfg.max_proj))
        self.cycle = learner_loop.compiled(make_cycle, *key)
        proj = jax.jit(functools.partial(project, method=key[0], proj_tol=key[1], max_proj=key[2]))
        # metric-learn's start (A = I under the bound f(I) / 100), in the paper's units
        a0 = proj(jnp.eye(x.shape[1], dtype=jnp.float32) * (100.0 / jnp.trace(self.w)), self.w)[0]
        grad_g, g0 = jax.jit(dissimilar_grad)(a0, self.x, self.dissimilar)
        self.state = MMCState(a0, ascent_direction(grad_g, self.w), g0, jnp.float32(cfg.init_step))
        self.max_iter, self.tol = int(cfg.max_iter), float(cfg.tol)

    def advance(self, done: int, length: int) -> learner_loop.Chunk:
        """Up to ``length`` tries after ``done``; fewer when the step fell below ``tol``."""
        kept, rounds = 0, 0
        for it in range(1, length + 1):
            self.state, info = self.cycle(self.state, self.x, self.w, self.dissimilar)
            kept += int(info["kept"])
            rounds += int(info["projections"])
            alpha = float(self.state.step)
            if alpha < self.tol or done + it == self.max_iter:
                break
        row = {
            "loss": -float(self.state.g),
            "objective": float(self.state.g),
            "similar": float(jnp.vdot(self.w, self.state.a)),
            "step_size": alpha,
            "kept": kept,
            "projections": rounds / it,
        }
        tries, tol, stopped = done + it, self.tol, None
        if alpha < tol:
            stopped = (
                f"converged: relative step {alpha:.3g} < tol {tol:g} after {tries} of "
                f"{self.max_iter} tries"
            )
        elif tries == self.max_iter:
            stopped = f"max_iter reached: {tries} tries, relative step {alpha:.3g} >= tol {tol:g}"
        return learner_loop.Chunk(row, it, stop=alpha < tol, stopped=stopped)


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None):
    """Learns an MMC metric, a full matrix (arguments and errors: ``warca_jax.methods``).

    ``seed`` draws the pairs; a history row every ``log_every`` tries.

    Returns:
      (linear Metric with W^T W = A, history rows: step (tries so far), loss (-g(A)),
      objective (g(A)), similar (f(A) <= 1), step_size (the relative alpha of the next
      try), kept (tries kept in the chunk), projections (mean rounds per try), seconds;
      the last row's ``stopped`` says why training ended).
    """
    x, y, scale = validate(features, labels, cfg)
    loop = learner_loop.Loop.start("MMC", features, log_fn, progress, callback)
    run = _Tries(x, draw_pairs(y, int(cfg.num_constraints), seed), cfg)

    def make_metric(a) -> Metric:
        proj = linalg.psd_factor(np.asarray(a))
        return Metric("linear", x.shape[1], projection=proj, name="mmc", feature_scale=scale)

    hint = "lower init_step or check the training data"
    return loop.fit(
        run.advance,
        lambda: make_metric(run.state.a),
        num_iters=run.max_iter,
        chunk=int(cfg.log_every),
        reference_loss=float(run.state.g),
        hint=hint,
    )


VARIANTS = ("default", "small")  # small: 30 tries, the exact projection


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``mmc``: what configs/mmc.py starts from."""
    m = checks.new_config("mmc", variant, VARIANTS)
    # similar pairs drawn from the labels, and as many dissimilar ones (0: 20 C^2 with C
    # the number of identities, metric-learn's n_constraints=None; capped by the pairs
    # that exist); drawn from the seed.
    m.num_constraints = 0
    m.max_iter = 100  # tries (steps kept or undone) at most (metric-learn: 100).
    # stop when the relative step alpha falls below tol (metric-learn's MMC_Supervised:
    # 1e-6 on ||alpha M|| / ||A||; 0: run max_iter tries).
    m.tol = 1e-6
    # the first step, relative to ||A||_F (metric-learn: 0.1 in absolute units; grown by 5%
    # after each kept step, halved after each undone one, as there).
    m.init_step = 0.1
    # 'alternating': the paper's (and metric-learn's) projections onto {f(A) <= 1} and the
    # PSD cone in turn, until f(A) <= 1 + proj_tol (metric-learn: 0.01) or max_proj rounds
    # (metric-learn: 10,000); 'exact': the nearest point of their intersection, by
    # bisection on its one Lagrange multiplier (tens of eigendecompositions, not thousands).
    m.projection = "alternating"
    m.proj_tol = 0.01
    m.max_proj = 10000
    m.log_every = 10  # tries per history row.
    m.block_size = 8192  # pairs whose distances are formed at once.
    if variant == "small":  # the exact projection: seconds, not a minute, per split
        m.max_iter = 30
        m.projection = "exact"
    return m


METHODS = {"mmc": Method(fit, validate, default_config, VARIANTS)}
