"""LMNN: large margin nearest neighbours (Weinberger & Saul, JMLR 2009).

Learns L: [D', D] so that each point's k target neighbours (its k nearest
same-label points in the input space, fixed once) are pulled close and every
differently labelled point inside the target's margin (an impostor) is pushed
out. The loss (JMLR 2009, eq. 13, with the pull/push trade-off written as
``pull + mu * push``; mu = 1 is the paper's mu = 1/2 up to a factor 2):

    eps(L) = 1/N sum_i sum_{j ~> i} ||L (x_i - x_j)||^2
           + mu/N sum_i sum_{j ~> i} sum_{l: y_l != y_i} [m + ||L (x_i - x_j)||^2
                                                        - ||L (x_i - x_l)||^2]_+

Impostor search (the expensive part) is blocked matrix work: the distances of a
block of rows to all N points in the current metric, one [b, N] matrix at a
time, masked by label and reduced with ``lax.top_k`` to each point's
``num_impostors`` nearest differently labelled points. As in the paper's
solver, this active set is refreshed every ``refresh_every`` steps and the
steps in between evaluate the hinge only on it ([N, k, num_impostors] masks);
the share of (i, j) whose last candidate still violates the margin (so that
more impostors exist than the set holds) is logged as ``truncated_frac``.

A class with fewer than k + 1 images gives its points all their same-label
partners as targets (fewer than k); a point whose class has one image has no
targets and serves only as an impostor. ``validate`` refuses a k that no class
can supply. L is trained by Adam on the closed-form gradient, jitted as one
``lax.scan`` of steps per refresh round.

Convergence: the step falls by a cosine from ``learning_rate`` to 0 over ``num_iters``
(``schedule = "cosine"``), so that the last iterate settles instead of oscillating around
the optimum as Adam at a constant step does, and training stops early when the loss's
relative change over the last ``tol_window`` logged rounds is at most ``tol``. The last
history row says which happened (``stopped``: "converged: ..." or "num_iters reached ...",
also logged with absl), and every row from the ``tol_window``-th on carries the
``rel_change`` that the rule tests. ``objective`` is the loss with every impostor (no
truncated active set), the number to compare learned maps by.

The number of steps: minimised to convergence, the loss fits the training people and
ranks new ones worse than Euclidean distance. By default (``stop_val_fraction`` 0.2) the step
count is chosen on identities held out of the training set, as the reference release's
``validation`` and ``earlystopping`` options do (``warca_jax.methods.held_out``): a first
fit without them, scored every ``val_every`` steps, then the fit on every identity, on the
same cosine schedule, stopped at the best step. Measurements, with their commands:
docs/methods.md#lmnn-and-nca-when-to-stop.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from warca_jax.maths import linalg
from warca_jax.methods import Method, checks, held_out, learner_loop
from warca_jax.methods.constraints import nearest_by_label
from warca_jax.metric import Metric

SCHEDULES = ("constant", "cosine")


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an LMNN config that cannot run on this data."""
    (n, d), max_class = data.x.shape, int(np.unique(data.y, return_counts=True)[1].max())
    checks.check_number(cfg, "k", low=1, integer=True, label="k (target neighbours)")
    if cfg.k > max_class - 1:
        raise ValueError(
            f"k = {cfg.k} target neighbours needs a class with at least {cfg.k + 1} images; "
            f"the largest class has {max_class}"
        )
    checks.check_number(cfg, "dim", integer=True)
    checks.check_range(cfg.dim, 0, d, what="output dim", note=f"0: D = {d}")
    checks.check_number(cfg, "num_impostors", integer=True)
    checks.check_range(
        cfg.num_impostors,
        1,
        n - max_class,
        what="num_impostors",
        note="points outside the largest class",
    )
    checks.check_numbers(
        cfg, ("num_iters", "refresh_every", "block_size", "tol_window"), low=1, integer=True
    )
    checks.check_number(cfg, "mu", low=0)
    checks.check_number(cfg, "tol", low=0, note="; 0: no early stop")
    checks.check_number(
        cfg, "stop_val_fraction", low=0, high=1, high_open=True, note="; 0: no held-out identities"
    )
    checks.check_numbers(cfg, ("val_every", "val_patience"), low=1, integer=True)
    if cfg.val_every % cfg.refresh_every:
        raise ValueError(
            f"method.val_every must be a multiple of refresh_every ({cfg.refresh_every}): "
            f"the held-out identities are scored after a refresh round; got {cfg.val_every}"
        )
    checks.check_choice(cfg, "schedule", SCHEDULES)
    checks.check_numbers(cfg, ("margin", "learning_rate"), low=0, low_open=True)


