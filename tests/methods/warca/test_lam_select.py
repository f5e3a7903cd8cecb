"""WARCA's lambda rule (``lam_select``): its rungs, its order, and its held-out fits through
one ``GridFit`` against one fit per lambda."""

import numpy as np
import pytest

from warca_jax.data.synthetic import make_synthetic
from warca_jax.methods import held_out, model_checks, warca
from warca_jax.methods.warca import config as warca_config
from warca_jax.methods.warca import default_config, lam_select
from warca_jax.runs import defaults

GRID = (1e-5, 1e-3, 1e-1, 10.0)


def _cfg(**overrides):
    cfg = default_config("linear")
    cfg.update(dim=6, num_iters=90, log_every=10, batch_size=64, lam_grid=GRID)
    cfg.update(overrides)
    return cfg


def _data():
    return make_synthetic(num_ids=40, images_per_id=4, dim=16, signal_dim=4, seed=0)


def test_rungs_halve_the_lambdas_down_to_one():
    # 4 lambdas by 3: at num_iters / 9 two go on, at num_iters / 3 one is left
    assert lam_select.rungs(2000, 100, 4) == [(200, 2), (700, 1)]
    assert lam_select.rungs(2000, 100, 9) == [(200, 3), (700, 1)]
    assert lam_select.rungs(2000, 100, 2) == [(700, 1)]
    assert lam_select.rungs(2000, 100, 1) == []
    assert lam_select.rungs(2000, 100, 4, factor=1) == [(2000, 1)]  # every lambda to the end
    # rungs on one step are one; a rung is at least one chunk and at most the whole fit
    assert lam_select.rungs(40, 20, 4) == [(20, 1)]
    assert lam_select.rungs(30, 50, 4) == [(30, 1)]


def test_the_rules_order_puts_the_weakest_within_one_standard_error_first():
    rng = np.random.default_rng(0)
    base = rng.uniform(40, 60, size=200)
    noise = [n - n.mean() for n in rng.normal(0, 5, (4, 200))]  # standard error about 0.35
    grid = (1e-5, 1e-4, 1e-3, 1e-2)
    aps = [base + noise[0] - 0.1, base + 0.2, base - 10.0, base - 3.0]
    assert lam_select.ranking(grid, aps, "smallest") == [0, 1, 3, 2]
    assert lam_select.ranking(grid, aps, "largest") == [1, 0, 3, 2]
    assert lam_select.ranking(grid, aps, "argmax") == [1, 0, 3, 2]
    with pytest.raises(ValueError, match="unknown rule 'best'"):
        lam_select.ranking(grid, aps, "best")


def test_halving_stops_the_losers_and_calls_stop_once_each():
    grid = (1e-5, 1e-4, 1e-3, 1e-2)
    means = {200: [50.0, 60.0, 40.0, 30.0], 700: [0.0, 70.0, 10.0, 0.0]}
    asked, stopped = [], []

    def scores(step, live):
        asked.append((step, list(live)))
        return {p: np.full(5, means[step][p]) for p in live}

    chosen, seen = lam_select.halve(grid, [(200, 2), (700, 1)], scores, stop=stopped.append)
    assert chosen == 1 and asked == [(200, [0, 1, 2, 3]), (700, [0, 1])]
    assert sorted(stopped) == [0, 2, 3] and [s for s, _ in seen] == [200, 700]


def _held_out_aps(x, y, c, cfg, seed):
    """Each lambda's held-out APs from a fit of its own on the training part (``fit``)."""
    held = held_out.split(y, cfg.lam_val_fraction, seed=seed)
    out = []
    for lam in GRID:
        metric, _ = warca.fit(
            x[held.train], y[held.train], warca_config.at_lam(cfg, lam), seed=seed,
            cams=c[held.train],
        )  # fmt: skip
        out.append(lam_select.held_out_ap(metric, x[held.val], y[held.val], c[held.val]))
    return out


