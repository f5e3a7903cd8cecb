"""ITML: it learns, its projections are the dense Bregman projections, A stays PSD, bad input."""

import functools

import jax
import jax.numpy as jnp
import learner_checks
import numpy as np
import pytest
from conftest import small_problem
from repo_configs import method_section

import warca_jax.sklearn
from warca_jax.methods import itml

_method = functools.partial(method_section, "itml")


def _dense_sweep(a, lam, xi, v, delta, gamma):
    """One sweep of projections written with A^-1: the Bregman projection of (A, xi) onto
    v^T A v = xi_c under the LogDet divergence moves A^-1 by -delta alpha v v^T and 1 / xi_c
    by delta alpha / gamma, with alpha clipped by the dual variable lambda_c >= 0."""
    a, lam, xi = a.copy(), lam.copy(), xi.copy()
    for c in range(len(v)):
        p = v[c] @ a @ v[c]
        theta = delta[c] * gamma / (gamma + 1.0) * (1.0 / p - 1.0 / xi[c])
        alpha = min(lam[c], theta)
        a = np.linalg.inv(np.linalg.inv(a) - delta[c] * alpha * np.outer(v[c], v[c]))
        a = (a + a.T) / 2
        xi[c] = 1.0 / (1.0 / xi[c] + delta[c] * alpha / gamma)
        lam[c] -= alpha
    return a, lam, xi


