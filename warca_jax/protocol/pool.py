"""Running a stage's jobs: the ones without an outcome, here or in worker processes; shards.

Workers are started with ``spawn`` (JAX is not fork-safe): each imports
``warca_jax.protocol.grid_job`` by name and runs ``grid_job.run_any`` (``jobs.run_job``,
or a whole grid's job) on the pickled job dict, so nothing here depends on how the parent
was started (``python -m experiments.protocol`` or a test calling ``run_protocol``).
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time

import ml_collections
from absl import logging

from warca_jax.io import progress_report, workdir_lock
from warca_jax.protocol import grid_job
from warca_jax.protocol.jobs import claim, outcome


def shard(jobs: list[dict], num_shards: int, shard_index: int) -> list[dict]:
    """Every ``num_shards``-th job, starting at ``shard_index``."""
    if num_shards < 1 or not 0 <= shard_index < num_shards:
        raise ValueError(
            f"shard_index must be in [0, num_shards) with num_shards >= 1; "
            f"got {shard_index} of {num_shards}"
        )
    return jobs[shard_index::num_shards]


def _pending(jobs: list[dict], desc: str) -> tuple[list[dict], list[tuple[dict, str]]]:
    """(the jobs without an outcome, the jobs whose failed.json recorded a failure before).

    Claims every job's folder first (``jobs.claim``: a changed config is refused), and
    refuses, before any job runs, a pending job whose folder another process holds
    (another run of the protocol on this workdir and shard: ``WorkdirInUseError``).
    """
    for job in jobs:
        for one in job.get("points", [job]):  # a grid job: each of its points
            if not one.get("fail"):  # one that fails before training runs no config
                claim(one["folder"], ml_collections.ConfigDict(one["config"]), one.get("workdir"))
    todo, failures = [], []
    for job in jobs:
        if job.get("kind") == "cv_grid":
            if grid_job.pending(job):
                todo.append(job)
            else:
                failures.extend(grid_job.failures(job))
            continue
        got = outcome(job)
        if got is None:
            todo.append(job)
        elif got[0] == "failed":
            failures.append((job, got[1]))
    for job in todo:  # free: this run's own workers take each lock, one job at a time
        workdir_lock.WorkdirLock(job["folder"]).check_free()
    logging.info("%s: %d jobs, %d already done", desc, len(jobs), len(jobs) - len(todo))
    for job, err in failures:
        logging.warning(
            "%s %s split %d failed before (%s); remove %s to run it again",
            job["dataset"],
            job["label"],
            job["split"],
            err,
            job["failed"],
        )
    return todo, failures


def _release_and_exit(signum, frame) -> None:
    """A worker's SIGTERM (its parent stopping the run): its job's folder locks released,
    then the exit; the job's finished files are whole (every write is a rename)."""
    del frame
    workdir_lock.release_all()
    os._exit(128 + signum)


