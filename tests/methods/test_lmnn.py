"""LMNN: it learns, its loss and gradient are the paper's, its search is exact, bad input."""

import functools

import finite_differences
import jax
import jax.numpy as jnp
import learner_checks
import numpy as np
import pytest
from conftest import small_problem
from repo_configs import method_section

from warca_jax.methods import constraints, held_out, learner_loop, lmnn
from warca_jax.metric import Metric


def _method(**overrides):
    # The solver's tests train to num_iters / tol, without held-out identities (their
    # own tests below set stop_val_fraction).
    return method_section("lmnn", **{"stop_val_fraction": 0.0, **overrides})


@pytest.mark.slow
def test_lmnn_beats_euclidean(reid):
    metric, hist = lmnn.fit(reid.x_train, reid.y_train, _method())
    # Measured: rank-1 74.5, mAP 75.8 against Euclidean 23.5 / 21.9.
    reid.assert_beats_euclidean(metric, rank1=35, mAP=35)
    assert hist[-1]["loss"] < hist[0]["loss"]
    assert metric.kind == "linear" and metric.projection.shape == (64, 64)


@pytest.mark.slow
def test_closed_form_gradient_equals_autodiff():
    x, y = small_problem()
    with jax.enable_x64(True):
        x = jnp.asarray(x, jnp.float64)
        labels = jnp.asarray(y, jnp.int32)
        targets, tv = constraints.nearest_by_label(x, labels, k=3, same=True, block_size=16)
        imps, iv = constraints.nearest_by_label(x, labels, k=10, same=False, block_size=16)
        lmap = jnp.asarray(np.random.default_rng(1).standard_normal((5, 12)) * 0.3)
        kw = dict(mu=0.7, margin=1.0)
        loss, _, push, active, _ = jax.jit(functools.partial(lmnn.lmnn_terms, **kw))(
            lmap, x, targets, tv, imps, iv
        )
        assert 0 < int(active.sum()) < active.size and float(push) > 0  # both sides of hinges
        want = jax.jit(jax.grad(functools.partial(lmnn.lmnn_loss, **kw)))(
            lmap, x, targets, tv, imps, iv
        )
        got, got_loss = jax.jit(functools.partial(lmnn.lmnn_grad, **kw))(
            lmap, x, targets, tv, imps, iv
        )
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(got_loss, loss, rtol=1e-12)


def _target_neighbours(x, y, k):
    """Each point's k nearest same-label points in the input space (all of them when its
    class has fewer than k + 1 images), by a sort per point."""
    out = []
    for i in range(len(y)):
        by_distance = np.argsort(np.sum((x - x[i]) ** 2, axis=1), kind="stable")
        out.append([j for j in by_distance if j != i and y[j] == y[i]][:k])
    return out


def _lmnn_reference(lmap, x, y, targets, *, mu, margin):
    """(pull, push, the triplets' hinge arguments) of eps(L) (Weinberger & Saul 2009, eq.
    13, as the module writes it): a loop over every target pair (i, j) and every
    differently labelled l, in float64 NumPy."""
    n = len(y)
    pull, push, slacks = 0.0, 0.0, []
    for i in range(n):
        for j in targets[i]:
            d_ij = np.sum((lmap @ (x[i] - x[j])) ** 2)
            pull += d_ij / n
            for o in range(n):  # the paper's l
                if y[o] != y[i]:
                    slack = margin + d_ij - np.sum((lmap @ (x[i] - x[o])) ** 2)
                    slacks.append(slack)
                    push += max(slack, 0.0) / n
    return pull, push, np.asarray(slacks)


