"""What the entry points show a user (warca_jax/runs/cli.py): one line for a mistyped config file
or variant, the root to run from, the baseline beside the result, no stray files or bars."""

import json
import logging
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from processes import ROOT, cpu_env
from repo_configs import CONFIGS

from warca_jax.io import config_files
from warca_jax.plots import cmc, run_plots
from warca_jax.runs import cli, defaults
from warca_jax.runs.pipeline import train_and_evaluate as pipeline_run

# entry point -> its config file, a mistyped variant, the variant it is close to, and a
# mistyped file name
ENTRY_POINTS = {
    "experiments.main": ("warca.py", "chi22", "chi2", "warka.py"),
    "experiments.protocol": ("protocol.py", "vipr", "viper", "protocl.py"),
    "experiments.aon_study": ("aon_study.py", "smal", "small", "aon_stdy.py"),
    "experiments.study_figures": ("study_figures.py", "orll", "orl", "study_figure.py"),
    "experiments.training_time": ("training_time.py", "synthtic", "synthetic", "trainig_time.py"),
}


def _command(args, *, cwd=ROOT, env=None):
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env or cpu_env(), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def _one_error_line(proc) -> str:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


def test_a_mistyped_variant_names_the_files_variants_and_the_close_match():
    with pytest.raises(ValueError) as e:
        config_files.load_config(os.path.join(CONFIGS, "warca.py:chi22"))
    assert str(e.value).endswith(
        "warca.py has no variant 'chi22' (did you mean 'chi2'?); its variants are linear, "
        "chi2, kernel, small, orl, lomo"
    )


def test_a_mistyped_config_file_names_the_config_files_and_the_close_match():
    with pytest.raises(FileNotFoundError) as e:
        config_files.load_config(os.path.join(CONFIGS, "warka.py"))
    message = str(e.value)
    assert f"(did you mean '{os.path.join(CONFIGS, 'warca.py')}'?)" in message
    assert message.endswith(", training_time.py, triplet_sgd.py, warca.py, xqda.py")
    assert "\n" not in message


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(ENTRY_POINTS))
def test_a_mistyped_config_file_or_variant_is_one_line_at_every_entry_point(module, tmp_path):
    file, typo, close, mistyped = ENTRY_POINTS[module]
    workdir = f"--workdir={tmp_path / 'w'}"
    line = _one_error_line(_command(["-m", module, f"--config=configs/{file}:{typo}", workdir]))
    variants = ", ".join(config_files.load_config_module(os.path.join(CONFIGS, file)).VARIANTS)
    assert line == (
        f"error: --config=configs/{file}:{typo}: configs/{file} has no variant {typo!r} "
        f"(did you mean {close!r}?); its variants are {variants}"
    )
    line = _one_error_line(_command(["-m", module, f"--config=configs/{mistyped}", workdir]))
    assert line.startswith(
        f"error: --config=configs/{mistyped}: no config file 'configs/{mistyped}' (did you "
        f"mean 'configs/{file}'?); the config files in configs/: aon_study.py, frml.py,"
    )
    assert not os.path.exists(tmp_path / "w")


# an environment variable of the project, a value it cannot use, what the refusal expects
BAD_ENVIRONMENT = (
    ("WARCA_JAX_MAX_ARRAY_BYTES", "abc", "expected a positive number of bytes"),
    ("WARCA_JAX_MAX_IMAGE_PIXELS", "-3", "expected a positive whole number of pixels"),
)


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(ENTRY_POINTS))
def test_an_unusable_environment_variable_is_one_line_before_any_work(module, tmp_path):
    file = ENTRY_POINTS[module][0]
    for name, value, expected in BAD_ENVIRONMENT:
        cmd = ["-m", module, f"--config=configs/{file}", f"--workdir={tmp_path / 'w'}"]
        line = _one_error_line(_command(cmd, env=cpu_env(**{name: value})))
        assert line == f"error: {name}={value!r}: " + line.split(": ", 2)[2]
        assert expected in line
        assert not os.path.exists(tmp_path / "w")


