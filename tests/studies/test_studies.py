"""The AON vs Frobenius study and the training-time study, on shrunk configs."""

import json
import time
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest
from repo_configs import config_module

from warca_jax import datasets
from warca_jax.maths import kernels as warca_kernels
from warca_jax.methods import rpcca, warca
from warca_jax.plots import study_plots
from warca_jax.runs import defaults
from warca_jax.studies import aon as aon_study
from warca_jax.studies import aon_report, training_time

aon_config = config_module("aon_study")
tt_config = config_module("training_time")

PNG = b"\x89PNG\r\n\x1a\n"


def png_size(path) -> tuple[int, int]:
    """(width, height) of a valid, non-empty PNG with something drawn in it."""
    assert path.stat().st_size > 0 and path.read_bytes()[:8] == PNG, path
    image = mpimg.imread(path)
    assert image.ndim == 3 and float(image.std()) > 0, f"{path} is blank"
    return image.shape[1], image.shape[0]


@pytest.fixture(scope="module")
def aon_run(tmp_path_factory):
    """The :small AON study, run once into a temp workdir."""
    workdir = tmp_path_factory.mktemp("aon")
    config = aon_config.get_config("small")
    return config, workdir, aon_study.run_study(config, str(workdir))


@pytest.fixture(scope="module")
def tt_run(tmp_path_factory):
    """The :small training-time study, run once into a temp workdir."""
    workdir = tmp_path_factory.mktemp("tt")
    config = tt_config.get_config("small")
    return config, workdir, training_time.run_study(config, str(workdir))


@pytest.fixture(scope="module")
def small_split():
    """Training data of the first split of the :small configs' data."""
    ds = datasets.from_config(aon_config.get_config("small").data)
    t = ds.splits[0].train_idx
    return ds, ds.features[t], ds.labels[t]


# ----------------------------------------------------------------------------- AON study
def test_condition_number_matches_numpy_singular_values():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(5, 12))
    s = np.linalg.svd(w, compute_uv=False)
    assert aon_study.condition_number(w) == pytest.approx(s.max() / s.min(), rel=1e-12)
    q, _ = np.linalg.qr(rng.normal(size=(12, 5)))
    assert aon_study.condition_number(3.0 * q.T) == pytest.approx(1.0, abs=1e-12)
    assert aon_study.condition_number(np.zeros((2, 4))) == float("inf")
    with pytest.raises(ValueError, match="2-D"):
        aon_study.condition_number(np.ones(4))


@pytest.mark.slow
def test_aon_at_large_lambda_is_near_orthonormal_and_frobenius_is_not(small_split):
    _, x, y = small_split
    method = aon_config.get_config("small").method
    conds = {}
    # lambda = 10: large against the hinge of inputs normalised to unit mean squared
    # distance, where every negative is inside the margin and pushes W outwards
    for penalty in ("aon", "frobenius"):
        cfg = defaults.overridden(method, penalty=penalty, lam=10.0)
        metric, _ = warca.fit(x, y, cfg, seed=0)
        conds[penalty] = aon_study.condition_number(metric.projection)
        if penalty == "aon":
            w = np.asarray(metric.projection, np.float64)
            np.testing.assert_allclose(w @ w.T, np.eye(cfg.dim), atol=0.05)
    assert conds["aon"] < 1.05
    assert conds["frobenius"] > 10 * conds["aon"]


