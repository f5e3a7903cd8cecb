"""SCML: it learns, its objective is the paper's, its RDA step, LDA basis, seeds, bad input."""

import functools

import finite_differences
import jax
import jax.numpy as jnp
import learner_checks
import numpy as np
import pytest
from repo_configs import config_module, method_section
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from warca_jax.methods import constraints, scml

get_config = config_module("scml").get_config

# One chunk length and batch for the small fits below, so that they share one program.
FAST = dict(max_iter=400, output_iter=200)

_method = functools.partial(method_section, "scml")


def _small_problem():
    """The training part of ``split_problem``: its fits and the pipeline's share programs."""
    return learner_checks.split_problem()[:2]


@pytest.mark.slow
def test_scml_beats_euclidean(reid):
    metric, hist = scml.fit(reid.x_train, reid.y_train, _method())
    # Measured: rank-1 76.5, mAP 80.0 against Euclidean 23.5 / 21.9 (460-600 of the 1,280
    # bases active).
    reid.assert_beats_euclidean(metric, rank1=40, mAP=40)
    assert hist[-1]["best_loss"] < hist[0]["loss"] and len(hist) == 20
    assert hist[-1]["stopped"].startswith("max_iter reached: 10000 steps")
    assert 0 < hist[-1]["active_bases"] < 1280


@pytest.mark.slow
def test_closed_form_subgradient_equals_autodiff():
    rng = np.random.default_rng(0)
    x, basis = rng.standard_normal((50, 8)), rng.standard_normal((30, 8))
    triplets = rng.integers(0, 50, (200, 3))
    with jax.enable_x64(True):
        xb = jnp.asarray(x @ basis.T)
        z = scml.triplet_terms(xb, jnp.asarray(triplets))
        w = jnp.asarray(rng.exponential(0.05, basis.shape[0]))
        slack = 1.0 + z @ w
        assert 0.05 < float(jnp.mean(slack > 0)) < 0.95  # both sides of the hinge
        assert float(jnp.min(jnp.abs(slack))) > 1e-6  # away from the kinks
        want = jax.grad(scml.hinge_loss)(w, z)
        np.testing.assert_allclose(scml.hinge_grad(w, z), want, rtol=1e-12, atol=1e-12)


def _knn_triplets_reference(x, y, k_genuine, k_impostor):
    """(a, p, n): p one of a's k_genuine nearest same-label points, n one of its k_impostor
    nearest other-label points, every combination; by a sort per anchor."""
    out = []
    for a in range(len(y)):
        by_distance = np.argsort(np.sum((x - x[a]) ** 2, axis=1), kind="stable")
        same = [j for j in by_distance if j != a and y[j] == y[a]]
        other = [j for j in by_distance if y[j] != y[a]]
        out += [(a, p, n) for p in same[:k_genuine] for n in other[:k_impostor]]
    return np.array(out)


def _scml_reference(w, basis, x, triplets, *, beta):
    """(F(w), the triplets' hinge arguments) of SCML (Shi et al. 2014, eq. 3, the global
    metric): M = sum_i w_i b_i b_i^T, then a loop over the triplets of
    [1 + d_M(a, p) - d_M(a, n)]_+ / T, plus beta ||w||_1; float64 NumPy."""
    m = sum(wi * np.outer(bi, bi) for wi, bi in zip(w, basis, strict=True))

    def d(i, j):
        return (x[i] - x[j]) @ m @ (x[i] - x[j])

    slacks = np.array([1.0 + d(a, p) - d(a, n) for a, p, n in triplets])
    return sum(max(s, 0.0) for s in slacks) / len(triplets) + beta * np.sum(np.abs(w)), slacks


@pytest.mark.slow
def test_objective_and_subgradient_equal_a_loop_over_the_papers_triplets():
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(30), [5] * 28 + [2, 1])  # one genuine neighbour; no anchor
    x = rng.standard_normal((143, 8)) + 0.7 * rng.standard_normal((30, 8))[y]
    triplets = _knn_triplets_reference(x, y, 3, 10)
    assert len(triplets) == 140 * 3 * 10 + 2 * 1 * 10 > scml._BLOCK  # two blocks of F
    np.testing.assert_array_equal(constraints.knn_triplets(x, y, k_same=3, k_other=10), triplets)
    basis = rng.standard_normal((12, 8))
    basis /= np.linalg.norm(basis, axis=1, keepdims=True)  # unit rank-one bases
    w, beta = rng.exponential(0.3, 12), 0.05
    want, slacks = _scml_reference(w, basis, x, triplets, beta=beta)
    assert 0.05 < np.mean(slacks > 0) < 0.95  # both sides of the hinge
    assert np.min(np.abs(slacks)) > 1e-6  # finite differences stay off the kinks
    want_grad = finite_differences.gradient(
        lambda v: _scml_reference(v, basis, x, triplets, beta=beta)[0], w
    )
    with jax.enable_x64(True):
        xb, trip = jnp.asarray(x @ basis.T), jnp.asarray(triplets)
        got = jax.jit(scml.full_objective)(jnp.asarray(w), xb, trip, beta)
        sub = jax.jit(lambda w: scml.hinge_grad(w, scml.triplet_terms(xb, trip)))(jnp.asarray(w))
        sub = np.asarray(sub)
    assert float(got["loss"]) == pytest.approx(want, rel=1e-12)
    assert float(got["l1"]) == pytest.approx(beta * np.sum(w), rel=1e-12)
    assert float(got["violated_frac"]) == pytest.approx(np.mean(slacks > 0))
    # d/dw of beta ||w||_1 is beta where w > 0
    np.testing.assert_allclose(sub + beta, want_grad, rtol=1e-6, atol=1e-8)
    # ``objective`` reads F from the linear map of the weights alone (float32).
    metric = scml.metric_from_weights(basis.astype(np.float32), w.astype(np.float32))
    obj = scml.objective(metric.projection, x, triplets, beta=beta)
    assert obj["loss"] == pytest.approx(want, rel=1e-4)


