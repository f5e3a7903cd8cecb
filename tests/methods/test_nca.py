"""NCA: it learns, its blocked loss and closed-form gradient are the paper's, bad input."""

import functools

import jax
import jax.numpy as jnp
import learner_checks
import numpy as np
import pytest
from conftest import small_problem
from repo_configs import method_section

from warca_jax import methods
from warca_jax.methods import nca

_method = functools.partial(method_section, "nca")


def _dense_nca(lmap, x, y):
    """f(L) / N and df/dL / N in float64 NumPy, written from the paper (eq. 1, 2 and 5)."""
    z = x @ lmap.T
    d = ((z[:, None] - z[None]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    e = np.exp(-(d - d.min(axis=1, keepdims=True)))
    p = e / e.sum(axis=1, keepdims=True)
    same = y[:, None] == y[None]
    p_i = (p * same).sum(axis=1)
    diff = x[:, None] - x[None]  # x_ik
    outer = np.einsum("ika,ikb->ikab", diff, diff)
    inner = np.einsum("i,ik,ikab->ab", p_i, p, outer) - np.einsum("ik,ikab->ab", p * same, outer)
    return p_i.mean(), 2.0 * lmap @ inner / len(y)


@pytest.mark.slow
def test_nca_beats_euclidean(reid):
    metric, hist = nca.fit(reid.x_train, reid.y_train, _method())
    # Measured: rank-1 66.0, mAP 64.8 against Euclidean 23.5 / 21.9 (100 L-BFGS steps).
    reid.assert_beats_euclidean(metric, rank1=35, mAP=35)
    assert hist[-1]["expected_accuracy"] > hist[0]["expected_accuracy"] + 0.1
    assert metric.kind == "linear" and metric.projection.shape == (64, 64)


@pytest.mark.slow
def test_blocked_loss_and_closed_form_gradient_are_the_papers():
    block_size = 24  # four blocks of 80 rows, the last one padded
    x, y = small_problem()
    x = x * 0.3  # softmax neither one-hot nor flat
    lmap = np.random.default_rng(1).standard_normal((5, 12)) * 0.5
    want_f, want_df = _dense_nca(lmap, x.astype(np.float64), y)
    with jax.enable_x64(True):
        args = (jnp.asarray(lmap), jnp.asarray(x, jnp.float64), jnp.asarray(y, jnp.int32))
        loss = jax.jit(functools.partial(nca.nca_loss, block_size=block_size))(*args)
        autodiff = jax.jit(jax.grad(functools.partial(nca.nca_loss, block_size=block_size)))(*args)
        got, got_loss = jax.jit(functools.partial(nca.nca_grad, block_size=block_size))(*args)
        custom = jax.jit(jax.grad(nca.nca_value), static_argnums=3)(*args, block_size)
    assert 0.1 < want_f < 0.9  # chance is 3 / 79
    np.testing.assert_allclose(-loss, want_f, rtol=1e-12)
    np.testing.assert_allclose(got_loss, loss, rtol=1e-12)
    np.testing.assert_allclose(got, autodiff, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got, -want_df, rtol=1e-9, atol=1e-12)  # loss = -f / N
    np.testing.assert_allclose(custom, got, rtol=1e-12, atol=1e-15)


@pytest.mark.slow
def test_objective_is_expected_leave_one_out_accuracy():
    x, y = small_problem()
    # A map that sends every class to its own far-apart point: p_i = 1 for all i.
    onehot = np.eye(20)[y] * 100.0
    xs = np.concatenate([onehot, x], axis=1)
    lmap = np.concatenate([np.eye(20), np.zeros((20, 12))], axis=1)
    assert nca.objective(lmap, xs, y) == pytest.approx(1.0)
    assert nca.objective(np.zeros((1, 32)), xs, y) == pytest.approx(3 / 79)  # uniform p_ij
    lmap = np.random.default_rng(0).standard_normal((3, 12)) * 0.3
    assert nca.objective(lmap, x, y, block_size=7) == pytest.approx(nca.objective(lmap, x, y))


@pytest.mark.slow
def test_same_seed_same_result():
    x, y = small_problem()
    cfg = _method(num_iters=20)
    a, ha = nca.fit(x, y, cfg)  # deterministic: NCA's fit takes no seed
    b, hb = methods.call_fit(methods.get("nca"), x, y, cfg, seed=3)  # a seed is not passed
    np.testing.assert_array_equal(a.projection, b.projection)
    assert [r["loss"] for r in ha] == [r["loss"] for r in hb]
    assert a.projection.shape == (12, 12)


@pytest.mark.slow
def test_adam_learns_too():
    x, y = small_problem()
    cfg = _method(optimizer="adam", num_iters=100, learning_rate=3e-2, tol=0.0)
    _, hist = nca.fit(x, y, cfg)
    assert hist[-1]["expected_accuracy"] > hist[0]["expected_accuracy"] + 0.05
    assert hist[-1]["stopped"] == "num_iters reached: 100 steps (tol 0: no early stop)"


@pytest.mark.slow
def test_stops_when_converged_and_says_why():
    last = learner_checks.fit_to_the_stop(
        nca.fit, *small_problem(), _method(num_iters=500, tol=1e-7)
    )[-1]
    # Measured: no change over 20 steps at step 60 of 500.
    assert last["step"] < 500
    assert last["stopped"].startswith("converged: relative change")
    assert f"at step {last['step']} of 500" in last["stopped"]


@pytest.mark.parametrize(
    "mutate, overrides, match",
    [
        (lambda x, y: (np.where(x > 2, np.inf, x), y), {}, "NaN or inf"),
        (lambda x, y: (x * 1e30, y), {}, "NCA cannot train on features of this scale"),
        (lambda x, y: (x, y[:-1]), {}, "labels (has|must have shape)"),
        (lambda x, y: (x, y), {"dim": 13}, r"output dim must be in \[0, 12\]"),
        (lambda x, y: (x, y), {"num_iters": 0}, r"method.num_iters must be >= 1"),
        (lambda x, y: (x, y), {"learning_rate": 0.0}, "method.learning_rate must be positive"),
        (lambda x, y: (x, y), {"tol": -1.0}, "method.tol must be >= 0"),
        (lambda x, y: (x, y), {"tol_window": 0}, "method.tol_window must be >= 1"),
        (lambda x, y: (x, y), {"block_size": 0}, "method.block_size must be >= 1"),
        (lambda x, y: (x, y), {"optimizer": "sgd"}, "unknown optimizer 'sgd'"),
        (lambda x, y: (x, y), {"schedule": "linear"}, "unknown schedule 'linear'"),
    ],
)
def test_bad_input_is_refused(mutate, overrides, match):
    learner_checks.assert_refused(nca.fit, *mutate(*small_problem()), _method(**overrides), match)


@pytest.mark.slow
def test_divergence_is_an_error():
    cfg = _method(optimizer="adam", num_iters=10, learning_rate=1e30, tol=0.0)
    learner_checks.assert_diverges(nca.fit, *small_problem(), cfg, "diverged|non-finite|degenerate")
