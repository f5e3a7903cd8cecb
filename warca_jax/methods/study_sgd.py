"""The CUHK03 study's own SGD optimisers: its pairwise loss (eq. 6) and triplet hinge (eq. 7).

Both learn a linear map L: [D', D] (the study's A = L^T L), with the squared
distance d_L(x_i, x_j) = ||L (x_i - x_j)||^2 = (x_i - x_j)^T A (x_i - x_j) of
its eq. 1-2, by plain SGD (optax) from the identity, as the study does:

* ``pairwise_sgd`` (eq. 6): sum_ij y_ij d_L(x_i, x_j), y_ij = +1 for a pair of
  the same identity and -1 otherwise, over the pairs of a minibatch of random
  samples. Summed as written, the negatives (all but a few pairs) dominate and
  the loss only spreads the data along its largest variance, so the two sides
  are averaged separately (mean over positive pairs minus mean over negative
  pairs). The loss is unbounded below (the study saw its validation cost fall
  without end); lam/2 ||L L^T - I||^2 keeps L finite (lam > 0 is required).
* ``triplet_sgd`` (eq. 7): sum [margin + d_L(a, p) - d_L(a, n)]_+ over a set of
  triplets mined from the training set: per anchor the hardest (farthest
  positive, closest negative) and ``num_random`` random ones "to prevent
  overfitting to outliers", mined again every ``val_every`` epochs.

The schedule is the study's: the training identities are split, ``num_val_ids``
of them held out (seeded); every ``val_every`` epochs the cost on the held-out
set is computed (eq. 6 on all its pairs, eq. 7 on a triplet set mined once at
the start); when it is higher than at the previous check the learning rate is
multiplied by ``lr_decay`` (halved). The parameters of the lowest validation
cost (the initial ones included) are returned. ``num_val_ids`` 0 holds no identity out
(data too small to spare any): the checks then use the training set's own cost. An
epoch is one pass over the training samples (eq. 6) or triplets (eq. 7) in minibatches of
``batch_size``.

The two losses and the triplet mining are in ``warca_jax.methods.study_losses`` (and
importable from here).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from warca_jax.maths import linalg, penalties, sampling
from warca_jax.maths.optim import TrainState
from warca_jax.methods import Method, checks, learner_loop, model_checks
from warca_jax.methods.study_losses import mine_triplets, pairwise_loss, triplet_loss
from warca_jax.metric import Metric

INITS = ("identity", "orthonormal")


def _batch_loss_fn(name: str, *, lam: float, penalty: str, margin: float) -> Callable:
    """loss(proj, data, idx) of the minibatch ``idx`` of items (samples or triplets)."""
    if name == "pairwise_sgd":
        return lambda proj, data, idx: pairwise_loss(
            proj, data[0][idx], data[1][idx], lam=lam, penalty=penalty
        )

    def loss(proj, data, idx):
        x, a, p, n, w = data
        return triplet_loss(
            proj, x[a[idx]], x[p[idx]], x[n[idx]], w[idx], margin=margin, lam=lam, penalty=penalty
        )

    return loss


def make_train_epochs(
    batch_loss: Callable, tx: optax.GradientTransformation, *, batch_size: int
) -> Callable:
    """The jitted ``run(state, data, key, epoch0, num_epochs) -> (state, mean loss)``.

    Epoch e shuffles the ``data``'s items with ``fold_in(key, e)`` and takes one SGD step
    per minibatch (the last, ragged one is dropped); all in one ``lax.scan``.
    """

    def run(state, data, key, epoch0, num_epochs):
        m = data[1].shape[0]  # items: samples (labels) or triplets (anchors)
        b = min(batch_size, m)

        def step(st, idx):
            loss, grad = jax.value_and_grad(batch_loss)(st.params, data, idx)
            updates, opt_state = tx.update(grad, st.opt_state, st.params)
            new = TrainState(optax.apply_updates(st.params, updates), opt_state, st.step + 1)
            return new, {"loss": loss}

        def epoch(st, e):
            perm = jax.random.permutation(jax.random.fold_in(key, e), m)
            batches = perm[: (m // b) * b].reshape(-1, b)
            return learner_loop.scan_steps(step, st, batches, reduce="none")

        epochs = epoch0 + jnp.arange(num_epochs)
        state, metrics = learner_loop.scan_steps(epoch, state, epochs, reduce="none")
        return state, jnp.mean(metrics["loss"])

    return jax.jit(run, static_argnums=4)


def build_programs(
    name: str, lam: float, penalty: str, margin: float, batch_size: int, momentum: float
):
    """``tx``, the jitted epochs and the jitted full-set cost of a setting.

    Built once per setting through ``learner_loop.compiled``. The learning rate is not a key:
    it lives in the optimiser state (``inject_hyperparams``).
    """
    batch_loss = _batch_loss_fn(name, lam=lam, penalty=penalty, margin=margin)
    tx = optax.inject_hyperparams(optax.sgd)(learning_rate=1.0, momentum=momentum or None)
    run = make_train_epochs(batch_loss, tx, batch_size=batch_size)
    cost = jax.jit(lambda proj, data: batch_loss(proj, data, jnp.arange(data[1].shape[0])))
    return tx, run, cost


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for a config of the study's SGD that cannot run on this data."""
    name, d = cfg.name, data.x.shape[1]
    checks.check_number(cfg, "dim", integer=True)
    checks.check_range(cfg.dim, 0, d, what="output dim", note=f"0: D = {d}")
    checks.check_number(cfg, "batch_size", low=2, integer=True)
    checks.check_numbers(cfg, ("num_epochs", "val_every"), low=1, integer=True)
    checks.check_number(cfg, "num_val_ids", low=0, integer=True, note="; 0: none held out")
    if cfg.num_val_ids == 1:
        raise ValueError(
            "num_val_ids must be 0 (no validation identities: the checks use the training "
            "cost) or at least 2 (a held-out identity needs another to be ranked against); "
            "got 1"
        )
    checks.check_number(cfg, "learning_rate", low=0, low_open=True)
    checks.check_number(cfg, "lr_decay", low=0, high=1, low_open=True)
    checks.check_numbers(cfg, ("lam", "momentum"), low=0)
    if name == "triplet_sgd":
        checks.check_number(cfg, "margin", low=0, low_open=True)
        checks.check_number(cfg, "num_random", low=0, integer=True)
    checks.check_choice(cfg, "init", INITS)
    checks.check_choice(cfg, "penalty", penalties.PENALTIES)
    if name == "pairwise_sgd" and (cfg.lam == 0 or cfg.penalty == "none"):
        raise ValueError(
            f"lam must be > 0 with a penalty for pairwise_sgd (eq. 6 is unbounded below); "
            f"got lam={cfg.lam}, penalty={cfg.penalty!r}"
        )
    _, counts = np.unique(data.y, return_counts=True)
    usable = int(np.sum(counts >= 2))
    if usable < cfg.num_val_ids + 2:
        raise ValueError(
            f"num_val_ids must leave 2 identities with two or more images for training: "
            f"{name} holds {cfg.num_val_ids} out of {usable} such identities"
        )


