"""experiments.protocol: the grid, resuming, selection by cross-validation, shards, reports."""

import csv
import json
import logging
import os
import subprocess
import sys

import matplotlib.image as mpimg
import numpy as np
import pytest
from PIL import Image
from processes import ROOT, cpu_env
from protocol_runs import run_results as _run_results
from protocol_runs import tiny as _tiny
from repo_configs import config_module

from warca_jax import datasets, protocol
from warca_jax.data import identity_splits
from warca_jax.io import run_files
from warca_jax.plots import cmc
from warca_jax.protocol import pool
from warca_jax.protocol.report import is_kernel
from warca_jax.runs import defaults

get_config = config_module("protocol").get_config


def _read(*parts):
    with open(os.path.join(*parts)) as f:
        return f.read()


def _run_file(workdir, label, split, name):
    return os.path.join(workdir, "runs", "synthetic", label, f"split_{split}", name)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("protocol"))
    results = protocol.run_protocol(_tiny(), workdir)
    return workdir, results


@pytest.mark.slow
def test_writes_every_run_table_and_plot(tiny_run):
    workdir, results = tiny_run
    for name in ("table2.md", "study.md", "study.csv", "results.json", "cmc_synthetic.png"):
        assert os.path.exists(os.path.join(workdir, name)), name
    for key in ("rank1", "rank5", "auc", "auc_top30"):
        with open(os.path.join(workdir, f"table2_{key}.csv")) as f:
            rows = list(csv.reader(f))
        assert rows[0][0] == "dataset" and rows[1][0] == "synthetic"
        # mean and std columns for WARCA-L, Euclidean and (skipped, empty) chi2 kNN
        assert len(rows[0]) == 7 and rows[1][5:] == ["", ""]
        assert 0 <= float(rows[1][1]) <= 100
    for label in ("warca-linear", "nn"):
        for s in range(2):
            folder = os.path.join(workdir, "runs", "synthetic", label, f"split_{s}")
            assert {"config.json", f"split_{s}.json", f"model_split{s}.npz"} <= set(
                os.listdir(folder)
            )
    assert not os.path.exists(os.path.join(workdir, "runs", "synthetic", "nn-chi2"))
    table = _read(workdir, "table2.md")
    assert "| dataset | WARCA-L | kNN Euclidean | kNN chi2 |" in table
    assert table.count("| synthetic |") == 4 and "| - |" in table  # one row per measure
    assert results["synthetic"]["warca:linear"]["num_done"] == 2
    # two methods done, both named (no grey lines): 9 x 6 inches at 120 dpi
    assert _png_size(os.path.join(workdir, "cmc_synthetic.png")) == (1080, 720)


def _png_size(path) -> tuple[int, int]:
    """(width, height) of a valid PNG with something drawn in it (matplotlib's reader)."""
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", path
    image = mpimg.imread(path)
    assert image.ndim == 3 and float(image.std()) > 0, f"{path} is blank"
    with Image.open(path) as im:
        assert im.format == "PNG" and im.size == (image.shape[1], image.shape[0])
    return im.size


@pytest.mark.parametrize(
    "label, fields, kernel",
    [
        ("warca:linear", {"kernel": "none"}, False),
        ("warca:chi2", {"kernel": "chi2_rbf"}, True),
        ("warca:kernel", {"kernel": "linear"}, True),  # the kernel form, linear kernel
        ("rpcca", {"kernel": "none"}, False),
        ("nn:chi2", {"distance": "chi2"}, True),  # by its label
        ("kernel_nn:laplacian", {"kernel": "laplacian"}, True),
        ("kernel_nn", {}, True),
        ("kissme", {}, False),
        ("nn", {"distance": "euclidean"}, False),
    ],
)
def test_a_method_is_kernel_by_its_config_or_its_label(label, fields, kernel):
    assert is_kernel(label, fields) is kernel