@pytest.mark.slow
def test_rda_step_solves_its_subproblem():
    rng = np.random.default_rng(1)
    k, beta, gamma = 6, 0.05, 5e-3
    state = scml.ScmlState(
        jnp.zeros(k),
        jnp.asarray(rng.standard_normal(k)),
        jnp.abs(jnp.asarray(rng.standard_normal(k))),
        jnp.int32(4),
    )
    grad = jnp.asarray(rng.standard_normal(k))
    new = scml.rda_update(state, grad, beta=beta, gamma=gamma)
    t = 5.0
    avg = (4 * np.asarray(state.avg_grad) + np.asarray(grad)) / t
    h = scml.DELTA + np.sqrt(np.asarray(state.ada) ** 2 + np.asarray(grad) ** 2)
    grid = np.linspace(0.0, 2 * float(np.max(new.w)) + 1.0, 200001)
    for i in range(k):  # argmin over w >= 0 of <gbar + beta, w> + gamma / (2 t) H w^2
        phi = (avg[i] + beta) * grid + gamma / (2 * t) * h[i] * grid**2
        assert abs(grid[np.argmin(phi)] - float(new.w[i])) <= grid[1]
    assert int(new.step) == 5 and np.any(np.asarray(new.w) == 0) and np.any(np.asarray(new.w) > 0)


def test_local_lda_spans_sklearns_discriminant_directions():
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(4), 50)
    x = rng.standard_normal((200, 6)) * [3, 1, 1, 0.5, 2, 1] + rng.standard_normal((4, 6))[y] * 2
    ours = scml.local_lda(x, y, 3)
    theirs = LinearDiscriminantAnalysis().fit(x, y).scalings_[:, :3].T
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    assert ours.shape == (3, 6)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.abs(np.sum(ours * theirs, axis=1)), 1.0, atol=1e-3)


def test_local_lda_is_sklearns_when_the_within_class_scatter_is_singular():
    # Two images a person, 30 people in 40-d: S_w has rank 30 < 40, as in a re-id local
    # set. metric-learn's basis is scikit-learn's SVD-solver LDA, whose directions all have
    # within-class variance; a ridge on S_w would instead take S_w's null space first, where
    # every training pair of a person is at distance 0.
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(30), 2)
    centres = 2 * rng.standard_normal((30, 40))
    x = rng.standard_normal((60, 40)) * rng.uniform(0.2, 3.0, 40) + centres[y]
    ours = scml.local_lda(x, y, 29)
    theirs = LinearDiscriminantAnalysis().fit(x, y).scalings_.T
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    assert ours.shape == theirs.shape == (29, 40)
    np.testing.assert_allclose(np.abs(np.sum(ours * theirs, axis=1)), 1.0, atol=1e-6)
    centred = x - (x.reshape(30, 2, 40).mean(axis=1))[y]
    assert np.min(np.linalg.norm(centred @ ours.T, axis=0)) > 1e-3  # no null direction
    assert scml.local_lda(x[::2], y[::2], 5).shape == (0, 40)  # one point a class: none


def _same_weights(a, b):
    """Whether two SCML maps are the same (their number of rows: the active bases)."""
    return a.shape == b.shape and np.allclose(a, b)


@pytest.mark.slow
def test_same_seed_same_result_and_stopping_rule():
    x, y = _small_problem()
    a, ha = learner_checks.assert_same_seed_same_result(
        scml.fit, x, y, _method(**FAST), apart=_same_weights
    )
    assert ha[-1]["stopped"].startswith("max_iter reached: 400 steps")
    # F of the returned metric, recomputed from W alone (beta tr(M) = beta ||w||_1 for unit
    # bases), is the best logged objective.
    triplets = constraints.knn_triplets(x, y, k_same=3, k_other=10)
    obj = scml.objective(a.projection, x, triplets, beta=get_config().method.beta)
    assert obj["loss"] == pytest.approx(min(r["loss"] for r in ha), rel=1e-4)
    # tol = 1: any relative gain of the best objective is <= 100 %, so the rule fires at
    # the first row that has one before it.
    _, hist = scml.fit(x, y, _method(tol=1.0, max_iter=1000, output_iter=200), seed=3)
    assert hist[-1]["step"] == 400 and len(hist) == 2
    assert hist[-1]["stopped"].startswith("converged: best objective improved by")
    assert "at step 400 of 1000" in hist[-1]["stopped"]


@pytest.mark.parametrize(
    "mutate, overrides, match",
    [
        (lambda x, y: (np.where(x > 2, np.inf, x), y), {}, "NaN or inf"),
        (lambda x, y: (x * 1e9, y), {}, "cannot train on features of this scale"),
        (lambda x, y: (x, y), {"k_genuine": 0}, "method.k_genuine must be >= 1"),
        (lambda x, y: (x, y), {"gamma": 0.0}, "method.gamma must be positive"),
        (lambda x, y: (x, y), {"beta": -1.0}, "method.beta must be >= 0"),
        (lambda x, y: (x, y), {"n_basis": 10**6}, r"method.n_basis must be in \[0, 7679\]"),
        (lambda x, y: (x, y), {"output_iter": 20000}, r"output_iter \(20000\) must be <="),
        (lambda x, y: (x, y), {"batch_size": 0}, "method.batch_size must be >= 1"),
    ],
)
def test_bad_input_is_refused(mutate, overrides, match):
    learner_checks.assert_refused(scml.fit, *mutate(*_small_problem()), _method(**overrides), match)
