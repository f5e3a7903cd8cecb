"""Linear WARCA at a million samples: wall time, time per iteration and peak memory.

Synthetic re-id features (``--num_samples`` x ``--dim``, 4 images per identity over 2
cameras, the identity in a 32-d subspace under stronger nuisance directions and noise)
are written block by block to a memory-mapped ``.npy`` in ``--data_dir`` (reused when
there) and trained on from the map, as a user's own large feature file would be. The
candidate pool bounds the violator search (``--candidate_pool``), so a step's memory
does not grow with N. After training, 1,000 held-out identities (query camera 0,
gallery camera 1) are ranked with the learned metric and with Euclidean distance.

  python -m benchmarks.bench_warca_scale                       # N = 1,000,000, D = 256
  python -m benchmarks.bench_warca_scale --scaling             # time/iteration vs N
  python -m benchmarks.bench_warca_scale --devices=1,2,4,8     # vs forced host devices
  python -m benchmarks.bench_warca_scale --kernel=rbf --num_landmarks=512   # Nystroem

``--devices`` runs each count in a fresh process with
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (on a CPU, N host devices share
its cores: the ratio shows the cost of the sharded program, not a speed-up). On a machine
with several accelerators, ``--num_devices`` picks how many of them train.

Prints one JSON line per run: device, N, D, D', iterations, wall seconds (fit, compile
included), seconds per iteration (after the first logged chunk), peak RSS (GiB), the
features' size (GiB), and held-out rank-1 / mAP of WARCA and of Euclidean distance.
"""

import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_IDS = 1000

flags.DEFINE_integer("num_samples", 1_000_000, "training samples N (4 images per identity)")
flags.register_validator(
    "num_samples",
    lambda n: n >= 8 and n % 4 == 0,
    "--num_samples must be a multiple of 4 (4 images per identity), >= 8",
)
flags.DEFINE_integer("dim", 256, "feature dimension D")
flags.DEFINE_integer("out_dim", 64, "WARCA's output dimension D'")
flags.DEFINE_integer("num_iters", 2000, "training steps")
flags.DEFINE_integer("batch_size", 512, "minibatch size")
flags.DEFINE_integer("candidate_pool", 4096, "the violator search's pool")
flags.DEFINE_integer("log_every", 100, "steps per logged chunk")
flags.DEFINE_string("kernel", "none", "none, or a kernel for Nystroem WARCA")
flags.DEFINE_integer("num_landmarks", 512, "Nystroem's landmarks")
flags.DEFINE_integer("num_devices", 0, "0: all visible devices")
flags.DEFINE_string("data_dir", "/tmp/warca_scale", "where the features' .npy is written")
flags.DEFINE_integer("seed", 0, "data and training seed")
flags.DEFINE_bool("scaling", False, "N = 1e4, 1e5, 1e6 (--num_iters)")
flags.DEFINE_string("devices", "", "comma-separated forced host device counts")
FLAGS = flags.FLAGS


