"""One workdir, one run: a second run is refused at once naming the holder; a killed run's
lock blocks nothing; the protocol locks each job folder, so its workers and shards share
the grid.

Two locks on one file in one process conflict as two processes' do (``flock`` locks an
open file, not a process), so the quick tests hold the lock here; the slow ones hold it
in another process, kill it, and run two entry points at once.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from processes import ROOT, cpu_env, run_python
from repo_configs import config_module, tiny_protocol

from warca_jax import datasets
from warca_jax.io.workdir_lock import LOCK_FILE, WorkdirInUseError, WorkdirLock
from warca_jax.protocol import run_protocol
from warca_jax.runs import pipeline
from warca_jax.studies import aon, figures, shared, training_time

HOLDER = f"pid {os.getpid()} on host {socket.gethostname()}"


def _nn(splits=2):
    c = config_module("nn").get_config("small")
    c.unlock()
    c.data.num_splits = splits
    return c


def _no_data(*args, **kwargs):
    raise AssertionError("data loaded on a workdir in use")


def test_a_second_run_on_a_held_workdir_is_refused_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "from_config", _no_data)
    with WorkdirLock(tmp_path) as held:
        record = json.loads((tmp_path / LOCK_FILE).read_text())
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
        with pytest.raises(WorkdirInUseError) as info:
            pipeline.train_and_evaluate(_nn(), str(tmp_path))
        assert held.held
    message = str(info.value)
    assert message.startswith(f"{tmp_path} is in use by another run: {HOLDER} (since ")
    assert "\n" not in message and "use another folder" in message
    assert not (tmp_path / LOCK_FILE).exists()  # released: the file goes with it


@pytest.mark.parametrize(
    "study, run, config",
    [
        ("aon", aon.run_study, "aon_study"),
        ("training_time", training_time.run_study, "training_time"),
        ("figures", figures.run, "study_figures"),
    ],
)
def test_a_study_on_a_held_workdir_is_refused_before_any_work(
    tmp_path, monkeypatch, study, run, config
):
    monkeypatch.setattr(shared.datasets, "from_config", _no_data)
    monkeypatch.setattr(figures.datasets, "from_config", _no_data)
    with WorkdirLock(tmp_path), pytest.raises(WorkdirInUseError, match=HOLDER):
        run(config_module(config).get_config("small"), str(tmp_path))


def test_a_new_workdir_is_locked_as_soon_as_it_is_made(tmp_path, monkeypatch):
    seen = []
    run_split = pipeline.run_split

    def watch(dataset, s, config, workdir, plan):
        seen.append(json.loads((tmp_path / "w" / LOCK_FILE).read_text())["pid"])
        with pytest.raises(WorkdirInUseError, match=HOLDER):
            WorkdirLock(workdir).acquire()  # what a second run started now meets
        return run_split(dataset, s, config, workdir, plan)

    monkeypatch.setattr(pipeline, "run_split", watch)
    pipeline.train_and_evaluate(_nn(), str(tmp_path / "w"))
    assert seen == [os.getpid(), os.getpid()]
    assert not (tmp_path / "w" / LOCK_FILE).exists()


def test_a_stale_lock_file_is_taken_over(tmp_path, caplog):
    gone = {"pid": 999_999_999, "host": "gone-host", "started": "2026-01-01T00:00:00+00:00"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(gone))  # left by a killed run: unlocked
    with caplog.at_level(logging.WARNING):
        res = pipeline.train_and_evaluate(_nn(), str(tmp_path))
    assert "taking over the lock left by pid 999999999 on host gone-host" in caplog.text
    assert res["num_splits"] == 2 and not (tmp_path / LOCK_FILE).exists()


def test_a_failed_run_releases_its_workdir(tmp_path):
    c = _nn()
    c.method.name = "nope"  # refused after the lock was taken on an existing folder
    with pytest.raises(ValueError):
        pipeline.train_and_evaluate(c, str(tmp_path))
    assert not (tmp_path / LOCK_FILE).exists()
    WorkdirLock(tmp_path).acquire()  # free


def test_a_lock_file_replaced_while_taken_is_locked_anew(tmp_path):
    first = WorkdirLock(tmp_path)
    first.acquire()
    second = WorkdirLock(tmp_path)
    with pytest.raises(WorkdirInUseError):
        second.acquire()
    first.release()  # removes the file: the next one locks a new file
    second.acquire()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    second.release()


def test_the_protocol_locks_each_job_folder_not_the_grid(tmp_path):
    job = tmp_path / "runs" / "synthetic" / "nn" / "split_1"
    job.mkdir(parents=True)
    with WorkdirLock(tmp_path):  # the grid's folder held: the protocol does not lock it
        with WorkdirLock(job), pytest.raises(WorkdirInUseError, match=f"{job} is in use"):
            run_protocol(tiny_protocol(), str(tmp_path))
        assert not list((tmp_path / "runs").rglob("split_*.json"))  # refused before any job
        results = run_protocol(tiny_protocol(), str(tmp_path))
    assert results["synthetic"]["nn"]["num_done"] == 2
    assert not list(tmp_path.rglob(LOCK_FILE))


# --------------------------------------------------------------- processes, slow


@pytest.mark.slow
def test_a_worker_process_meeting_a_held_job_folder_is_one_line(tmp_path, capsys):
    from experiments import main as _main  # noqa: F401 - defines the flags cli reads
    from warca_jax.protocol import pool
    from warca_jax.runs import cli

    jobs = [{"folder": str(tmp_path)}] * 2  # run_job locks the folder before anything else
    capsys.readouterr()
    with WorkdirLock(tmp_path), pytest.raises(SystemExit):
        cli.one_line_errors(lambda argv: pool._run_all(jobs, 2, lambda *a: None))(["main"])
    err = capsys.readouterr().err  # raised in a spawned worker, re-raised by the pool
    assert err == f"error: {tmp_path} is in use by another run: {HOLDER}" + err.split(HOLDER)[1]
    assert err.count("\n") == 1 and "Traceback" not in err


_HOLD = (
    "import sys, time\n"
    "from warca_jax.io.workdir_lock import WorkdirLock\n"
    "WorkdirLock(sys.argv[1]).acquire()\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


def _main(workdir, *flags, config="configs/nn.py:small", popen=False):
    args = [sys.executable, "-m", "experiments.main", f"--config={config}",
            f"--workdir={workdir}", "--config.progress=False", *flags]  # fmt: skip
    if popen:
        return subprocess.Popen(args, cwd=ROOT, env=cpu_env(), stderr=subprocess.PIPE, text=True)
    return subprocess.run(args, cwd=ROOT, env=cpu_env(), capture_output=True, text=True)


@pytest.mark.slow
def test_a_second_process_is_refused_and_a_killed_holder_blocks_nothing(tmp_path):
    wd = tmp_path / "w"
    wd.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(wd)], cwd=ROOT, env=cpu_env(), stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.perf_counter()
        proc = _main(wd, "--verbosity=-1")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        (line,) = proc.stderr.splitlines()
        assert line.startswith(
            f"error: {wd} is in use by another run: pid {holder.pid} on host {socket.gethostname()}"
        ), line
        assert not (wd / "config.json").exists(), time.perf_counter() - t0
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
    proc = _main(wd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"taking over the lock left by pid {holder.pid}" in proc.stderr
    assert (wd / "results.json").exists() and not (wd / LOCK_FILE).exists()


@pytest.mark.slow
def test_two_runs_started_at_once_on_a_new_workdir_run_once(tmp_path):
    wd = tmp_path / "w"
    slow = ("--config.method.num_iters=1500", "--verbosity=-1")
    procs = [_main(wd, *slow, config="configs/warca.py:small", popen=True) for _ in range(2)]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], errs
    winner, loser = (0, 1) if procs[0].returncode == 0 else (1, 0)
    assert f"is in use by another run: pid {procs[winner].pid} on host" in errs[loser]
    assert "Traceback" not in errs[loser]


@pytest.mark.slow
def test_a_run_killed_midway_resumes_to_the_clean_result(tmp_path):
    args = ("--config.method.num_iters=600",)
    config = "configs/warca.py:small"
    killed = _main(tmp_path / "k", *args, config=config, popen=True)
    deadline = time.time() + 300
    while not (tmp_path / "k" / "split_0.json").exists() and killed.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    assert (tmp_path / "k" / LOCK_FILE).exists()  # left behind, unlocked
    resumed = _main(tmp_path / "k", *args, config=config)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"taking over the lock left by pid {killed.pid}" in resumed.stderr
    run_python(["-m", "experiments.main", f"--config={config}", f"--workdir={tmp_path / 'c'}",
                "--config.progress=False", *args], cpu_env())  # fmt: skip
    got, want = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("k", "c"))
    for key in ("rank1", "mAP", "mINP", "AUC"):
        assert got["mean"][key] == want["mean"][key], key
    assert got["cmc"] == want["cmc"]


def _split_results(workdir) -> dict:
    """Every protocol run's split file: its rank-1, mAP and CMC, by path."""
    return {
        str(p.relative_to(workdir)): {k: json.loads(p.read_text())[k] for k in RESULT_KEYS}
        for p in (workdir / "runs").rglob("split_*.json")
    }