# LMNN's margin is in the units of the features, so features too small or too large for
# float32 training are refused, not rescaled.
validate = checks.validator(
    "LMNN", check_config, scale_free=False, scale_note=" (LMNN's margin is in the features' units)"
)


def _pair_sq(z: jax.Array, idx: jax.Array) -> jax.Array:
    """Squared distances ||z_i - z_idx[i, a]||^2 [N, A], from the dense Gram matrix.

    Gathering A rows of d' floats per point is slow on XLA's CPU backend; one
    [N, N] product Z Z^T (a BLAS call) and a gather of scalars is several times
    faster at the sizes LMNN meets (N up to a few thousand).
    """
    sq = jnp.sum(z * z, axis=1)
    gram = jnp.take_along_axis(z @ z.T, idx, axis=1)
    return jnp.maximum(sq[:, None] + sq[idx] - 2.0 * gram, 0.0)


def lmnn_terms(lmap, x, targets, target_valid, impostors, impostor_valid, *, mu, margin):
    """Pull, push and the active-triplet mask of the LMNN loss on a fixed active set.

    Args:
      lmap: [D', D] linear map L.
      x: [N, D] training features.
      targets, target_valid: [N, k] target neighbours and their validity.
      impostors, impostor_valid: [N, m] impostor candidates (different labels).
      mu: push weight.
      margin: m, the margin in squared distance.

    Returns:
      (loss, pull, push, active [N, k, m] bool, z = X L^T [N, D']).
    """
    n = x.shape[0]
    z = x @ lmap.T
    both = _pair_sq(z, jnp.concatenate([targets, impostors], axis=1))
    dt, di = both[:, : targets.shape[1]], both[:, targets.shape[1] :]
    viol = margin + dt[:, :, None] - di[:, None, :]
    active = (viol > 0) & target_valid[:, :, None] & impostor_valid[:, None, :]
    pull = jnp.sum(jnp.where(target_valid, dt, 0.0)) / n
    push = jnp.sum(jnp.where(active, viol, 0.0)) / n
    return pull + mu * push, pull, push, active, z


def lmnn_loss(lmap, x, targets, target_valid, impostors, impostor_valid, *, mu, margin):
    """The LMNN loss eps(L) (eq. 13) on a fixed active set; see ``lmnn_terms``."""
    return lmnn_terms(
        lmap, x, targets, target_valid, impostors, impostor_valid, mu=mu, margin=margin
    )[0]


def lmnn_grad(lmap, x, targets, target_valid, impostors, impostor_valid, *, mu, margin):
    """Closed-form gradient of ``lmnn_loss`` with respect to L: [D', D].

    Every term is c ||z_a - z_b||^2 with z = X L^T: the pull and the first hinge
    term on (i, j) with c = (1 + mu * #active l) / N, the second hinge term on
    (i, l) with c = -mu * #active j / N. With the pair weights in a matrix C
    ([N, N], a scatter of N (k + m) scalars) the gradient in z is
    2 (diag((C + C^T) 1) - C - C^T) Z, and dL = dZ^T X: two BLAS products and
    no [D, D] outer product.

    Returns:
      (gradient [D', D], loss).
    """
    n = x.shape[0]
    loss, _, _, active, z = lmnn_terms(
        lmap, x, targets, target_valid, impostors, impostor_valid, mu=mu, margin=margin
    )
    ct = (target_valid + mu * jnp.sum(active, axis=2)) * (2.0 / n)  # [N, k]
    ci = -mu * jnp.sum(active, axis=1) * (2.0 / n)  # [N, m]
    rows = jnp.arange(n)[:, None]
    c = jnp.zeros((n, n), z.dtype).at[rows, targets].add(ct).at[rows, impostors].add(ci)
    c = c + c.T
    dz = jnp.sum(c, axis=1)[:, None] * z - c @ z
    return dz.T @ x, loss


def objective(lmap, x, labels, *, k: int, mu: float, margin: float, block_size: int = 512):
    """The LMNN loss eps(L) (eq. 13) with every impostor, not a truncated active set.

    Targets are each point's k nearest same-label points in the input space (as ``fit``
    picks them); every differently labelled point is an impostor candidate.

    Args:
      lmap: [D', D] linear map L.
      x: [N, D] features. labels: [N] labels.
      k, mu, margin: as in the config.
      block_size: rows per distance block in the searches.

    Returns:
      dict of floats: ``loss`` (pull + mu * push), ``pull``, ``push``, ``active_triplets``.
    """
    x = jnp.asarray(x, jnp.float32)
    _, inverse, counts = np.unique(np.asarray(labels), return_inverse=True, return_counts=True)
    lj = jnp.asarray(inverse, jnp.int32)
    targets, tv = nearest_by_label(x, lj, k=k, same=True, block_size=block_size)
    m = int(len(inverse) - counts.min())  # the most differently labelled points any point has
    imps, iv = nearest_by_label(x, lj, k=m, same=False, block_size=block_size)
    loss, pull, push, active, _ = jax.jit(
        functools.partial(lmnn_terms, mu=float(mu), margin=float(margin))
    )(jnp.asarray(lmap, jnp.float32), x, targets, tv, imps, iv)
    return {
        "loss": float(loss),
        "pull": float(pull),
        "push": float(push),
        "active_triplets": int(jnp.sum(active)),
    }