@pytest.mark.slow
def test_a_finished_run_rerun_with_an_unusable_variable_keeps_its_models(tmp_path):
    """The variable is refused before the workdir is read: its healthy models are not
    called damaged and trained again."""
    cmd = ["-m", "experiments.main", "--config=configs/nn.py:small", f"--workdir={tmp_path}"]
    assert _command(cmd).returncode == 0
    models = sorted(p for p in os.listdir(tmp_path) if p.startswith("model_"))
    assert models
    before = {p: os.stat(tmp_path / p).st_mtime_ns for p in models}
    proc = _command(cmd, env=cpu_env(WARCA_JAX_MAX_ARRAY_BYTES="abc"))
    assert "WARCA_JAX_MAX_ARRAY_BYTES='abc'" in _one_error_line(proc)
    assert "damaged" not in proc.stderr
    assert {p: os.stat(tmp_path / p).st_mtime_ns for p in models} == before


@pytest.mark.slow
def test_a_config_file_given_as_the_next_argument_is_checked_too(tmp_path):
    proc = _command(["-m", "experiments.main", "--config", "configs/nn.py:cosin",
                     f"--workdir={tmp_path / 'w'}"])  # fmt: skip
    assert _one_error_line(proc) == (
        "error: --config=configs/nn.py:cosin: configs/nn.py has no variant 'cosin' (did you "
        "mean 'cosine'?); its variants are euclidean, manhattan, cosine, chi2, small"
    )


@pytest.mark.slow
def test_a_command_run_outside_the_repository_root_names_the_root(tmp_path):
    env = cpu_env(PYTHONPATH=str(ROOT))
    script = os.path.join(ROOT, "experiments", "main.py")
    proc = _command([script, "--config=configs/warca.py", f"--workdir={tmp_path / 'w'}"],
                    cwd=tmp_path, env=env)  # fmt: skip
    assert _one_error_line(proc) == (
        f"error: --config=configs/warca.py: no config file 'configs/warca.py' in the current "
        f"folder {tmp_path}: the commands run from the repository's root, {ROOT} (cd there "
        "first)"
    )