def _random_problem(rng, d=6, p=40):
    g = rng.standard_normal((d, d))
    a = g @ g.T / d + np.eye(d)
    v = rng.standard_normal((p, d))
    delta = np.where(np.arange(p) < p // 2, 1.0, -1.0)
    xi = np.where(delta > 0, 2.0, 12.0) * rng.uniform(0.5, 1.5, p)
    return a, v, delta, xi


@pytest.mark.slow
def test_itml_beats_euclidean(reid):
    metric, hist = itml.fit(reid.x_train, reid.y_train, _method(num_constraints=500))
    # Measured: rank-1 78.0, mAP 77.1 (converged after 84 sweeps) against Euclidean 23.5 / 21.9.
    reid.assert_beats_euclidean(metric, rank1=45, mAP=45)
    assert hist[-1]["stopped"].startswith("converged")
    assert metric.kind == "linear" and metric.projection.shape == (64, 64)


@pytest.mark.parametrize("gamma", [1.0, 50.0])
def test_sweeps_equal_dense_projections(gamma):
    rng = np.random.default_rng(0)
    a, v, delta, xi = _random_problem(rng)
    lam = np.zeros(len(v))
    want = (a, lam, xi)
    with jax.enable_x64(True):
        sweep = jax.jit(itml.projection_sweep)
        got = tuple(jnp.asarray(t, jnp.float64) for t in want)
        for _ in range(3):  # later sweeps clip alpha at lambda_c (satisfied constraints)
            want = _dense_sweep(*want, v, delta, gamma)
            got = sweep(*got, jnp.asarray(v), jnp.asarray(delta), gamma)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(np.asarray(g), w, rtol=1e-8, atol=1e-10)
    assert np.any(want[1] > 0) and np.any(want[1] == 0)  # active and inactive constraints


def test_projection_meets_its_constraint():
    rng = np.random.default_rng(1)
    a, v, delta, xi = _random_problem(rng, p=2)
    with jax.enable_x64(True):
        for c in (0, 1):  # a violated similar, then a violated dissimilar constraint
            xi_c = 0.5 * (v[c] @ a @ v[c]) if delta[c] > 0 else 2.0 * (v[c] @ a @ v[c])
            new_a, lam, new_xi = itml.projection_sweep(
                jnp.asarray(a),
                jnp.zeros(1),
                jnp.asarray([xi_c]),
                v[c : c + 1],
                delta[c : c + 1],
                3.0,
            )
            p = v[c] @ np.asarray(new_a) @ v[c]
            np.testing.assert_allclose(p, float(new_xi[0]), rtol=1e-10)  # on the hyperplane
            assert float(lam[0]) > 0  # the dual variable of a violated constraint grows


@pytest.mark.slow
@pytest.mark.parametrize("gamma", [1.0, 100.0])
def test_a_stays_positive_definite(gamma):
    x, y = small_problem()
    cfg = _method(gamma=gamma, num_constraints=300)
    v, delta, xi0, _ = itml.itml_constraints(x, y, cfg, np.random.default_rng(0))
    a, lam, xi, k, _ = itml.sweeps(
        jnp.eye(12), jnp.zeros(len(v)), jnp.asarray(xi0, jnp.float32), v, delta, gamma, 0.0, 500
    )
    w = np.linalg.eigvalsh(np.asarray(a, np.float64))
    # Measured: smallest eigenvalue 0.056 (gamma 1), 2.6e-4 (gamma 100; condition 1e5).
    assert w.min() > 1e-5 * w.max() and np.all(np.asarray(lam) >= 0)
    assert int(k) == 500 and np.all(np.asarray(xi) > 0)


@pytest.mark.slow
def test_lost_definiteness_is_an_error():
    # Near-hard constraints that conflict drive A's condition number beyond float32's:
    # refused with the reason, never returned.
    with pytest.raises(FloatingPointError, match="lost positive definiteness.*lower gamma"):
        itml.fit(*small_problem(), _method(gamma=1e4, num_constraints=300))


@pytest.mark.slow
def test_same_seed_same_result():
    cfg = _method(num_constraints=200, max_iter=30)
    # seed 4 draws other pairs
    learner_checks.assert_same_seed_same_result(
        itml.fit, *small_problem(), cfg, apart=np.array_equal
    )


@pytest.mark.slow
def test_stops_on_the_rule_and_says_why():
    x, y = small_problem()
    hist = learner_checks.fit_to_the_stop(itml.fit, x, y, _method(num_constraints=200))
    last = hist[-1]
    assert last["stopped"].startswith("converged: conv") and last["conv"] < 1e-3
    assert f"after {last['step']} sweeps" in last["stopped"] and last["step"] < 1000
    assert all(r["conv"] >= 1e-3 for r in hist[:-1])
    _, hist = itml.fit(x, y, _method(num_constraints=200, max_iter=7, log_every=5))
    assert [r["step"] for r in hist] == [5, 7]
    assert hist[-1]["stopped"].startswith("max_iter reached: 7 sweeps")


def test_covariance_prior_and_euclidean_bounds():
    x, y = small_problem()
    metric, hist = itml.fit(x, y, _method(num_constraints=200, prior="covariance"))
    assert metric.is_finite() and np.isfinite(hist[-1]["loss"])
    metric, hist = itml.fit(x, y, _method(num_constraints=200, bounds="euclidean"))
    assert metric.is_finite() and hist[-1]["stopped"].startswith("converged")


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"gamma": 0.0}, r"method.gamma must be positive .* got 0.0"),
        ({"max_iter": 0}, r"method.max_iter must be >= 1 .* got 0"),
        ({"tol": -1e-3}, r"method.tol must be >= 0"),
        (
            {"num_constraints": -1},
            r"method.num_constraints must be >= 0 \(an integer; 0: 20 C\^2\); got -1",
        ),
        ({"log_every": 0}, r"method.log_every must be >= 1"),
        ({"prior": "random"}, r"unknown prior 'random'"),
        ({"bounds": "cosine"}, r"unknown bounds 'cosine'"),
        ({"upper_percentile": 120.0}, r"method.upper_percentile must be in \[0, 100\]"),
        ({"lower_percentile": 96.0}, r"lower_percentile \(96\) must not exceed"),
    ],
)
def test_bad_hyperparameters_are_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        itml.fit(*small_problem(), _method(**overrides))


def test_singular_covariance_prior_is_refused():
    x, y = small_problem()
    x = np.concatenate([x, x[:, :1]], axis=1)  # a repeated column
    with pytest.raises(ValueError, match="prior 'covariance' needs an invertible covariance"):
        itml.fit(x, y, _method(prior="covariance"))


@pytest.mark.slow
def test_sklearn_pipeline():
    x, y = small_problem()
    est = warca_jax.sklearn.estimator("itml", num_constraints=200)
    learned, plain = learner_checks.knn_accuracies(est, x[::2], y[::2], x[1::2], y[1::2])
    # Measured: 0.55 against 0.40 for the same pipeline without ITML.
    assert learned > plain