def make_round(mu, margin, m, rounds_steps, block_size, learning_rate, schedule, num_iters):
    """``tx`` and a jitted refresh round: impostor search in the current metric, then Adam
    steps (built once per setting through ``learner_loop.compiled``).

    ``schedule`` "cosine" multiplies the step by a cosine falling from 1 to 0 over
    ``num_iters`` steps (the step count lives in the optimiser state); "constant" keeps it.
    """
    lr = learning_rate
    if schedule == "cosine":
        lr = optax.cosine_decay_schedule(learning_rate, num_iters)
    tx = optax.adam(lr)

    def round_fn(lmap, opt_state, x, labels, targets, target_valid):
        z = x @ lmap.T
        imp, imp_valid = nearest_by_label(z, labels, k=m, same=False, block_size=block_size)
        # Triplets whose m-th (farthest kept) candidate still violates: the set is truncated.
        d = _pair_sq(z, jnp.concatenate([targets, imp[:, -1:]], axis=1))
        trunc = (margin + d[:, :-1] - d[:, -1:] > 0) & target_valid
        truncated = jnp.sum(trunc) / jnp.maximum(jnp.sum(target_valid), 1)

        def step(carry, _):
            lmap, opt_state = carry
            g, loss = lmnn_grad(
                lmap, x, targets, target_valid, imp, imp_valid, mu=mu, margin=margin
            )
            updates, opt_state = tx.update(g, opt_state, lmap)
            return (optax.apply_updates(lmap, updates), opt_state), {"loss": loss}

        (lmap, opt_state), last = learner_loop.scan_steps(
            step, (lmap, opt_state), length=rounds_steps, reduce="last"
        )
        _, pull, push, active, _ = lmnn_terms(
            lmap, x, targets, target_valid, imp, imp_valid, mu=mu, margin=margin
        )
        metrics = {
            "loss": last["loss"],
            "pull": pull,
            "push": push,
            "active_triplets": jnp.sum(active),
            "truncated_frac": truncated,
        }
        return lmap, opt_state, metrics

    return tx, jax.jit(round_fn)


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None):
    """Learns an LMNN metric (arguments and errors: ``warca_jax.methods``).

    With ``stop_val_fraction`` > 0 (``warca_jax.methods.held_out``): a first fit on the
    training identities less a held-out share (drawn from ``seed``), scored on them every
    ``val_every`` steps and stopped after ``val_patience`` scores without a better one;
    then the fit on every training identity, on the same schedule, up to the step that
    scored best. Without held-out identities (stop_val_fraction 0, or too few identities to
    hold any out: logged, and said in the last history row) it trains to ``num_iters`` or
    ``tol``. Otherwise deterministic (fixed targets, identity or PCA initialisation,
    full-batch steps). A history row per refresh round, of the last fit.

    Returns:
      (linear Metric with W = L, history rows: step, loss, pull, push,
      active_triplets, truncated_frac, seconds; rel_change from the ``tol_window``-th
      row on; the last row's ``stopped`` says why training ended: "converged: ..."
      when the rule above fired, "num_iters reached: ..." otherwise, or the step the
      held-out identities chose, and ``held_out`` what they scored).
    """
    x, y, _ = validate(features, labels, cfg)

    def train_part(xp, yp, watch):
        loop = learner_loop.Loop.start("LMNN (held-out identities)", xp, None, progress)
        _train(xp, yp, cfg, loop, watch=watch)

    stop_at, note = held_out.choose_steps("LMNN", x, y, cfg, validate, train_part, seed=seed)
    loop = learner_loop.Loop.start("LMNN", features, log_fn, progress, callback)
    metric, history = _train(x, y, cfg, loop, stop_at=stop_at)
    if note is not None and history:
        history[-1]["held_out"] = note
        if stop_at is not None and history[-1]["step"] == stop_at:  # not converged before
            history[-1]["stopped"] = f"held-out step reached: {note}"
    return metric, history