@pytest.mark.slow
def test_the_end_of_run_line_shows_euclidean_beside_the_result_and_warns_below_it(tmp_path):
    # D' = 1: a learned metric far below Euclidean distance on the same features
    proc = _command(["-m", "experiments.main", "--config=configs/warca.py:small",
                     f"--workdir={tmp_path}", "--config.method.dim=1",
                     "--config.method.num_iters=20", "--config.method.log_every=10"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    mean, base = results["mean"], results["baseline_euclidean"]["mean"]
    assert mean["rank1"] < base["rank1"] and mean["mAP"] < base["mAP"]
    assert (
        "mean over 2 splits (Euclidean distance in brackets): "
        f"rank1 {mean['rank1']:.2f} ({base['rank1']:.2f}), " in proc.stderr
    )
    assert f"mAP {mean['mAP']:.2f} ({base['mAP']:.2f}), " in proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "below Euclidean distance" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("W"), proc.stderr[-3000:]
    assert warnings[0].endswith(
        f"warca scores below Euclidean distance on the same features: rank1 "
        f"{mean['rank1']:.2f} < {base['rank1']:.2f}, mAP {mean['mAP']:.2f} < "
        f"{base['mAP']:.2f} (mean over 2 splits)"
    )


@pytest.mark.slow
def test_a_closed_form_learner_writes_and_lists_no_metrics_file(tmp_path):
    proc = _command(["-m", "experiments.main", "--config=configs/kissme.py:small",
                     f"--workdir={tmp_path}"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / "metrics.jsonl").exists() and not (tmp_path / "curves.png").exists()
    listed = [ln for ln in proc.stderr.splitlines() if f"results in {tmp_path}:" in ln]
    assert len(listed) == 1 and "metrics.jsonl" not in listed[0], proc.stderr[-3000:]
    assert "(Euclidean distance in brackets)" in proc.stderr  # KISSME is above it: no warning
    assert "below Euclidean distance" not in proc.stderr


def _warca_run(workdir, *overrides):
    return _command(["-m", "experiments.main", "--config=configs/warca.py",
                     f"--workdir={workdir}", "--config.data.num_splits=1",
                     "--config.data.synthetic.num_ids=60", "--config.method.num_iters=100",
                     *overrides])  # fmt: skip


@pytest.mark.slow
def test_progress_bars_stay_off_when_stderr_is_not_a_terminal_unless_forced(tmp_path):
    quiet = _warca_run(tmp_path / "a")  # stderr is a pipe here, as a log file would be
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert "steps/s]" not in quiet.stderr and "\r" not in quiet.stderr, quiet.stderr[-3000:]
    forced = _warca_run(tmp_path / "b", "--config.progress=True")
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert "WARCA training: 100%|" in forced.stderr
    assert json.loads((tmp_path / "a" / "config.json").read_text())["progress"] is None


class _Stream:
    def __init__(self, tty):
        self.tty = tty

    def isatty(self):
        return self.tty


@pytest.mark.parametrize(
    "value, tty, shown",
    [(None, True, True), (None, False, False), (True, False, True), (False, True, False)],
)
def test_progress_bars_follow_the_terminal_unless_the_config_says(value, tty, shown, monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Stream(tty))
    assert defaults.progress_bars(value) is shown
    assert defaults.base_config().progress is None


def test_a_training_curve_that_reaches_zero_stays_apart_from_zero(tmp_path, monkeypatch):
    # WARCA's closer_frac as the chi2 main job logs it: no negative nearer after step 300
    closer = [8e-3, 7e-6, 0.0, 0.0, 0.0, 0.0]
    rows = [
        {"split": s, "step": 100 * (i + 1), "loss": 1.0 / (i + 1), "closer_frac": c * (1 + s)}
        for s in range(2)
        for i, c in enumerate(closer)
    ]
    figures = []
    real = cmc.figure

    def keep(*args, **kw):
        figures.append(real(*args, **kw))
        return figures[-1]

    monkeypatch.setattr(cmc, "figure", keep)
    run_plots.plot_training_curves(rows, tmp_path / "curves.png")
    ax = figures[0][0].axes[1]
    ax.figure.canvas.draw()  # the limits and transforms as written
    assert ax.get_ylabel() == "closer_frac"
    to_pixels = ax.transData.transform
    y_small, y_zero = to_pixels([(200, 7e-6), (200, 0.0)])[:, 1]
    assert y_small - y_zero > 20  # 7e-6 is drawn well above 0, not on it
    lo, _ = ax.get_ylim()
    assert to_pixels([(200, 0.0)])[0, 1] - to_pixels([(200, lo)])[0, 1] > 3  # 0 off the frame
    assert np.isfinite(ax.get_ylim()).all()


def test_the_summary_names_no_baseline_when_the_run_has_none(caplog):
    results = {"method": "warca", "num_splits": 1, "mean": {"rank1": 10.0, "mAP": 5.0}}
    with caplog.at_level(logging.INFO, logger="absl"):
        cli.log_summary(results)
    assert [r.getMessage() for r in caplog.records] == ["mean over 1 split: rank1 10.00, mAP 5.00"]


def test_reproducible_numerics_sets_gpu_determinism_and_full_float32_unless_chosen(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.delenv("JAX_DEFAULT_MATMUL_PRECISION", raising=False)
    cli.reproducible_numerics()
    assert os.environ["XLA_FLAGS"] == "--xla_gpu_deterministic_ops=true"
    assert os.environ["JAX_DEFAULT_MATMUL_PRECISION"] == "highest"
    assert jax.config.jax_default_matmul_precision == "highest"
    cli.reproducible_numerics()  # a second call adds nothing
    assert os.environ["XLA_FLAGS"] == "--xla_gpu_deterministic_ops=true"
    # the user's own choices stay: other XLA flags kept, an explicit setting not overridden
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    cli.reproducible_numerics()
    assert os.environ["XLA_FLAGS"] == (
        "--xla_force_host_platform_device_count=2 --xla_gpu_deterministic_ops=true"
    )
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_deterministic_ops=false")
    monkeypatch.setenv("JAX_DEFAULT_MATMUL_PRECISION", "tensorfloat32")
    cli.reproducible_numerics()
    assert os.environ["XLA_FLAGS"] == "--xla_gpu_deterministic_ops=false"
    assert jax.config.jax_default_matmul_precision == "highest"  # this process: unchanged


@pytest.mark.slow
def test_an_entry_point_runs_with_reproducible_numerics():
    # the worker processes and the entry point itself see the settings (through the
    # environment); a CPU ignores both, so the run is the same as without them.
    code = (
        "import os, jax; from warca_jax.runs import cli\n"
        "def main(argv):\n"
        "    print(os.environ['XLA_FLAGS'], os.environ['JAX_DEFAULT_MATMUL_PRECISION'],\n"
        "          jax.config.jax_default_matmul_precision)\n"
        "cli.run(main)\n"
    )
    env = cpu_env()
    for name in ("XLA_FLAGS", "JAX_DEFAULT_MATMUL_PRECISION"):
        env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["--xla_gpu_deterministic_ops=true", "highest", "highest"]


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_main_job_is_one_line_and_the_same_command_resumes(tmp_path, signum):
    # 3 splits (of the config's 10) of a second or two each (a given lambda, 300 steps):
    # the signal comes after the first, before the last, and the resumed run has two
    # splits left, not nine
    cmd = [sys.executable, "-m", "experiments.main", "--config=configs/warca.py",
           "--config.data.num_splits=3", "--config.method.lam=1e-3",
           "--config.method.num_iters=300", f"--workdir={tmp_path}"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=cpu_env(), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not (tmp_path / "split_0.json").exists():
            time.sleep(0.2)
        assert (tmp_path / "split_0.json").exists(), "the first split did not finish"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum], err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    name = "Ctrl-C (SIGINT)" if signum == signal.SIGINT else "SIGTERM"
    assert last.startswith(f"interrupted by {name}; {tmp_path} keeps what finished (")
    assert "split" in last and last.endswith("run the same command to resume")
    assert not (tmp_path / ".lock").exists()
    again = subprocess.run(cmd, cwd=ROOT, env=cpu_env(), capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "taking over the lock" not in again.stderr
    assert "already done; reusing split_0.json" in again.stderr


def _npz_32(path):
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(30), 4)
    feats = rng.normal(size=(120, 32)).astype(np.float32) + (labels % 5)[:, None]
    np.savez(path, features=feats, labels=labels, cams=np.tile([0, 0, 1, 1], 30))


@pytest.mark.slow
def test_the_main_job_fits_an_unset_dim_to_the_data_and_keeps_a_given_one(tmp_path):
    data = tmp_path / "f32.npz"
    _npz_32(data)
    base = [sys.executable, "-m", "experiments.main", "--config=configs/warca.py",
            "--config.data.name=npz", f"--config.data.path={data}",
            "--config.data.num_splits=1", "--config.method.num_iters=20"]  # fmt: skip
    run = subprocess.run([*base, f"--workdir={tmp_path}/auto"], cwd=ROOT, env=cpu_env(),
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "method.dim = 32, the features' dimension (the config's, 40, exceeds it)" in run.stderr
    saved = json.loads((tmp_path / "auto" / "config.json").read_text())
    assert saved["method"]["dim"] == 32
    again = subprocess.run([*base, f"--workdir={tmp_path}/auto"], cwd=ROOT, env=cpu_env(),
                           capture_output=True, text=True)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]  # the same run: resumed, not refused
    given = subprocess.run([*base, f"--workdir={tmp_path}/given", "--config.method.dim=40"],
                           cwd=ROOT, env=cpu_env(), capture_output=True, text=True)  # fmt: skip
    assert given.returncode == 1
    assert given.stderr.strip().splitlines()[-1] == (
        "error: config.method.dim: output dim must be in [1, 32] (input dimensions), got 40"
    )


@pytest.mark.slow
def test_none_on_the_command_line_gives_a_set_lambda_back_to_the_rule(tmp_path):
    """configs/warca.py:lomo sets lam; --config.method.lam=None chooses it by rule again. A
    number field that may not be None is refused with its name."""
    base = ["-m", "experiments.main", "--config=configs/warca.py:lomo",
            "--config.data.name=synthetic", "--config.data.num_splits=1",
            "--config.method.num_iters=100", "--config.method.log_every=50"]  # fmt: skip
    proc = _command([*base, "--config.method.lam=None", f"--workdir={tmp_path / 'rule'}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "chose lam" in proc.stderr
    with open(tmp_path / "rule" / "config.json") as f:
        assert json.load(f)["method"]["lam"] is None
    bad = _command([*base, "--config.method.learning_rate=None", f"--workdir={tmp_path / 'b'}"])
    assert _one_error_line(bad) == (
        "error: config.method.learning_rate must be positive (a finite number); got None"
    )


@pytest.mark.slow
@pytest.mark.parametrize("val_fraction", [0.0, 0.2])
def test_the_automatic_dim_fits_the_lambda_rules_held_out_fits(val_fraction, tmp_path, caplog):
    """configs/warca.py:kernel (lambda chosen) on 15 training people x 2 images: D' fits the
    smallest fit the run makes (the rule's held-out fits, after data.val_fraction's), and
    says so, instead of a refusal over a dimension nobody set."""
    config = config_files.load_config(f"{CONFIGS}/warca.py:kernel")
    assert config.method.lam is None  # the lambda rule
    config.data.synthetic.update(num_ids=30, images_per_id=2)
    config.data.update(num_train_ids=15, num_splits=1, val_fraction=val_fraction)
    config.method.update(num_iters=100, log_every=50)
    with caplog.at_level(logging.INFO):
        results = pipeline_run(config, str(tmp_path), auto_dim=True)
    assert np.isfinite(results["mean"]["rank1"])
    rule_rows = 24 if not val_fraction else 20  # 12 (10) of 15 (12) people x 2 images
    assert config.method.dim == rule_rows
    assert f"method.dim = {rule_rows}, the training images of the smallest fit" in caplog.text


def test_the_paper_dim_of_a_paper_dataset_within_what_the_form_can_take():
    from warca_jax.data import dataset_arrays
    from warca_jax.runs import config_checks

    config = config_files.load_config(f"{CONFIGS}/warca.py:chi2")
    config.data.name = "viper"
    feats = np.ones((160, 300), np.float32)
    split = dataset_arrays.Split(train_idx=np.arange(80), query_idx=np.arange(80, 120),
                           gallery_idx=np.arange(120, 160))  # fmt: skip
    ds = dataset_arrays.Dataset(name="viper", features=feats, labels=np.arange(160) // 2,
                          cams=np.arange(160) % 2, splits=(split,))  # fmt: skip
    config_checks.fit_dim_to_data(config, ds)
    assert config.method.dim == 80  # the paper's 100 is more than a kernel form's N
    config.method.kernel = "none"
    config.method.dim = 40
    config_checks.fit_dim_to_data(config, ds)
    assert config.method.dim == 100  # the primal form maps the 300 features: the paper's
