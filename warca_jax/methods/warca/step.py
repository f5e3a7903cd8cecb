"""WARCA's training step: one function per form, each a sequence of the paper's equations.

``primal_step`` (W: [D', D] on features X) and ``kernel_step`` (A: [D', N] on the kernel
matrix K) share the draw of the minibatch (``_draw``), the violator search
(``_search``) and the optimiser update with its logged numbers (``_update``); what
differs between them is which equations of ``warca_jax.maths.losses`` they evaluate:

* primal: the eq. 20-22 hinge gradient (``losses.hinge_grad``) or its autodiff, and the
  AON penalty's gradient 2 (W W^T - I) W;
* kernel: the embeddings K A^T of all N training points, computed once per step
  ([N, N] x [N, D'], the one dense product the method needs) and shared by the
  violator search, the hinge gradient and the penalty; with ``preconditioned`` the
  eq. 23-24 direction (``losses.kernel_hinge_precond_grad``, a scatter into three columns
  of A per triplet, and ``penalties.kernel_aon_penalty_precond_grad``), else eq. 20-22.

The logged ``loss`` is the eq. 12 (eq. 18) objective of the minibatch
(``losses.objective``). Lambda and the step size are the step's ``Hyperparams``
argument, never constants of the compiled program: fits that differ only in them (a
lambda x eta grid) share one program (``compiled_chunk``).

With a ``mesh`` the computation is laid out over its devices (XLA's SPMD partitioner
does the communication): the features and the embeddings of all training points are
split by rows, so without a candidate pool the [B, N] violator search is split by
candidate, on the devices that hold them; with a pool the minibatch is split by pair.
The gradient is a sum over the minibatch, reduced across devices; parameters and
optimiser state are replicated.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax

from warca_jax.maths import device_mesh, losses, optim, penalties, sampling
from warca_jax.methods import learner_loop


class Hyperparams(NamedTuple):
    """The run's penalty weight lambda and step size eta: float32 scalars, arguments of
    the compiled step (required, no default)."""

    lam: jax.Array
    learning_rate: jax.Array


def hyperparams(cfg) -> Hyperparams:
    """The ``Hyperparams`` of a checked WARCA config (``config.check_config``) whose ``lam``
    is a number (``fit`` chooses one first where it is None): the one place the config's
    lambda and eta become the compiled step's arguments (float32, as the parameters).

    Raises:
      ValueError: ``cfg.lam`` is None (the default: the rule has not chosen one yet).
    """
    if cfg.lam is None:
        raise ValueError(
            "the step needs lam as a number; lam None is chosen from lam_grid by fit "
            "(lam_select), so give lam a value to build the step directly"
        )
    return Hyperparams(
        lam=jnp.asarray(cfg.lam, jnp.float32),
        learning_rate=jnp.asarray(cfg.learning_rate, jnp.float32),
    )


def config_optimizer(cfg, hyper: Hyperparams) -> optax.GradientTransformationExtraArgs:
    """The ``tx`` of a WARCA config at ``hyper``: penalty + Adam (+ cosine decay)."""
    return optim.make_optimizer(
        learning_rate=hyper.learning_rate,
        lam=hyper.lam,
        penalty_mode=cfg.penalty_mode,
        decay_steps=cfg.num_iters if cfg.schedule == "cosine" else 0,
    )


def init_state(cfg, hyper: Hyperparams, params: jax.Array) -> optim.TrainState:
    """Step 0: ``params``, a fresh optimiser state."""
    return optim.TrainState(
        params, config_optimizer(cfg, hyper).init(params), jnp.zeros((), jnp.int32)
    )


def _num_bits(cfg, n: int) -> int:
    """Random words one step uses: 3B for the pairs, 2B for the violators, C for a pool."""
    return 5 * cfg.batch_size + _pool(cfg, n)


def _pool(cfg, n: int) -> int:
    """Candidates per step: ``cfg.candidate_pool``, or 0 for all N training points."""
    return cfg.candidate_pool if 0 < cfg.candidate_pool < n else 0


def _constrainer(mesh) -> Callable:
    """``constrain(a, *spec)``: lays ``a`` out on ``mesh`` (no-op without one)."""

    def constrain(a, *spec):
        if mesh is None:
            return a
        return jax.lax.with_sharding_constraint(
            a, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))
        )

    return constrain


class _Draw(NamedTuple):
    i: jax.Array  # [B] anchors
    j: jax.Array  # [B] positives
    u: jax.Array  # [2, B] uniforms of the violator search
    cand: jax.Array | None  # [C] the candidate pool, None: all N


def _draw(cfg, table: sampling.PairTable, bits) -> _Draw:
    """Step 1 of section 3.3 (pairs uniformly from S, eq. 3) and the candidate pool."""
    b, n = cfg.batch_size, table.labels.shape[0]
    i, j = sampling.sample_pairs(bits[: 3 * b].reshape(3, b), table)
    u = sampling.to_uniform(bits[3 * b : 5 * b]).reshape(2, b)
    cand = sampling.to_indices(bits[5 * b :], n) if _pool(cfg, n) else None
    return _Draw(i, j, u, cand)


class _Search(NamedTuple):
    k: jax.Array  # [B] violators, indices of training points
    pv: jax.Array  # [B, D'] projected negative differences of the chosen violators
    weights: jax.Array  # [B] L(rank_ij), 0 where no violator
    viol: sampling.Violators
    d_ij: jax.Array  # [B]
    d_ik: jax.Array  # [B, C] to every candidate
    negative: jax.Array  # [B, C]


def _search(cfg, table, draw: _Draw, ea, ep, ec, *, rows: int, constrain) -> _Search:
    """Step 2 of section 3.3: a violator k per pair among the candidates, and L(rank_ij).

    d_ij by ``losses.distance``, d_ik by ``losses.candidate_distances`` (eq. 5, 17);
    ``sampling.find_violators`` flags the negatives with ``losses.margin_violation`` > 0
    and estimates rank^gamma_ij (eq. 14); the pair's weight is eq. 6's ranking error at
    that rank, ``losses.rank_weight`` (eq. 8).

    ``ea``, ``ep``: [B, D'] embedded anchors and positives; ``ec``: [C, D'] the embedded
    candidates (all ``rows`` rows of the features, padding included, without a pool).
    """
    n = table.labels.shape[0]
    anchor_labels = table.labels[draw.i]
    if draw.cand is not None:
        negative = table.labels[draw.cand][None, :] != anchor_labels[:, None]
    else:
        cand_labels = jnp.pad(table.labels, (0, rows - n), constant_values=-1)
        negative = cand_labels[None, :] != anchor_labels[:, None]
        if rows > n:  # padding rows are never candidates
            negative = negative & (jnp.arange(rows) < n)[None, :]
    d_ij = losses.distance(ea - ep)
    # the violator search runs where its candidates live: split by candidate over
    # all N, by pair over a pool.
    spec = (device_mesh.DATA, None) if draw.cand is not None else (None, device_mesh.DATA)
    d_ik = constrain(losses.candidate_distances(ea, ec), *spec)
    negative = constrain(negative, *spec)
    viol = sampling.find_violators(
        draw.u,
        d_ij,
        d_ik,
        negative,
        table.num_negatives[draw.i],
        margin=float(cfg.margin),
        sampler=cfg.sampler,
        max_tries=cfg.max_tries,
    )
    k = draw.cand[viol.index] if draw.cand is not None else viol.index
    weights = jnp.where(viol.found, losses.rank_weight(viol.rank, weighting=cfg.weighting), 0.0)
    weights = jax.lax.stop_gradient(weights)
    return _Search(k, ea - ec[viol.index], weights, viol, d_ij, d_ik, negative)


def _plain_hinge_grad(cfg, w, pu, feats, draw: _Draw, s: _Search) -> tuple[jax.Array, jax.Array]:
    """The hinge term's gradient in W (eq. 20-22), closed form or by ``jax.grad``."""
    margin = float(cfg.margin)
    if cfg.gradient == "closed_form":
        return losses.hinge_grad(pu, s.pv, feats, draw.i, draw.j, s.k, s.weights, margin=margin)
    hinge = losses.triplet_hinge(pu, s.pv, margin=margin)[0]
    u, v = feats[draw.i] - feats[draw.j], feats[draw.i] - feats[s.k]
    return jax.grad(losses.warca_hinge_loss)(w, u, v, s.weights, margin=margin), hinge


