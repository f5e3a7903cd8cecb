"""Throughput of the image descriptors (colour + LBP, LOMO) on random 128 x 48 images.

Run from the repository root::

    python benchmarks/bench_features.py [--batch_size 256] [--num_color_lbp 2048] [--num_lomo 512]

For each descriptor, prints one JSON line: images/s over the whole set in batches of
--batch_size (compilation excluded: the first batch is run once before timing), the
compile time (first call minus a warm call) and the device. Target for color_lbp:
more than 500 images/s on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import numpy as np

from warca_jax.features.extraction import DESCRIPTORS


def bench(name: str, images: np.ndarray, batch_size: int) -> dict:
    fn = DESCRIPTORS[name].fn
    batches = [images[i : i + batch_size] for i in range(0, len(images), batch_size)]
    batches = [b for b in batches if len(b) == batch_size]  # one compiled shape
    t0 = time.perf_counter()
    jax.block_until_ready(fn(batches[0]))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(fn(batches[0]))
    warm_one = time.perf_counter() - t0
    t0 = time.perf_counter()
    for b in batches:
        out = np.asarray(fn(b))
    elapsed = time.perf_counter() - t0
    n = batch_size * len(batches)
    return {
        "descriptor": name,
        "dim": int(out.shape[1]),
        "images": n,
        "batch_size": batch_size,
        "images_per_s": round(n / elapsed, 1),
        "seconds": round(elapsed, 3),
        "compile_s": round(first - warm_one, 3),
        "device": str(jax.devices()[0]),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--num_color_lbp", type=int, default=2048)
    parser.add_argument("--num_lomo", type=int, default=512)
    parser.add_argument("--only", default="", help="comma-separated descriptor names")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    counts = {"color_lbp": args.num_color_lbp, "lomo": args.num_lomo}
    names = args.only.split(",") if args.only else list(counts)
    for name in names:
        n = max(counts[name], args.batch_size)
        images = rng.integers(0, 256, size=(n, 128, 48, 3), dtype=np.uint8)
        print(json.dumps(bench(name, images, args.batch_size)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
