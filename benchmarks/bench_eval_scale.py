"""Times `warca_jax.evaluation.evaluate` on a large synthetic re-id problem.

Run from the repository root::

    python -m benchmarks.bench_eval_scale [--num_queries 100000] [--num_gallery 1000000]
        [--dim 64] [--images_per_id 10] [--num_devices 0] [--gallery_chunk N]
        [--block_size 256] [--seed 0]

The embeddings are L2-normalised float32 rows: an identity centre plus noise, generated
block by block so that generation itself needs no more memory than the result. Each
identity has ``images_per_id`` gallery images alternating between 2 cameras; query ``i``
shows identity ``i mod num_ids`` in a random camera, so its same-camera gallery images are
junk. One evaluation on the first ``block_size`` queries warms up (compiles) the programs of
the full gallery; the second, timed, ranks every query. On a CPU,
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (set before the run) makes N devices.
Prints one line of JSON.
"""

from __future__ import annotations

import json
import resource
import time

import jax
import numpy as np
from absl import app, flags

from warca_jax import evaluation
from warca_jax.maths import device_mesh

_GEN_BLOCK = 65536  # rows generated at a time

flags.DEFINE_integer("num_queries", 100_000, "queries", lower_bound=1)
flags.DEFINE_integer("num_gallery", 1_000_000, "gallery images", lower_bound=1)
flags.DEFINE_integer("dim", 64, "embedding dimension", lower_bound=1)
flags.DEFINE_integer("images_per_id", 10, "gallery images per identity", lower_bound=1)
flags.DEFINE_float("noise", 1.0, "noise / centre norm")
flags.DEFINE_string("metric", "euclidean", "the distance")
flags.DEFINE_integer("num_devices", 0, "0: all devices")
flags.DEFINE_integer(
    "gallery_chunk", evaluation.GALLERY_CHUNK, "gallery rows per step", lower_bound=1
)
flags.DEFINE_integer("block_size", 256, "queries per block", lower_bound=1)
flags.DEFINE_integer("seed", 0, "the problem's seed")
FLAGS = flags.FLAGS


def embeddings(
    labels: np.ndarray, centres: np.ndarray, *, noise: float, seed: int, stream: int
) -> np.ndarray:
    """L2-normalised ``centres[labels] + noise * N(0, I)``, float32, built in row blocks.

    Args:
      labels: [n] identity index of each row. centres: [num_ids, d] float32.
      noise: standard deviation of the per-coordinate noise.
      seed, stream: the random stream (query and gallery use different streams).

    Returns:
      [n, d] float32 unit rows.
    """
    n, d = len(labels), centres.shape[1]
    out = np.empty((n, d), np.float32)
    for start in range(0, n, _GEN_BLOCK):
        rng = np.random.default_rng([seed, stream, start])
        block = out[start : start + _GEN_BLOCK]
        rng.standard_normal(block.shape, dtype=np.float32, out=block)
        block *= noise
        block += centres[labels[start : start + _GEN_BLOCK]]
        block /= np.linalg.norm(block, axis=1, keepdims=True)
    return out


def make_problem(args) -> tuple:
    """(xq, xg, ql, gl, qc, gc) of the synthetic problem described in the module docstring."""
    num_ids = max(1, args.num_gallery // args.images_per_id)
    rng = np.random.default_rng([args.seed, 0])
    centres = rng.standard_normal((num_ids, args.dim), dtype=np.float32)
    centres /= np.sqrt(args.dim)  # unit length on average, like the noise at noise = 1/sqrt(d)
    gl = np.arange(args.num_gallery) % num_ids
    gc = (np.arange(args.num_gallery) // num_ids) % 2
    ql = np.arange(args.num_queries) % num_ids
    qc = rng.integers(0, 2, args.num_queries)
    noise = args.noise / np.sqrt(args.dim)
    xg = embeddings(gl, centres, noise=noise, seed=args.seed, stream=1)
    xq = embeddings(ql, centres, noise=noise, seed=args.seed, stream=2)
    return xq, xg, ql + 1, gl + 1, qc, gc  # labels from 1: 0 means distractor


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    args = FLAGS

    mesh = device_mesh.make_mesh(args.num_devices)
    xq, xg, ql, gl, qc, gc = make_problem(args)
    kw = dict(
        distance=args.metric,
        mesh=mesh,
        gallery_chunk=args.gallery_chunk,
        block_size=args.block_size,
        max_rank=20,
    )
    warm = slice(0, min(args.block_size, args.num_queries))
    evaluation.evaluate(xq[warm], xg, ql[warm], gl, qc[warm], gc, **kw)
    t0, cpu0 = time.perf_counter(), time.process_time()
    res = evaluation.evaluate(xq, xg, ql, gl, qc, gc, **kw)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    pairs = args.num_queries * args.num_gallery
    print(
        json.dumps(
            {
                "benchmark": "eval_scale",
                "device_kind": jax.devices()[0].device_kind,
                "num_devices": int(mesh.devices.size),
                "nq": args.num_queries,
                "ng": args.num_gallery,
                "dim": args.dim,
                "metric": args.metric,
                "images_per_id": args.images_per_id,
                "gallery_chunk": args.gallery_chunk,
                "block_size": args.block_size,
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "pairs_per_s": float(f"{pairs / wall:.4g}"),
                "peak_rss_gib": round(
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3
                ),
                "gallery_gib": round(xg.nbytes / 2**30, 3),
                "rank1": round(res["rank1"], 2),
                "mAP": round(res["mAP"], 2),
                "mINP": round(res["mINP"], 2),
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