@pytest.mark.slow
def test_loss_and_gradient_equal_a_loop_over_the_papers_triplets():
    rng = np.random.default_rng(0)
    sizes = [5, 4, 4, 4, 3, 3, 2, 1]  # a class with k = 1 target, a singleton with none
    cls = np.repeat(np.arange(len(sizes)), sizes)
    y = cls * 7 + 3  # labels need not be 0..C-1
    x = rng.standard_normal((len(y), 5)) + 0.8 * rng.standard_normal((len(sizes), 5))[cls]
    lmap = rng.standard_normal((3, 5)) * 0.5
    k, mu, margin = 3, 0.7, 1.0
    targets = _target_neighbours(x, y, k)
    pull, push, slacks = _lmnn_reference(lmap, x, y, targets, mu=mu, margin=margin)
    assert 0.1 < np.mean(slacks > 0) < 0.9  # both sides of the hinges
    assert np.min(np.abs(slacks)) > 1e-3  # finite differences stay off the kinks

    def loss_of(flat):
        p, q, _ = _lmnn_reference(flat.reshape(lmap.shape), x, y, targets, mu=mu, margin=margin)
        return p + mu * q

    want_grad = finite_differences.gradient(loss_of, lmap.ravel()).reshape(lmap.shape)
    with jax.enable_x64(True):
        xj, lj = jnp.asarray(x), jnp.asarray(y, jnp.int32)
        tgt, tv = constraints.nearest_by_label(xj, lj, k=k, same=True, block_size=8)
        imp, iv = constraints.nearest_by_label(xj, lj, k=len(y) - 1, same=False, block_size=8)
        args, kw = (jnp.asarray(lmap), xj, tgt, tv, imp, iv), dict(mu=mu, margin=margin)
        loss, got_pull, got_push, active, _ = jax.jit(functools.partial(lmnn.lmnn_terms, **kw))(
            *args
        )
        got_grad, grad_loss = jax.jit(functools.partial(lmnn.lmnn_grad, **kw))(*args)
        autodiff = jax.jit(jax.grad(functools.partial(lmnn.lmnn_loss, **kw)))(*args)
    np.testing.assert_allclose(float(got_pull), pull, rtol=1e-12)
    np.testing.assert_allclose(float(got_push), push, rtol=1e-12)
    np.testing.assert_allclose(float(loss), pull + mu * push, rtol=1e-12)
    assert int(active.sum()) == int(np.sum(slacks > 0))
    np.testing.assert_allclose(float(grad_loss), pull + mu * push, rtol=1e-12)
    scale = np.abs(want_grad).max()
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-6, atol=1e-7 * scale)
    np.testing.assert_allclose(autodiff, want_grad, rtol=1e-6, atol=1e-7 * scale)
    # ``objective``: the same loss from the labels alone (its own target and impostor
    # search, float32).
    obj = lmnn.objective(lmap, x, y, k=k, mu=mu, margin=margin, block_size=8)
    assert obj["pull"] == pytest.approx(pull, rel=1e-5)
    assert obj["push"] == pytest.approx(push, rel=1e-5)
    assert obj["loss"] == pytest.approx(pull + mu * push, rel=1e-5)
    assert obj["active_triplets"] == int(np.sum(slacks > 0))


@pytest.mark.slow
@pytest.mark.parametrize("same", [True, False])
def test_blocked_search_equals_brute_force(same):
    rng = np.random.default_rng(0)
    z = rng.standard_normal((37, 5)).astype(np.float32)
    y = np.concatenate([np.repeat(np.arange(9), 4), [9]])  # one singleton class
    idx, valid = constraints.nearest_by_label(
        jnp.asarray(z), jnp.asarray(y), k=3, same=same, block_size=8
    )
    d = ((z[:, None] - z[None]) ** 2).sum(-1)
    for i in range(len(z)):
        ok = (y == y[i]) & (np.arange(len(z)) != i) if same else y != y[i]
        want = np.argsort(np.where(ok, d[i], np.inf), kind="stable")[: min(3, ok.sum())]
        np.testing.assert_array_equal(np.asarray(idx[i])[: len(want)], want)
        assert int(valid[i].sum()) == len(want)  # the singleton has no target neighbour


