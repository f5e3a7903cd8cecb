"""The batched cross-validation grid: WARCA's points trained together (``warca.problem.GridFit``),
one protocol job per grid (``protocol.grid_job``) and successive halving."""

import glob
import json
import os

import numpy as np
import pytest
from repo_configs import config_module

from warca_jax import protocol
from warca_jax.data.synthetic import make_synthetic
from warca_jax.methods import model_checks
from warca_jax.methods.warca import default_config, fitting, problem
from warca_jax.protocol import cross_validation, successive_halving

POINTS = [(1e-4, 1e-2), (1e-2, 1e-1), (1.0, 100.0)]  # the last may diverge


def _cfg(variant):
    cfg = default_config(variant)
    cfg.unlock()
    cfg.update(num_iters=300, log_every=100, dim=8, batch_size=64)
    return cfg


def _data(variant):
    x, y, c = make_synthetic(num_ids=60, seed=0)
    return (np.abs(x) if variant == "chi2" else x), y, c


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["linear", "chi2"])
def test_a_grid_point_is_its_own_fit_bit_for_bit(variant):
    x, y, c = _data(variant)
    cfg = _cfg(variant)
    g = problem.GridFit(x, y, cfg, POINTS, seed=3, cams=c)
    g.advance(100)  # stopped at a rung and resumed: the same chunks as one fit
    g.advance(300, [0, 1, 2])
    for p, (lam, eta) in enumerate(POINTS):
        one = cfg.copy_and_resolve_references()
        one.lam, one.learning_rate = lam, eta
        try:
            metric, _ = fitting.fit(x, y, one, seed=3, cams=c)
        except model_checks.TrainingDivergedError as e:
            assert g.failed[p] == f"TrainingDivergedError: {e}"  # the fit's own failure
            continue
        assert p not in g.failed
        np.testing.assert_array_equal(g.metric(p).projection, metric.projection)
        assert g.steps[p] == 300


def test_a_point_is_advanced_only_to_chunk_boundaries():
    x, y, c = _data("linear")
    g = problem.GridFit(x, y, _cfg("linear"), POINTS[:1], seed=0, cams=c)
    with pytest.raises(ValueError, match="multiple of log_every"):
        g.advance(150)


def test_rungs_keep_three_points_for_the_end_or_two_in_a_small_grid():
    assert successive_halving.rungs(2000, 100, 36, 3) == [200, 700, 2000]  # 36 -> 12 -> 4
    assert successive_halving.rungs(2000, 100, 9, 3) == [700, 2000]  # 9 -> 3
    assert successive_halving.rungs(2000, 100, 4, 3) == [700, 2000]  # 4 -> 2
    assert successive_halving.rungs(2000, 100, 6, 3) == [700, 2000]  # 6 -> 2
    assert successive_halving.rungs(2000, 100, 3, 3) == [2000]  # too few to halve
    assert successive_halving.rungs(2000, 100, 2, 3) == [2000]
    assert successive_halving.rungs(2000, 100, 36, 1) == [2000]  # halving off
    assert successive_halving.rungs(100, 100, 36, 3) == [100]  # one chunk: nowhere to stop
    means = {0: 50.0, 1: 70.0, 2: 70.0, 3: 10.0, 4: 60.0}
    assert successive_halving.survivors(means, 3) == [1, 2]  # the best ceil(5 / 3), ties by order


def _small(**changes):
    c = config_module("protocol").get_config("small")
    c.unlock()
    c.methods = ("warca:linear",)
    c.cv.methods = ("warca:linear",)
    c.cv.lams = (1e-4, 1e-2, 1.0)
    c.cv.etas = (1e-2, 1e-1, 1.0)
    c.cv.num_splits = 2
    c.cv.num_iters = 400
    c.overrides = {"warca:linear": {"log_every": 50}}
    c.data.num_splits = 2
    c.data.synthetic.num_ids = 40
    for key, value in changes.items():
        c.cv[key] = value
    c.lock()
    return c


def _cv_results(workdir):
    out = {}
    for path in glob.glob(os.path.join(workdir, "cv", "*", "*", "split_*", "*", "*.json")):
        if path.endswith("config.json"):
            continue
        with open(path) as f:
            res = json.load(f)
        key = os.path.relpath(path, workdir)
        out[key] = {k: res.get(k) for k in ("rank1", "mAP", "halted_at", "error")}
    return out


def _selected(workdir):
    with open(os.path.join(workdir, "cv", "synthetic", "warca-linear", "selected.json")) as f:
        s = json.load(f)
    return s["lam"], s["learning_rate"], s["mean"]


@pytest.fixture(scope="module")
def full_grid(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("full"))
    protocol.run_protocol(_small(halving=1), workdir, stage="cv")
    return workdir