def _update(cfg, state, hyper, grad, pen_grad, pen, hinge, s: _Search, *, constrain):
    """The optimiser's step on hinge gradient + lambda R', and the step's logged numbers."""
    w = state.params
    updates, opt_state = config_optimizer(cfg, hyper).update(
        constrain(grad), state.opt_state, w, penalty_grad=pen_grad
    )
    loss, hinge_loss = losses.objective(hinge, s.weights, pen, lam=hyper.lam)
    found = s.viol.found
    metrics = {
        "loss": loss,
        "hinge": hinge_loss,
        "penalty": pen,
        "mean_rank": jnp.mean(s.viol.rank),
        # per pair, the fraction of its negative candidates within the margin (d_ik <
        # d_ij + gamma: the violators eq. 14 counts), the margin's closer_frac. It keeps
        # moving where the share of pairs with a violator (once logged as violated_frac,
        # and as active_frac, the same pairs up to rounding) stays at 1 for the whole run
        "margin_frac": jnp.mean(
            sampling.closer_fraction(s.d_ij + float(cfg.margin), s.d_ik, s.negative)
        ),
        # margin-free progress: how often a negative is nearer than the positive (eq. 7's
        # rank over the candidates' negatives: a training ranking error, 1 - AUC), and the
        # sampled triplets' distance gap
        "closer_frac": jnp.mean(sampling.closer_fraction(s.d_ij, s.d_ik, s.negative)),
        "mean_gap": jnp.sum(jnp.where(found, losses.distance(s.pv) - s.d_ij, 0.0))
        / jnp.maximum(jnp.sum(found), 1),
    }
    new_params = constrain(optax.apply_updates(w, updates))
    return optim.TrainState(new_params, opt_state, state.step + 1), metrics