# The study's losses have a margin (eq. 7) or a penalty (eq. 6) in the features' units, so
# features too small or too large for float32 training are refused, not rescaled.
validate = checks.validator(
    None,
    check_config,
    scale_free=False,
    scale_note=" ({name}'s margin and penalty are in the features' units)",
)


def _split_validation(key, y: np.ndarray, num_val_ids: int) -> np.ndarray:
    """Boolean mask of the samples of ``num_val_ids`` random identities with 2+ images."""
    ids, counts = np.unique(y, return_counts=True)
    eligible = ids[counts >= 2]
    chosen = np.asarray(jax.random.permutation(key, len(eligible)))[:num_val_ids]
    return np.isin(y, eligible[chosen])


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False):
    """Learns L by the study's SGD and schedule (``cfg.name``: pairwise_sgd or triplet_sgd;
    arguments and errors: ``warca_jax.methods``).

    ``seed`` draws the validation identities, the initial map, the shuffles and the random
    triplets; the progress bar counts epochs.

    The loop is ``learner_loop.run_in_chunks``, ``val_every`` epochs a chunk: each chunk
    mines the triplets again (eq. 7), runs its epochs, computes the validation cost,
    keeps the best parameters and halves the rate when the cost rose.

    Returns:
      (Metric of kind "linear" with W = L [D', D], history): one row per validation
      check: epoch, step, loss (mean minibatch loss since the last check), val_cost,
      learning_rate (the rate used since the last check), best_epoch, seconds.
    """
    x, y, _ = validate(features, labels, cfg)
    hint = f"lower learning_rate (now {cfg.learning_rate:g})"
    k_split, k_init, k_train, k_mine, k_val = jax.random.split(jax.random.PRNGKey(seed), 5)
    is_val = _split_validation(k_split, y, cfg.num_val_ids)
    margin = float(cfg.margin) if "margin" in cfg else 0.0
    tx, run, cost_fn = learner_loop.compiled(
        build_programs,
        cfg.name,
        float(cfg.lam),
        cfg.penalty,
        margin,
        cfg.batch_size,
        float(cfg.momentum),
    )
    state = _initial_state(k_init, cfg, x.shape[1], tx)
    x_tr, table_tr = jnp.asarray(x[~is_val]), sampling.make_pair_table(y[~is_val])
    x_val, table_val = x_tr, table_tr  # num_val_ids 0: the training set's own cost
    if cfg.num_val_ids:
        x_val, table_val = jnp.asarray(x[is_val]), sampling.make_pair_table(y[is_val])

    def dataset(x_part, table, key, proj):
        if cfg.name != "triplet_sgd":
            return x_part, table.labels
        mined = mine_triplets(key, x_part @ proj.T, table, num_random=cfg.num_random)
        return (x_part, *mined)

    val_cost = functools.partial(cost_fn, data=dataset(x_val, table_val, k_val, state.params))
    best = {"cost": float(val_cost(state.params)), "params": state.params, "epoch": 0}
    schedule = {"prev_cost": best["cost"], "lr": float(cfg.learning_rate)}

    def advance(epoch, length):
        nonlocal state
        train_data = dataset(x_tr, table_tr, jax.random.fold_in(k_mine, epoch), state.params)
        hyper = dict(state.opt_state.hyperparams, learning_rate=jnp.float32(schedule["lr"]))
        state = state._replace(opt_state=state.opt_state._replace(hyperparams=hyper))
        state, loss = run(state, train_data, k_train, epoch, length)
        epoch, cost = epoch + length, float(val_cost(state.params))
        if cost < best["cost"]:
            best.update(cost=cost, params=state.params, epoch=epoch)
        row = dict(epoch=epoch, step=int(state.step), loss=float(loss), val_cost=cost)
        row.update(learning_rate=schedule["lr"], best_epoch=best["epoch"])
        if cost > schedule["prev_cost"]:  # the study's schedule: halve the rate when it rises
            schedule["lr"] *= cfg.lr_decay
        schedule["prev_cost"] = cost
        return row

    history = learner_loop.run_in_chunks(
        advance,
        num_iters=cfg.num_epochs,
        chunk=cfg.val_every,
        method=cfg.name,
        log_fn=log_fn,
        progress=progress,
        t0=time.perf_counter(),
        hint=hint,
    )
    proj = np.asarray(best["params"])
    metric = Metric("linear", input_dim=x.shape[1], projection=proj, name=cfg.name)
    return model_checks.check_model(metric, method=cfg.name, features=features, hint=hint), history