@pytest.mark.slow
def test_aon_study_writes_every_promised_file(aon_run):
    config, workdir, results = aon_run
    for name in ("config.json", "results.json", "results.md"):
        assert (workdir / name).stat().st_size > 0
    for name in aon_study.PLOTS:  # 5 x 4 inches at 100 dpi; the CMC as cmc.plot_cmc draws it
        assert png_size(workdir / name) == ((960, 660) if name == "cmc.png" else (500, 400))
    on_disk = json.loads((workdir / "results.json").read_text())
    assert on_disk == json.loads(json.dumps(results))
    lams, etas = list(config.study.lams), list(config.study.etas)
    assert on_disk["lams"] == lams and on_disk["etas"] == etas
    assert on_disk["penalties"] == ["aon", "frobenius"]
    splits = config.data.num_splits
    for p in ("aon", "frobenius"):
        sweep = on_disk["lambda_sweep"][p]
        assert np.shape(sweep["rank1"]) == (len(lams), splits)
        assert np.shape(sweep["condition_number"]) == (len(lams), splits)
        assert np.shape(on_disk["eta_sweep"][p]["rank1"]) == (len(etas), splits)
        best = on_disk["best"][p]
        assert best["lam"] == lams[int(np.argmax(sweep["rank1_mean"]))]
        assert on_disk["eta_sweep"][p]["lam"] == best["lam"]  # eta_lam None: best lambda
        assert len(best["cmc"]) > 1 and best["cmc"][0] == pytest.approx(best["rank1_mean"])
        assert np.all(np.diff(best["cmc"]) >= 0)
    # Every run has its own file; an eta equal to method.learning_rate at the best lambda
    # is the lambda sweep's run, reused rather than trained twice.
    files = sorted(p.name for p in (workdir / "runs").glob("*.json"))
    assert len(files) == results["runs_trained"]
    assert len(files) == len(config.study.penalties) * splits * (len(lams) + len(etas) - 1)
    rec = json.loads((workdir / "runs" / aon_study.run_name("aon", 1.0, 0.01, 1)).read_text())
    s = np.asarray(rec["singular_values"])
    assert rec["condition_number"] == pytest.approx(s.max() / s.min())
    assert rec["rank1"] == on_disk["lambda_sweep"]["aon"]["rank1"][lams.index(1.0)][1]
    table = (workdir / "results.md").read_text()
    assert "| 1e-06 |" in table and "Euclidean" in table


@pytest.mark.slow
def test_aon_study_on_the_same_workdir_redoes_nothing(aon_run, monkeypatch):
    config, workdir, first = aon_run
    calls = []
    real_fit = warca.fit
    monkeypatch.setattr(warca, "fit", lambda *a, **k: calls.append(1) or real_fit(*a, **k))
    mtimes = {p.name: p.stat().st_mtime_ns for p in (workdir / "runs").iterdir()}
    again = aon_study.run_study(config, str(workdir))
    assert calls == [] and again["runs_trained"] == 0
    assert {p.name: p.stat().st_mtime_ns for p in (workdir / "runs").iterdir()} == mtimes
    assert again["lambda_sweep"] == first["lambda_sweep"] and again["best"] == first["best"]
    # An interrupted study (one run file missing) redoes that run only, with the same result.
    victim = workdir / "runs" / aon_study.run_name("frobenius", 1e-6, 0.01, 0)
    victim.unlink()
    redone = aon_study.run_study(config, str(workdir))
    assert len(calls) == 1 and redone["runs_trained"] == 1
    assert redone["lambda_sweep"] == first["lambda_sweep"]


@pytest.mark.slow
def test_a_diverged_run_is_recorded_and_the_study_goes_on(tmp_path, monkeypatch):
    config = aon_config.get_config("small")
    config.study.lams = (1e-6, 1.0)
    config.study.etas = (0.01,)  # method.learning_rate: the eta sweep reuses the lambda runs
    real_fit = warca.fit

    def fit(x, y, cfg, **kwargs):
        if cfg.penalty == "frobenius" and cfg.lam == 1.0:
            raise FloatingPointError("WARCA diverged by step 20")
        return real_fit(x, y, cfg, **kwargs)

    monkeypatch.setattr(warca, "fit", fit)
    results = aon_study.run_study(config, str(tmp_path))
    frob = results["lambda_sweep"]["frobenius"]
    assert frob["rank1"][1] == [None, None] and frob["diverged"][1] == [True, True]
    assert frob["rank1_mean"][1] is None and frob["condition_number_geomean"][1] is None
    assert results["best"]["frobenius"]["lam"] == 1e-6
    assert results["lambda_sweep"]["aon"]["diverged"] == [[False, False], [False, False]]
    assert "| 1 | " in (tmp_path / "results.md").read_text()
    assert "diverged" in (tmp_path / "results.md").read_text()
    assert all((tmp_path / name).read_bytes()[:8] == PNG for name in aon_study.PLOTS)


