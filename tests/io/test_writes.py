"""A write that fails is one line naming the file, and what was finished before it is reused.

The failures are simulated where the operating system raises them: a full disk
(``ENOSPC``) inside matplotlib's ``savefig``, NumPy's ``savez`` or a file's ``write``; a
read-only folder (``EROFS``) from ``os.makedirs``. The slow tests meet the real ones in a
child process: the file size limit (``RLIMIT_FSIZE``: ``EFBIG``), a read-only mount (in a
user and mount namespace, ``unshare -rm``: as root, ``chmod`` makes nothing read-only),
a name of 300 bytes and a path of 5,000 characters.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys

import matplotlib.figure
import numpy as np
import pytest
from cli_exits import one_line_exit
from processes import ROOT, cpu_env
from repo_configs import config_module, tiny_protocol

from experiments import main as _main  # noqa: F401 - defines the --config flag cli reads
from warca_jax import datasets, features
from warca_jax.io import run_files, writes
from warca_jax.metric import Metric
from warca_jax.protocol import run_protocol
from warca_jax.runs import cli, pipeline

FULL = os.strerror(errno.ENOSPC)


def _config(method="nn", splits=2):
    c = config_module(method).get_config("small")
    c.unlock()
    c.data.num_splits = splits
    if method == "warca":
        c.method.num_iters, c.method.log_every = 20, 5
    return c


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, FULL)  # as PIL's and NumPy's file writes raise it: no name


class _FullFile:
    """A file opened for writing whose ``write`` writes half and then finds the disk full."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        self.f.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, FULL)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def _open_full_for(stem: str):
    """``open`` whose files named ``stem*`` (or their temporaries) fill the disk."""

    def fake(file, mode="r", *args, **kwargs):
        f = open(file, mode, *args, **kwargs)  # noqa: SIM115 - closed by the caller
        name = os.path.basename(os.fspath(file)).lstrip(".")
        return _FullFile(f) if ("w" in mode or "a" in mode) and name.startswith(stem) else f

    return fake