@pytest.mark.slow
@pytest.mark.parametrize(
    "where",
    [
        "runs/synthetic/nn/split_1",  # a run's split folder, its outcome removed
        "runs/synthetic/nn",  # a method's folder above it
        "cv/synthetic/warca-linear/split_0",  # a CV split of a grid
        "data",  # the stored datasets' folder
    ],
)
def test_a_link_planted_at_a_folder_of_the_workdir_is_refused_never_written_through(
    tiny_run, tmp_path, where
):
    """A finished workdir whose folder is replaced by a link to a folder elsewhere: the
    rerun refuses it in one line naming it, and nothing is written into the link's target."""
    import shutil

    copy = tmp_path / "w"
    shutil.copytree(tiny_run[0], copy)
    folder = copy / where
    shutil.rmtree(folder)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, folder)
    with pytest.raises(OSError, match=f"cannot write into {folder}: it is a symbolic link"):
        protocol.run_protocol(_tiny(), str(copy))
    assert os.listdir(outside) == []


@pytest.mark.slow
def test_a_workdir_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "w")
    with pytest.raises(OSError, match="it is a symbolic link"):
        protocol.run_protocol(_tiny(), str(tmp_path / "w"))
    assert os.listdir(tmp_path / "real") == []


@pytest.mark.slow
def test_the_cmc_of_twenty_methods_names_the_best_five_and_greys_the_rest(tmp_path):
    ranks = np.arange(1, 101)
    curves = {f"method {i}": 100 - (95 - 2 * i) * np.exp(-ranks / (5 + i)) for i in range(20)}
    kernel = {f"method {i}" for i in range(0, 20, 3)}
    path = cmc.plot_methods_cmc(curves, tmp_path / "cmc.png", kernel=kernel, title="CMC")
    assert _png_size(path) == (1320, 720)  # 11 x 6 inches: the legend beside the axes
    few = {k: curves[k] for k in list(curves)[:4]}
    assert _png_size(cmc.plot_methods_cmc(few, tmp_path / "few.png")) == (1080, 720)


def test_tables_hold_the_mean_and_std_of_the_split_results(tiny_run):
    workdir, results = tiny_run
    rank1 = []
    for s in range(2):
        with open(
            os.path.join(workdir, "runs", "synthetic", "nn", f"split_{s}", f"split_{s}.json")
        ) as f:
            rank1.append(json.load(f)["rank1"])
    entry = results["synthetic"]["nn"]
    assert entry["rank1"]["mean"] == pytest.approx(np.mean(rank1))
    assert entry["rank1"]["std"] == pytest.approx(np.std(rank1))
    assert f"{np.mean(rank1):.2f} ± {np.std(rank1):.2f}" in _read(workdir, "study.md")


def test_euclidean_run_equals_plain_evaluation(tiny_run):
    workdir, _ = tiny_run
    ds = datasets.from_config(_tiny().data)
    split = ds.splits[1]
    from warca_jax import evaluation

    x = ds.features
    q, g = split.query_idx, split.gallery_idx
    ref = evaluation.evaluate(x[q], x[g], ds.labels[q], ds.labels[g], ds.cams[q], ds.cams[g])
    with open(_run_file(workdir, "nn", 1, "split_1.json")) as f:
        assert json.load(f)["rank1"] == pytest.approx(ref["rank1"])


def test_cross_validation_selects_the_best_grid_point(tiny_run):
    workdir, _ = tiny_run
    base = os.path.join(workdir, "cv", "synthetic", "warca-linear")
    with open(os.path.join(base, "selected.json")) as f:
        sel = json.load(f)
    scores = {}
    for eta in (1e-2, 1e-1):
        with open(os.path.join(base, "split_0", f"lam_0.01_eta_{eta:g}", "result.json")) as f:
            scores[eta] = json.load(f)[sel["measure"]]
    best = max(scores, key=lambda e: (scores[e], -e))  # the first of equal ones
    assert sel["learning_rate"] == best and sel["lam"] == 1e-2
    with open(
        os.path.join(workdir, "runs", "synthetic", "warca-linear", "split_0", "config.json")
    ) as f:
        used = json.load(f)["method"]
    assert used["learning_rate"] == best and used["num_iters"] == 60 and used["dim"] == 40