@pytest.mark.slow
def test_small_classes_use_all_their_images():
    x, y = small_problem()
    y = y.copy()
    y[y == 0] = np.array([0, 0, 100, 101])  # class 0 keeps two images; two singletons
    metric, hist = lmnn.fit(x, y, _method(num_iters=10, refresh_every=10))
    assert metric.is_finite() and np.isfinite(hist[-1]["loss"])


@pytest.mark.slow
def test_same_seed_same_result():
    x, y = small_problem()
    metric, _ = learner_checks.assert_same_seed_same_result(
        lmnn.fit, x, y, _method(num_iters=20, refresh_every=10, dim=6)
    )
    assert metric.projection.shape == (6, 12)


@pytest.mark.parametrize(
    "mutate, overrides, match",
    [
        (lambda x, y: (np.where(x > 2, np.inf, x), y), {}, "NaN or inf"),
        (lambda x, y: (x, y[:-1]), {}, "labels has .* entries but the features have"),
        (lambda x, y: (x, y), {"k": 4}, "needs a class with at least 5 images"),
        (lambda x, y: (x, y), {"k": 0}, "k .target neighbours. must be >= 1"),
        (lambda x, y: (x, y), {"dim": 13}, "output dim"),
        (lambda x, y: (x, y), {"num_impostors": 100}, "num_impostors"),
        (lambda x, y: (x, y), {"learning_rate": 0.0}, "learning_rate"),
        (lambda x, y: (x, y), {"refresh_every": 0}, "refresh_every"),
    ],
)
def test_bad_input_is_refused(mutate, overrides, match):
    learner_checks.assert_refused(lmnn.fit, *mutate(*small_problem()), _method(**overrides), match)


@pytest.mark.slow
def test_divergence_is_an_error():
    cfg = _method(num_iters=10, refresh_every=10, learning_rate=1e30)
    learner_checks.assert_diverges(lmnn.fit, *small_problem(), cfg, "diverged|non-finite")


def _old_default(**overrides):
    """The defaults before the stopping rule: 300 Adam steps at a constant 1e-3."""
    return _method(num_iters=300, learning_rate=1e-3, schedule="constant", tol=0.0, **overrides)


@pytest.mark.slow
def test_stops_early_when_converged_and_says_why():
    cfg = _method(num_iters=5000, schedule="constant", tol=1e-3)
    hist = learner_checks.fit_to_the_stop(lmnn.fit, *small_problem(), cfg)
    last = hist[-1]
    # Measured: converged at step 1950 of 5000.
    assert last["step"] < 5000
    assert last["stopped"].startswith("converged: relative change")
    assert f"at step {last['step']} of 5000" in last["stopped"]
    assert last["rel_change"] <= 1e-3
    assert all(r["rel_change"] > 1e-3 for r in hist[:-1] if "rel_change" in r)


@pytest.mark.slow
def test_num_iters_reached_says_so():
    x, y = small_problem()
    _, hist = lmnn.fit(x, y, _method(num_iters=150, refresh_every=10, tol=1e-4))
    assert hist[-1]["step"] == 150
    assert hist[-1]["stopped"].startswith("num_iters reached: 150 steps, relative change")
    _, hist = lmnn.fit(x, y, _method(num_iters=30, tol=0.0))  # too few rows for the rule
    assert hist[-1]["stopped"] == "num_iters reached: 30 steps (tol 0: no early stop)"


@pytest.mark.slow
def test_default_beats_old_default_objective():
    x, y = small_problem()
    new, hist = lmnn.fit(x, y, _method())
    old, _ = lmnn.fit(x, y, _old_default())
    kw = dict(k=3, mu=1.0, margin=1.0)
    new_obj, old_obj = (
        lmnn.objective(new.projection, x, y, **kw),
        lmnn.objective(old.projection, x, y, **kw),
    )
    # Measured: 9.6 (converged by step 2870) against 283.
    assert new_obj["loss"] < 0.1 * old_obj["loss"]
    assert hist[-1]["stopped"].startswith("converged")


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"tol": -1.0}, "tol"),
        ({"tol_window": 0}, "tol_window"),
        ({"schedule": "linear"}, "schedule"),
    ],
)
def test_bad_stopping_config_is_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        lmnn.fit(*small_problem(), _method(**overrides))