def _train(x, y, cfg, loop, *, stop_at=None, watch=None):
    """LMNN's steps on (x, y) through ``loop``: to ``num_iters`` or ``tol``, or to
    ``stop_at`` steps of the same schedule, or until ``watch`` says stop."""
    _, inverse = np.unique(y, return_inverse=True)
    xj, lj = jnp.asarray(x), jnp.asarray(inverse, jnp.int32)
    k, bs = int(cfg.k), int(cfg.block_size)
    targets, target_valid = nearest_by_label(xj, lj, k=k, same=True, block_size=bs)
    m = int(cfg.num_impostors)
    lmap = jnp.asarray(linalg.initial_map(x, int(cfg.dim)))
    opt_state = None
    num_iters = int(cfg.num_iters) if stop_at is None else min(int(stop_at), int(cfg.num_iters))

    def advance(done, length):
        nonlocal lmap, opt_state
        tx, round_fn = learner_loop.compiled(
            make_round,
            float(cfg.mu),
            float(cfg.margin),
            m,
            length,
            bs,
            float(cfg.learning_rate),
            str(cfg.schedule),
            int(cfg.num_iters),  # the schedule's length, also when stopping at stop_at
        )
        if done == 0:
            opt_state = tx.init(lmap)
        lmap, opt_state, metrics = round_fn(lmap, opt_state, xj, lj, targets, target_valid)
        return metrics

    def make_metric(lmap) -> Metric:
        return Metric(kind="linear", input_dim=x.shape[1], projection=np.asarray(lmap), name="lmnn")

    rule = learner_loop.StoppingRule(
        tol=float(cfg.tol),
        window=int(cfg.tol_window),
        num_iters=num_iters,
        log_every=int(cfg.refresh_every),
    )

    def advance_or_stop(done, length):
        # A round's metrics, with the relative change of the loss over the last
        # ``window`` rounds; the last chunk says why training ended.
        chunk = rule.chunk(advance(done, length), done, length)
        step = done + length
        if watch is not None and watch.due(step) and watch.score(step, make_metric(lmap)):
            return chunk._replace(stop=True, stopped="held-out mAP stopped improving")
        return chunk

    hint = f"lower learning_rate (now {cfg.learning_rate:g})"
    return loop.fit(
        advance_or_stop,
        lambda: make_metric(lmap),
        num_iters=num_iters,
        chunk=int(cfg.refresh_every),
        hint=hint,
    )


VARIANTS = ("default", "small", "large")  # small: 60 steps; large: L [128, D], 100 steps


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``lmnn``: what configs/lmnn.py starts from."""
    m = checks.new_config("lmnn", variant, VARIANTS)
    m.k = 3  # target neighbours per point (same label, nearest in the input space).
    m.dim = 0  # output dimension D' of L (0: D, a square L; < D: PCA-initialised).
    m.mu = 1.0  # weight of the push (impostor) term: loss = pull + mu * push.
    m.margin = 1.0  # margin in squared distance.
    m.num_impostors = 32  # nearest differently labelled points kept per point.
    m.refresh_every = 10  # steps between impostor searches (one logged row each).
    # Adam steps (full batch) at most; fewer when the loss converged (tol below).
    m.num_iters = 3000
    m.learning_rate = 1e-2  # Adam's first step size (L starts at the identity: entries ~1).
    # 'cosine': the step falls from learning_rate to 0 over num_iters, so that the last
    # iterate settles (Adam at a constant step keeps oscillating around the optimum);
    # 'constant': learning_rate throughout.
    m.schedule = "cosine"
    # stop early when the loss's relative change over the last tol_window logged rounds is at
    # most tol (0: run all num_iters steps); the last history row says why training stopped.
    m.tol = 1e-4
    m.tol_window = 10  # logged rounds (of refresh_every steps) the change is taken over.
    m.block_size = 512  # rows per [block, N] distance matrix in the searches.
    # The number of steps, chosen on held-out identities (warca_jax.methods.held_out, as
    # the reference release's `validation` / `earlystopping`): stop_val_fraction of the training
    # identities are held out and scored by retrieval mAP every val_every steps; after
    # val_patience scores without a better one that fit stops, and LMNN trains on every
    # identity up to the best step. 0: train to num_iters / tol. At convergence LMNN fits
    # the training people (docs/methods.md#lmnn-and-nca-when-to-stop).
    m.stop_val_fraction = 0.2
    m.val_every = 50  # steps between held-out scores (a multiple of refresh_every).
    m.val_patience = 10  # held-out scores without a better one before that fit stops.
    if variant == "small":
        m.num_iters = 60
    elif variant == "large":  # L: [128, D] from PCA, so each step costs N D 128, not N D^2.
        m.dim = 128
        m.num_iters = 100
    return m


METHODS = {"lmnn": Method(fit, validate, default_config, VARIANTS)}