def _start_worker(parent: int, period: float = 1.0) -> None:
    """A worker's initializer: a daemon thread that ends the worker once its parent is gone
    (killed without shutting the pool down), so that no worker is left training for
    nobody. The worker ignores SIGINT: Ctrl-C reaches every process of the terminal's
    group, and it is the parent that stops the run (ending its workers, ``_run_all``),
    with one line instead of a traceback from each worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _release_and_exit)

    def watch():
        while os.getppid() == parent:
            time.sleep(period)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


# The variables that set the threads of the BLAS / LAPACK libraries numpy and scipy load
# (OpenBLAS, an OpenMP build, MKL), read once when the library loads.
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def blas_threads(num_workers: int) -> int:
    """The BLAS threads of each of ``num_workers`` workers: this process's cores shared
    among them, at least one each."""
    if hasattr(os, "sched_getaffinity"):  # the cores this process may run on (Linux)
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    return max(1, cores // num_workers)


def _share_blas_threads(num_workers: int) -> list[str]:
    """Sets, in this process's environment that spawned workers inherit, each BLAS thread
    variable the user has not set to ``blas_threads(num_workers)``; returns the names it
    set, for the caller to remove once the workers have started.

    Each BLAS library starts a thread per core: workers side by side would run more
    threads than cores, and OpenBLAS's threads, which wait by spinning, then slow each
    other's factorisations (eigh, SVD, Cholesky) many times over.
    """
    unset = [k for k in BLAS_THREAD_VARS if k not in os.environ]
    for k in unset:
        os.environ[k] = str(blas_threads(num_workers))
    return unset


class WorkerDiedError(RuntimeError):
    """A worker process ended by a signal from outside the run (the message names its job)."""


def worker_died(processes: dict, jobs: list[dict], stopped=()) -> WorkerDiedError:
    """The error for a pool broken by a worker that died: which worker (pid, signal or exit
    status), which job it held (its folder's lock names the pid), the likely cause, and
    that a rerun resumes. ``processes``: the pool's pid -> Process, all ended; ``stopped``:
    the pids this run killed itself (``_stop_workers``), not named."""
    ended = {pid: proc.exitcode for pid, proc in processes.items() if pid not in stopped}
    dead = {
        pid: code
        for pid, code in ended.items()
        if code is not None and code < 0 and code != -signal.SIGTERM
    } or {pid: code for pid, code in ended.items() if code}
    held = {workdir_lock.holder_pid(job["folder"]): job for job in jobs}
    parts = []
    for pid, code in sorted(dead.items()):
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        job = held.get(pid)
        what = f"{job['dataset']} {job['label']} split {job['split']}" if job else "a job"
        parts.append(f"the worker process {pid} running {what} was ended by {how}")
    told = "; ".join(parts) or "a worker process ended abruptly"
    return WorkerDiedError(
        f"{told}, from outside this run (the system's out-of-memory killer sends SIGKILL when "
        "memory runs out: fewer --num_workers use less); the other workers were stopped and "
        "every finished job is kept: run the same command again to resume"
    )


def _start_pool(todo: list[dict], num_workers: int):
    """(the pool of ``num_workers`` spawned workers running ``todo``, future -> job).

    The pool starts a worker at a submit, after waking its manager thread; that thread
    then waits on the results and on the sentinels of the workers started so far, so a
    worker started once that wait has begun is not watched until the thread wakes again.
    The last worker's death could go unseen (no BrokenProcessPool, ``as_completed`` waiting
    for ever, nothing printed): one more wakeup, once every worker has started, makes the
    thread watch them all (CPython 3.11's pool; later versions submit in the same order).
    """
    ctx = multiprocessing.get_context("spawn")  # JAX is not fork-safe
    # workers sharing a GPU must not each reserve most of its memory up front
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    set_here = _share_blas_threads(num_workers)
    try:
        pool = concurrent.futures.ProcessPoolExecutor(
            num_workers, mp_context=ctx, initializer=_start_worker, initargs=(os.getpid(),)
        )
        futures = {pool.submit(grid_job.run_any, job): job for job in todo}
    finally:  # the workers have started with them; this process keeps its own
        for k in set_here:
            os.environ.pop(k, None)
    with pool._shutdown_lock:  # as submit does: the thread closes its wakeup under it
        pool._executor_manager_thread_wakeup.wakeup()
    return pool, futures


def _stop_workers(processes: dict, grace: float = 10.0) -> set[int]:
    """Stops the pool's workers: SIGTERM (each releases its job's locks, then exits), and
    SIGKILL to those still running ``grace`` seconds later (a worker's handler runs only
    once its main thread is back from a jitted XLA call; the kernel releases a killed
    worker's locks, and the rerun takes its folder over). Returns the pids it killed."""
    for proc in processes.values():
        proc.terminate()
    running = {proc.sentinel: pid for pid, proc in processes.items()}  # ready once it ends
    deadline = time.monotonic() + grace
    while running and time.monotonic() < deadline:
        for ended in multiprocessing.connection.wait(list(running), deadline - time.monotonic()):
            del running[ended]
    for pid in running.values():
        processes[pid].kill()
    return set(running.values())


def _run_all(todo: list[dict], num_workers: int, done) -> None:
    """Runs every job of ``todo`` (in ``num_workers`` processes), ``done(job, outcome)`` each."""
    if num_workers <= 1:
        for job in todo:
            done(job, grid_job.run_any(job))
        return
    pool, futures = _start_pool(todo, num_workers)
    try:
        for fut in concurrent.futures.as_completed(futures):
            done(futures[fut], fut.result())
    except BaseException as error:
        # a bug, Ctrl-C, SIGTERM or a worker killed: stop at once, leaving the finished
        # outcomes; the jobs in flight end with their workers (their folders' locks are
        # taken over, as a dead process's, by the run that resumes)
        processes = dict(getattr(pool, "_processes", None) or {})
        for fut in futures:
            fut.cancel()
        stopped = _stop_workers(processes)
        pool.shutdown(wait=True, cancel_futures=True)  # quick: no worker is left
        if isinstance(error, concurrent.futures.process.BrokenProcessPool):
            raise worker_died(processes, list(futures.values()), stopped) from None
        raise
    pool.shutdown()


def execute(
    jobs: list[dict], *, num_workers: int, progress: bool, desc: str
) -> list[tuple[dict, str]]:
    """Runs the jobs without a recorded outcome (in ``num_workers`` processes).

    Returns:
      The failed jobs with their reasons: those that failed now and those whose
      failed.json recorded a failure before (they are not run again).
    """
    todo, failures = _pending(jobs, desc)
    bar = progress_report.bar(
        len(jobs), desc, show=progress, unit="jobs", initial=len(jobs) - len(todo)
    )

    def done(job, out):
        bar.update(1)
        bar.set_postfix_str(f"{job['dataset']} {job['label']} split {job['split']}")
        for point, error in out.get("failures", []):  # a grid job's
            logging.warning(
                "%s %s split %d (lambda %g, eta %g) failed: %s",
                point["dataset"],
                point["label"],
                point["split"],
                point["config"]["method"]["lam"],
                point["config"]["method"]["learning_rate"],
                error,
            )
            failures.append((point, error))
        if out["status"] == "failed":
            logging.warning(
                "%s %s split %d failed: %s",
                job["dataset"],
                job["label"],
                job["split"],
                out["error"],
            )
            failures.append((job, out["error"]))

    _run_all(todo, num_workers, done)
    bar.close()
    return failures