@pytest.mark.slow
def test_aon_study_refuses_a_workdir_with_another_config(aon_run):
    config, workdir, _ = aon_run
    other = aon_config.get_config("small")
    other.study.lams = (1e-4, 1.0)
    with pytest.raises(ValueError, match="different config"):
        aon_study.run_study(other, str(workdir))


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("lams", (), "study.lams is empty"),
        ("lams", (1e-3, -1.0), "positive finite"),
        ("etas", (0.0, 0.1), "study.etas must hold positive"),
        ("etas", (0.1, 0.1), "duplicated"),
        ("penalties", ("aon", "l1"), "study.penalties"),
        ("eta_lam", -1.0, "eta_lam"),
    ],
)
def test_aon_study_refuses_bad_configs_before_any_work(tmp_path, field, value, message):
    config = aon_config.get_config("small")
    config.study[field] = value
    with pytest.raises(ValueError, match=message):
        aon_study.run_study(config, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_aon_study_refuses_an_approximate_kernel_and_bad_compare_workdirs(tmp_path):
    config = aon_config.get_config("small")
    config.method.kernel, config.method.kernel_approx = "rbf", "nystroem"
    with pytest.raises(ValueError, match="kernel_approx must be 'none'"):
        aon_study.run_study(config, str(tmp_path / "run"))
    config = aon_config.get_config("small")
    config.study.compare_workdirs = ("",)
    with pytest.raises(ValueError, match="compare_workdirs must be a tuple of folders"):
        aon_study.run_study(config, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["none", "linear", "rbf"])
def test_map_singular_values_are_those_of_the_learned_map(small_split, kernel):
    """The condition number the study records is that of the map the metric applies: for
    the linear form and the linear kernel, the Jacobian of ``transform`` in input space;
    for the rbf kernel, A K A^T against the embeddings' Gram in feature space."""
    _, x, y = small_split
    cfg = defaults.overridden(
        aon_config.get_config("small").method, kernel=kernel, num_iters=20, log_every=20, lam=1e-3
    )  # one fit at a given lambda: the map, not the penalty's choice, is under test
    metric, _ = warca.fit(x, y, cfg, seed=0)
    sv = aon_study.map_singular_values(metric)
    assert sv.shape == (cfg.dim,) and np.all(np.diff(sv) <= 1e-9) and sv[-1] > 0
    if kernel == "rbf":  # W W^T = A K A^T: the Gram of the rows of W in feature space
        k = np.asarray(
            warca_kernels.kernel_matrix(
                metric.support, metric.support, kernel="rbf", gamma=metric.gamma
            ),
            np.float64,
        )
        a = np.asarray(metric.projection, np.float64)
        expected = np.sqrt(np.sort(np.linalg.eigvalsh(a @ k @ a.T))[::-1])
    else:  # the map is linear in x: its Jacobian, up to the metric's input scaling
        d = x.shape[1]
        jac = metric.transform(np.eye(d, dtype=np.float32)) - metric.transform(
            np.zeros((1, d), np.float32)
        )
        expected = np.linalg.svd(jac.astype(np.float64), compute_uv=False)
    assert sv[0] / sv[-1] == pytest.approx(expected[0] / expected[-1], rel=1e-3)
    np.testing.assert_allclose(sv / sv[0], expected / expected[0], atol=1e-4)


@pytest.mark.slow
def test_panel_e_reads_the_finished_studies_it_is_given(aon_run, tmp_path):
    _, workdir, results = aon_run
    rows = aon_report.by_dataset(results, (str(workdir),))
    assert [r["dataset"] for r in rows] == [results["dataset"]] * 2
    for p in ("aon", "frobenius"):
        best = results["best"][p]
        assert rows[1]["rank1"][p] == (best["rank1_mean"], best["rank1_std"])
    with pytest.raises(ValueError, match="results.json not found"):
        aon_report.by_dataset(results, (str(tmp_path),))
    (tmp_path / "results.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="is not an AON study's results.json"):
        aon_report.by_dataset(results, (str(tmp_path),))
    path = study_plots.plot_rank1_by_dataset(
        ["a", "b"],
        {"aon": [(50.0, 1.0), (None, None)], "frobenius": [(40.0, 2.0), (30.0, 0.0)]},
        tmp_path / "e.png",
    )
    assert png_size(path) == (500, 400)
    with pytest.raises(ValueError, match="one \\(mean, std\\) per dataset"):
        study_plots.plot_rank1_by_dataset(["a"], {"aon": []}, tmp_path / "f.png")


def test_study_plots_refuse_misshapen_curves(tmp_path):
    with pytest.raises(ValueError, match="must be \\[3 lambda values"):
        study_plots.plot_condition_numbers(
            [1e-3, 1e-2, 1e-1], {"aon": np.ones((2, 2))}, tmp_path / "c"
        )
    with pytest.raises(ValueError, match="positive"):
        study_plots.plot_rank1_sweep(
            [0.0, 1.0], {"aon": np.ones((2, 1))}, tmp_path / "r", xlabel="x"
        )
    with pytest.raises(ValueError, match="one common length"):
        study_plots.plot_rank1_vs_seconds({"w": [([1, 2], [3, 4]), ([1], [3])]}, tmp_path / "t")


# ----------------------------------------------------------------------------- training time
@pytest.mark.slow
def test_training_time_writes_curves_sampled_every_log_every(tt_run):
    config, workdir, results = tt_run
    assert png_size(workdir / training_time.PLOT) == (550, 420)  # 5.5 x 4.2 inches, 100 dpi
    on_disk = json.loads((workdir / "curves.json").read_text())
    assert on_disk == json.loads(json.dumps(results))
    assert set(on_disk["methods"]) == set(training_time.METHODS)
    for name in training_time.METHODS:
        cfg = config[name]
        res = on_disk["methods"][name]
        steps = list(range(cfg.log_every, cfg.num_iters + 1, cfg.log_every))
        assert len(res["splits"]) == config.data.num_splits
        for s, curve in enumerate(res["splits"]):
            assert curve["split"] == s and curve["step"] == steps
            assert len(curve["seconds"]) == len(curve["rank1"]) == len(steps)
            assert np.all(np.diff(curve["seconds"]) > 0) and curve["seconds"][0] > 0
            assert all(0 <= r <= 100 for r in curve["rank1"])
            assert curve["rank1"][-1] == pytest.approx(curve["final_rank1"])
            assert curve["warm_up_first_chunk_seconds"] > 0
            assert curve["eval_seconds"] > 0
        mean = res["mean"]
        assert mean["step"] == steps
        assert mean["rank1"] == pytest.approx(np.mean([c["rank1"] for c in res["splits"]], 0))
        # Both methods learn: the last sample beats Euclidean distance.
        assert mean["rank1"][-1] > on_disk["baseline_euclidean"]["rank1_mean"]


@pytest.mark.slow
def test_training_time_resumes_and_refuses_another_config(tt_run, monkeypatch):
    config, workdir, first = tt_run
    monkeypatch.setattr(training_time, "rank1_curve", lambda *a, **k: pytest.fail("retrained"))
    again = training_time.run_study(config, str(workdir))
    assert again["methods"] == first["methods"]
    other = tt_config.get_config("small")
    other.rpcca.lam = 0.5
    with pytest.raises(ValueError, match="different config"):
        training_time.run_study(other, str(workdir))


def test_training_time_refuses_bad_configs_before_any_work(tmp_path):
    config = tt_config.get_config("small")
    config.warca.num_iters = 90  # not a multiple of log_every = 20
    with pytest.raises(ValueError, match="multiple of log_every"):
        training_time.run_study(config, str(tmp_path / "run"))
    config = tt_config.get_config("small")
    config.rpcca.learning_rate = -1.0
    with pytest.raises(ValueError, match="learning_rate must be positive"):
        training_time.run_study(config, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_rpcca_callback_sees_the_metric_so_far_and_its_time_is_not_training(small_split):
    _, x, y = small_split
    cfg = tt_config.get_config("small").rpcca
    seen = []

    def slow(row, metric):
        seen.append((row["step"], row["seconds"], np.array(metric.projection)))
        time.sleep(0.2)

    t0 = time.perf_counter()
    metric, history = rpcca.fit(x, y, cfg, seed=3, callback=slow)
    wall = time.perf_counter() - t0
    assert [s for s, _, _ in seen] == [r["step"] for r in history] == [20, 40, 60, 80, 100]
    np.testing.assert_array_equal(seen[-1][2], metric.projection)
    assert not np.allclose(seen[0][2], seen[-1][2])  # the metric so far, not the final one
    # Five 0.2 s callbacks ran, yet the rows' seconds count training only.
    assert wall - history[-1]["seconds"] >= 5 * 0.2
    assert history[-1]["seconds"] - history[0]["seconds"] < 4 * 0.2


def test_warm_up_stops_after_the_first_chunk(small_split):
    _, x, y = small_split
    cfg = defaults.overridden(tt_config.get_config("small").warca, lam=1e-3)  # one fit
    calls = []
    real_fit = warca.fit

    def fit(*args, callback, **kwargs):
        return real_fit(
            *args, callback=lambda r, m: (calls.append(r["step"]), callback(r, m)), **kwargs
        )

    seconds = training_time.warm_up(fit, x, y, cfg, seed=0)
    assert calls == [cfg.log_every] and seconds > 0


def test_same_seed_same_result(small_split):
    ds, _, _ = small_split
    config = aon_config.get_config("small")
    a, b = (
        aon_study.run_point(ds, config, penalty="aon", lam=1e-2, eta=1e-2, split=0) for _ in "ab"
    )
    assert a["rank1"] == b["rank1"] and a["singular_values"] == b["singular_values"]


@pytest.mark.parametrize(
    "study,name,variant",
    [
        (aon_study, "aon_study", "viper"),
        (aon_study, "aon_study", "cuhk01"),
        (training_time, "training_time", "viper"),
        (training_time, "training_time", "cuhk01"),
    ],
)
def test_real_data_variants_need_the_images_folder(tmp_path, study, name, variant):
    """The real-data variants of the figures read the images the user names; without a
    folder they are refused before any work, naming the field."""
    config = config_module(name).get_config(variant)
    assert config.data.name == variant and config.data.path == ""
    with pytest.raises(ValueError, match=f"dataset '{variant}' needs data.path"):
        study.run_study(config, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


@pytest.mark.real_data
def test_the_orl_aon_variant_reads_the_repository_faces():
    config = aon_config.get_config("orl")
    assert config.data.descriptor == "lomo" and config.method.kernel == "linear"
    assert (Path(config.data.path) / "s1" / "1.pgm").is_file()


@pytest.mark.slow
def test_panel_e_can_be_redrawn_with_other_studies_on_the_same_workdir(aon_run, tmp_path):
    """Naming other finished studies changes a figure, not a run: the study resumes on its
    workdir (no run is trained again) and panel (e) gains their rows."""
    config, workdir, first = aon_run
    again = aon_config.get_config("small")
    again.study.compare_workdirs = (str(workdir),)
    results = aon_study.run_study(again, str(workdir))
    assert results["runs_trained"] == 0
    assert [r["dataset"] for r in results["by_dataset"]] == [first["dataset"]] * 2
    assert results["lambda_sweep"] == json.loads(json.dumps(first["lambda_sweep"]))
