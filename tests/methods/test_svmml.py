"""SVMML: it learns, its distances are the decision function, it saves and loads, bad input."""

import functools

import jax
import jax.numpy as jnp
import learner_checks
import ml_collections
import numpy as np
import pytest
from conftest import small_problem
from repo_configs import method_section

from warca_jax.methods import svmml, svmml_released
from warca_jax.methods.model_checks import TrainingDivergedError
from warca_jax.metric import Metric
from warca_jax.runs import defaults

_method = functools.partial(method_section, "svmml")

_small_problem = functools.partial(small_problem, num_ids=30, dim=16)


@pytest.fixture(scope="module")
def small_fit():
    x, y = _small_problem()
    return x, y, svmml.fit(x, y, _method(num_iters=60, log_every=30), seed=1)


@pytest.mark.slow
def test_svmml_beats_euclidean(reid):
    metric, hist = svmml.fit(reid.x_train, reid.y_train, _method())
    # Euclidean: rank-1 23.5, mAP 21.9 (the margin asserted below).
    reid.assert_beats_euclidean(metric, rank1=15, mAP=15)
    assert hist[-1]["loss"] < hist[0]["loss"]
    assert hist[-1]["stopped"].startswith("converged")
    for m in (metric.a_mat, metric.b_mat):  # projected on the PSD cone
        np.testing.assert_allclose(m, m.T, atol=1e-5)
        assert np.linalg.eigvalsh(m.astype(np.float64)).min() > -1e-4 * np.abs(m).max()


@pytest.mark.slow
def test_distances_are_the_decision_function(small_fit):
    x, _, (metric, _) = small_fit
    got = metric.pairwise_distances(x[:7], x[5:16], block_size=3)
    # Slow direct computation, pair by pair, of f(x, z) on the reduced features.
    a, b, c = (v.astype(np.float64) for v in (metric.a_mat, metric.b_mat, metric.c_vec))
    red = (x.astype(np.float64) - metric.mean) @ metric.components.T.astype(np.float64)
    want = np.empty((7, 11))
    for r in range(7):
        for s in range(11):
            u, z = red[r], red[5 + s]
            want[r, s] = 0.5 * u @ a @ u + 0.5 * z @ a @ z - u @ b @ z + c @ (u + z) + metric.bias
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert np.abs(want).max() > 0.1  # a non-trivial model


@pytest.mark.slow
def test_save_load_round_trip(small_fit, tmp_path):
    x, _, (metric, _) = small_fit
    metric.save(tmp_path / "svmml.npz")
    back = Metric.load(tmp_path / "svmml.npz")
    assert type(back) is svmml.SvmmlMetric and back.kind == "svmml"
    assert back.bias == metric.bias
    np.testing.assert_array_equal(back.pairwise_distances(x, x), metric.pairwise_distances(x, x))


def test_pairs_are_all_positives_and_sampled_negatives():
    y = np.repeat(np.arange(5), [2, 3, 3, 1, 4])
    i, j, dis = svmml.make_pairs(y, neg_ratio=2.0, seed=0)
    pos = {(a, b) for a, b in zip(i[~dis], j[~dis], strict=True)}
    want = {(a, b) for a in range(len(y)) for b in range(a + 1, len(y)) if y[a] == y[b]}
    assert pos == want
    assert dis.sum() == 2 * len(want) and np.all(y[i[dis]] != y[j[dis]])
    i2, j2, _ = svmml.make_pairs(y, neg_ratio=2.0, seed=0)
    np.testing.assert_array_equal(i, i2)
    np.testing.assert_array_equal(j, j2)


@pytest.mark.slow
def test_same_seed_same_result(small_fit):
    x, y, (metric, hist) = small_fit
    again, hist2 = svmml.fit(x, y, _method(num_iters=60, log_every=30), seed=1)
    np.testing.assert_array_equal(again.a_mat, metric.a_mat)
    assert [r["loss"] for r in hist] == [r["loss"] for r in hist2]
    # the seed draws the different-label pairs when not all of them are taken
    few = _method(num_iters=60, log_every=30, neg_ratio=2.0)
    one, _ = svmml.fit(x, y, few, seed=1)
    other, _ = svmml.fit(x, y, few, seed=2)
    assert not np.allclose(other.a_mat, one.a_mat)


