"""NCA: neighbourhood components analysis (Goldberger, Roweis, Hinton & Salakhutdinov,
NIPS 2004).

Learns L: [D', D] that maximises the expected number of points classified correctly by a
stochastic nearest neighbour rule: point i picks neighbour j with the softmax (paper eq. 1)

    p_ij = exp(-||L x_i - L x_j||^2) / sum_{k != i} exp(-||L x_i - L x_k||^2),   p_ii = 0,

and is right with probability p_i = sum_{j in C_i} p_ij (C_i: the other points of its
class). The objective (eq. 2) is f(L) = sum_i p_i; its gradient (eq. 5) is

    df/dL = 2 L sum_i (p_i sum_k p_ik x_ik x_ik^T - sum_{j in C_i} p_ij x_ij x_ij^T),

x_ik = x_i - x_k. Written with W_ik = p_ik ([y_k = y_i] - p_i) and z = L x, it is
df/dL = -2 G^T X with G = (diag((W + W^T) 1) - W - W^T) Z: no [D, D] outer product.

Here the loss minimised is ``-f(L) / N`` (minus the expected leave-one-out accuracy,
``expected_accuracy`` = f / N in the history). The [N, N] softmax is formed
``block_size`` rows at a time (a ``lax.scan`` over row blocks that accumulates W^T Z), so
that memory grows as block_size x N, not N^2 per temporary.

metric-learn 0.7.0 optimises the same objective with L-BFGS-B (100 iterations). Here, as
for every iterative learner of this package, L is trained by Adam on the closed-form
gradient through ``learner_loop.run_in_chunks``: full-batch steps, the step falling by a
cosine from ``learning_rate`` to 0 over ``num_iters``, stopping early when the loss's
relative change over the last ``tol_window`` logged rows is at most ``tol`` (the last
history row's ``stopped`` says which rule ended training). Initialisation: the identity
for a square L (what metric-learn's ``init='auto'`` picks when D' = D and it cannot use
LDA), the top D' principal directions for D' < D.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from warca_jax.maths import linalg
from warca_jax.methods import Method, checks, learner_loop
from warca_jax.metric import Metric

OPTIMIZERS = ("lbfgs", "adam")
SCHEDULES = ("constant", "cosine")


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an NCA config that cannot run on this data."""
    d = data.x.shape[1]
    checks.check_number(cfg, "dim", integer=True)
    checks.check_range(cfg.dim, 0, d, what="output dim", note=f"0: D = {d}")
    checks.check_numbers(
        cfg, ("num_iters", "log_every", "block_size", "tol_window"), low=1, integer=True
    )
    checks.check_number(cfg, "learning_rate", low=0, low_open=True)
    checks.check_number(cfg, "tol", low=0, note="; 0: no early stop")
    checks.check_choice(cfg, "optimizer", OPTIMIZERS)
    checks.check_choice(cfg, "schedule", SCHEDULES)


# NCA's softmax is over squared distances in the features' units, so its result depends on
# their scale: features too small or too large for float32 training are refused.
validate = checks.validator(
    "NCA", check_config, scale_free=False, scale_note=" (NCA's softmax is in the features' units)"
)


def _blocks(n: int, block_size: int) -> tuple[int, int]:
    """(number of row blocks, padded rows) for n rows."""
    nb = -(-n // block_size)
    return nb, nb * block_size - n


def _block_softmax(z, labels, start, block_size, zp, lp):
    """Rows [start, start + block_size) of the NCA softmax.

    Returns:
      (p_i [B], W [B, N] with W_ik = p_ik ([y_k = y_i] - p_i), valid [B]): zero on
      padded rows.
    """
    n = z.shape[0]
    zb = jax.lax.dynamic_slice_in_dim(zp, start, block_size)
    lb = jax.lax.dynamic_slice_in_dim(lp, start, block_size)
    rows = start + jnp.arange(block_size)
    valid = rows < n
    sq = jnp.sum(z * z, axis=1)
    dist = jnp.maximum(jnp.sum(zb * zb, axis=1)[:, None] + sq[None, :] - 2.0 * zb @ z.T, 0.0)
    self_pair = rows[:, None] == jnp.arange(n)[None, :]
    logits = jnp.where(self_pair, -jnp.inf, -dist)
    p = jnp.exp(logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True))
    same = (lb[:, None] == labels[None, :]) & ~self_pair
    p_i = jnp.where(valid, jnp.sum(jnp.where(same, p, 0.0), axis=1), 0.0)
    w = jnp.where(valid[:, None], p * (same.astype(p.dtype) - p_i[:, None]), 0.0)
    return p_i, w, valid


def _padded(z, labels, block_size):
    nb, pad = _blocks(z.shape[0], block_size)
    return nb, jnp.pad(z, ((0, pad), (0, 0))), jnp.pad(labels, (0, pad))