@pytest.mark.slow
def test_one_grid_job_gives_every_points_own_job_results(full_grid, tmp_path, monkeypatch):
    monkeypatch.setattr(cross_validation, "trains_grids", lambda label: False)  # a job per point
    workdir = str(tmp_path)
    protocol.run_protocol(_small(halving=1), workdir, stage="cv")
    assert not glob.glob(os.path.join(workdir, "cv", "*", "*", "timing.json"))
    assert _cv_results(workdir) == _cv_results(full_grid)
    assert _selected(workdir) == _selected(full_grid)


@pytest.mark.slow
def test_halving_chooses_the_best_finalist_with_the_full_grids_scores(full_grid, tmp_path):
    workdir = str(tmp_path)
    protocol.run_protocol(_small(halving=3), workdir, stage="cv")
    full, halved = _cv_results(full_grid), _cv_results(workdir)
    assert full.keys() == halved.keys()
    finished = [k for k, v in halved.items() if v["rank1"] is not None and not v["halted_at"]]
    stopped = [k for k, v in halved.items() if v["halted_at"]]
    assert len(finished) == 3 * 2 and len(stopped) > 0  # 9 points -> 3, on 2 splits
    assert all(halved[k] == full[k] for k in finished)  # trained to the end: the same
    # the choice is the full grid's best among the finalists (halving may stop the full
    # grid's winner early on a flat grid: an option, not the default)
    means = {}
    for k in finished:
        means.setdefault(os.path.dirname(k).split(os.sep)[-1], []).append(full[k]["mAP"])
    lam, eta, mean = _selected(workdir)
    assert mean == pytest.approx(max(float(np.mean(v)) for v in means.values()), abs=1e-4)
    with open(os.path.join(workdir, "cv", "synthetic", "warca-linear", "timing.json")) as f:
        timing = json.load(f)
    assert [r["points"] for r in timing["rungs"]] == [9, 3]


@pytest.mark.slow
def test_a_grid_is_redone_when_a_point_is_missing_or_halving_changes(full_grid, tmp_path):
    workdir = str(tmp_path)
    protocol.run_protocol(_small(halving=3), workdir, stage="cv")
    before = _cv_results(workdir)
    some = next(k for k, v in before.items() if v["rank1"] is not None)
    os.remove(os.path.join(workdir, some))
    protocol.run_protocol(_small(halving=3), workdir, stage="cv")
    assert _cv_results(workdir) == before  # same seed, same grid: the same files
    protocol.run_protocol(_small(halving=1), workdir, stage="cv")  # halted points redone
    assert _cv_results(workdir) == _cv_results(full_grid)


@pytest.mark.slow
def test_both_cv_paths_train_on_the_splits_normalised_features(full_grid, tmp_path, monkeypatch):
    # data.normalize: a grid job and a job per point see the same normalised features of
    # each CV split (feature_norm.for_split), and they are not the raw features' scores
    c = _small(halving=1)
    c.unlock()
    c.data.normalize = "center_l2"
    c.lock()
    grid_dir, point_dir = str(tmp_path / "grid"), str(tmp_path / "points")
    protocol.run_protocol(c, grid_dir, stage="cv")
    monkeypatch.setattr(cross_validation, "trains_grids", lambda label: False)
    protocol.run_protocol(c, point_dir, stage="cv")
    assert _cv_results(grid_dir) == _cv_results(point_dir)
    assert _cv_results(grid_dir).keys() == _cv_results(full_grid).keys()
    assert _cv_results(grid_dir) != _cv_results(full_grid)


def test_a_bad_halving_is_refused(tmp_path):
    with pytest.raises(ValueError, match="cv.halving"):
        protocol.run_protocol(_small(halving=0), str(tmp_path))


@pytest.mark.slow
def test_a_diverged_grid_point_is_recorded_and_never_selected(tmp_path, monkeypatch):
    advance = problem.GridFit.advance

    def diverging(self, until, points=None):  # every point at eta 0.1 diverges at once
        for p in self.live(points):
            if self.cfgs[p].learning_rate == 0.1:
                self._fail(p, model_checks.TrainingDivergedError("diverged by step 50"))
        advance(self, until, points)

    monkeypatch.setattr(problem.GridFit, "advance", diverging)
    workdir = str(tmp_path)
    protocol.run_protocol(_small(halving=3), workdir, stage="cv")
    results = _cv_results(workdir)
    failed = sorted(k for k, v in results.items() if v["error"])
    assert len(failed) == 3 * 2 and all("eta_0.1" in k for k in failed)
    assert all("TrainingDivergedError: diverged by step 50" in results[k]["error"] for k in failed)
    with open(os.path.join(workdir, "cv", "synthetic", "warca-linear", "selected.json")) as f:
        sel = json.load(f)
    assert sel["learning_rate"] != 0.1
    assert all(r["mean"] is None for r in sel["grid"] if r["learning_rate"] == 0.1)