@pytest.mark.parametrize(
    "mutate, overrides, match",
    [
        (lambda x, y: (np.where(x > 2, np.nan, x), y), {}, "NaN or inf"),
        (lambda x, y: (x, y[:-1]), {}, "labels has .* entries but the features have"),
        (lambda x, y: (x, y), {"pca_dim": 17}, "pca_dim must be in"),
        (lambda x, y: (x, y), {"pca_variance": 0.0}, "pca_variance"),
        (lambda x, y: (x, y), {"neg_ratio": 0.0}, "neg_ratio"),
        (lambda x, y: (x, y), {"lam": 0.0}, "lam"),
        (lambda x, y: (x, y), {"tol": -1.0}, "tol"),
    ],
)
def test_bad_input_is_refused(mutate, overrides, match):
    learner_checks.assert_refused(
        svmml.fit, *mutate(*_small_problem()), _method(**overrides), match
    )


@pytest.mark.slow
def test_pair_decisions_equal_the_gathered_form():
    rng = np.random.default_rng(7)
    x = jnp.asarray(rng.normal(size=(9, 4)), jnp.float32)
    a, b = (jnp.asarray(rng.normal(size=(4, 4)), jnp.float32) for _ in range(2))
    params = (a, b, jnp.asarray(rng.normal(size=4), jnp.float32), jnp.asarray(0.3))
    i, j = jnp.asarray(rng.integers(0, 9, 20)), jnp.asarray(rng.integers(0, 9, 20))
    np.testing.assert_allclose(
        svmml.pair_decisions(params, x, i, j),
        svmml.decision(params, x[i], x[j]),
        rtol=1e-5,
        atol=1e-5,
    )


def test_closed_form_gradient_equals_autodiff():
    """``loss_and_grad`` (dense [N, N] pair matrices) is ``svmml_loss`` and its reverse-mode
    gradient, repeated pairs and both orders of a pair included."""
    rng = np.random.default_rng(11)
    x = jnp.asarray(rng.normal(size=(12, 5)), jnp.float32)
    params = tuple(
        jnp.asarray(rng.normal(size=shape), jnp.float32) for shape in ((5, 5), (5, 5), (5,), ())
    )
    i = jnp.asarray(np.r_[rng.integers(0, 12, 40), 3, 3, 7], jnp.int32)
    j = jnp.asarray(np.r_[rng.integers(0, 12, 40), 7, 7, 3], jnp.int32)
    dis = jnp.asarray(rng.random(43) < 0.7)
    value, grads = svmml.loss_and_grad(params, x, i, j, dis, lam=0.03)
    ref_value, ref_grads = jax.value_and_grad(functools.partial(svmml.svmml_loss, lam=0.03))(
        params, x, i, j, dis
    )
    np.testing.assert_allclose(value, ref_value, rtol=1e-5)
    assert 0.1 < float(value)  # margins violated: the data term is not zero
    for got, want in zip(grads, ref_grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * float(jnp.max(jnp.abs(want))))


@pytest.mark.slow
def test_both_gradient_arrangements_fit_alike(small_fit, monkeypatch):
    """Above ``DENSE_MAX_N`` the fit takes reverse-mode through ``pair_decisions``: the same
    steps to float rounding."""
    x, y, (metric, hist) = small_fit
    monkeypatch.setattr(svmml, "DENSE_MAX_N", 0)
    gathered, hist_g = svmml.fit(x, y, _method(num_iters=60, log_every=30), seed=1)
    np.testing.assert_allclose(hist_g[-1]["loss"], hist[-1]["loss"], rtol=1e-4)
    for name in ("a_mat", "b_mat", "c_vec"):
        ref = getattr(metric, name)
        np.testing.assert_allclose(getattr(gathered, name), ref, atol=1e-4 * np.abs(ref).max())


def _numpy_objective(theta, xr, i, j, dis, lam):
    a, b, c, bias = theta
    h = 0.5 * np.sum((xr @ a) * xr, 1) + xr @ c
    f = h[i] + h[j] - np.sum((xr[i] @ b) * xr[j], 1) + bias
    y = np.where(dis, 1.0, -1.0)
    m = np.maximum(1 - y * f, 0) ** 2
    data = m[dis].mean() + m[~dis].mean()
    return data + 0.5 * lam * (np.sum(a * a) + np.sum(b * b) + c @ c), f, y, m


def _numpy_solve(xr, i, j, dis, lam, iters):
    """Independent plain projected gradient in float64 numpy, step 1 / (Lipschitz bound)."""
    p = xr.shape[1]
    theta = [np.zeros((p, p)), np.zeros((p, p)), np.zeros(p), 0.0]
    step = 1.0 / svmml.lipschitz_bound(xr, i, j, dis, lam)
    w = np.where(dis, 1.0 / dis.sum(), 1.0 / (~dis).sum())

    def psd(m):
        e, v = np.linalg.eigh(0.5 * (m + m.T))
        return (v * np.maximum(e, 0)) @ v.T

    for _ in range(iters):
        a, b, c, bias = theta
        _, f, y, _ = _numpy_objective(theta, xr, i, j, dis, lam)
        r = -2 * y * np.maximum(1 - y * f, 0) * w  # d loss / d f per pair
        xi, xj = xr[i], xr[j]
        ga = 0.5 * ((xi * r[:, None]).T @ xi + (xj * r[:, None]).T @ xj) + lam * a
        gb = -(xi * r[:, None]).T @ xj + lam * b
        gc = (xi + xj).T @ r + lam * c
        theta = [psd(a - step * ga), psd(b - step * gb), c - step * gc, bias - step * r.sum()]
    return theta


