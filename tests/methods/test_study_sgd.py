"""The study's SGD optimisers: losses and gradients, mining, schedule, learning, bad input."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from repo_configs import config_module

from warca_jax.maths import penalties, sampling
from warca_jax.methods import study_sgd

NAMES = ("pairwise_sgd", "triplet_sgd")


def _method(name, **overrides):
    cfg = copy.deepcopy(config_module(name).get_config().method)
    cfg.update(**overrides)
    return cfg


@pytest.mark.slow
def test_pairwise_gradient_is_the_studys_outer_product_form():
    # eq. 5: d/dA (y^T A y) = y y^T, so d/dL ||L y||^2 = 2 L y y^T for A = L^T L.
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        proj, x = rng.normal(size=(3, 5)), rng.normal(size=(8, 5))
        labels = jnp.asarray([0, 0, 1, 1, 1, 2, 3, 3])
        g = jax.grad(study_sgd.pairwise_loss)(proj, x, labels, lam=0.3, penalty="aon")
        same = np.asarray(labels)[:, None] == np.asarray(labels)[None, :]
        pos, neg = same & ~np.eye(8, dtype=bool), ~same
        coef = pos / pos.sum() - neg / neg.sum()  # eq. 6, y_ij = +1 / -1, sides averaged
        diff = x[:, None, :] - x[None, :, :]
        outer = np.einsum("ij,ijd,ije->de", coef, diff, diff)
        expected = 2 * proj @ outer + 0.3 * np.asarray(penalties.aon_penalty_grad(proj))
        np.testing.assert_allclose(g, expected, rtol=1e-10)


@pytest.mark.slow
def test_triplet_gradient_is_the_studys_outer_product_form():
    with jax.enable_x64(True):
        rng = np.random.default_rng(1)
        proj = 0.3 * rng.normal(size=(4, 6))
        xa, xp, xn = (rng.normal(size=(10, 6)) for _ in range(3))
        w = np.ones(10)
        w[3] = 0.0
        g = jax.grad(study_sgd.triplet_loss)(
            proj, xa, xp, xn, w, margin=1.0, lam=0.2, penalty="frobenius"
        )
        u, v = xa - xp, xa - xn
        hinge = 1.0 + np.sum((u @ proj.T) ** 2, 1) - np.sum((v @ proj.T) ** 2, 1)
        assert np.all(np.abs(hinge) > 1e-3)  # away from the kink
        coef = w * (hinge > 0) / w.sum()
        assert 0 < np.count_nonzero(coef) < 9  # both sides of the hinge are exercised
        outer = np.einsum("t,td,te->de", coef, u, u) - np.einsum("t,td,te->de", coef, v, v)
        np.testing.assert_allclose(g, 2 * proj @ outer + 0.2 * proj, rtol=1e-10)


@pytest.mark.slow
def test_mined_triplets_are_the_hardest_and_valid_random_ones():
    rng = np.random.default_rng(2)
    y = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4])  # identity 3 has one image
    emb = rng.normal(size=(12, 3)).astype(np.float32)
    a, p, n, valid = (
        np.asarray(v)
        for v in study_sgd.mine_triplets(
            jax.random.PRNGKey(0), emb, sampling.make_pair_table(y), num_random=3, block=5
        )
    )
    assert a.shape == p.shape == n.shape == valid.shape == (48,)
    d = ((emb[:, None] - emb[None]) ** 2).sum(-1)
    for i in range(12):
        same = (y == y[i]) & (np.arange(12) != i)
        assert valid[i] == (same.sum() > 0)
        if same.any():
            assert p[i] == np.flatnonzero(same)[np.argmax(d[i, same])]
        assert n[i] == np.flatnonzero(y != y[i])[np.argmin(d[i, y != y[i]])]
    real = valid > 0
    assert np.all(y[a] == y[p]) and np.all(a[real] != p[real]) and np.all(y[a] != y[n])
    assert len(set(zip(a[12:], n[12:], strict=True))) > 12  # random negatives vary


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_beats_euclidean_and_follows_the_schedule(reid, name):
    metric, hist = study_sgd.fit(reid.x_train, reid.y_train, _method(name), seed=0)
    # Measured (seed 0): pairwise 73.0 / 72.6, triplet 66.5 / 72.9 rank-1 / mAP;
    # Euclidean 23.5 / 21.9.
    reid.assert_beats_euclidean(metric, rank1=30, mAP=35)
    assert metric.kind == "linear" and metric.projection.shape == (64, 64)
    assert [r["epoch"] for r in hist] == list(range(10, 101, 10))
    assert set(hist[0]) >= {"epoch", "step", "loss", "val_cost", "learning_rate", "best_epoch"}
    for prev, row, nxt in zip(hist, hist[1:], hist[2:], strict=False):
        rose = row["val_cost"] > prev["val_cost"]
        assert nxt["learning_rate"] == row["learning_rate"] * (0.5 if rose else 1.0)
    assert hist[-1]["learning_rate"] < hist[0]["learning_rate"]  # the cost rose at least once
    costs = {r["epoch"]: r["val_cost"] for r in hist}
    assert costs[hist[-1]["best_epoch"]] == min(costs.values())


@pytest.mark.slow
def test_returns_the_best_validation_parameters(reid):
    long, hist = study_sgd.fit(reid.x_train, reid.y_train, _method("triplet_sgd"), seed=0)
    best = hist[-1]["best_epoch"]
    assert 0 < best < 100  # the model overfits, as the study reports: the best is not the last
    short, _ = study_sgd.fit(
        reid.x_train, reid.y_train, _method("triplet_sgd", num_epochs=best), seed=0
    )
    np.testing.assert_array_equal(long.projection, short.projection)


@pytest.mark.parametrize("name", NAMES)
def test_no_validation_identities_checks_the_training_cost(name):
    # num_val_ids 0 (data too small to spare identities, e.g. 3 people): every identity
    # trains, and the schedule's checks use the training set's cost, which then falls
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 6)
    x = (rng.normal(size=(18, 5)) + 2.0 * rng.normal(size=(3, 5))[y]).astype(np.float32)
    metric, hist = study_sgd.fit(
        x, y, _method(name, num_epochs=20, val_every=5, num_val_ids=0, learning_rate=1e-2)
    )
    assert hist[-1]["val_cost"] < hist[0]["val_cost"]
    assert metric.projection.shape == (5, 5)
    with pytest.raises(ValueError, match="num_val_ids must leave 2 identities"):
        study_sgd.fit(x, y, _method(name, num_val_ids=2))


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_result(reid, name):
    cfg = _method(name, num_epochs=20)
    a, ha = study_sgd.fit(reid.x_train, reid.y_train, cfg, seed=3)
    b, hb = study_sgd.fit(reid.x_train, reid.y_train, cfg, seed=3)
    c, _ = study_sgd.fit(reid.x_train, reid.y_train, cfg, seed=4)
    np.testing.assert_array_equal(a.projection, b.projection)
    assert [r["val_cost"] for r in ha] == [r["val_cost"] for r in hb]
    assert not np.allclose(a.projection, c.projection)


@pytest.mark.slow
def test_divergence_is_an_error_not_a_model(reid):
    cfg = _method("triplet_sgd", num_epochs=10, learning_rate=1e3)
    with pytest.raises(FloatingPointError, match="diverged|non-finite"):
        study_sgd.fit(reid.x_train, reid.y_train, cfg)


@pytest.mark.parametrize(
    "name, overrides, mutate, match",
    [
        ("pairwise_sgd", {"num_val_ids": 99}, None, "num_val_ids .* 99 out of 100"),
        ("triplet_sgd", {"num_val_ids": 1}, None, "num_val_ids must be 0 .* or at least 2"),
        ("triplet_sgd", {"num_val_ids": -1}, None, "num_val_ids must be >= 0"),
        ("pairwise_sgd", {"lam": 0.0}, None, "unbounded below"),
        ("pairwise_sgd", {"penalty": "none"}, None, "unbounded below"),
        ("triplet_sgd", {"dim": 65}, None, "output dim"),
        ("triplet_sgd", {"init": "zeros"}, None, "unknown init"),
        ("triplet_sgd", {"penalty": "l1"}, None, "unknown penalty"),
        ("triplet_sgd", {"batch_size": 1}, None, "batch_size must be >= 2"),
        ("triplet_sgd", {"margin": 0.0}, None, "margin must be positive"),
        ("pairwise_sgd", {"lr_decay": 2.0}, None, "lr_decay"),
        ("pairwise_sgd", {}, lambda x, y: (np.where(x > 3, np.inf, x), y), "NaN or inf"),
        (
            "triplet_sgd",
            {},
            lambda x, y: (x, y[:-1]),
            "labels has .* entries but the features have",
        ),
    ],
)
def test_bad_input_is_refused_before_training(reid, name, overrides, mutate, match):
    x, y = reid.x_train, reid.y_train
    if mutate is not None:
        x, y = mutate(x, y)
    with pytest.raises(ValueError, match=match):
        study_sgd.validate(x, y, _method(name, **overrides))
    with pytest.raises(ValueError, match=match):
        study_sgd.fit(x, y, _method(name, **overrides))
