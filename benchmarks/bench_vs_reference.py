"""Kernel WARCA (chi2-RBF): warca_jax side by side with the authors' C++ WARCA release.

Both implementations learn a 40-d kernel WARCA metric on the same synthetic re-id problem
(``warca_jax.data.synthetic.make_reference_problem``: 256-d L1-normalised histograms, 4 images
per identity; ``--sizes`` training images, as many test images, generated with seed 0 for
every run: the data is fixed and ``--seeds`` are training seeds). The test embeddings of
each run are ranked by ``warca_jax.evaluation.evaluate`` in this process, the same way for
both: gallery = the test image with camera (image index) 0 of each identity, probes = the
images 1-3; rank-1 and mAP in percent.

Each run is timed as a whole process, from the start of the interpreter or binary to its
exit, with the test embeddings written to a file:

* warca_jax: a fresh ``python`` process (this module with ``--_worker``) imports JAX and
  warca_jax, loads the training and test features from ``.npy``, runs
  ``warca.fit(hist_train, train_labels, configs.warca.get_config("chi2").method)`` (the
  config's defaults, with ``num_iters`` and ``preconditioned`` set: the chi2-RBF kernel
  matrix and its bandwidth 1 / mean training chi2 distance, XLA compilation, Adam
  training) and ``metric.transform(hist_test)``, and saves the embeddings. Its line
  breaks the wall time down: ``imports_s`` (from the script's first line to JAX and
  warca_jax imported), ``load_s``, ``fit_s``, ``first_chunk_s`` (the first history row's
  ``seconds``: kernel matrix, bandwidth, initialisation, compilation and the first
  ``log_every`` steps, ``first_chunk_steps``), ``steady_s_per_100`` (100 steps after the
  first chunk), ``setup_compile_s`` (first chunk minus its share of steady steps: kernel,
  bandwidth, initialisation and compilation), ``transform_s``, ``save_s`` and ``other_s``
  (the rest of the process wall: interpreter start and exit).
* C++: ``OMP_THREAD_LIMIT=2 OMP_WAIT_POLICY=PASSIVE warca_train_double_precision.bin -q
  -k 4 -g GAMMA -r 40 -b 512 -i ITERS -e 0.01 -l 1e-2 -m 512 -s SEED features labels
  model`` then ``warca_predict_double_precision.bin test_features model embeddings``,
  both on comma-separated text (``%.17g``). The wall time is the two processes together
  (their text parsing and model I/O included; not the writing of the text files by this
  script). GAMMA = 1 / mean chi2 distance sum (x-y)^2/(x+y) over the distinct training
  pairs, in float64 NumPy here, outside the timed part (warca_jax computes its bandwidth
  inside ``fit``, in float32, timed).

The C++ release is not part of this repository (it is GPL-3.0; nothing of it is copied
here): build it yourself, outside this repository, from the authors' public repository
(idiap/warca on GitHub): ``apt-get install libopenblas-dev``; in its Makefile add ``-O3
-DNDEBUG`` to CFLAGS and replace ``-lcblas`` by ``-lopenblas``; ``make``. It hard-codes
4 OpenMP threads, hence ``OMP_THREAD_LIMIT=2`` on a 2-core machine, and
``OMP_WAIT_POLICY=PASSIVE``, without which its idle threads spin against OpenBLAS's and
its wall time varies widely between identical runs. Its seed has no
default: ``-s`` is always given. Its kernel ids are those of the enum in src/warca.h (4
= chi2-RBF). Without ``-g`` its float32 kernel is nearly constant on these histograms
and W turns to NaN, so the bandwidth is always passed. Pass the two binaries. Without
them (or if a path does not exist) the C++ side is skipped and warca_jax runs alone.

  python -m benchmarks.bench_vs_reference \\
      --cpp_train=WARCA/warca_train_double_precision.bin \\
      --cpp_predict=WARCA/warca_predict_double_precision.bin \\
      [--sizes=1200,2400,4800] [--seeds=1,2,3] [--preconditioned=both|true|false]
      [--num_iters=2000] [--out=runs.jsonl]

Prints one JSON line per (size, implementation, preconditioned, seed), then the machine
(platform, CPU count, JAX version and devices of the warca_jax processes) and a markdown
table of the means over seeds. The C++ binary uses at most 2 OpenMP threads; warca_jax
uses what JAX gives it (all CPU cores, or the accelerator). All files live in a
temporary directory, removed at the end.
"""

import time

_T_START = time.perf_counter()  # the worker's imports are timed from here