@pytest.mark.slow
def test_fit_reaches_the_constrained_optimum():
    """The fit stops on a small KKT residual, and its objective equals an independent solve."""
    x, y = _small_problem(seed=3)
    cfg = _method(pca_dim=4, neg_ratio=3.0, lam=1e-2, tol=3e-4, num_iters=2000, log_every=100)
    metric, hist = svmml.fit(x, y, cfg, seed=0)
    assert hist[-1]["stopped"].startswith("converged"), hist[-1]
    assert hist[-1]["residual"] <= 3e-4
    # The reduced (whitened) features the fit used, and its pairs.
    xr = (x.astype(np.float64) - metric.mean) @ metric.components.T.astype(np.float64)
    np.testing.assert_allclose(np.mean(np.sum(xr * xr, 1)), 1.0, rtol=1e-4)
    np.testing.assert_allclose(xr.var(0), 1.0 / xr.shape[1], rtol=1e-3)
    i, j, dis = svmml.make_pairs(y, neg_ratio=3.0, seed=0)
    got = [metric.a_mat, metric.b_mat, metric.c_vec, metric.bias]
    got = [np.asarray(v, np.float64) for v in got]
    f_got = _numpy_objective(got, xr, i, j, dis, 1e-2)[0]
    theta = _numpy_solve(xr, i, j, dis, 1e-2, iters=4000)
    f_ref = _numpy_objective(theta, xr, i, j, dis, 1e-2)[0]
    assert f_got < 2.0 - 0.5  # well below the start (every margin 1: objective 2)
    assert abs(f_got - f_ref) <= 1e-3 * f_ref
    # An unconverged learner is told apart: a few steps leave a large residual.
    _, short = svmml.fit(x, y, defaults.overridden(cfg, num_iters=5, log_every=5), seed=0)
    assert short[-1]["stopped"].startswith("num_iters spent")
    assert short[-1]["residual"] > 30 * hist[-1]["residual"]


# ---- solver="released": the authors' released trainer (svmml_released) ----


def _released(**overrides):
    return method_section("svmml", "released", **overrides)


def _loop_objective(theta, x, y, lam):
    """The released trainer's objective pair by pair: logistic loss of s f over every ordered
    pair i != j, each class weighted to total 1, plus lam/2 (||A||^2 + ||B||^2)."""
    p = x.shape[1]
    a, b, bias = theta[: p * p].reshape(p, p), theta[p * p : -1].reshape(p, p), theta[-1]
    pairs = [(i, j) for i in range(len(y)) for j in range(len(y)) if i != j]
    n_same = sum(y[i] == y[j] for i, j in pairs)
    total = 0.0
    for i, j in pairs:
        u, z = x[i], x[j]
        f = 0.5 * u @ a @ u + 0.5 * z @ a @ z - u @ b @ z + bias
        sign, weight = (1.0, 1.0 / n_same) if y[i] == y[j] else (-1.0, 1.0 / (len(pairs) - n_same))
        total += weight * np.log1p(np.exp(sign * f))
    return total + 0.5 * lam * (np.sum(a * a) + np.sum(b * b))


def test_released_objective_and_gradient_match_an_independent_form():
    from finite_differences import gradient

    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(7, 3)), np.array([0, 0, 1, 1, 1, 2, 2])
    theta = np.concatenate([rng.normal(size=9), rng.normal(size=9), [0.4]])
    s, w = svmml_released.pair_signs_and_weights(y)
    value, grad = svmml_released.objective(theta, x, s, w, 0.3)
    np.testing.assert_allclose(value, _loop_objective(theta, x, y, 0.3), rtol=1e-12)
    # A and B enter through x^T A x and x^T B z only: the gradient of a symmetric A is the
    # symmetrised one; compare on symmetric A and B.
    sym = np.concatenate([(theta[:9].reshape(3, 3) + theta[:9].reshape(3, 3).T).ravel() / 2,
                          (theta[9:18].reshape(3, 3) + theta[9:18].reshape(3, 3).T).ravel() / 2,
                          theta[18:]])  # fmt: skip
    _, grad = svmml_released.objective(sym, x, s, w, 0.3)
    want = gradient(lambda t: _loop_objective(t, x, y, 0.3), sym)
    np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-8)