def write_features(path: Path, n: int, dim: int, seed: int, block: int = 100_000) -> None:
    """Writes [n + 2 * TEST_IDS, dim] float32 features to ``path`` block by block."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, 48)))
    signal, nuisance = basis[:, :32].T, basis[:, 32:].T
    total = n + 2 * TEST_IDS
    out = np.lib.format.open_memmap(path.with_suffix(".tmp.npy"), "w+", np.float32, (total, dim))
    for s in range(0, total, block):
        rows = min(block, total - s)
        ids = _labels(np.arange(s, s + rows), n)
        # each identity's mean drawn from its own seed, so blocks need not hold whole ids
        uniq, inv = np.unique(ids, return_inverse=True)
        means = np.stack([np.random.default_rng([seed, i]).standard_normal(32) for i in uniq])
        x = 1.5 * means[inv] @ signal
        x += 4.0 * rng.standard_normal((rows, 16)) @ nuisance
        x += rng.standard_normal((rows, dim))
        out[s : s + rows] = x
    out.flush()
    del out
    os.replace(path.with_suffix(".tmp.npy"), path)


def _labels(rows: np.ndarray, n: int) -> np.ndarray:
    """Training rows: 4 images per identity; the 2 * TEST_IDS test rows: 2 per identity."""
    train = rows < n
    return np.where(train, rows // 4, n // 4 + 1 + (rows - n) // 2)


def run(args, n: int) -> dict:
    """One fit on ``n`` training samples with the flags ``args``; its JSON row."""
    import jax

    from warca_jax import evaluation
    from warca_jax.io import config_files
    from warca_jax.methods import warca
    from warca_jax.runs import defaults

    get_config = config_files.load_config_module("configs/warca.py").get_config

    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"warca_scale_{n}x{args.dim}_seed{args.seed}.npy"
    t0 = time.perf_counter()
    if not path.exists():
        write_features(path, n, args.dim, args.seed)
    gen_seconds = time.perf_counter() - t0
    feats = np.load(path, mmap_mode="r")
    labels = _labels(np.arange(n), n)

    cfg = defaults.overridden(
        get_config("linear").method,
        dim=args.out_dim,
        batch_size=args.batch_size,
        num_iters=args.num_iters,
        candidate_pool=args.candidate_pool,
        log_every=args.log_every,
        num_devices=args.num_devices,
    )
    if args.kernel != "none":  # kernel WARCA on Nystroem features: N x N is out of reach
        cfg.update(kernel=args.kernel, kernel_approx="nystroem", num_landmarks=args.num_landmarks)
    t0 = time.perf_counter()
    metric, hist = warca.fit(feats[:n], labels, cfg, seed=args.seed)
    wall = time.perf_counter() - t0
    per_iter = (hist[-1]["seconds"] - hist[0]["seconds"]) / max(args.num_iters - args.log_every, 1)

    test = np.asarray(feats[n:])
    tl = _labels(np.arange(n, n + 2 * TEST_IDS), n)
    q, g = np.arange(0, 2 * TEST_IDS, 2), np.arange(1, 2 * TEST_IDS, 2)
    cams = np.tile([0, 1], TEST_IDS)
    emb = metric.transform(test)
    learned = evaluation.evaluate(emb[q], emb[g], tl[q], tl[g], cams[q], cams[g])
    euclid = evaluation.evaluate(test[q], test[g], tl[q], tl[g], cams[q], cams[g])
    dev = jax.devices()
    return {
        "device": f"{len(dev)} x {dev[0].device_kind}",
        "mesh_devices": args.num_devices or len(dev),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "num_samples": n,
        "dim": args.dim,
        "out_dim": args.out_dim,
        "num_iters": args.num_iters,
        "batch_size": args.batch_size,
        "candidate_pool": args.candidate_pool,
        "kernel": args.kernel
        if args.kernel == "none"
        else f"{args.kernel} (Nystroem, {args.num_landmarks} landmarks)",
        "generate_seconds": round(gen_seconds, 1),
        "fit_seconds": round(wall, 2),
        "seconds_per_iter": round(per_iter, 5),
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "features_gib": round(n * args.dim * 4 / 2**30, 2),
        "rank1": round(learned["rank1"], 2),
        "mAP": round(learned["mAP"], 2),
        "euclidean_rank1": round(euclid["rank1"], 2),
        "euclidean_mAP": round(euclid["mAP"], 2),
    }


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    args = FLAGS
    if args.devices:
        base = [a for a in sys.argv[1:] if not a.startswith("--devices")]
        ref = None
        for count in [int(c) for c in args.devices.split(",")]:
            env = dict(os.environ, JAX_PLATFORMS="cpu")
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={count}"
            cmd = [sys.executable, "-m", "benchmarks.bench_warca_scale", *base]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
            if out.returncode:
                sys.exit(out.stderr[-2000:])
            for line in out.stdout.splitlines():
                row = json.loads(line)
                ref = ref or row["seconds_per_iter"]
                row["ratio_to_first"] = round(row["seconds_per_iter"] / ref, 2)
                print(json.dumps(row), flush=True)
        return
    sizes = (10_000, 100_000, 1_000_000) if args.scaling else (args.num_samples,)
    for n in sizes:
        print(json.dumps(run(args, n)), flush=True)


if __name__ == "__main__":
    app.run(main)
