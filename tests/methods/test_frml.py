"""FRML: it learns, its gradient and retraction equal direct computations, bad input."""

import functools

import jax
import jax.numpy as jnp
import learner_checks
import numpy as np
import pytest
from conftest import small_problem
from repo_configs import method_section

from warca_jax.maths import linalg
from warca_jax.methods import frml
from warca_jax.runs import defaults

_method = functools.partial(method_section, "frml")

_small_problem = functools.partial(small_problem, num_ids=30, dim=16)


@pytest.mark.slow
def test_frml_beats_euclidean(reid):
    metric, hist = frml.fit(reid.x_train, reid.y_train, _method())
    # Measured: rank-1 77.5, mAP 78.6 against Euclidean 23.5 / 21.9.
    reid.assert_beats_euclidean(metric, rank1=40, mAP=40)
    assert hist[-1]["loss"] < hist[0]["loss"]
    # The retraction keeps U orthonormal: W W^T = diag(s).
    w = metric.projection
    gram = w @ w.T
    np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-3 * gram.max())


def _dense_loss(m, u, v, weights, *, margin, lam):
    """f(M) of a minibatch with M dense [D, D] (the module docstring's equation): the
    reference the factored gradient is checked against; u, v: [B, D], weights: [B]."""
    du = jnp.einsum("bd,de,be->b", u, m, u)
    dv = jnp.einsum("bd,de,be->b", v, m, v)
    hinge = jnp.maximum(margin + du - dv, 0.0)
    return jnp.mean(weights * hinge) + 0.5 * lam * jnp.sum(m * m)


def _random_state(rng, d, r):
    u, _ = np.linalg.qr(rng.standard_normal((d, r)))
    return frml.FrmlState(jnp.asarray(u), jnp.asarray(rng.uniform(0.5, 2.0, r)), jnp.zeros(()))


@pytest.mark.slow
def test_euclidean_gradient_factors_equal_autodiff():
    rng = np.random.default_rng(0)
    d, r, b, lam, margin = 9, 3, 12, 0.1, 1.0
    with jax.enable_x64(True):
        st = _random_state(rng, d, r)
        m = (st.u * st.s) @ st.u.T
        u, v = jnp.asarray(rng.standard_normal((2, b, d)))
        weights = jnp.asarray(rng.uniform(0.5, 3.0, b))
        hinge = margin + jnp.einsum("bd,de,be->b", u, m, u) - jnp.einsum("bd,de,be->b", v, m, v)
        assert 0 < int(jnp.sum(hinge > 0)) < b  # active and inactive pairs both present
        want = jax.grad(_dense_loss)(m, u, v, weights, margin=margin, lam=lam)
        coef = weights * (hinge > 0) / b
        got = frml.euclidean_grad_times_u(st, u, v, coef, lam=lam)
        np.testing.assert_allclose(got, want @ st.u, rtol=1e-10, atol=1e-10)


@pytest.mark.slow
def test_retraction_equals_dense_projection_and_truncation():
    rng = np.random.default_rng(1)
    d, r, lr = 10, 3, 0.3
    with jax.enable_x64(True):
        st = _random_state(rng, d, r)
        z = rng.standard_normal((d, d))
        z = z + z.T
        new = frml.retract(st, jnp.asarray(z) @ st.u, lr=lr)
        # Slow direct computation: dense tangent projection and a full eigendecomposition.
        uu = np.asarray(st.u)
        p = uu @ uu.T
        q = np.eye(d) - p
        xi = p @ z @ p + q @ z @ p + p @ z @ q
        m = (uu * np.asarray(st.s)) @ uu.T - lr * xi
        w, vec = np.linalg.eigh(m)
        top = np.argsort(w)[::-1][:r]
        want = (vec[:, top] * np.maximum(w[top], 0)) @ vec[:, top].T
        got = (np.asarray(new.u) * np.asarray(new.s)) @ np.asarray(new.u).T
        np.testing.assert_allclose(got, want, atol=1e-10)
        np.testing.assert_allclose(np.asarray(new.u).T @ np.asarray(new.u), np.eye(r), atol=1e-10)


@pytest.mark.slow
def test_same_seed_same_result():
    x, y = _small_problem()
    cfg = _method(dim=4, num_iters=40, batch_size=64, log_every=20)
    learner_checks.assert_same_seed_same_result(frml.fit, x, y, cfg, apart=np.allclose)


@pytest.mark.parametrize(
    "mutate, overrides, match",
    [
        (lambda x, y: (np.where(x > 2, np.nan, x), y), {}, "NaN or inf"),
        (lambda x, y: (x, np.arange(len(y))), {}, "2 identities with two or more"),
        (lambda x, y: (x, y), {"dim": 17}, "rank dim"),
        (lambda x, y: (x, y), {"lam": -1.0}, "lam"),
        (lambda x, y: (x, y), {"sampler": "warp"}, "unknown sampler"),
        (lambda x, y: (x, y), {"learning_rate": -1.0}, "learning_rate"),
        (lambda x, y: (x, y), {"batch_size": 0}, "batch_size"),
    ],
)
def test_bad_input_is_refused(mutate, overrides, match):
    learner_checks.assert_refused(
        frml.fit, *mutate(*_small_problem()), _method(**{"dim": 4, **overrides}), match
    )


@pytest.mark.slow
def test_divergence_is_an_error():
    cfg = _method(dim=4, num_iters=20, batch_size=64, log_every=20, learning_rate=1e30)
    learner_checks.assert_diverges(frml.fit, *_small_problem(), cfg, "diverged|non-finite")


def _one_nn_accuracy(z, labels) -> float:
    d = np.linalg.norm(z[:, None] - z[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    return float(np.mean(labels[np.argmin(d, axis=1)] == labels))


@pytest.mark.slow
def test_wide_data_trains_in_the_span_of_the_training_features():
    x, y = _small_problem(num_ids=40, images_per_id=4)
    rng = np.random.default_rng(0)
    d = 240  # D > N = 80 training images
    lift = rng.standard_normal((x.shape[1], d)).astype(np.float32) / np.sqrt(x.shape[1])
    noise = 0.05 * rng.standard_normal((len(y), d)).astype(np.float32)
    wide = x @ lift + noise
    train, test = y < 20, y >= 20
    cfg = _method("small", dim=8, learning_rate=0.1)
    metrics = {}
    for span in (True, False):
        metrics[span], _ = frml.fit(wide[train], y[train], defaults.overridden(cfg, span=span))
    assert metrics[True].projection.shape == (8, d)
    # no part outside the span of the centred training features: data off it is ignored
    basis = linalg.training_span(wide[train], min_dim=8).basis
    off = rng.standard_normal(d).astype(np.float32)
    off -= basis.T @ (basis @ off)
    np.testing.assert_allclose(metrics[True].projection @ off, 0, atol=1e-4)
    assert np.abs(metrics[False].projection @ off).max() > 1e-2  # the full form keeps one
    accuracy = {s: _one_nn_accuracy(m.transform(wide[test]), y[test]) for s, m in metrics.items()}
    assert accuracy[True] > 0.5 and accuracy[True] >= accuracy[False] - 0.1, accuracy
