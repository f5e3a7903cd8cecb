"""Optimisers for WARCA: Adam with the penalty as an optax transformation.

The training step computes the two parts of the gradient, each one equation of
``warca_jax.maths.losses``: the hinge part (eq. 20-22, or the preconditioned eq. 23-24) and
the penalty's gradient R' (eq. 20's first term, or eq. 23's). ``add_penalty_grad``
adds lambda R', passed to ``update`` as the extra argument ``penalty_grad``, to the
incoming updates; chained with Adam:

* ``coupled``: penalty -> scale_by_adam -> scale(-lr). The penalty gradient is
  part of the gradient Adam rescales: Adam on the full gradient of eq. 12 (its kernel
  form eq. 18's gradient is eq. 20), or on the eq. 23 direction in the preconditioned
  kernel form, in place of the plain step of eq. 25.
* ``decoupled``: scale_by_adam -> penalty -> scale(-lr), as ``optax.adamw``
  does with weight decay: the penalty step is not rescaled by Adam.

Lambda and the step size are arguments of ``make_optimizer`` that may be traced
arrays: the WARCA training step builds its ``tx`` inside the compiled program from its
``Hyperparams`` argument, so that one program serves every point of a (lambda, eta)
grid search, and no value of either is baked into it.

Step-size schedule: with ``decay_steps`` the Adam step is multiplied by a cosine that
falls from 1 to 0 over that many steps. Adam's steps have a fixed size in parameter
units whatever the gradient's size, so a constant step size never lets the iterates
settle: with the hinge's noisy minibatch gradients WARCA oscillated around its optimum
by an amount that grows with eta, and its accuracy at the last step depended on eta.
Decaying the step to 0 makes the last iterate converge for every eta tried
(measurements: docs/methods.md#what-warca-needs-beyond-the-paper).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import optax

PENALTY_MODES = ("coupled", "decoupled")


def add_penalty_grad(lam) -> optax.GradientTransformationExtraArgs:
    """Adds lam * R' to the updates: hinge part + lambda R', the sum of eq. 20 (or eq. 23).

    Args:
      lam: penalty weight lambda (a number or a scalar array).

    Returns:
      A transformation whose ``update`` takes the penalty's gradient R' at the current
      params as the required extra argument ``penalty_grad`` (a pytree like the updates).
    """

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None, *, penalty_grad=None, **extra_args):
        del params, extra_args
        if penalty_grad is None:
            raise ValueError("add_penalty_grad needs penalty_grad= (the penalty's gradient)")
        return jax.tree.map(lambda u, p: u + lam * p, updates, penalty_grad), state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def check_hyperparams(*, learning_rate: float, lam: float) -> None:
    """Raises ValueError for a step size or penalty weight out of range."""
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"learning_rate must be positive (a finite number), got {learning_rate}")
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"lam must be non-negative (a finite number), got {lam}")


def make_optimizer(
    *,
    learning_rate,
    lam,
    penalty_mode: str = "coupled",
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    decay_steps: int = 0,
) -> optax.GradientTransformationExtraArgs:
    """Adam chained with the penalty transformation; the one factory for ``tx``.

    WARCA's update (eq. 25 is the plain step A <- A - eta (eq. 23); Adam on the same
    direction, the hinge part plus lambda R' of ``add_penalty_grad``, replaces it, as
    the paper's section 3.3 uses Adam).

    ``learning_rate`` and ``lam`` are numbers (checked here, ``check_hyperparams``) or
    scalar arrays, traced ones included (checked by the caller: WARCA's config check,
    ``methods.warca.config.check_config``, before any work).
    ``decay_steps`` > 0 multiplies the step by a cosine falling from 1 to 0 over that
    many steps (0: a constant step size). ``tx.update`` needs ``penalty_grad=``.
    """
    if penalty_mode not in PENALTY_MODES:
        raise ValueError(f"unknown penalty_mode {penalty_mode!r}; expected one of {PENALTY_MODES}")
    if not isinstance(learning_rate, jax.Array) and not isinstance(lam, jax.Array):
        check_hyperparams(learning_rate=learning_rate, lam=lam)
    if decay_steps < 0:
        raise ValueError(f"decay_steps must be >= 0 (0: constant step), got {decay_steps}")
    pen = add_penalty_grad(lam)
    adam = optax.scale_by_adam(b1=b1, b2=b2, eps=eps)
    parts = [pen, adam] if penalty_mode == "coupled" else [adam, pen]
    if decay_steps > 0:
        parts.append(optax.scale_by_schedule(optax.cosine_decay_schedule(1.0, int(decay_steps))))
    return optax.chain(*parts, optax.scale(-learning_rate))


class TrainState(NamedTuple):
    """Training state pytree: parameters, optimiser state and step counter."""

    params: jax.Array
    opt_state: optax.OptState
    step: jax.Array
