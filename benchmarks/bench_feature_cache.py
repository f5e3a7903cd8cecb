"""The cost of the feature cache's checks: reading a valid entry against a plain np.load.

Run from the repository root::

    python benchmarks/bench_feature_cache.py [--viper ~/data/viper] [--num_images 20000]

Two image sets: VIPeR's 1,264 images (``--viper``: the dataset's folder, its cam_a/ and
cam_b/ images; default: 1,264 synthetic 48 x 128 BMP images, VIPeR's size and format, in a
temporary folder) and ``--num_images`` synthetic ones of the same size. For each, a valid
cache entry of random [n, D] float32 features (D of ``--descriptor``; reading does not
depend on the values) is written by ``warca_jax.features.cache.Entry``, then timed (best
of ``--repeats``, milliseconds):

* ``np_load``: a plain ``np.load`` of the entry's array;
* ``earlier_read``: the read before entries were checked: a key over every image's path,
  size and mtime (one ``os.stat`` each), ``np.load``, and a pass checking that every value
  is finite;
* ``checked_read``: ``Entry.read``: every image's stamps (``os.stat``), the record, the
  ``np.load`` and the array's checksum;
* ``content_read``: ``checked_read`` plus a sha256 of every image's bytes (what hashing
  the images on every read would cost);
* the parts (hot only): ``stat_images``, ``checksum``, ``hash_images``.

The four reads take turns within each repeat, so that they meet the same load of a shared
machine.

Each set is timed with the array in the page cache (``hot``) and evicted from it before
every read (``cold``, ``posix_fadvise(DONTNEED)``; the images' metadata stays cached).
One JSON line per set and temperature, with ``checked_vs_np_load`` and
``checked_vs_earlier`` (the checked read's time over the other's, minus 1).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time

import numpy as np
from PIL import Image

from warca_jax import datasets
from warca_jax.features import extraction, feature_cache

VIPER_IMAGES = 1264


def synthetic_images(folder: str, n: int, seed: int) -> list[str]:
    """n random 128 x 48 BMP images (VIPeR's size and format) in ``folder``."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (128, 48, 3), dtype=np.uint8)
    paths = []
    for i in range(n):
        p = os.path.join(folder, f"{i:06d}.bmp")
        pixels = base.copy()
        pixels[i % 128] = rng.integers(0, 256, (48, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(p)
        paths.append(p)
    return paths


def earlier_read(paths, array_path: str, descriptor: str) -> np.ndarray:
    """The read before entries were checked: key over paths, sizes and mtimes; load; finite."""
    h = hashlib.sha256(descriptor.encode())
    for p in paths:
        st = os.stat(p)
        h.update(f"\n{os.path.abspath(p)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    h.hexdigest()
    out = np.load(array_path, allow_pickle=False)
    if not np.isfinite(out).all():
        raise ValueError("non-finite")
    return out


def evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def best_ms(fns: dict, repeats: int, before=None) -> dict:
    """The best of ``repeats`` times of each function, in milliseconds; the functions take
    turns within each repeat, so that they meet the same load of a shared machine."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            if before is not None:
                before()
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return {name: round(1e3 * t, 2) for name, t in best.items()}


def bench(name: str, paths, cache_dir: str, descriptor: str, repeats: int, seed: int):
    desc = extraction.get_descriptor(descriptor)
    shape = (len(paths), desc.dim())
    entry = feature_cache.Entry(
        cache_dir, paths, descriptor=descriptor, options=feature_cache.parameters(desc.fn),
        height=128, width=48,
    )  # fmt: skip
    entry.take_stamps()
    feats = np.random.default_rng(seed).random(shape, dtype=np.float32)
    entry.write(feats)
    assert entry.read(shape) is not None, "the entry just written is not valid"
    path = entry.array_path
    image_bytes = sum(os.path.getsize(p) for p in paths)
    rows = []
    for temperature, before in (("hot", None), ("cold", lambda: evict(path))):
        t = best_ms(
            {
                "np_load": lambda: np.load(path, allow_pickle=False),
                "earlier_read": lambda: earlier_read(paths, path, descriptor),
                "checked_read": lambda: entry.read(shape),
                "content_read": lambda: (entry.read(shape), feature_cache.image_content(paths)),
            },
            repeats,
            before,
        )
        if temperature == "hot":
            parts = {
                "stat_images": lambda: feature_cache.image_stamps(paths),
                "checksum": lambda: feature_cache.array_checksum(feats),
                "hash_images": lambda: feature_cache.image_content(paths),
            }
            t.update(best_ms(parts, repeats))
        rows.append({
            "set": name,
            "images": len(paths),
            "image_mb": round(image_bytes / 1e6, 1),
            "array_mb": round(feats.nbytes / 1e6, 1),
            "descriptor": descriptor,
            "page_cache": temperature,
            **t,
            "checked_vs_np_load": round(t["checked_read"] / t["np_load"] - 1, 3),
            "checked_vs_earlier": round(t["checked_read"] / t["earlier_read"] - 1, 3),
            "content_vs_np_load": round(t["content_read"] / t["np_load"] - 1, 3),
        })  # fmt: skip
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viper", default="", help="VIPeR's folder (default: synthetic)")
    parser.add_argument("--num_images", type=int, default=20000)
    parser.add_argument("--descriptor", default="color_lbp")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    # The images are all written before their entry: their stamps can be trusted at once.
    feature_cache.RACY_NS = 0
    with tempfile.TemporaryDirectory() as tmp:
        if args.viper:
            viper = list(datasets.load("viper", os.path.expanduser(args.viper)).paths)
            sets = [("viper", viper)]
        else:
            viper = synthetic_images(os.path.join(tmp, "viper"), VIPER_IMAGES, args.seed)
            sets = [("viper_synthetic", viper)]
        big = synthetic_images(os.path.join(tmp, "big"), args.num_images, args.seed + 1)
        sets.append((f"synthetic_{args.num_images}", big))
        for name, paths in sets:
            for row in bench(name, paths, os.path.join(tmp, "cache"), args.descriptor,
                             args.repeats, args.seed):  # fmt: skip
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
