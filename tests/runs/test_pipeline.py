"""train_and_evaluate and the absl entry point, on shrunk configs in temp dirs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import fixture_trees
import matplotlib.image as mpimg
import numpy as np
import pytest
from conftest import assert_refused_before_any_work, forbid
from repo_configs import config_module

from warca_jax import datasets, evaluation, methods
from warca_jax.data import identity_splits, synthetic
from warca_jax.metric import Metric
from warca_jax.plots import cmc, run_plots
from warca_jax.runs import config_checks, pipeline, run_plan

get_config = config_module("warca").get_config

ROOT = Path(__file__).resolve().parents[2]


def _small(**data_overrides):
    c = get_config("small")
    c.unlock()
    c.method.num_iters = 60
    c.method.log_every = 20
    c.data.update(data_overrides)
    return c


@pytest.mark.slow
def test_entry_point_writes_every_output(tmp_path):
    workdir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.main",
            "--config=configs/warca.py:small",
            f"--workdir={workdir}",
            "--config.method.lam=0.001",
            "--config.method.num_iters=40",
            "--config.method.log_every=20",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # JAX's backend discovery is not what a user reads first (cli.QUIET_LOGGERS)
    assert "Unable to initialize backend" not in proc.stderr, proc.stderr[:2000]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    # Even 40 steps learn: above Euclidean distance on the same splits (about 24 rank-1).
    base = json.loads((workdir / "results.json").read_text())["baseline_euclidean"]["mean"]
    assert summary["mean"]["rank1"] > base["rank1"] + 10
    assert summary["mean"]["mAP"] > base["mAP"] + 10
    assert json.loads((workdir / "config.json").read_text())["method"]["lam"] == 0.001
    lines = [json.loads(ln) for ln in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [(r["split"], r["step"]) for r in lines] == [(0, 20), (0, 40), (1, 20), (1, 40)]
    assert {"loss", "mean_rank", "penalty", "seconds"} <= set(lines[0])
    results = json.loads((workdir / "results.json").read_text())
    assert results["num_splits"] == 2 and len(results["splits"]) == 2
    keys = "rank1 rank5 rank10 rank20 mAP mINP AUC train_seconds eval_seconds num_skipped"
    for key in keys.split():
        assert key in results["mean"] and key in results["std"] and key in results["splits"][0]
    assert png_size(workdir / "cmc.png") == CMC_SIZE
    assert png_size(workdir / "curves.png") == _curves_size(2)
    assert f"results in {workdir}: results.json, cmc.png, curves.png" in proc.stderr
    metric = Metric.load(workdir / "model_split0.npz")
    assert metric.kind == "linear" and metric.output_dim == 16


@pytest.mark.slow
def test_unknown_config_field_fails_loudly(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.main",
            "--config=configs/warca.py:small",
            f"--workdir={tmp_path}",
            "--config.method.lerning_rate=0.1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0 and "lerning_rate" in proc.stderr


def _nn_run(workdir, *overrides):
    return subprocess.run(
        [sys.executable, "-m", "experiments.main", "--config=configs/nn.py:small",
         f"--workdir={workdir}", *overrides],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
def test_a_workdir_is_resumed_across_presentation_fields_and_refused_naming_other_fields(
    tmp_path,
):
    first = _nn_run(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    again = _nn_run(tmp_path, "--config.progress=True", "--config.eval.plot_max_rank=10")
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.splitlines()[-1] == first.stdout.splitlines()[-1]
    assert json.loads((tmp_path / "config.json").read_text())["progress"] is False
    other = _nn_run(tmp_path, "--config.method.distance=cosine", "--config.progress=True")
    assert other.returncode == 1 and "Traceback" not in other.stderr
    errors = [ln for ln in other.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [
        f"error: {tmp_path} holds a run with a different config ({tmp_path}/config.json): "
        "method.distance 'euclidean' -> 'cosine'; use a new workdir or remove it to start over"
    ], other.stderr[-3000:]


@pytest.mark.slow
def test_restart_reuses_finished_splits(tmp_path, monkeypatch):
    config = _small()
    first = pipeline.train_and_evaluate(config, str(tmp_path))
    os.remove(tmp_path / "split_1.json")  # as if interrupted during split 1
    calls = []
    real = methods.get("warca")

    def counting_fit(*args, **kwargs):
        calls.append(1)
        return real.fit(*args, **kwargs)

    monkeypatch.setitem(methods.registry(), "warca", real._replace(fit=counting_fit))
    second = pipeline.train_and_evaluate(config, str(tmp_path))
    assert len(calls) == 1  # only split 1 was trained again
    assert second["splits"][0] == first["splits"][0]
    assert second["splits"][1]["rank1"] == pytest.approx(first["splits"][1]["rank1"])
    lines = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert sum(r["split"] == 1 for r in lines) == 3  # no duplicated lines for the redone split


@pytest.mark.slow
def test_other_config_on_same_workdir_is_refused(tmp_path):
    pipeline.train_and_evaluate(_small(), str(tmp_path))
    other = _small()
    other.method.lam = 0.5
    with pytest.raises(ValueError, match=r"different config .*: method\.lam None -> 0\.5;"):
        pipeline.train_and_evaluate(other, str(tmp_path))


@pytest.mark.slow
def test_user_npz_with_fixed_splits(tmp_path):
    x, y, cams = synthetic.make_synthetic(
        num_ids=40, images_per_id=4, dim=16, signal_dim=4, num_nuisance=2, seed=1
    )
    split = dict(
        train_idx=np.nonzero(y < 20)[0],
        query_idx=np.nonzero((y >= 20) & (cams == 0))[0],
        gallery_idx=np.nonzero((y >= 20) & (cams == 1))[0],
    )
    path = tmp_path / "feats.npz"
    np.savez(path, features=x, labels=y, cams=cams, **split)
    config = _small(name="npz", path=str(path))
    config.method.dim = 8
    results = pipeline.train_and_evaluate(config, str(tmp_path / "run"))
    assert results["dataset"] == "feats" and results["num_splits"] == 1
    assert results["splits"][0]["num_queries"] == len(split["query_idx"])


def test_bad_data_is_refused_before_any_training(tmp_path):
    config = _small()
    config.method.kernel = "chi2"  # the real-valued synthetic data has negative entries
    with pytest.raises(ValueError, match="non-negative"):
        pipeline.train_and_evaluate(config, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
    missing = _small(name="npz", path=str(tmp_path / "nope.npz"))
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        pipeline.train_and_evaluate(missing, str(tmp_path / "run2"))


ORL = fixture_trees.ORL


@pytest.mark.real_data
@pytest.mark.slow
@pytest.mark.skipif(not ORL.is_dir(), reason=f"the ORL faces are not at {ORL}")
def test_orl_config_runs_end_to_end_on_real_images(tmp_path):
    """configs/warca.py:orl: features from the real images, kernel WARCA, one split."""
    c = get_config("orl")
    assert c.data.name == "orl" and Path(c.data.path) == ORL.resolve()
    c.unlock()
    c.data.num_splits = 4
    c.data.cache_dir = str(tmp_path / "cache")
    c.progress = False
    results = pipeline.train_and_evaluate(c, str(tmp_path / "run"))
    assert results["dataset"] == "orl" and results["num_splits"] == 4
    # 20 test people, 5 queries and 5 gallery images each: faces are easy for the descriptor
    # (Euclidean about 92 rank-1), so the learned metric must keep up with Euclidean distance
    # on rank-1 and beat it on mAP. One split's rank-1 (100 queries) ranges from 88 to 100
    # over ten splits, a wider spread than the metric's gain, so the test averages four.
    base = results["baseline_euclidean"]["mean"]
    assert results["mean"]["rank1"] >= base["rank1"]
    assert results["mean"]["mAP"] > base["mAP"]
    assert len(list((tmp_path / "cache").glob("color_lbp_*.npy"))) == 1


def test_registered_dataset_options_are_checked(tmp_path):
    bad_option = _small(name="orl", path=str(ORL), loader_options={"variant": "x"})
    with pytest.raises(ValueError, match="dataset 'orl' takes no option"):
        datasets.from_config(bad_option.data)
    with pytest.raises(ValueError, match="must be a map option -> value"):
        datasets.loader_options("{'variant': 'x'}")
    no_path = _small(name="viper", path="")
    with pytest.raises(ValueError, match="needs data.path"):
        datasets.from_config(no_path.data)
    fixed = _small(name="market1501", path=str(tmp_path), num_test_ids=10)
    with pytest.raises(ValueError, match="fixed protocol"):
        datasets.from_config(fixed.data)
    unknown = _small(name="nope", path=str(tmp_path))
    with pytest.raises(ValueError, match="valid names"):
        datasets.from_config(unknown.data)
    missing = _small(name="viper", path=str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="absent"):
        datasets.from_config(missing.data)


# --- validation during training (data.val_fraction, eval.keep_best) ---------------------


def _val_config(module="warca", num_splits=2, **overrides):

    c = config_module(module).get_config("small")
    c.unlock()
    if module == "warca":
        c.method.num_iters = 60
        c.method.log_every = 20
    c.data.num_splits = num_splits
    c.data.val_fraction = 0.25
    c.eval.baseline = False
    for key, value in overrides.items():
        section, field = key.split("__")
        c[section][field] = value
    return c


def _lines(workdir):
    return [json.loads(ln) for ln in (Path(workdir) / "metrics.jsonl").read_text().splitlines()]


def _spy_on_fit(monkeypatch, name, wrap_callback=None):
    """Records the labels each fit of ``name`` trains on; optionally wraps its callback."""
    real = methods.get(name)
    fitted = []

    def fit(features, labels, cfg, *, callback=None, **kwargs):
        fitted.append(np.asarray(labels).copy())
        if wrap_callback is not None:
            callback = wrap_callback(cfg, callback)
        return real.fit(features, labels, cfg, callback=callback, **kwargs)

    monkeypatch.setitem(methods.registry(), name, real._replace(fit=fit))
    return fitted


@pytest.mark.slow
def test_val_fraction_logs_val_metrics_on_held_out_identities(tmp_path, monkeypatch):
    config = _val_config()
    fitted = _spy_on_fit(monkeypatch, "warca")
    pipeline.train_and_evaluate(config, str(tmp_path / "a"))
    lines = _lines(tmp_path / "a")
    assert [(r["split"], r["step"]) for r in lines] == [
        (s, t) for s in (0, 1) for t in (20, 40, 60)
    ]
    for r in lines:
        assert 0 <= r["val_rank1"] <= 100 and 0 < r["val_mAP"] <= 100
        assert {"loss", "closer_frac", "mean_gap"} <= set(r)
    assert png_size(tmp_path / "a" / "curves.png") == _curves_size(3)  # and validation
    dataset = datasets.from_config(config.data)
    for s, labels in enumerate(fitted):
        split = dataset.splits[s]
        val = run_plan.plan_split(dataset, s, config).val
        held = np.unique(dataset.labels[np.concatenate([val.query_idx, val.gallery_idx])])
        trained = np.unique(labels)
        assert len(held) == 8 and len(trained) == 30 - 8  # round(0.25 * 30) of 30
        assert not np.intersect1d(held, trained).size
        np.testing.assert_array_equal(
            np.union1d(held, trained), np.unique(dataset.labels[split.train_idx])
        )
        result = json.loads((tmp_path / "a" / f"split_{s}.json").read_text())
        assert result["num_val_ids"] == 8 and result["num_train_ids"] == 22
        last = [r for r in lines if r["split"] == s][-1]  # no keep_best: the last model
        assert result["kept_step"] == 60 and result["val_mAP"] == last["val_mAP"]
    # same seed, same held-out identities and the same lines; another seed, others
    pipeline.train_and_evaluate(config, str(tmp_path / "b"))
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in lines]
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in _lines(tmp_path / "b")] == strip
    other = _val_config()
    other.seed = 1
    a, b = (
        run_plan.plan_split(dataset, 0, config).val,
        run_plan.plan_split(dataset, 0, other).val,
    )
    assert not np.array_equal(a.train_idx, b.train_idx)


@pytest.mark.slow
def test_keep_best_keeps_the_model_of_the_best_validated_chunk(tmp_path, monkeypatch):
    import dataclasses

    seen = {}  # step -> projection handed to the callback

    def wrap(cfg, callback):
        def spy(row, metric):
            if row["step"] == cfg.num_iters:  # spoil the last model: the best is earlier
                rng = np.random.default_rng(0)
                noise = rng.standard_normal(metric.projection.shape).astype(np.float32)
                metric = dataclasses.replace(metric, projection=noise)
            seen[row["step"]] = metric.projection.copy()
            return callback(row, metric)

        return spy

    _spy_on_fit(monkeypatch, "warca", wrap)
    config = _val_config(num_splits=1, eval__keep_best=True)
    config.method.log_every = 10
    pipeline.train_and_evaluate(config, str(tmp_path))
    lines = _lines(tmp_path)
    best = max(lines, key=lambda r: r["val_mAP"])  # the first of ties, as kept
    result = json.loads((tmp_path / "split_0.json").read_text())
    assert best["step"] < 60 and result["kept_step"] == best["step"]
    assert result["val_mAP"] == best["val_mAP"] and result["val_rank1"] == best["val_rank1"]
    saved = Metric.load(tmp_path / "model_split0.npz")
    np.testing.assert_array_equal(saved.projection, seen[best["step"]])


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"data__val_fraction": -0.1}, r"data.val_fraction must be in \[0, 1\)"),
        ({"data__val_fraction": 1.0}, r"data.val_fraction must be in \[0, 1\)"),
        ({"data__val_fraction": float("nan")}, r"data.val_fraction must be in \[0, 1\)"),
        ({"data__val_fraction": 0.02}, r"split 0: data.val_fraction=0.02 holds out 1 of the 30"),
        ({"data__val_fraction": 0.97}, r"holds out 29 of the 30 training identities, leaving 1"),
        (
            {"data__val_fraction": 0.0, "eval__keep_best": True},
            r"keep_best=True .* data.val_fraction > 0",
        ),
    ],
)
def test_bad_validation_settings_are_refused_before_any_work(
    overrides, message, tmp_path, monkeypatch
):
    forbid(monkeypatch, methods, "call_fit", "fitted despite a bad validation setting")
    config = _val_config(**overrides)
    assert_refused_before_any_work(pipeline.train_and_evaluate, config, tmp_path / "w", message)


def test_closed_form_learner_refuses_val_fraction(tmp_path):
    with pytest.raises(ValueError, match=r"needs an iterative learner.*method 'kissme'"):
        pipeline.train_and_evaluate(_val_config("kissme"), str(tmp_path / "w"))
    assert not (tmp_path / "w").exists()
    x, y, _ = synthetic.make_synthetic(num_ids=10, dim=8, signal_dim=2, num_nuisance=1)
    with pytest.raises(ValueError, match="'kissme' takes no callback"):
        pipeline.fit_method(x, y, _val_config("kissme").method, callback=lambda row, m: None)


def _counting(monkeypatch, module, name):
    """Wraps ``module.name`` to count its calls; returns the list of calls."""
    real, calls = getattr(module, name), []

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_run_checks_its_config_once_and_draws_each_held_out_part_once(tmp_path, monkeypatch):
    """The validation settings are checked once per run, each split's held-out identities
    drawn once (and trained without), the learner looked up once; a restart as well."""

    fitted = []

    def quick_fit(features, labels, cfg, *, log_fn, callback, **kwargs):  # one logged chunk
        fitted.append(np.asarray(labels).copy())
        proj = np.eye(4, features.shape[1], dtype=np.float32)
        metric = Metric("linear", features.shape[1], projection=proj, name="warca")
        row = {"step": 1, "loss": 1.0, "seconds": 0.0}
        log_fn({**row, **callback(row, metric)})
        return metric, [row]

    config = _val_config(num_splits=3)
    dataset = datasets.from_config(config.data)
    real = methods.get("warca")
    monkeypatch.setitem(methods.registry(), "warca", real._replace(fit=quick_fit))
    checks = _counting(monkeypatch, config_checks, "check_validation_config")
    draws = _counting(monkeypatch, identity_splits, "validation_split")
    lookups = _counting(monkeypatch, methods, "get")
    results = pipeline.train_and_evaluate(config, str(tmp_path))
    assert len(checks) == 1 and len(lookups) == 1 and len(draws) == 3
    for s, (draw, labels) in enumerate(zip(draws, fitted, strict=True)):
        assert draw[1] == s  # (dataset, s): split s's training part, drawn once
        np.testing.assert_array_equal(draw[0].splits[s].train_idx, dataset.splits[s].train_idx)
        held = results["splits"][s]["num_val_ids"]
        assert held == 8 and len(np.unique(labels)) == 30 - held
    os.remove(tmp_path / "split_2.json")  # a restart redoes split 2 from the same draws
    del checks[:], draws[:], lookups[:]
    pipeline.train_and_evaluate(config, str(tmp_path))
    assert len(checks) == 1 and len(lookups) == 1 and len(draws) == 3 and len(fitted) == 4
    np.testing.assert_array_equal(fitted[3], fitted[2])


@pytest.mark.slow
@pytest.mark.parametrize("module", ["rpcca", "lmnn", "frml", "svmml", "mlapg"])
def test_other_iterative_learners_log_val_metrics(module, tmp_path):
    config = _val_config(module, num_splits=1, eval__keep_best=True)
    results = pipeline.train_and_evaluate(config, str(tmp_path))
    lines = _lines(tmp_path)
    assert len(lines) >= 2
    assert all({"val_rank1", "val_mAP", "loss"} <= set(r) for r in lines)
    best = max(lines, key=lambda r: r["val_mAP"])
    assert results["splits"][0]["kept_step"] == best["step"]


@pytest.mark.parametrize("kind", ["embedding", "own_distance"])
def test_eval_rerank_ranks_the_k_reciprocal_distances(kind):

    ds = datasets.from_config(_small().data)
    split = ds.splits[0]
    cfg = get_config("small").eval
    cfg.unlock()
    cfg.rerank = True
    q, g = ds.features[split.query_idx], ds.features[split.gallery_idx]
    ids = (ds.labels[split.query_idx], ds.labels[split.gallery_idx],
           ds.cams[split.query_idx], ds.cams[split.gallery_idx])  # fmt: skip
    if kind == "embedding":
        metric = Metric("identity", ds.features.shape[1], name="euclidean")
        want = evaluation.evaluate_reranked(q, g, *ids, distance="euclidean")
    else:
        kernel_nn = config_module("kernel_nn")

        tr = split.train_idx
        metric, _ = pipeline.fit_method(
            ds.features[tr], ds.labels[tr], kernel_nn.get_config("laplacian").method
        )
        assert metric.kind == "kernel_distance"
        d = metric.pairwise_distances
        want = evaluation.evaluate_distances(
            evaluation.k_reciprocal(d(q, g), d(q, q), d(g, g)), *ids
        )
    got = evaluation.evaluate_metric(metric, ds, split, cfg)
    plain = evaluation.evaluate_metric(metric, ds, split, get_config("small").eval)
    assert got["mAP"] == pytest.approx(want["mAP"]) and got["rank1"] == want["rank1"]
    assert got["mAP"] != plain["mAP"]


# --- the run's figures (cmc.png, curves.png) and its log columns -------------------------

PNG = b"\x89PNG\r\n\x1a\n"
CMC_SIZE = tuple(round(v * cmc.DPI) for v in cmc.FIGSIZE)  # (960, 660)


def png_size(path) -> tuple[int, int]:
    """(width, height) of a valid PNG with something drawn in it (matplotlib's reader)."""
    path = Path(path)
    assert path.stat().st_size > 0 and path.read_bytes()[:8] == PNG, path
    image = mpimg.imread(path)
    assert image.ndim == 3 and float(image.std()) > 0, f"{path} is blank"
    return image.shape[1], image.shape[0]


def _curves_size(panels: int) -> tuple[int, int]:
    return round(run_plots.PANEL[0] * panels * cmc.DPI), round(run_plots.PANEL[1] * cmc.DPI)


def _history(splits=2, steps=(10, 20, 30, 40), **columns):
    """metrics.jsonl rows: ``columns`` name -> f(split, step) for every split and step."""
    return [
        {"split": s, "step": t, **{k: f(s, t) for k, f in columns.items()}, "seconds": 0.1 * t}
        for s in range(splits)
        for t in steps
    ]


@pytest.mark.slow
def test_training_curves_draw_the_loss_a_moving_ranking_measure_and_validation(tmp_path):
    rows = _history(
        loss=lambda s, t: 2.0 / t + s,
        closer_frac=lambda s, t: 0.1 / t,
        violated_frac=lambda s, t: 1.0,
        val_rank1=lambda s, t: 50.0 + t,
        val_mAP=lambda s, t: 40.0 + t,
    )
    assert [p[1] for p in run_plots._panels(rows)] == ["loss", "closer_frac", "%"]
    path = run_plots.plot_training_curves(rows, tmp_path / "c.png", title="t")
    assert png_size(path) == _curves_size(3)
    # without closer_frac the next moving measure; a constant one is never drawn
    rows = _history(loss=lambda s, t: 1.0 / t, violated_frac=lambda s, t: 0.5)
    assert [p[1] for p in run_plots._panels(rows)] == ["loss"]
    assert png_size(run_plots.plot_training_curves(rows, tmp_path / "l.png")) == _curves_size(1)
    rows = _history(loss=lambda s, t: 1.0 / t, expected_accuracy=lambda s, t: t / 50)
    assert [p[1] for p in run_plots._panels(rows)] == ["loss", "expected_accuracy"]
    with pytest.raises(ValueError, match="no history row holds a step and a loss"):
        run_plots.plot_training_curves([{"split": 0, "seconds": 1.0}], tmp_path / "x.png")


def test_the_mean_curve_is_over_the_steps_every_split_logged():
    series = {0: (np.array([10.0, 20, 30]), np.array([3.0, 2, 1])),
              1: (np.array([10.0, 20]), np.array([5.0, 4]))}  # fmt: skip
    steps, mean = run_plots._mean_curve(series)
    np.testing.assert_array_equal(steps, [10, 20])
    np.testing.assert_allclose(mean, [4, 3])
    assert run_plots._mean_curve({0: series[0]}) is None  # one split: no mean
    assert run_plots._mean_curve({0: series[0], 1: (np.array([40.0]), np.array([1.0]))}) is None


def test_the_cmc_axis_is_fitted_to_the_data():
    assert cmc.fitted_range([90.0, 95.0, 100.0]) == (89.0, 101.0)  # at least 1 point
    assert cmc.fitted_range([20.0, 100.0]) == (16.0, 104.0)  # 5% of the range
    assert cmc.fitted_range([0.0, 100.0])[0] == 0.0  # never below 0
    assert cmc.fitted_range(np.array([np.nan, 50.0]), [60.0]) == (49.0, 61.0)


def _fake_results(num_splits=3, length=30):
    def curve(start):
        return np.minimum(100.0, start + np.arange(length) * 3.0).tolist()

    splits = [
        {"cmc": curve(80 + s), "mAP": 85.0 + s,
         "baseline_euclidean": {"cmc": curve(30 + 2 * s), "mAP": 25.0 + s}}
        for s in range(num_splits)
    ]  # fmt: skip
    return {"method": "warca", "mean": {"mAP": 86.0}, "splits": splits}


@pytest.mark.slow
def test_run_figures_draw_cmc_and_only_an_iterative_learner_draws_curves(tmp_path):
    results = _fake_results()
    closed = tmp_path / "closed"
    closed.mkdir()
    written = run_plots.write_run_figures(
        str(closed), results, iterative=False, max_rank=50, title="kissme on synthetic"
    )
    assert written == [str(closed / "cmc.png")] and not (closed / "curves.png").exists()
    assert png_size(closed / "cmc.png") == CMC_SIZE
    pixels = (mpimg.imread(closed / "cmc.png")[..., :3] * 255).round()
    for rgb in ((31, 119, 180), (255, 127, 14)):  # tab:blue (the method), tab:orange (euclidean)
        assert np.any(np.all(np.abs(pixels - rgb) <= 3, axis=-1)), rgb
    iterative = tmp_path / "iterative"
    iterative.mkdir()
    rows = _history(splits=3, loss=lambda s, t: 1.0 / t, closer_frac=lambda s, t: 0.1 / t)
    (iterative / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    written = run_plots.write_run_figures(
        str(iterative), results, iterative=True, max_rank=50, title="warca on synthetic"
    )
    assert written == [str(iterative / "cmc.png"), str(iterative / "curves.png")]
    assert png_size(iterative / "curves.png") == _curves_size(2)


@pytest.mark.slow
def test_a_warca_run_draws_its_figures_and_logs_only_columns_that_move(tmp_path):
    pipeline.train_and_evaluate(_small(), str(tmp_path))
    assert png_size(tmp_path / "cmc.png") == CMC_SIZE
    assert png_size(tmp_path / "curves.png") == _curves_size(2)  # loss, closer_frac
    rows = _lines(tmp_path)
    assert len(rows) == 6  # 2 splits x 60 steps / 20
    identity = {"split", "step", "lam", "lam_choice"}  # the fit's lambda and how it was chosen
    constant = sorted(k for k in rows[0] if k not in identity and len({r[k] for r in rows}) == 1)
    assert constant == [], f"columns that never change: {constant}"
    assert {"margin_frac", "closer_frac", "mean_gap", "mean_rank"} <= set(rows[0])
    # the share of pairs with a violator (and active_frac, the same pairs) stayed at 1
    assert not {"violated_frac", "active_frac"} & set(rows[0])


@pytest.mark.slow
def test_a_closed_form_run_draws_cmc_and_no_curves(tmp_path):
    pipeline.train_and_evaluate(config_module("kissme").get_config("small"), str(tmp_path))
    assert png_size(tmp_path / "cmc.png") == CMC_SIZE
    assert not (tmp_path / "curves.png").exists()
    assert not (tmp_path / "metrics.jsonl").exists()  # no history, no file
