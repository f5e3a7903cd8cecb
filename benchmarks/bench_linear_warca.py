"""Linear WARCA at the size of the CUHK03 new-protocol training set; prints time and memory.

7,368 training samples (the real identity labels of the protocol's train_idx, 767
identities, read from data/reid_protocols) with synthetic 2,048-d features
carrying an identity signal; D' = 128, minibatch 512, 2,000 iterations. The test part
is 700 held-out synthetic identities (query camera 0, gallery camera 1).

  python -m benchmarks.bench_linear_warca [--candidate_pool=1024] [--sampler=exact]
"""

import json
import os
import platform
import resource
import time
from pathlib import Path

import numpy as np
import scipy.io
from absl import app, flags

from warca_jax import evaluation
from warca_jax.io import config_files
from warca_jax.methods import warca
from warca_jax.runs import defaults

get_config = config_files.load_config_module("configs/warca.py").get_config

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data" / "reid_protocols"

flags.DEFINE_string("data_dir", str(DEFAULT_DATA), "the folder of CUHK03's protocol .mat")
flags.DEFINE_integer("candidate_pool", 1024, "the violator search's pool (0: every sample)")
flags.DEFINE_string("sampler", "exact", "the violator sampler: exact or wsabie")
flags.DEFINE_integer("num_iters", 2000, "training steps")
flags.DEFINE_integer("seed", 0, "data and training seed")
FLAGS = flags.FLAGS


def features_for(labels, rng, dim, signal_dim=64, num_nuisance=32):
    """Identity means in a signal subspace plus strong nuisance directions and noise."""
    basis, _ = np.linalg.qr(rng.standard_normal((dim, signal_dim + num_nuisance)))
    ids, inv = np.unique(labels, return_inverse=True)
    means = 3.0 * rng.standard_normal((len(ids), signal_dim)) @ basis[:, :signal_dim].T
    nuis = 5.0 * rng.standard_normal((len(labels), num_nuisance)) @ basis[:, signal_dim:].T
    return (means[inv] + nuis + rng.standard_normal((len(labels), dim))).astype(np.float32)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    args = FLAGS

    mat = scipy.io.loadmat(Path(args.data_dir) / "cuhk03_new_protocol_config_labeled.mat")
    labels = mat["labels"].ravel().astype(np.int64)
    train_labels = labels[mat["train_idx"].ravel().astype(np.int64) - 1]
    rng = np.random.default_rng(args.seed)
    test_labels = np.repeat(np.arange(10_000, 10_700), 2)  # 700 identities, 2 cameras
    x = features_for(np.concatenate([train_labels, test_labels]), rng, 2048)
    x_train, x_test = x[: len(train_labels)], x[len(train_labels) :]
    cams = np.tile([0, 1], 700)

    run = {k: getattr(args, k) for k in ("num_iters", "sampler", "candidate_pool")}
    cfg = defaults.overridden(
        get_config("linear").method, dim=128, batch_size=512, log_every=500, **run
    )
    t0 = time.perf_counter()
    metric, hist = warca.fit(x_train, train_labels, cfg, seed=args.seed)
    wall = time.perf_counter() - t0
    e = metric.transform(x_test)
    q, g = cams == 0, cams == 1
    res = evaluation.evaluate(e[q], e[g], test_labels[q], test_labels[g], cams[q], cams[g])
    eu = evaluation.evaluate(x_test[q], x_test[g], test_labels[q], test_labels[g], cams[q], cams[g])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        json.dumps(
            {
                "benchmark": "linear_warca",
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
                "n_train": len(train_labels),
                "ids_train": int(len(np.unique(train_labels))),
                "dim": 2048,
                "out_dim": 128,
                "iters": args.num_iters,
                "sampler": args.sampler,
                "candidate_pool": args.candidate_pool,
                "fit_wall_s": round(wall, 2),
                "first_log_s": round(hist[0]["seconds"], 2),
                "peak_rss_gib": round(peak, 2),
                "rank1": round(res["rank1"], 2),
                "mAP": round(res["mAP"], 2),
                "rank1_euclidean": round(eu["rank1"], 2),
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
