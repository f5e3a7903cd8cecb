"""Optimisers for WARCA: Adam with the penalty as an optax transformation.

The penalty lambda * grad R(params) is added to the incoming gradient by a
``GradientTransformation`` of its own, chained with Adam:

* ``coupled``: penalty -> scale_by_adam -> scale(-lr). The penalty gradient is
  part of the gradient Adam rescales (the paper's loss, eq. 12, minimised by
  Adam).
* ``decoupled``: scale_by_adam -> penalty -> scale(-lr), as ``optax.adamw``
  does with weight decay: the penalty step is not rescaled by Adam.

For kernel WARCA the parameters are A: [D', N] and the penalty needs A K; the
training step passes the embeddings K A^T: [N, D'] as the extra argument
``embeddings`` so that no N x N product is repeated. With ``preconditioned``
the gradients are multiplied by K^-1 (eq. 23): 2 (A K A^T - I) A for AON and A
for Frobenius; the hinge part is preconditioned by the training step
(``losses.kernel_hinge_precond_grad``), so Adam receives the eq. 25 direction.

Step-size schedule: with ``decay_steps`` the Adam step is multiplied by a cosine that
falls from 1 to 0 over that many steps. Adam's steps have a fixed size in parameter
units whatever the gradient's size, so a constant step size never lets the iterates
settle: with the hinge's noisy minibatch gradients WARCA oscillated around its optimum
by an amount that grows with eta, and rank-1 at the last step depended on eta (77 at
eta = 1e-2 against 86 at 1e-3 on the shared 2,400-image problem). Decaying the step to
0 makes the last iterate converge for every eta tried (RESULTS.md, "WARCA's accuracy").
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from warca_jax import losses

PENALTY_MODES = ("coupled", "decoupled")


def penalty_value(
    params: jax.Array, *, kind: str, embeddings: jax.Array | None = None
) -> jax.Array:
    """R(params): the penalty of the primal form, or of the kernel form given K A^T."""
    if embeddings is None:
        return losses.penalty(params, kind=kind)
    if kind == "aon":
        r = params @ embeddings - jnp.eye(params.shape[0], dtype=params.dtype)
        return 0.5 * jnp.sum(r * r)
    if kind == "frobenius":  # 1/2 ||A X^T||^2 = 1/2 tr(A K A^T)
        return 0.5 * jnp.sum(params * embeddings.T)
    return losses.penalty(params, kind=kind)


def _penalty_grad(params, *, kind, embeddings, preconditioned):
    if embeddings is None:
        return losses.penalty_grad(params, kind=kind)
    if kind == "none":
        return jnp.zeros_like(params)
    if kind == "aon":
        if preconditioned:
            return losses.kernel_aon_penalty_precond_grad(params, embeddings)
        eye = jnp.eye(params.shape[0], dtype=params.dtype)
        return 2.0 * (params @ embeddings - eye) @ embeddings.T
    if kind == "frobenius":
        return params if preconditioned else embeddings.T
    raise ValueError(f"unknown penalty {kind!r}; expected one of {losses.PENALTIES}")


def add_penalty_grad(
    lam: float, *, kind: str = "aon", preconditioned: bool = False
) -> optax.GradientTransformationExtraArgs:
    """Adds lam * grad R(params) to the updates.

    Args:
      lam: penalty weight lambda.
      kind: ``aon`` (eq. 10), ``frobenius`` or ``none``.
      preconditioned: kernel form only: use the K^-1 preconditioned gradient.

    Returns:
      A transformation whose ``update`` takes ``embeddings=K A^T`` as an extra
      argument in the kernel form (omit it, or pass None, in the primal form).
    """
    if kind not in losses.PENALTIES:
        raise ValueError(f"unknown penalty {kind!r}; expected one of {losses.PENALTIES}")

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None, *, embeddings=None, **extra_args):
        del extra_args
        if params is None:
            raise ValueError("add_penalty_grad needs the current params")
        g = _penalty_grad(params, kind=kind, embeddings=embeddings, preconditioned=preconditioned)
        return jax.tree.map(lambda u, p: u + lam * p, updates, g), state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def check_hyperparams(*, learning_rate: float, lam: float, penalty_mode: str) -> None:
    """Raises ValueError for a step size, penalty weight or penalty mode out of range."""
    if penalty_mode not in PENALTY_MODES:
        raise ValueError(f"unknown penalty_mode {penalty_mode!r}; expected one of {PENALTY_MODES}")
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"learning_rate must be positive (a finite number), got {learning_rate}")
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"lam must be non-negative (a finite number), got {lam}")


def _chain(
    learning_rate,
    lam,
    *,
    penalty: str,
    penalty_mode: str,
    preconditioned: bool,
    b1: float,
    b2: float,
    eps: float,
    decay_steps: int,
) -> optax.GradientTransformationExtraArgs:
    pen = add_penalty_grad(lam, kind=penalty, preconditioned=preconditioned)
    adam = optax.scale_by_adam(b1=b1, b2=b2, eps=eps)
    parts = [pen, adam] if penalty_mode == "coupled" else [adam, pen]
    if decay_steps > 0:
        parts.append(optax.scale_by_schedule(optax.cosine_decay_schedule(1.0, decay_steps)))
    return optax.chain(*parts, optax.scale(-learning_rate))


def make_optimizer(
    *,
    learning_rate: float,
    lam: float,
    penalty: str = "aon",
    penalty_mode: str = "coupled",
    preconditioned: bool = False,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    decay_steps: int = 0,
    tunable: bool = False,
) -> optax.GradientTransformationExtraArgs:
    """Adam chained with the penalty transformation; the one factory for ``tx``.

    ``decay_steps`` > 0 multiplies the step by a cosine falling from 1 to 0 over that
    many steps (0: a constant step size).

    With ``tunable`` the step size and lambda live in the optimiser state
    (``optax.inject_hyperparams``: ``state.hyperparams["learning_rate"]`` and
    ``["lam"]``) instead of in the compiled program, so that one jitted training
    step serves every point of a (lambda, eta) grid search.
    """
    check_hyperparams(learning_rate=learning_rate, lam=lam, penalty_mode=penalty_mode)
    if decay_steps < 0:
        raise ValueError(f"decay_steps must be >= 0 (0: constant step), got {decay_steps}")
    static = dict(
        penalty=penalty,
        penalty_mode=penalty_mode,
        preconditioned=preconditioned,
        b1=b1,
        b2=b2,
        eps=eps,
        decay_steps=int(decay_steps),
    )
    if tunable:
        factory = optax.inject_hyperparams(_chain, static_args=tuple(static))
        return factory(learning_rate, lam, **static)
    return _chain(learning_rate, lam, **static)


class TrainState(NamedTuple):
    """Training state pytree: parameters, optimiser state and step counter."""

    params: jax.Array
    opt_state: optax.OptState
    step: jax.Array