def test_validation_split_lies_inside_the_training_part():
    ds = datasets.from_config(_tiny().data)
    for s in range(2):
        v = identity_splits.validation_split(ds, s, fraction=0.3, seed=0)
        train = set(ds.splits[s].train_idx)
        held = set(v.query_idx) | set(v.gallery_idx)
        assert held <= train and set(v.train_idx) <= train and not held & set(v.train_idx)
        val_ids = set(ds.labels[list(held)])
        assert len(val_ids) == round(0.3 * len(set(ds.labels[list(train)])))
        assert not val_ids & set(ds.labels[v.train_idx])
    again = identity_splits.validation_split(ds, 1, fraction=0.3, seed=0)
    np.testing.assert_array_equal(again.query_idx, v.query_idx)


def test_restart_redoes_nothing_and_an_interrupted_run_is_redone_alone(tiny_run, tmp_path):
    workdir, _ = tiny_run
    import shutil

    copy = str(tmp_path / "w")
    shutil.copytree(workdir, copy)
    before = _run_results(copy)
    stamps = {p: os.path.getmtime(os.path.join(copy, p)) for p in before}
    lost = os.path.join("runs", "synthetic", "warca-linear", "split_1", "split_1.json")
    os.remove(os.path.join(copy, lost))  # as if the run had been stopped during this job
    protocol.run_protocol(_tiny(), copy)
    after = _run_results(copy)
    assert after == before  # same seed, same result
    for p, t in stamps.items():
        if p != lost:
            assert os.path.getmtime(os.path.join(copy, p)) == t, p


def test_a_presentation_or_cache_change_reuses_every_outcome(tiny_run, tmp_path):
    """The job folders accept a config that differs only in progress bars, the feature
    cache's folder or a field at the value earlier runs had, and the outcomes follow the
    same rule: nothing is redone."""
    workdir, _ = tiny_run
    import shutil

    copy = str(tmp_path / "w")
    shutil.copytree(workdir, copy)
    before = _run_results(copy)
    stamps = {p: os.path.getmtime(os.path.join(copy, p)) for p in before}
    changed = _tiny(progress=True)
    changed.unlock()
    changed.data.cache_dir = str(tmp_path / "cache")
    changed.lock()
    protocol.run_protocol(changed, copy)
    assert _run_results(copy) == before
    for p, t in stamps.items():
        assert os.path.getmtime(os.path.join(copy, p)) == t, p
    cfg = json.loads(_read(copy, "runs", "synthetic", "nn", "split_0", "config.json"))
    other = dict(cfg, seed=cfg["seed"] + 1)
    assert run_files.computed_fields(dict(cfg, progress=not cfg.get("progress"))) == (
        run_files.computed_fields(cfg)
    )
    assert run_files.computed_fields(other) != run_files.computed_fields(cfg)


def test_a_changed_method_config_is_refused(tiny_run, tmp_path):
    workdir, _ = tiny_run
    import shutil

    copy = str(tmp_path / "w")
    shutil.copytree(workdir, copy)
    changed = _tiny(overrides={"warca:linear": {"num_iters": 61, "log_every": 30}})
    with pytest.raises(ValueError, match="different config") as refused:
        protocol.run_protocol(changed, copy)
    # the message names what changed, with the old and the new value
    assert "method.num_iters 60 -> 61" in str(refused.value), refused.value


