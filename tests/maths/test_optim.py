"""Tests for warca_jax/maths/optim.py: the checks of make_optimizer and its two orders."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from warca_jax.maths import optim


@pytest.mark.parametrize("as_array", [False, True])
def test_an_unknown_penalty_mode_is_refused_for_numbers_and_arrays(as_array):
    lam, lr = (jnp.float32(1e-3), jnp.float32(1e-2)) if as_array else (1e-3, 1e-2)
    with pytest.raises(ValueError, match="unknown penalty_mode 'both'; expected one of"):
        optim.make_optimizer(learning_rate=lr, lam=lam, penalty_mode="both")


@pytest.mark.parametrize(
    "learning_rate, lam, message",
    [
        (0.0, 1e-3, "learning_rate must be positive"),
        (float("nan"), 1e-3, "learning_rate must be positive"),
        (1e-2, -1.0, "lam must be non-negative"),
        (1e-2, float("inf"), "lam must be non-negative"),
    ],
)
def test_numbers_out_of_range_are_refused(learning_rate, lam, message):
    with pytest.raises(ValueError, match=message):
        optim.make_optimizer(learning_rate=learning_rate, lam=lam)


def test_a_negative_decay_is_refused():
    with pytest.raises(ValueError, match="decay_steps must be >= 0"):
        optim.make_optimizer(learning_rate=1e-2, lam=1e-3, decay_steps=-1)


def test_the_two_orders_put_the_penalty_before_or_after_adam():
    params = jnp.array([1.0, -2.0, 0.5])
    grad = jnp.array([0.3, 0.1, -0.2])
    pen = jnp.array([2.0, -1.0, 4.0])
    lam, lr = 0.5, 0.1
    adam = optax.scale_by_adam()

    def adam_of(g):
        return adam.update(g, adam.init(params))[0]

    for mode, expected in (
        ("coupled", -lr * adam_of(grad + lam * pen)),
        ("decoupled", -lr * (adam_of(grad) + lam * pen)),
    ):
        tx = optim.make_optimizer(learning_rate=lr, lam=lam, penalty_mode=mode)
        update, _ = tx.update(grad, tx.init(params), params, penalty_grad=pen)
        np.testing.assert_allclose(update, expected, rtol=1e-6, err_msg=mode)
