"""SDML: it learns, its ADMM solution meets the optimality conditions and equals
scikit-learn's graphical lasso, unbounded problems and bad input are refused."""

import functools

import jax
import jax.numpy as jnp
import learner_checks
import numpy as np
import pytest
from conftest import small_problem
from repo_configs import method_section
from sklearn.covariance import graphical_lasso

import warca_jax.sklearn
from warca_jax.methods import sdml
from warca_jax.runs import defaults

_method = functools.partial(method_section, "sdml")


def _well_posed(d=8, alpha=0.1):
    """A sample covariance (definite) and an alpha that zeroes part of its inverse."""
    rng = np.random.default_rng(0)
    g = rng.standard_normal((d, d)) * (rng.random((d, d)) < 0.3) + 2 * np.eye(d)
    x = rng.standard_normal((60, d)) @ np.linalg.inv(g).T
    return np.cov(x, rowvar=False), alpha


def _solve64(p, alpha, tol=1e-11, iters=5000):
    with jax.enable_x64(True):
        pj = jnp.asarray(p, jnp.float64)
        z0 = jnp.asarray(np.diag(1.0 / np.diag(p)))
        state = sdml.AdmmState(z0, jnp.zeros_like(z0), jnp.asarray(1.0, jnp.float64))
        state, k, stats, converged = sdml.admm_iterations(state, pj, alpha, tol, iters)
        assert bool(converged), (int(k), stats)
        return np.asarray(state.z), {key: float(v) for key, v in stats.items()}


@pytest.mark.slow
def test_sdml_beats_euclidean(reid):
    metric, hist = sdml.fit(reid.x_train, reid.y_train, _method())
    # Measured: rank-1 29.0, mAP 26.4 (converged after 10 iterations) against Euclidean
    # 23.5 / 21.9 (balance_param 0.9: 38.0 / 36.1).
    reid.assert_beats_euclidean(metric, rank1=4, mAP=3)
    assert hist[-1]["stopped"].startswith("converged")
    assert metric.kind == "linear" and metric.projection.shape == (64, 64)


@pytest.mark.slow
def test_solution_meets_the_optimality_conditions():
    p, alpha = _well_posed()
    z, stats = _solve64(p, alpha)
    w = np.linalg.inv(z)
    off = ~np.eye(len(p), dtype=bool)
    # KKT of min tr(MP) - log det M + alpha sum_{i != j} |M_ij|: M^-1 - P = alpha Gamma,
    # Gamma_ii = 0, Gamma_ij = sign(M_ij) where M_ij != 0 and in [-1, 1] where it is 0.
    np.testing.assert_allclose(np.diag(w), np.diag(p), rtol=1e-8)
    assert np.all(np.abs(w - p)[off] <= alpha * (1 + 1e-8))
    nz = off & (z != 0)
    np.testing.assert_allclose((w - p)[nz], alpha * np.sign(z[nz]), rtol=1e-6)
    assert 0 < nz.sum() < off.sum()  # some entries zeroed, some not: both conditions tested
    assert 0 <= stats["gap"] <= 1e-10 * max(1.0, abs(stats["loss"]))
    assert np.linalg.eigvalsh(z).min() > 0


@pytest.mark.slow
def test_solution_equals_scikit_learn_graphical_lasso():
    p, alpha = _well_posed()
    z, _ = _solve64(p, alpha)
    _, want = graphical_lasso(p, alpha, tol=1e-8, max_iter=1000)
    np.testing.assert_allclose(z, want, atol=1e-6)
    # and in float32 through fit's solver, to the default tolerance
    z32, hist = sdml.solve(p, alpha, _method())
    assert hist[-1]["stopped"].startswith("converged")
    f = sdml.objective
    # the gap certifies the objective (measured: 1.4e-6 relative, 27 iterations); a gap of
    # 1e-5 |f| leaves the matrix less exact (measured: 1.0e-3 relative)
    assert f(z32, p, alpha) - f(want, p, alpha) <= 1e-5 * abs(f(want, p, alpha))
    assert np.linalg.norm(z32 - want) <= 5e-3 * np.linalg.norm(want)


@pytest.mark.slow
def test_unbounded_problem_is_refused_with_the_balance_that_works():
    x, y = small_problem()
    cfg = method_section("sdml", "metric_learn")  # the pairs' sum, eta 0.5
    with pytest.raises(ValueError, match=r"has no minimiser; lower method.balance_param") as err:
        sdml.fit(x, y, cfg)
    largest = float(str(err.value).split(" below ")[1].split(",")[0])
    metric, hist = sdml.fit(x, y, defaults.overridden(cfg, balance_param=0.5 * largest))
    assert metric.is_finite() and hist[-1]["stopped"].startswith("converged")


@pytest.mark.slow
def test_same_seed_same_result():
    cfg = _method(num_constraints=100)
    # seed 4 draws other pairs
    learner_checks.assert_same_seed_same_result(
        sdml.fit, *small_problem(), cfg, apart=np.array_equal
    )


def test_max_iter_reached_says_so():
    hist = learner_checks.fit_to_the_stop(
        sdml.fit, *small_problem(), _method(max_iter=3, log_every=2, tol=1e-9)
    )
    assert [r["step"] for r in hist] == [2, 3]
    assert hist[-1]["stopped"].startswith("max_iter reached: 3 iterations")


def test_covariance_prior():
    x, y = small_problem()
    metric, hist = sdml.fit(x, y, _method(prior="covariance"))
    assert metric.is_finite() and hist[-1]["stopped"].startswith("converged")


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"balance_param": 1.0}, r"method.balance_param must be in \[0, 1\) .* got 1.0"),
        ({"balance_param": -0.1}, r"method.balance_param must be in \[0, 1\)"),
        ({"sparsity_param": -1.0}, r"method.sparsity_param must be >= 0"),
        ({"loss_matrix": "mean"}, r"unknown loss_matrix 'mean'"),
        ({"prior": "random"}, r"unknown prior 'random'"),
        ({"rho": 0.0}, r"method.rho must be positive"),
        ({"max_iter": 0}, r"method.max_iter must be >= 1"),
        ({"tol": 0.0}, r"method.tol must be positive"),
        ({"num_constraints": -5}, r"method.num_constraints must be >= 0"),
    ],
)
def test_bad_hyperparameters_are_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        sdml.fit(*small_problem(), _method(**overrides))


def test_bad_data_is_refused():
    x, y = small_problem()
    with pytest.raises(ValueError, match="at least 2 feature dimensions"):
        sdml.fit(x[:, :1], y, _method())
    with pytest.raises(ValueError, match="prior 'covariance' needs an invertible covariance"):
        sdml.fit(np.concatenate([x, x[:, :1]], axis=1), y, _method(prior="covariance"))


def test_sklearn_pipeline():
    x, y = small_problem()
    est = warca_jax.sklearn.estimator("sdml", balance_param=0.9)
    learned, plain = learner_checks.knn_accuracies(est, x[::2], y[::2], x[1::2], y[1::2])
    # Measured: 0.50 against 0.40 for the same pipeline without SDML (balance_param 0.5: 0.40).
    assert learned > plain