def primal_step(cfg, mesh=None) -> Callable:
    """``step(state, hyper, x, table, bits) -> (state, metrics)`` of linear WARCA (eq. 12).

    ``x``: [rows, D] features, rows >= N (``table.labels``): padding rows that make them
    divisible over the devices of ``mesh``, never drawn and never a candidate. ``bits``:
    the step's random words (``sampling.step_bits``).
    """
    constrain = _constrainer(mesh)

    def step(state: optim.TrainState, hyper: Hyperparams, x, table: sampling.PairTable, bits):
        w = state.params
        draw = _draw(cfg, table, bits)
        if draw.cand is None:  # embed every training point once
            emb = constrain(x @ w.T, device_mesh.DATA, None)
            ea, ep, ec = emb[draw.i], emb[draw.j], emb
        else:  # embed only the minibatch and the pool
            ea, ep, ec = x[draw.i] @ w.T, x[draw.j] @ w.T, x[draw.cand] @ w.T
        s = _search(cfg, table, draw, ea, ep, ec, rows=x.shape[0], constrain=constrain)
        grad, hinge = _plain_hinge_grad(cfg, w, ea - ep, x, draw, s)
        pen_grad = penalties.penalty_grad(w, kind=cfg.penalty)
        pen = penalties.penalty(w, kind=cfg.penalty)
        return _update(cfg, state, hyper, grad, pen_grad, pen, hinge, s, constrain=constrain)

    return step


def kernel_step(cfg, mesh=None) -> Callable:
    """``step(state, hyper, gram, table, bits) -> (state, metrics)`` of kernel WARCA (eq. 18).

    ``gram``: [rows, N] the (centred, scaled) training kernel matrix K, padded by rows
    as ``x`` in ``primal_step``. The parameter is A: [D', N], W = A X^T (eq. 15); the
    rows of K A^T are the A kappa_l of eq. 17, so d_ij, d_ik (eq. 17, 22) are distances
    between them. With ``cfg.preconditioned`` the direction is the gradient times K^-1
    (eq. 23-24), else the gradient (eq. 20-22).
    """
    constrain = _constrainer(mesh)
    precond = bool(cfg.preconditioned)

    def step(state: optim.TrainState, hyper: Hyperparams, gram, table: sampling.PairTable, bits):
        a = state.params
        n, rows = table.labels.shape[0], gram.shape[0]
        draw = _draw(cfg, table, bits)
        emb = constrain(gram @ a.T, device_mesh.DATA, None)  # [rows, D']: K A^T
        ea, ep = emb[draw.i], emb[draw.j]
        ec = emb if draw.cand is None else emb[draw.cand]
        s = _search(cfg, table, draw, ea, ep, ec, rows=rows, constrain=constrain)
        if precond:
            grad, hinge = losses.kernel_hinge_precond_grad(
                emb, draw.i, draw.j, s.k, s.weights, margin=float(cfg.margin), n=n
            )
        else:
            grad, hinge = _plain_hinge_grad(cfg, a, ea - ep, gram, draw, s)
        emb_n = emb if rows == n else emb[:n]
        pen_grad = penalties.kernel_penalty_grad(a, emb_n, kind=cfg.penalty, preconditioned=precond)
        pen = penalties.kernel_penalty(a, emb_n, kind=cfg.penalty)
        return _update(cfg, state, hyper, grad, pen_grad, pen, hinge, s, constrain=constrain)

    return step