RESULT_KEYS = ("rank1", "mAP", "cmc")


@pytest.mark.slow
def test_protocol_shards_at_once_and_workers_share_the_grid(tmp_path):
    common = [
        "-m",
        "experiments.protocol",
        "--config=configs/protocol.py:small",
        "--config.methods=('nn','kissme')",
        "--config.cv.methods=()",
        "--num_workers=2",
    ]
    shards = [
        subprocess.Popen(
            [sys.executable, *common, f"--workdir={tmp_path / 's'}", "--num_shards=2",
             f"--shard_index={i}", "--stage=runs"],
            cwd=ROOT, env=cpu_env(), stderr=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]  # fmt: skip
    errs = [p.communicate(timeout=600)[1] for p in shards]
    assert [p.returncode for p in shards] == [0, 0], [e[-2000:] for e in errs]
    run_python([*common, f"--workdir={tmp_path / 's'}", "--stage=report"], cpu_env())
    run_python([*common, f"--workdir={tmp_path / 'one'}"], cpu_env())
    got = _split_results(tmp_path / "s")
    assert len(got) == 4 and got == _split_results(tmp_path / "one")
    assert not list(tmp_path.rglob(LOCK_FILE))


def test_taking_a_lock_already_held_warns_of_nothing(tmp_path, caplog):
    # the main job takes its workdir's lock, then run_files.prepare asks for it again: that
    # is not a lock "left by" a run that ended, and a foreign config's refusal must not
    # come after such a warning naming this very process
    lock = WorkdirLock(str(tmp_path))
    with caplog.at_level(logging.WARNING):
        lock.acquire()
        lock.acquire()
    assert lock.held
    assert not [r for r in caplog.records if "taking over" in r.getMessage()]
    lock.release()
    assert not os.path.exists(lock.path)