@pytest.mark.slow
def test_shards_and_workers_give_the_single_process_results(tiny_run, tmp_path):
    workdir, _ = tiny_run
    reference = _run_results(workdir)
    shared = str(tmp_path / "sharded")
    with pytest.raises(RuntimeError, match="cross-validation results .* missing"):
        protocol.run_protocol(_tiny(), shared, stage="runs")
    for i in range(2):
        protocol.run_protocol(_tiny(), shared, stage="cv", num_shards=2, shard_index=i)
    protocol.run_protocol(_tiny(), shared, stage="runs", num_shards=2, shard_index=0)
    protocol.run_protocol(_tiny(), shared, stage="runs", num_shards=2, shard_index=1, num_workers=2)
    protocol.run_protocol(_tiny(), shared, stage="report")
    assert _run_results(shared) == reference
    assert _read(shared, "table2.md") == _read(workdir, "table2.md")


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"methods": ("warca:linear", "nope")}, "unknown method label 'nope'"),
        ({"methods": ("warca:linear", "nn:spicy")}, "unknown variant"),
        ({"cv.methods": ("kissme",)}, "not in config.methods"),
        ({"methods": ("nn", "kissme"), "cv.methods": ("kissme",)}, "no lam and learning_rate"),
        ({"cv.etas": ()}, "at least one value"),
        ({"cv.etas": (0.0,)}, "etas > 0"),
        ({"cv.grids": {"warca:linear": {"etas": ()}}}, "at least one value"),
        ({"cv.grids": {"nn": {"etas": (1.0,)}}}, "not in cv.methods"),
        ({"cv.grids": {"warca:linear": {"eta": (1.0,)}}}, "cv.grids must map"),
        ({"datasets": ("synthetic", "mnist")}, "unknown dataset"),
        ({"datasets": ("viper",)}, "needs a folder"),
        ({"overrides": {"warca:linear": {"num_iter": 5}}}, "no such field"),
        ({"overrides": {"kissme": {"pca_dim": 5}}}, "not in config.methods"),
        ({"dims": {"viper": 0}}, r"config\.dims\['viper'\] must be an integer >= 1"),
    ],
)
def test_bad_configs_are_refused_before_any_work(changes, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        protocol.run_protocol(_tiny(**changes), str(tmp_path / "w"))
    assert not os.path.exists(tmp_path / "w" / "runs")


def test_bad_flags_are_refused(tmp_path):
    with pytest.raises(ValueError, match="shard_index"):
        protocol.run_protocol(_tiny(), str(tmp_path), num_shards=2, shard_index=2)
    with pytest.raises(ValueError, match="stage"):
        protocol.run_protocol(_tiny(), str(tmp_path), stage="train")


def test_every_variant_loads_and_plans():
    for arg in ("synthetic", "small", "orl", "all", "viper"):
        c = get_config(arg)
        for label in c.methods:
            protocol.method_config(label)
        if arg in ("all", "viper"):
            c = defaults.overridden(c, data_root="/data")
        plan = protocol.Plan(c)
        assert plan.dim("viper") == 100 and plan.dim("market1501") == 200
        assert plan.dim("cuhk03") == 40
    plan = protocol.Plan(defaults.overridden(get_config("all"), data_root="/data"))
    assert len(plan.datasets) == 9
    assert "warca:chi2" not in plan.runs("market1501")
    assert "warca:linear" in plan.runs("market1501") and "kissme" in plan.runs("market1501")
    assert len(plan.grid("warca:chi2")) == 36  # the paper's 9 lambdas x 4 step sizes
    plan = protocol.Plan(get_config("synthetic"))
    assert plan.grid("frml") == [(1e-2, 3e-3), (1e-2, 1e-1), (1e-2, 1.0)]
    assert len(plan.grid("warca:linear")) == 9


def _viper_subset(**changes):
    c = get_config("viper")
    c = defaults.overridden(c, data_root="/data", methods=("warca:chi2", "lfda:chi2"))
    for key, value in changes.items():
        section, _, field = key.rpartition(".")
        (c[section] if section else c)[field] = value
    return c


def test_a_method_subset_leaves_out_the_default_cv_settings_of_the_others(caplog):
    with caplog.at_level(logging.INFO, logger="absl"):
        plan = protocol.Plan(_viper_subset(), explicit=("methods",))
    assert plan.cv_methods == ["warca:chi2"] and list(plan.grids) == ["warca:chi2"]
    assert len(plan.grid("warca:chi2")) == 36  # the paper's grid, untouched
    dropped = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert dropped == [
        "config.cv.methods: 'warca:linear' left out, as config.methods does not hold it",
        "config.cv.methods: 'frml' left out, as config.methods does not hold it",
        "config.cv.grids: 'frml' left out, as cv.methods does not hold it",
    ]
    # a narrowed cv.methods drops the default grid of a method it no longer holds
    plan = protocol.Plan(
        _viper_subset(**{"methods": ("warca:chi2", "frml"), "cv.methods": ("warca:chi2",)}),
        explicit=("methods", "cv.methods"),
    )
    assert list(plan.grids) == ["warca:chi2"]


def test_a_method_subset_of_a_lomo_table_leaves_out_the_others_overrides(caplog):
    c = defaults.overridden(get_config("table3"), data_root="/data", methods=("warca:kernel",))
    with caplog.at_level(logging.INFO, logger="absl"):
        plan = protocol.Plan(c, explicit=("methods",))
    assert plan.methods == plan.cv_methods == ["warca:kernel"]
    dropped = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert dropped == [
        f"config.overrides: {label!r} left out, as config.methods does not hold it"
        for label in ("mlapg", "xqda")
    ]
    # the same override given on the command line is a request that cannot be met
    with pytest.raises(ValueError, match=r"config\.overrides name \['mlapg', 'xqda'\]"):
        protocol.Plan(c, explicit=("methods", "overrides"))


@pytest.mark.parametrize(
    "changes, explicit, match",
    [
        (
            {"cv.methods": ("warca:chi2", "frml")},
            ("cv.methods",),
            r"^config\.cv\.methods name \['frml'\], which are not in config\.methods "
            r"\('warca:chi2', 'lfda:chi2'\); expected",
        ),
        ({}, ("cv.grids.frml.etas",), r"^config\.cv\.grids name \['frml'\], which are not in"),
        ({}, None, r"^config\.cv\.methods name \['warca:linear', 'frml'\]"),
    ],
    ids=["cv-methods", "cv-grids-entry", "python-api-default"],
)
def test_a_cv_request_for_a_method_not_run_is_refused(changes, explicit, match):
    with pytest.raises(ValueError, match=match):
        protocol.Plan(_viper_subset(**changes), explicit=explicit)


@pytest.mark.slow
def test_a_method_subset_runs_in_one_try_on_the_command_line(tmp_path):
    def protocol_command(workdir, *overrides):
        return subprocess.run(
            [sys.executable, "-m", "experiments.protocol", "--config=configs/protocol.py:small",
             f"--workdir={workdir}", "--config.methods=('nn','kissme')", *overrides],
            cwd=ROOT, env=cpu_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    proc = protocol_command(tmp_path / "w")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1])["runs_done"] == 4
    assert "config.cv.methods: 'warca:linear' left out" in proc.stderr
    assert sorted(os.listdir(tmp_path / "w" / "runs" / "synthetic")) == ["kissme", "nn"]
    assert not os.path.exists(tmp_path / "w" / "cv")
    refused = protocol_command(tmp_path / "r", "--config.cv.methods=('warca:linear',)")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    errors = [ln for ln in refused.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, refused.stderr[-3000:]
    assert errors[0].startswith("error: config.cv.methods name ['warca:linear'], which are not")
    assert not os.path.exists(tmp_path / "r")


def _children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (Linux's /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid:
                out.append(int(entry))
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _endless_protocol(workdir) -> subprocess.Popen:
    """The protocol's runs stage on two workers whose jobs train for ever, in a new session,
    stderr piped: for the tests that stop it."""
    cmd = [sys.executable, "-m", "experiments.protocol", "--config=configs/protocol.py:small",
           f"--workdir={workdir}", "--config.methods=('warca:linear',)", "--config.cv.methods=()",
           "--config.overrides={'warca:linear': {'num_iters': 1000000}}", "--num_workers=2",
           "--stage=runs"]  # fmt: skip
    return subprocess.Popen(
        cmd, cwd=ROOT, env=cpu_env(), stderr=subprocess.PIPE, text=True, start_new_session=True
    )


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the workers in /proc")
@pytest.mark.parametrize("how", ["SIGTERM to the parent", "Ctrl-C to the process group"])
def test_a_stopped_protocol_ends_its_workers_in_one_line(tmp_path, how):
    import glob
    import signal
    import time

    proc = _endless_protocol(tmp_path)
    try:
        deadline, workers = time.monotonic() + 300, []
        while time.monotonic() < deadline and len(workers) < 2:
            time.sleep(0.5)
            workers = [p for p in _children(proc.pid) if "spawn_main" in _cmdline(p)]
        assert len(workers) == 2, "the workers did not start"
        while time.monotonic() < deadline and len(glob.glob(f"{tmp_path}/runs/*/*/*/.lock")) < 2:
            time.sleep(0.5)  # each worker holds its job's folder
        if how.startswith("SIGTERM"):
            proc.send_signal(signal.SIGTERM)
        else:  # what a terminal does: every process of the foreground group gets it
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(p) for p in workers):
            time.sleep(0.5)
        assert not any(_alive(p) for p in workers), "workers outlived their parent"
    finally:
        proc.kill()
    assert proc.returncode == (143 if how.startswith("SIGTERM") else 130), err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("interrupted by ") and "run the same command to resume" in last
    assert str(tmp_path) in last
    assert not glob.glob(f"{tmp_path}/**/.lock", recursive=True), "a lock was left behind"


def test_workers_share_the_cores_among_their_blas_threads(monkeypatch):
    # each worker's BLAS gets its share of the cores, a variable the user set is kept, and
    # the parent's environment is as it was once the workers have started
    for name in pool.BLAS_THREAD_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    cores = pool.blas_threads(1)
    assert pool.blas_threads(2) == max(1, cores // 2) and pool.blas_threads(cores + 1) == 1
    set_here = pool._share_blas_threads(2)
    share = str(max(1, cores // 2))
    assert os.environ["OPENBLAS_NUM_THREADS"] == os.environ["OMP_NUM_THREADS"] == share
    assert os.environ["MKL_NUM_THREADS"] == "3"
    assert set_here == ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"]  # MKL's was the user's


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the workers in /proc")
def test_a_worker_killed_from_outside_is_named_in_one_line(tmp_path):
    # what the out-of-memory killer does: SIGKILL to one worker; the parent names the job
    # that worker held and the signal, stops the other worker, and exits 1 in one line
    import glob
    import signal
    import time

    from warca_jax.io import workdir_lock

    proc = _endless_protocol(tmp_path)
    try:
        deadline, locks = time.monotonic() + 300, []
        while time.monotonic() < deadline and len(locks) < 2:
            time.sleep(0.5)  # each worker holds its job's folder, its pid in the lock
            locks = sorted(glob.glob(f"{tmp_path}/runs/*/*/*/.lock"))
        assert len(locks) == 2, "the workers did not start their jobs"
        folders = [os.path.dirname(lock) for lock in locks]
        holders = [workdir_lock.holder_pid(folder) for folder in folders]
        while time.monotonic() < deadline and None in holders:
            time.sleep(0.1)
            holders = [workdir_lock.holder_pid(folder) for folder in folders]
        assert None not in holders, f"no pid in {locks}"
        # the worker started last (the larger pid): the one whose death the pool's manager
        # thread could miss (pool._start_pool), which hung the run in about one run of three
        (victim, folder), (other, _) = sorted(zip(holders, folders, strict=True), reverse=True)
        os.kill(victim, signal.SIGKILL)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"killed {victim} of {locks}: {e.stderr!r}"[-3000:]) from None
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
        proc.communicate()  # reaped and its pipe closed, whatever happened
    assert proc.returncode == 1, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    split = os.path.basename(folder).split("_")[-1]
    assert last.startswith(f"error: the worker process {victim} running "), last
    assert "warca" in last, last
    assert f"split {split} was ended by signal SIGKILL" in last, last
    assert "out-of-memory" in last and "run the same command again to resume" in last, last
    assert not _alive(other), "the other worker outlived the run"