def _euclidean_ranks(x):
    d = np.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=2).astype(np.float64)
    return d, np.argsort(d, axis=1, kind="stable")


def test_released_with_no_iterations_is_the_euclidean_distance():
    x, y = _small_problem()
    metric, hist = svmml.fit(x, y, _released(num_iters=0, pca_dim=16, pca_variance=1.0))
    assert hist == [] and type(metric) is svmml.SvmmlMetric
    np.testing.assert_array_equal(metric.c_vec, np.zeros(metric.components.shape[0]))
    got = np.asarray(metric.pairwise_distances(x, x), np.float64)
    d, ranks = _euclidean_ranks(x.astype(np.float64))
    # every PCA dim with variance, not whitened: a rotation of the data's span, so
    # f = 1/2 ||x - z||^2 (up to float32 sums)
    np.testing.assert_allclose(got, 0.5 * d, atol=1e-4 * d.max())
    np.testing.assert_array_equal(np.argsort(got, axis=1, kind="stable")[:, :5], ranks[:, :5])


def test_released_lowers_its_objective_from_the_euclidean_start_and_repeats():
    x, y = _small_problem()
    cfg = _released(num_iters=30, log_every=10)
    metric, hist = svmml.fit(x, y, cfg, seed=0)
    assert [r["step"] for r in hist] == [10, 20, 30]
    assert hist[-1]["stopped"].startswith("num_iters spent")
    # the objective of the model returned, computed independently of the trainer's
    red = (x.astype(np.float64) - metric.mean) @ metric.components.T.astype(np.float64)
    s, w = svmml_released.pair_signs_and_weights(y)
    p = red.shape[1]
    start = svmml_released.objective(svmml_released.euclidean_start(p), red, s, w, 1e-6)[0]
    theta = np.concatenate([metric.a_mat.ravel(), metric.b_mat.ravel(), [metric.bias]])
    end = svmml_released.objective(theta.astype(np.float64), red, s, w, 1e-6)[0]
    assert end < 0.7 * start, (start, end)
    assert hist[0]["loss"] < start and hist[-1]["loss"] < hist[0]["loss"]
    assert not np.allclose(metric.a_mat, np.eye(p), atol=1e-3)  # it moved off the start
    # the same run gives the same result (every pair is used: the seed draws nothing)
    again, hist2 = svmml.fit(x, y, cfg, seed=0)
    np.testing.assert_array_equal(again.a_mat, metric.a_mat)
    np.testing.assert_array_equal(again.b_mat, metric.b_mat)
    assert again.bias == metric.bias
    assert [r["loss"] for r in hist] == [r["loss"] for r in hist2]


def test_released_non_finite_objective_is_refused(monkeypatch):
    x, y = _small_problem()

    def broken(theta, *args):
        value, grad = objective(theta, *args)
        return value * np.nan, grad * np.nan

    objective = svmml_released.objective
    monkeypatch.setattr(svmml_released, "objective", broken)
    with pytest.raises(TrainingDivergedError, match="not finite"):
        svmml.fit(x, y, _released(num_iters=10, log_every=5))


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"solver": "lbfgs"}, r"unknown solver 'lbfgs'; expected one of \('fista', 'released'\)"),
        ({"whiten": "no"}, "method.whiten must be True or False; got 'no'"),
        ({"num_iters": -1}, r"method.num_iters must be >= 0 \(an integer; 0: the start"),
        ({"num_iters": 2.5}, "method.num_iters must be >= 0"),
        ({"solver": "fista", "num_iters": 0}, "method.num_iters must be >= 1"),
    ],
)
def test_released_bad_config_is_refused(overrides, match, monkeypatch):
    monkeypatch.setattr(svmml_released, "CgRun", None)  # refused before any work
    x, y = _small_problem()
    cfg = ml_collections.ConfigDict({**_released().to_dict(), **overrides})  # any type
    with pytest.raises(ValueError, match=match):
        svmml.fit(x, y, cfg)


@pytest.mark.slow
def test_released_refuses_training_sets_over_its_pair_matrix_limit(monkeypatch):
    x, y = _small_problem()
    monkeypatch.setattr(svmml, "RELEASED_MAX_N", x.shape[0] - 1)
    with pytest.raises(ValueError, match=r"N x N pair matrices .* use solver 'fista'"):
        svmml.fit(x, y, _released(num_iters=5))
    svmml.fit(x, y, _method(num_iters=5))  # the default solver has no such limit