def _readable(folder) -> None:
    """Every file left in ``folder`` is whole: no temporary file, JSON parses, models load."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        assert not name.startswith(".") and ".tmp" not in name, name
        if name.endswith(".json"):
            run_files.read_json(path)
        elif name.endswith(".npz"):
            Metric.load(path)


WRITERS = {  # what fills the disk, the file named, the learner
    "figure": (lambda mp: mp.setattr(matplotlib.figure.Figure, "savefig", _full_disk), "cmc.png"),
    "model": (lambda mp: mp.setattr(np, "savez", _full_disk), "model_split0.npz"),
    "json": (lambda mp: mp.setattr(run_files, "open", _open_full_for("split_1"), raising=False),
             "split_1.json"),
    "metrics": (lambda mp: mp.setattr(writes, "open", _open_full_for("metrics"), raising=False),
                "metrics.jsonl"),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_full_disk_is_one_line_naming_the_file_and_the_rerun_reuses_what_was_done(
    writer, tmp_path, capsys, monkeypatch, caplog
):
    patch, name = WRITERS[writer]
    method = "warca" if writer == "metrics" else "nn"
    clean = pipeline.train_and_evaluate(_config(method), str(tmp_path / "clean"))
    wd = tmp_path / "w"
    with monkeypatch.context() as mp:
        patch(mp)
        line = one_line_exit(capsys, lambda: pipeline.train_and_evaluate(_config(method), str(wd)))
    assert f"cannot write {wd / name}: {FULL} [ENOSPC]" in line, line
    assert "a rerun reuses them" in line
    _readable(wd)
    with caplog.at_level(logging.INFO):
        again = pipeline.train_and_evaluate(_config(method), str(wd))
    if writer in ("figure", "json"):  # split 0 was finished before the failure
        assert "split 0 already done" in caplog.text
    assert (wd / "cmc.png").exists() and not (wd / ".lock").exists()
    keys = ("rank1", "mAP", "AUC")
    assert {k: again["mean"][k] for k in keys} == {k: clean["mean"][k] for k in keys}
    assert again["cmc"] == clean["cmc"]


def test_the_figures_of_a_full_disk_leave_results_json_whole(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", _full_disk)
    one_line_exit(capsys, lambda: pipeline.train_and_evaluate(_config(), str(tmp_path)))
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["num_splits"] == 2 and len(results["splits"]) == 2


def test_a_full_disk_while_the_feature_cache_is_written_names_it(tmp_path, capsys, monkeypatch):
    from PIL import Image

    rng = np.random.default_rng(0)
    paths = []
    for i in range(3):
        paths.append(str(tmp_path / f"img{i}.png"))
        Image.fromarray(rng.integers(0, 255, (32, 16, 3), dtype=np.uint8)).save(paths[-1])
    monkeypatch.setattr(np, "save", _full_disk)
    cache = tmp_path / "cache"
    line = one_line_exit(
        capsys,
        lambda: features.extract(paths, height=32, width=16, batch_size=4, cache_dir=cache),
    )
    assert f"cannot write {cache}{os.sep}" in line and f"{FULL} [ENOSPC]" in line, line
    assert os.listdir(cache) == []  # no partial cache file


def test_a_full_disk_while_the_protocol_plots_keeps_its_runs(tmp_path, capsys, monkeypatch):
    with monkeypatch.context() as mp:
        mp.setattr(matplotlib.figure.Figure, "savefig", _full_disk)
        line = one_line_exit(capsys, lambda: run_protocol(tiny_protocol(), str(tmp_path)))
    assert f"cannot write {tmp_path / 'cmc_synthetic.png'}: {FULL}" in line, line
    runs = tmp_path / "runs" / "synthetic" / "nn"
    times = {p: p.stat().st_mtime_ns for p in runs.rglob("split_*.json")}
    assert len(times) == 2 and (tmp_path / "table2.md").exists()
    results = run_protocol(tiny_protocol(), str(tmp_path))
    assert results["synthetic"]["nn"]["num_done"] == 2
    assert {p: p.stat().st_mtime_ns for p in runs.rglob("split_*.json")} == times  # reused
    assert (tmp_path / "cmc_synthetic.png").exists()


def test_a_read_only_parent_is_one_line_before_any_work(tmp_path, capsys, monkeypatch):
    def read_only(path, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)

    def no_load(*args, **kwargs):
        raise AssertionError("data loaded for a workdir that cannot be made")

    monkeypatch.setattr(os, "makedirs", read_only)  # root cannot be refused by chmod
    wd = tmp_path / "parent" / "w"
    line = one_line_exit(capsys, lambda: pipeline.train_and_evaluate(_config(), str(wd)))
    assert f"{tmp_path / 'parent'}" in line and "Read-only file system [EROFS]" in line, line
    monkeypatch.setattr(datasets, "from_config", no_load)
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # the parent: unwritable
    monkeypatch.setattr(os, "statvfs", lambda path: os.statvfs_result((0,) * 8 + (1, 255)))
    line = one_line_exit(capsys, lambda: pipeline.train_and_evaluate(_config(), str(wd)))
    assert f"workdir {wd} cannot be made: its parent {tmp_path} is on a read-only" in line


@pytest.mark.parametrize(
    "path, problem",
    [("a" * 300, "is 300 bytes long; this file system allows 255"),
     ("/".join(["b" * 49] * 100), "the path is"),
     (("é" * 130), "is 260 bytes long")],
    ids=["300-byte-name", "5000-characters", "260-byte-utf8-name"],
)  # fmt: skip
def test_a_name_too_long_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, path, problem):
    def no_load(*args, **kwargs):
        raise AssertionError("data loaded for a workdir that cannot be made")

    monkeypatch.setattr(datasets, "from_config", no_load)
    wd = os.path.join(tmp_path, path)
    line = one_line_exit(capsys, lambda: pipeline.train_and_evaluate(_config(), wd))
    assert line.startswith(f"error: workdir {tmp_path}") and problem in line, line
    assert os.listdir(tmp_path) == []


def test_a_name_too_long_is_not_taken_for_a_config_field(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["main", "--config=configs/nn.py", "--config.method.name=nn"])
    wd = os.path.join(tmp_path, "a" * 300)
    line = one_line_exit(capsys, lambda: pipeline.train_and_evaluate(_config(), wd))
    assert line.startswith(f"error: workdir {tmp_path}"), line


def test_write_error_pickles_and_names_its_file():
    import pickle

    e = writes.write_error("/w/cmc.png", OSError(errno.EFBIG, os.strerror(errno.EFBIG)))
    again = pickle.loads(pickle.dumps(e))
    assert str(again) == str(e) and again.errno == errno.EFBIG
    assert str(e).startswith("cannot write /w/cmc.png: File too large [EFBIG]: the file size")


def test_a_write_errno_raised_by_another_package_is_one_line(capsys):
    def from_elsewhere(argv):
        os.makedirs("/proc/no/such/w")  # raised inside os.py: ENOENT, a bug-like error

    with pytest.raises(FileNotFoundError):
        cli.one_line_errors(from_elsewhere)(["main"])
    failed = OSError(errno.ENOSPC, FULL, "/w/x.png")
    assert str(cli.for_the_user(failed)).startswith(f"cannot write /w/x.png: {FULL}")


# ----------------------------------------------------------------- the real ones, slow


def _run_main(workdir, *flags, file_size_limit=0):
    """``python -m experiments.main`` on nn:small; with ``file_size_limit`` bytes set first
    (``RLIMIT_FSIZE``, in the child itself: Python ignores SIGXFSZ, so a write past it
    fails with EFBIG as under ``ulimit -f``)."""
    argv = ["experiments.main", "--config=configs/nn.py:small", f"--workdir={workdir}",
            "--verbosity=-1", *flags]  # fmt: skip
    script = (
        "import resource, runpy, sys\n"
        f"if {file_size_limit}:\n"
        f"    resource.setrlimit(resource.RLIMIT_FSIZE, ({file_size_limit}, {file_size_limit}))\n"
        f"sys.argv = {argv!r}\n"
        "runpy.run_module('experiments.main', run_name='__main__', alter_sys=True)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT, env=cpu_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _single_error_line(proc) -> str:
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: ")
    return line


@pytest.mark.slow
def test_the_file_size_limit_is_one_line_and_the_rerun_finishes(tmp_path):
    line = _single_error_line(_run_main(tmp_path / "w", file_size_limit=20_000))
    assert f"cannot write {tmp_path / 'w' / 'cmc.png'}: File too large [EFBIG]" in line, line
    assert json.loads((tmp_path / "w" / "results.json").read_text())["num_splits"] > 0
    proc = _run_main(tmp_path / "w", "--verbosity=0")
    assert proc.returncode == 0 and "split 0 already done" in proc.stderr, proc.stderr[-3000:]
    assert (tmp_path / "w" / "cmc.png").exists()
    traced = _run_main(tmp_path / "v", "--traceback", file_size_limit=20_000)
    assert "Traceback" in traced.stderr and "WriteError: cannot write" in traced.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_a_workdir_under_a_read_only_mount_is_one_line(tmp_path):
    (tmp_path / "ro").mkdir()
    probe = subprocess.run(
        ["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "ro", "none", str(tmp_path / "ro")],
        capture_output=True,
    )
    if probe.returncode:
        pytest.skip(f"no user and mount namespaces here: {probe.stderr.decode()[-200:]}")
    script = (
        f"mount -t tmpfs -o ro none {tmp_path / 'ro'} && exec {sys.executable} -m "
        f"experiments.main --config=configs/nn.py:small --workdir={tmp_path / 'ro' / 'w'} "
        "--verbosity=-1"
    )
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        cwd=ROOT, env=cpu_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    line = _single_error_line(proc)
    assert f"its parent {tmp_path / 'ro'} is on a read-only file system [EROFS]" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    "path, problem",
    [("a" * 300, "is 300 bytes long"), ("/".join(["b" * 49] * 100), "the path is")],
    ids=["300-byte-name", "5000-characters"],
)
def test_a_name_too_long_is_one_line_from_the_command_line(tmp_path, path, problem):
    line = _single_error_line(_run_main(os.path.join(tmp_path, path)))
    assert line.startswith(f"error: workdir {tmp_path}") and problem in line, line