import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIM = 40  # the C++ -r, as warca_jax's config dim (each warca_jax line gives its dim)
CPP_ENV = {"OMP_THREAD_LIMIT": "2", "OMP_WAIT_POLICY": "PASSIVE"}


def _int_list(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


flags.DEFINE_string(
    "sizes",
    "1200,2400,4800",
    "training images per problem, comma-separated (num_ids = 2 * size / 4)",
)
flags.DEFINE_string("seeds", "1,2,3", "training seeds, comma-separated")
flags.DEFINE_string("cpp_train", "", "path to warca_train_double_precision.bin")
flags.DEFINE_string("cpp_predict", "", "path to warca_predict_double_precision.bin")
flags.DEFINE_enum(
    "preconditioned",
    "both",
    ("both", "true", "false"),
    "warca_jax variants to run: the K^-1 preconditioned update, the plain one, or both",
)
flags.DEFINE_integer("num_iters", 2000, "iterations of both")
flags.DEFINE_string("out", "", "append the JSON lines to this file too")
# internal: one warca_jax fit in this process (see _worker)
flags.DEFINE_string("_worker", "", "internal: the folder of one warca_jax fit")
flags.DEFINE_integer("_seed", 0, "internal: the worker's training seed")
flags.DEFINE_integer("_preconditioned", 1, "internal: the worker's preconditioned")
FLAGS = flags.FLAGS


def _worker(args) -> None:
    """One warca_jax fit + test embedding in this fresh process; prints one JSON line."""
    import jax

    from warca_jax.io import config_files
    from warca_jax.methods import warca

    get_config = config_files.load_config_module("configs/warca.py").get_config

    imports_s = time.perf_counter() - _T_START
    folder = args._worker
    t = time.perf_counter()
    x_train = np.load(os.path.join(folder, "train_features.npy"))
    y_train = np.load(os.path.join(folder, "train_labels.npy"))
    x_test = np.load(os.path.join(folder, "test_features.npy"))
    load_s = time.perf_counter() - t

    cfg = get_config("chi2").method
    cfg.num_iters = args.num_iters
    cfg.preconditioned = bool(args._preconditioned)
    t = time.perf_counter()
    metric, history = warca.fit(x_train, y_train, cfg, seed=args._seed)
    fit_s = time.perf_counter() - t
    t = time.perf_counter()
    emb = np.asarray(metric.transform(x_test))
    transform_s = time.perf_counter() - t
    t = time.perf_counter()
    np.save(os.path.join(folder, "embeddings.npy"), emb)
    save_s = time.perf_counter() - t

    first, last = history[0], history[-1]
    steady = None
    if len(history) > 1:
        steady = (last["seconds"] - first["seconds"]) / (last["step"] - first["step"]) * 100
    print(
        json.dumps(
            {
                "imports_s": imports_s,
                "load_s": load_s,
                "fit_s": fit_s,
                "first_chunk_s": first["seconds"],
                "first_chunk_steps": int(first["step"]),
                "steady_s_per_100": steady,
                "setup_compile_s": (
                    None if steady is None else first["seconds"] - steady * first["step"] / 100
                ),
                "transform_s": transform_s,
                "save_s": save_s,
                "dim": int(cfg.dim),
                "final_loss": last["loss"],
                "gamma": float(metric.gamma),
                "jax_version": jax.__version__,
                "jax_devices": [str(d) for d in jax.devices()],
            }
        ),
        flush=True,
    )


def run_warca_jax(folder: str, seed: int, preconditioned: bool, num_iters: int, env: dict):
    """Runs one warca_jax fit in a fresh process; returns (its JSON dict, process wall s)."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.bench_vs_reference",
        f"--_worker={folder}",
        f"--_seed={seed}",
        f"--_preconditioned={int(preconditioned)}",
        f"--num_iters={num_iters}",
    ]
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(
            f"warca_jax worker failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return json.loads(lines[-1]), wall


def chi2_gamma(x: np.ndarray, max_elements: int = 4_000_000) -> float:
    """1 / mean chi2 distance sum (a-b)^2/(a+b) (over dims with a+b > 0), distinct pairs.

    Float64, by blocks of rows against the rows after them (each unordered pair once).
    """
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    block = max(1, max_elements // max(1, n * d))
    total = 0.0
    for a in range(0, n, block):
        rows, rest = x[a : a + block, None, :], x[None, a:, :]
        den = rows + rest
        num = (rows - rest) ** 2
        dist = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0).sum(axis=2)
        # pairs (a + i, a + j) with j > i: each unordered pair exactly once
        total += dist[np.triu(np.ones(dist.shape, dtype=bool), k=1)].sum()
    return float(1.0 / (2.0 * total / (n * (n - 1))))


def run_cpp(train_bin: str, predict_bin: str, folder: str, gamma: float, seed: int, iters: int):
    """Trains + predicts with the C++ binaries; returns (embeddings, train s, predict s)."""
    model = os.path.join(folder, "warca.model")
    out = os.path.join(folder, "cpp_embeddings.txt")
    for f in (model, out):
        if os.path.exists(f):
            os.remove(f)
    env = dict(os.environ, **CPP_ENV)
    train_cmd = [
        train_bin,
        "-q",
        "-k", "4",
        "-g", f"{gamma:.17g}",
        "-r", str(OUT_DIM),
        "-b", "512",
        "-i", str(iters),
        "-e", "0.01",
        "-l", "1e-2",
        "-m", "512",
        "-s", str(seed),
        os.path.join(folder, "train_features.txt"),
        os.path.join(folder, "train_labels.txt"),
        model,
    ]  # fmt: skip
    predict_cmd = [predict_bin, os.path.join(folder, "test_features.txt"), model, out]
    times = []
    for cmd in (train_cmd, predict_cmd):
        t = time.perf_counter()
        proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - t)
        if proc.returncode != 0:
            raise RuntimeError(
                f"{cmd[0]} failed (exit {proc.returncode}):\n"
                + proc.stderr.decode(errors="replace")[-4000:]
            )
    emb = np.loadtxt(out, delimiter=",", ndmin=2)
    return emb, times[0], times[1]


def score(emb: np.ndarray, labels: np.ndarray, cams: np.ndarray) -> dict:
    """Rank-1 and mAP: gallery = camera 0, probes = cameras 1-3 (same-camera junk: none)."""
    from warca_jax import evaluation

    if emb.shape[0] != len(labels) or not np.all(np.isfinite(emb)):
        raise ValueError(f"bad embeddings: shape {emb.shape} for {len(labels)} test images")
    g, q = cams == 0, cams != 0
    res = evaluation.evaluate(emb[q], emb[g], labels[q], labels[g], cams[q], cams[g])
    return {"rank1": float(res["rank1"]), "mAP": float(res["mAP"])}


def _cpp_binaries(args) -> tuple[str, str] | None:
    missing = [
        f"--{name}={path!r}" + ("" if path else " (not given)")
        for name, path in (("cpp_train", args.cpp_train), ("cpp_predict", args.cpp_predict))
        if not (path and os.path.isfile(path) and os.access(path, os.X_OK))
    ]
    if missing:
        print(
            "C++ side SKIPPED: no executable C++ WARCA binary at "
            + ", ".join(missing)
            + "; running warca_jax alone (build the release and pass --cpp_train and "
            "--cpp_predict, see this script's docstring)",
            flush=True,
        )
        return None
    return os.path.abspath(args.cpp_train), os.path.abspath(args.cpp_predict)


def _mean(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return float(np.mean(vals)) if vals else None


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def bench_size(size, seeds, variants, cpp, num_iters, folder, worker_env, emit) -> dict | None:
    """All runs on the problem of ``size`` training images; returns the last worker's info."""
    from warca_jax.data.synthetic import make_reference_problem

    prob = make_reference_problem(size // 2, seed=0)  # the data is fixed; seeds train
    x_train, y_train = prob["hist_train"], prob["train_labels"]
    x_test, y_test, cams = prob["hist_test"], prob["test_labels"], prob["test_cams"]
    np.save(os.path.join(folder, "train_features.npy"), x_train)
    np.save(os.path.join(folder, "train_labels.npy"), y_train)
    np.save(os.path.join(folder, "test_features.npy"), x_test)
    common = {"size": size, "n_train": len(x_train), "n_test": len(x_test), "num_iters": num_iters}
    gamma = None
    if cpp:
        np.savetxt(os.path.join(folder, "train_features.txt"), x_train, delimiter=",", fmt="%.17g")
        np.savetxt(os.path.join(folder, "train_labels.txt"), y_train, fmt="%d")
        np.savetxt(os.path.join(folder, "test_features.txt"), x_test, delimiter=",", fmt="%.17g")
        gamma = chi2_gamma(x_train)
    info = None
    for seed in seeds:
        if cpp:
            emb, train_s, predict_s = run_cpp(*cpp, folder, gamma, seed, num_iters)
            emit(
                {
                    **common,
                    "implementation": "cpp",
                    "preconditioned": None,
                    "seed": seed,
                    **score(emb, y_test, cams),
                    "wall_s": train_s + predict_s,
                    "train_s": train_s,
                    "predict_s": predict_s,
                    "gamma": gamma,
                }
            )
        for pre in variants:
            info, wall = run_warca_jax(folder, seed, pre, num_iters, worker_env)
            emb = np.load(os.path.join(folder, "embeddings.npy"))
            parts = ("imports_s", "load_s", "fit_s", "transform_s", "save_s")
            emit(
                {
                    **common,
                    "implementation": "warca_jax",
                    "preconditioned": pre,
                    "seed": seed,
                    **score(emb, y_test, cams),
                    "wall_s": wall,
                    **{k: v for k, v in info.items() if k != "jax_devices"},
                    "other_s": wall - sum(info[k] for k in parts),
                }
            )
    return info


def machine_info(cpp, worker_info: dict) -> dict:
    """Where the runs ran: platform, CPUs, and JAX's version and devices in the workers."""
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "jax_version": worker_info["jax_version"],
        "jax_devices": worker_info["jax_devices"],
        "cpp": "OMP_THREAD_LIMIT=2" if cpp else "skipped",
    }


def print_table(runs: list[dict], sizes, args) -> None:
    """The markdown table of the means over seeds."""
    print()
    print(
        f"Kernel WARCA (chi2-RBF, D' = {OUT_DIM}, {args.num_iters} iterations), "
        f"mean over seeds {args.seeds}; wall = whole processes (s)"
    )
    print()
    print(
        "| size | C++ rank-1 | warca_jax precond rank-1 | warca_jax plain rank-1 "
        "| C++ wall | warca_jax wall | speed ratio (C++ / warca_jax) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for size in sizes:
        at = [r for r in runs if r["size"] == size]
        c = [r for r in at if r["implementation"] == "cpp"]
        j = [r for r in at if r["implementation"] == "warca_jax"]
        jp = [r for r in j if r["preconditioned"]]
        jn = [r for r in j if not r["preconditioned"]]
        c_wall, j_wall = _mean(c, "wall_s"), _mean(j, "wall_s")
        ratio = c_wall / j_wall if c_wall is not None and j_wall else None
        print(
            f"| {size} | {_fmt(_mean(c, 'rank1'), '.2f')} | {_fmt(_mean(jp, 'rank1'), '.2f')} "
            f"| {_fmt(_mean(jn, 'rank1'), '.2f')} | {_fmt(c_wall, '.1f')} "
            f"| {_fmt(j_wall, '.1f')} | {_fmt(ratio, '.2f')} |"
        )
    print()
    print("warca_jax wall: the mean over all its runs at that size (both variants when run).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    args = FLAGS
    if args._worker:
        _worker(args)
        return
    sizes, seeds = _int_list(args.sizes), _int_list(args.seeds)
    for size in sizes:
        if size < 8 or size % 4:
            raise SystemExit(f"--sizes: each size must be a multiple of 4, >= 8; got {size}")
    if not seeds:
        raise SystemExit("--seeds: give at least one seed")
    if args.num_iters < 1:
        raise SystemExit(f"--num_iters must be >= 1; got {args.num_iters}")
    variants = {"both": [True, False], "true": [True], "false": [False]}[args.preconditioned]
    # the warca_jax processes get the environment as it was given; this process only ranks
    # embeddings, on the CPU, and leaves any accelerator to the timed processes
    worker_env = dict(os.environ)
    os.environ["JAX_PLATFORMS"] = "cpu"
    cpp = _cpp_binaries(args)
    runs, worker_info = [], None
    out = open(args.out, "a") if args.out else None

    def emit(row: dict) -> None:
        runs.append(row)
        timed = ("_s", "_s_per_100", "rank1", "mAP")
        line = json.dumps(
            {k: round(v, 4) if k.endswith(timed) and v is not None else v for k, v in row.items()}
        )
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    try:
        with tempfile.TemporaryDirectory(prefix="bench_vs_reference_") as folder:
            for size in sizes:
                worker_info = bench_size(
                    size, seeds, variants, cpp, args.num_iters, folder, worker_env, emit
                )
        line = json.dumps({"machine": machine_info(cpp, worker_info)})
        print(line, flush=True)
        if out:
            out.write(line + "\n")
    finally:
        if out:
            out.close()
    print_table(runs, sizes, args)


if __name__ == "__main__":
    app.run(main)