def _initial_state(key, cfg, d: int, tx: optax.GradientTransformation) -> TrainState:
    """The study's start: L = I (``identity``) or a random orthonormal map, and tx's state."""
    dim = cfg.dim or d
    if cfg.init == "identity":
        params = jnp.eye(dim, d, dtype=jnp.float32)
    else:
        params = linalg.random_orthonormal_rows(key, dim=dim, d=d)
    return TrainState(params, tx.init(params), jnp.zeros((), jnp.int32))


# The default hyperparameters: the ``method`` sections that configs/pairwise_sgd.py and
# configs/triplet_sgd.py start from. default: L from the identity, plain SGD, the study's
# validation schedule; study: its 100 validation identities (needs more than 100 training
# identities); small: a shrunk run; large: L: [128, D] for 7,368 x 2,048 problems.
SGD_METHODS = ("pairwise_sgd", "triplet_sgd")
VARIANTS = ("default", "study", "small", "large")


def default_config(name: str, variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``name`` ('pairwise_sgd' or 'triplet_sgd') for ``variant``."""
    if name not in SGD_METHODS:
        raise ValueError(f"unknown study optimiser {name!r}; expected one of {SGD_METHODS}")
    m = checks.new_config(name, variant, VARIANTS)
    m.dim = 0  # output dimension D' of L (0: D, the study's full A = L^T L).
    m.init = "identity"  # 'identity' (the study's A_init = I) or 'orthonormal' (random).
    if name == "pairwise_sgd":
        m.lam = 0.01  # penalty weight: eq. 6 is unbounded below, the penalty bounds it (> 0).
        m.penalty = "aon"  # 'aon' lam/2 ||L L^T - I||^2 or 'frobenius' lam/2 ||L||^2.
    else:
        m.margin = 1.0  # margin of the hinge (the study: 1).
        m.num_random = 1  # random triplets per anchor beside its hardest one.
        m.lam = 0.0  # penalty weight (0: eq. 7 alone, as the study).
        m.penalty = "none"  # 'none', 'aon' lam/2 ||L L^T - I||^2 or 'frobenius' lam/2 ||L||^2.
    m.learning_rate = 1e-3  # SGD step size (the study: 1e-3).
    m.momentum = 0.0  # SGD momentum (0: plain SGD, as the study).
    # samples (pairwise: eq. 6 runs over all their pairs) or triplets per minibatch.
    m.batch_size = 50
    m.num_epochs = 100  # passes over the training samples (the study: 100).
    m.val_every = 10  # epochs between validation costs (the study: 10).
    m.lr_decay = 0.5  # learning rate factor when the validation cost rises (halved).
    m.num_val_ids = 20  # identities held out for validation (the study: ~100 of 767;
    #                     20 of the 100 training identities of the synthetic data; 0:
    #                     none, the checks use the training cost).
    if variant in ("study", "large"):
        m.num_val_ids = 100
    if variant == "large":  # L: [128, D]: the AON penalty and each step cost D 128^2, not D^3.
        m.dim = 128
        m.num_epochs = 20
        m.val_every = 5
        if name == "pairwise_sgd":
            m.learning_rate = 1e-4  # 1e-3 diverges on 2,048-d features by epoch 5.
    elif variant == "small":
        m.num_epochs = 20
        m.num_val_ids = 6
    return m


METHODS = {
    name: Method(fit, validate, functools.partial(default_config, name), VARIANTS)
    for name in SGD_METHODS
}