def nca_loss(lmap: jax.Array, x: jax.Array, labels: jax.Array, *, block_size: int) -> jax.Array:
    """-f(L) / N: minus the expected leave-one-out accuracy (eq. 2, over N).

    Args:
      lmap: [D', D] linear map L.
      x: [N, D] features.
      labels: [N] int labels.
      block_size: rows of the softmax formed at once.
    """
    z = x @ lmap.T
    nb, zp, lp = _padded(z, labels, block_size)
    p_i = jax.lax.map(
        lambda s: _block_softmax(z, labels, s, block_size, zp, lp)[0], jnp.arange(nb) * block_size
    )
    return -jnp.sum(p_i) / z.shape[0]


def nca_grad(
    lmap: jax.Array, x: jax.Array, labels: jax.Array, *, block_size: int
) -> tuple[jax.Array, jax.Array]:
    """Closed-form gradient of ``nca_loss`` (eq. 5, over -N) with respect to L.

    One pass over row blocks accumulates r = W 1, W Z (block rows) and W^T Z (all rows);
    then dloss/dZ = (2 / N) ((r + W^T 1) o Z - W Z - W^T Z) and dloss/dL = (dloss/dZ)^T X.

    Returns:
      (gradient [D', D], loss).
    """
    n = x.shape[0]
    z = x @ lmap.T
    nb, zp, lp = _padded(z, labels, block_size)

    def block(carry, start):
        wtz, col = carry
        p_i, w, _ = _block_softmax(z, labels, start, block_size, zp, lp)
        zb = jax.lax.dynamic_slice_in_dim(zp, start, block_size)
        # rows' own terms: r_i z_i - (W Z)_i
        own = jnp.sum(w, axis=1)[:, None] * zb - w @ z
        return (wtz + w.T @ zb, col + jnp.sum(w, axis=0)), (own, jnp.sum(p_i))

    init = (jnp.zeros_like(z), jnp.zeros((n,), z.dtype))
    (wtz, col), (own, p_sum) = jax.lax.scan(block, init, jnp.arange(nb) * block_size)
    gz = (own.reshape(-1, z.shape[1])[:n] + col[:, None] * z - wtz) * (2.0 / n)
    return gz.T @ x, -jnp.sum(p_sum) / n


def objective(lmap, x, labels, *, block_size: int = 512) -> float:
    """The expected leave-one-out accuracy f(L) / N of a map L ([D', D]) on (x, labels):
    the number to compare learned maps by (metric-learn's loss is N times it)."""
    _, inverse = np.unique(np.asarray(labels), return_inverse=True)
    loss = jax.jit(functools.partial(nca_loss, block_size=block_size))(
        jnp.asarray(lmap, jnp.float32), jnp.asarray(x, jnp.float32), jnp.asarray(inverse, jnp.int32)
    )
    return -float(loss)


def _closed_form_fwd(lmap, x, labels, block_size):
    g, loss = nca_grad(lmap, x, labels, block_size=block_size)
    return loss, g


def _closed_form_bwd(block_size, g, ct):
    del block_size
    return ct * g, None, None


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def nca_value(lmap: jax.Array, x: jax.Array, labels: jax.Array, block_size: int) -> jax.Array:
    """``nca_loss`` whose derivative (for ``jax.grad`` and L-BFGS's line search) is the
    closed form ``nca_grad``, not autodiff through the blocks."""
    return nca_loss(lmap, x, labels, block_size=block_size)


nca_value.defvjp(_closed_form_fwd, _closed_form_bwd)


def make_optimizer(optimizer, learning_rate, schedule, num_iters):
    """L-BFGS with a zoom line search (strong Wolfe), or Adam at ``learning_rate``
    (decayed by a cosine to 0 over ``num_iters`` when ``schedule`` is "cosine")."""
    if optimizer == "lbfgs":
        return optax.lbfgs(memory_size=10)
    lr = learning_rate
    if schedule == "cosine":
        lr = optax.cosine_decay_schedule(learning_rate, num_iters)
    return optax.adam(lr)


def make_chunk(length, block_size, optimizer, learning_rate, schedule, num_iters):
    """``tx`` and a jitted chunk of ``length`` steps (built once per setting through
    ``learner_loop.compiled``)."""
    tx = make_optimizer(optimizer, learning_rate, schedule, num_iters)

    def chunk_fn(lmap, opt_state, x, labels):
        def value_fn(lmap):
            return nca_value(lmap, x, labels, block_size)

        # L-BFGS's line search leaves the value and gradient at the new point in its state
        value_and_grad = optax.value_and_grad_from_state(value_fn)

        def step(carry, _):
            lmap, opt_state = carry
            if optimizer == "lbfgs":
                loss, g = value_and_grad(lmap, state=opt_state)
                updates, opt_state = tx.update(
                    g, opt_state, lmap, value=loss, grad=g, value_fn=value_fn
                )
            else:
                g, loss = nca_grad(lmap, x, labels, block_size=block_size)
                updates, opt_state = tx.update(g, opt_state, lmap)
            metrics = {"loss": loss, "grad_norm": jnp.sqrt(jnp.sum(g * g))}
            return (optax.apply_updates(lmap, updates), opt_state), metrics

        (lmap, opt_state), last = learner_loop.scan_steps(
            step, (lmap, opt_state), length=length, reduce="last"
        )
        return lmap, opt_state, dict(last, expected_accuracy=-last["loss"])

    return tx, jax.jit(chunk_fn)


