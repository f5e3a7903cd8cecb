"""Times `warca_jax.evaluation.evaluate` at Market-1501 scale.

Run from the repository root::

    python benchmarks/bench_evaluation.py [--data_dir DIR] [--metric euclidean]

Uses the real Market-1501 query/gallery identities and cameras (3,368 x 19,732) and random
2,048-d float32 features with an identity signal, then prints warm time, time including
compilation, peak RSS and the headline metrics. Target: < 5 s and < 4 GiB on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import scipy.io

from warca_jax.evaluation import evaluate

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data" / "reid_protocols"


def load_vector(path: Path) -> np.ndarray:
    """Loads the single array stored in a .mat file as a flat int64 vector."""
    mat = scipy.io.loadmat(path)
    keys = [k for k in mat if not k.startswith("__")]
    if len(keys) != 1:
        raise ValueError(f"{path}: expected one array, found keys {keys}")
    return np.asarray(mat[keys[0]]).ravel().astype(np.int64)


def make_features(labels: np.ndarray, rng: np.random.Generator, dim: int) -> np.ndarray:
    """Identity centre plus noise, so that ranking is informative but not perfect."""
    ids, inverse = np.unique(labels, return_inverse=True)
    centres = rng.standard_normal((len(ids), dim), dtype=np.float32)
    noise = rng.standard_normal((len(labels), dim), dtype=np.float32)
    return 0.3 * centres[inverse] + noise


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--metric", default="euclidean")
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    ql = load_vector(args.data_dir / "queryID.mat")
    qc = load_vector(args.data_dir / "queryCam.mat")
    gl = load_vector(args.data_dir / "testID.mat")
    gc = load_vector(args.data_dir / "testCam.mat")
    rng = np.random.default_rng(args.seed)
    # Shared centres for query and gallery identities: one draw over both label sets.
    feats = make_features(np.concatenate([ql, gl]), rng, args.dim)
    xq, xg = feats[: len(ql)], feats[len(ql) :]
    print(f"queries {xq.shape}, gallery {xg.shape}, metric {args.metric}")

    t0 = time.perf_counter()
    evaluate(xq, xg, ql, gl, qc, gc, distance=args.metric)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = evaluate(xq, xg, ql, gl, qc, gc, distance=args.metric)
    warm = time.perf_counter() - t0
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux

    print(f"wall seconds (warm):             {warm:.2f}")
    print(f"wall seconds (including compile): {cold:.2f}")
    print(f"peak RSS:                         {rss_gib:.2f} GiB")
    print(f"rank1 {res['rank1']:.2f}  mAP {res['mAP']:.2f}  mINP {res['mINP']:.2f}")
    print(f"num_valid {res['num_valid']}  num_skipped {res['num_skipped']}")


if __name__ == "__main__":
    main(sys.argv[1:])