def _step_fn(cfg, *, kernel_form: bool, mesh=None) -> Callable:
    return (kernel_step if kernel_form else primal_step)(cfg, mesh)


def _check_hyper(hyper: Hyperparams) -> None:
    chex.assert_shape([hyper.lam, hyper.learning_rate], ())


def make_train_step(cfg, *, kernel_form: bool, mesh=None) -> Callable:
    """Builds the jitted ``step(state, hyper, feats, table, key) -> (state, metrics)``.

    ``feats`` is X: [N, D] in the primal form and K: [N, N] in the kernel form;
    ``table`` is the ``sampling.PairTable`` of the training labels; ``hyper`` the run's
    ``Hyperparams``. The step's randomness is ``sampling.step_bits(key, state.step, ...)``,
    so a run is reproducible from the seed and independent of how steps are grouped.
    ``mesh``: see the module's docstring (None: no layout constraints, one device).
    """
    step = _step_fn(cfg, kernel_form=kernel_form, mesh=mesh)

    def one(state, hyper, feats, table, key):
        _check_hyper(hyper)
        bits = sampling.step_bits(key, state.step, _num_bits(cfg, table.labels.shape[0]))
        return step(state, hyper, feats, table, bits)

    return jax.jit(one, donate_argnums=0)


def make_train_chunk(cfg, *, kernel_form: bool, mesh=None) -> Callable:
    """Like ``make_train_step`` but runs ``length`` steps in one call (``lax.scan``).

    ``chunk(state, hyper, feats, table, key, length) -> (state, metrics)`` with the
    metrics averaged over the chunk; the same steps, bit for bit in their randomness,
    as calling the single step ``length`` times, with one dispatch from Python and one
    batched draw of random words instead of ``length``.
    """
    step = _step_fn(cfg, kernel_form=kernel_form, mesh=mesh)

    def chunk(state, hyper, feats, table, key, length):
        _check_hyper(hyper)
        size = _num_bits(cfg, table.labels.shape[0])
        steps = state.step + jnp.arange(length, dtype=state.step.dtype)
        bits = jax.vmap(lambda t: sampling.step_bits(key, t, size))(steps)

        def body(st, bits_t):
            return step(st, hyper, feats, table, bits_t)

        state, metrics = jax.lax.scan(body, state, bits)
        return state, jax.tree.map(jnp.mean, metrics)

    return jax.jit(chunk, static_argnums=5, donate_argnums=0)


def build_chunk(frozen_cfg: tuple, kernel_form: bool, mesh):
    """The jitted chunk for a config without its ``TUNABLE`` fields (lambda, eta).

    ``frozen_cfg``: the sorted (field, value) items of the rest. Fits with the same
    method config (the splits of a protocol, and every point of a lambda x eta grid
    search) share one compiled program; lambda and eta are its ``Hyperparams`` argument.
    Built through ``compiled_chunk`` (``learner_loop.compiled``, every learner's cache).
    """
    cfg = types.SimpleNamespace(**dict(frozen_cfg))
    return make_train_chunk(cfg, kernel_form=kernel_form, mesh=mesh)


def compiled_chunk(frozen_cfg: tuple, kernel_form: bool, mesh):
    """``build_chunk``, built once per setting by ``learner_loop.compiled``."""
    return learner_loop.compiled(build_chunk, frozen_cfg, kernel_form, mesh)