class _Trainer:
    """An NCA fit between chunks: L, the optimiser state and the stopping rule."""

    def __init__(self, x: np.ndarray, labels: np.ndarray, cfg):
        self.x, self.labels = jnp.asarray(x), jnp.asarray(labels, jnp.int32)
        self.lmap = jnp.asarray(linalg.initial_map(x, int(cfg.dim)))
        self.opt_state = None
        self.block_size, num_iters = int(cfg.block_size), int(cfg.num_iters)
        self.opt_key = (str(cfg.optimizer), float(cfg.learning_rate), str(cfg.schedule), num_iters)
        if cfg.optimizer == "lbfgs":  # Adam's settings unused: one program for every num_iters
            self.opt_key = ("lbfgs", 0.0, "constant", 0)
        self.rule = learner_loop.StoppingRule(
            tol=float(cfg.tol),
            window=int(cfg.tol_window),
            num_iters=num_iters,
            log_every=int(cfg.log_every),
        )

    def advance(self, done: int, length: int) -> learner_loop.Chunk:
        """``length`` steps after ``done`` (``learner_loop.run_in_chunks``'s ``advance``)."""
        tx, chunk_fn = learner_loop.compiled(make_chunk, length, self.block_size, *self.opt_key)
        if done == 0:
            # strongly typed, as the chunk returns it, so that the next chunk is no retrace
            self.opt_state = jax.tree.map(lambda v: jnp.asarray(v, v.dtype), tx.init(self.lmap))
        self.lmap, self.opt_state, metrics = chunk_fn(
            self.lmap, self.opt_state, self.x, self.labels
        )
        return self.rule.chunk(metrics, done, length)


def fit(features, labels, cfg, *, log_fn=None, progress=False, callback=None):
    """Learns an NCA map (arguments and errors: ``warca_jax.methods``).

    Deterministic here (identity or PCA initialisation, full-batch steps): it takes no
    ``seed``. A history row every ``log_every`` steps.

    Returns:
      (linear Metric with W = L, history rows: step, loss (-f / N), expected_accuracy
      (f / N), seconds; rel_change from the ``tol_window``-th row on; the last row's
      ``stopped`` says why training ended).
    """
    x, y, _ = validate(features, labels, cfg)
    loop = learner_loop.Loop.start("NCA", features, log_fn, progress, callback)
    state = _Trainer(x, np.unique(y, return_inverse=True)[1], cfg)

    def make_metric(lmap) -> Metric:
        return Metric(kind="linear", input_dim=x.shape[1], projection=np.asarray(lmap), name="nca")

    hint = f"lower learning_rate (now {cfg.learning_rate:g})"
    return loop.fit(
        state.advance,
        lambda: make_metric(state.lmap),
        num_iters=int(cfg.num_iters),
        chunk=int(cfg.log_every),
        reference_loss=1.0,  # the loss is in [-1, 0]
        hint=hint,
    )


VARIANTS = ("default", "small", "large")  # small: 30 steps; large: L [128, D] from PCA


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``nca``: what configs/nca.py starts from."""
    m = checks.new_config("nca", variant, VARIANTS)
    # output dimension D' of L (0: D, a square L initialised at the identity, as
    # metric-learn's n_components=None; < D: the top D' principal directions).
    m.dim = 0
    # 'lbfgs': L-BFGS (memory 10) with a zoom line search, as metric-learn's L-BFGS-B;
    # 'adam': Adam at learning_rate (raise num_iters: Adam stalls on NCA's plateaus sooner
    # and needs some hundreds of steps; the default against metric-learn's: python -m
    # benchmarks.bench_vs_metric_learn --learner=nca).
    m.optimizer = "lbfgs"
    m.num_iters = 100  # full-batch steps at most (metric-learn's max_iter=100).
    m.learning_rate = 1e-2  # Adam's first step (L starts at the identity: entries ~1).
    # Adam's step: 'cosine' falls from learning_rate to 0 over num_iters, so that the last
    # iterate settles; 'constant' keeps learning_rate. (L-BFGS's step is its line search's.)
    m.schedule = "cosine"
    # stop early when the loss's relative change over the last tol_window logged rows is at
    # most tol (0: run all num_iters steps); the last history row says why training stopped.
    # 1e-7 per step: float32's round-off on a loss of size 1, the analogue of the float64
    # ftol on which metric-learn's L-BFGS-B stops (a step that no longer changes the
    # objective). Running on past it (the earlier default, tol 0) moved L along a saturated
    # objective and cost retrieval on held-out people
    # (docs/methods.md#lmnn-and-nca-when-to-stop).
    m.tol = 1e-7
    m.tol_window = 1  # logged rows (of log_every steps) the change is taken over.
    m.log_every = 1  # steps per history row (one jitted chunk): the rule sees every step.
    m.block_size = 512  # rows of the [block, N] softmax formed at once.
    if variant == "small":
        m.num_iters = 30
    elif variant == "large":  # L: [128, D] from PCA, so each step costs N D 128, not N D^2.
        m.dim = 128
    return m


METHODS = {"nca": Method(fit, validate, default_config, VARIANTS)}