@pytest.mark.slow
def test_the_rule_through_one_grid_is_the_rule_on_one_fit_per_lambda():
    x, y, c = _data()
    cfg = _cfg()
    # every lambda to the end (factor 1): the choice one fit per lambda gives
    lam, note = lam_select.choose(x, y, c, cfg, seed=2, factor=1)
    aps = _held_out_aps(x, y, c, cfg, seed=2)
    assert lam == GRID[lam_select.choice(GRID, aps)]
    for g, a in zip(GRID, aps, strict=True):
        assert f"{g:g}: {np.mean(a):.2f}" in note  # the same held-out scores, to the digit
    # halving: the losers stopped early change nothing for the points that go on; its
    # choice is the rule through the rungs on each lambda trained to the end and scored
    held = held_out.split(y, cfg.lam_val_fraction, seed=2)
    tr = held.train
    points = warca.GridFit(x[tr], y[tr], cfg, [(g, 1e-2) for g in GRID], seed=2, cams=c[tr])

    def scores(step, live):
        points.advance(step)
        return {
            p: lam_select.held_out_ap(points.metric(p), x[held.val], y[held.val], c[held.val])
            for p in live
        }

    expected, _ = lam_select.halve(GRID, lam_select.rungs(90, 10, len(GRID)), scores)
    halved, note = lam_select.choose(x, y, c, cfg, seed=2)
    assert halved == GRID[expected] and "step 10:" in note and "step 30:" in note
    # a default fit is the fit at the lambda it chose, bit for bit
    chosen, hist = warca.fit(x, y, defaults.overridden(cfg, lam=None), seed=2, cams=c)
    again, _ = warca.fit(x, y, defaults.overridden(cfg, lam=halved), seed=2, cams=c)
    np.testing.assert_array_equal(chosen.projection, again.projection)
    assert hist[0]["lam"] == halved and "held-out identities chose" in hist[0]["lam_choice"]


def test_a_grid_of_one_lambda_is_used_without_held_out_fits(monkeypatch):
    x, y, c = _data()

    def no_grid(*a, **k):
        raise AssertionError("no held-out fit for a grid of one lambda")

    monkeypatch.setattr(lam_select, "GridFit", no_grid)
    lam, note = lam_select.choose(x, y, c, _cfg(lam_grid=(1e-3,)), seed=0)
    assert lam == 1e-3 and "the grid's only value" in note


@pytest.mark.slow
def test_diverged_lambdas_drop_out_and_all_diverged_is_an_error(monkeypatch):
    x, y, c = _data()

    class SecondDiverges(warca.GridFit):
        def advance(self, until, points=None):
            super().advance(until, points)
            if 1 not in self.failed:
                self._fail(1, FloatingPointError("diverged by step 10"))

    monkeypatch.setattr(lam_select, "GridFit", SecondDiverges)
    cfg = _cfg(lam_grid=(1e-3, 1e-5), num_iters=20)
    lam, note = lam_select.choose(x, y, c, cfg, seed=0)
    assert lam == 1e-3 and "1e-05" not in note  # the weakest, had it not diverged
    monkeypatch.setattr(lam_select, "GridFit", warca.GridFit)
    with pytest.raises(model_checks.TrainingDivergedError, match="every lambda of lam_grid"):
        lam_select.choose(x, y, c, _cfg(lam_grid=(1e-3, 1.0), learning_rate=1e4), seed=0)


def test_a_config_at_another_lambda_is_made_one_way():
    """``config.at_lam``: a locked copy at that lambda (and eta, where given), its grid
    emptied (the rule does not run), the config it came from untouched; the protocol's
    cross-validated choice is made by it too."""
    from warca_jax.protocol import plan

    cfg = default_config("small")
    cfg.lock()
    at = warca_config.at_lam(cfg, 1e-3)
    assert (at.lam, tuple(at.lam_grid), at.learning_rate) == (1e-3, (), cfg.learning_rate)
    assert cfg.lam is None and tuple(cfg.lam_grid) == (1e-5, 1e-4, 1e-3, 1e-2)
    assert warca_config.at_lam(cfg, 0, learning_rate=3e-3).learning_rate == 3e-3
    with pytest.raises(AttributeError):
        at.new_field = 1  # locked, as every config a run uses
    assert warca_config.at_lam(cfg, np.float32(0.5)).lam == 0.5  # a float, whatever it came as
    for lam, eta, field in (
        (-1.0, None, "lam"),
        (float("nan"), None, "lam"),
        (1e-3, 0.0, "learning_rate"),
    ):
        with pytest.raises(ValueError, match=rf"^method\.{field} must be"):
            warca_config.at_lam(cfg, lam, learning_rate=eta)  # checked as it is made
    config = _protocol_config()
    chosen = plan.run_method_config(config, "warca", "synthetic", 40, lam=1e-3, learning_rate=2e-2)
    own = plan.run_method_config(config, "warca", "synthetic", 40, learning_rate=2e-2)
    assert own.lam is None and tuple(own.lam_grid)  # without a chosen lambda: the rule's
    assert chosen.to_dict() == warca_config.at_lam(own, 1e-3).to_dict()


def _protocol_config():
    from repo_configs import config_module

    return config_module("protocol").get_config("small")