def test_held_out_split_is_seeded_and_says_when_it_cannot_hold_out():
    y = np.repeat(np.arange(10), 3)
    a, b = held_out.split(y, 0.2, seed=4), held_out.split(y, 0.2, seed=4)
    assert a.num_ids == 2 and np.array_equal(a.val, b.val) and np.array_equal(a.train, b.train)
    assert len(np.unique(y[a.val])) == 2 and not set(y[a.val]) & set(y[a.train])
    assert sorted(np.concatenate([a.train, a.val])) == list(range(30))
    why = held_out.split(np.repeat(np.arange(4), 3), 0.2, seed=0)
    assert isinstance(why, str) and "holds 1 out: 2 or more are needed" in why


def test_best_keeps_the_earliest_of_ties_and_counts_the_misses():
    best = held_out.Best()
    offers = [best.offer(step, v) for step, v in [(1, 0.5), (2, 0.7), (3, 0.7), (4, float("nan"))]]
    assert offers == [True, True, False, False]
    assert (best.step, best.value, best.misses) == (2, 0.7, 2)


def test_watch_keeps_the_earliest_best_and_stops_after_patience(monkeypatch):
    watch = held_out.Watch(np.zeros((4, 2)), np.array([0, 0, 1, 1]), every=10, patience=2)
    scores = iter([50.0, 70.0, 70.0, 60.0])
    monkeypatch.setattr(held_out, "retrieval_map", lambda *_: next(scores))
    assert [watch.score(step, None) for step in (10, 20, 30, 40)] == [False, False, False, True]
    assert (watch.best_step, watch.best_map) == (20, 70.0)
    assert watch.due(30) and not watch.due(35)


@pytest.mark.slow
def test_held_out_retrieval_map_excludes_the_query_itself():
    x = np.array([[0.0], [0.1], [5.0], [5.1]], np.float32)
    metric = Metric(kind="linear", input_dim=1, projection=np.eye(1, dtype=np.float32))
    assert held_out.retrieval_map(metric, x, np.array([0, 0, 1, 1])) == pytest.approx(100.0)
    assert held_out.retrieval_map(metric, x, np.array([0, 1, 0, 1])) < 100.0


@pytest.mark.slow
def test_held_out_identities_choose_the_step_and_the_final_fit_stops_there():
    x, y = small_problem()
    cfg = _method(stop_val_fraction=0.25, val_every=20, val_patience=3, num_iters=200, tol=0.0)
    metric, hist = lmnn.fit(x, y, cfg, seed=1)
    chosen = int(hist[-1]["held_out"].split("chose step ")[1].split(" ")[0])
    assert hist[-1]["step"] == chosen and hist[-1]["stopped"].startswith("held-out step reached")
    # the last fit is the plain fit on every identity, on the same schedule, cut at that step
    cut = lmnn._train(x, y, cfg, learner_loop.Loop.start("LMNN", x), stop_at=chosen)[0]
    np.testing.assert_array_equal(metric.projection, cut.projection)
    again, _ = lmnn.fit(x, y, cfg, seed=1)
    np.testing.assert_array_equal(metric.projection, again.projection)


@pytest.mark.slow
def test_held_out_fallback_is_said_in_the_history():
    x, y = small_problem()
    keep = y < 4  # 4 identities: 0.2 of them holds fewer than 2 out
    _, hist = lmnn.fit(
        x[keep], y[keep], _method(stop_val_fraction=0.2, num_iters=20, num_impostors=8)
    )
    assert hist[-1]["held_out"].startswith("no held-out identities: stop_val_fraction 0.2")


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"stop_val_fraction": 1.0}, "stop_val_fraction"),
        ({"val_every": 15}, "multiple of refresh_every"),
    ],
)
def test_bad_held_out_config_is_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        lmnn.fit(*small_problem(), _method(**overrides))
