"""XQDA on LOMO against Liao et al.'s published VIPeR numbers, one suspect at a time.

Liao et al. (CVPR 2015) report LOMO + XQDA on VIPeR at 40.00 / 68.13 / 80.51 / 91.08
(rank 1 / 5 / 10 / 20), from their public demo: 10 random 316 / 316 splits, camera A as
the gallery and camera B as the probes. This script reads VIPeR from its images with the
project's loader, extracts the project's LOMO (``warca_jax.features.lomo``) and fits the
project's XQDA (``warca_jax.methods.xqda``) with one setting changed at a time:

  features   the colour preprocessing (``lomo``'s ``retinex``): ``msrcr`` (the project's
             approximation of the original's Retinex, its earlier default), ``msrcp``
             (chromaticity preserved), ``none`` (HSV of the image itself); or
             ``unnormalised`` (max-pooled counts, no log and no L2).
  ridge      the ridge on Sigma_I: ``relative`` reg * trace(Sigma_I) / D at reg 1, 0.1,
             0.01, or ``absolute`` 0.001 (the original's lambda, on its L2-normalised
             features).
  pairs      ``all`` ordered pairs of the training images, or ``cross_camera`` (the
             original's two views: a camera-A image against a camera-B image).
  probe      ``cam_a`` (the loader's default) or ``cam_b`` (the demo's: gallery camera A).
  basis      ``generalized`` (the paper's eq. 14-15, the default) or ``svd`` (the original
             code's: left singular vectors of inv(Sigma_I) Sigma_E).

Each row is rank 1 / 5 / 10 / 20 (mean over the splits, ± std of rank-1), the subspace
size XQDA kept, and the seconds. It also prints the extraction speed of LOMO (images per
second, after compilation) on the machine.

  python benchmarks/bench_lomo_xqda.py --viper=PATH/VIPeR [--splits=10] [--rows=all]
  python benchmarks/bench_lomo_xqda.py --cuhk01=PATH/CUHK01 --rows=xqda_original,no_retinex,msrcp

CUHK01 is read with Liao's reading (``protocol='multi_shot'``: both camera-A images of a
test person probe, both camera-B images gallery; 486 test people), its images resized to
128 x 48; its published row is Liao et al.'s 63.21 / 83.89 / 90.04 / 94.16. ``--orl`` reads
the ORL faces of data/ (the loader's 10 splits, no published row).

``--rows`` picks rows by name (comma-separated; ``all`` runs every row below).
"""

import argparse
import json
import os
import platform
import time

import jax
import numpy as np

from warca_jax import dataset_arrays, datasets, defaults, evaluation
from warca_jax.features import load_images
from warca_jax.features.lomo import lomo
from warca_jax.methods import xqda

# the ORL faces shipped in data/ (grey faces: LOMO's colour part sees only the value)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORL_PATH = os.path.join(ROOT, "data", "orl_faces")

# name: (features, ridge, reg, pairs, probe[, basis]); features name a retinex of ``lomo``
# or "unnormalised" (the default retinex, no log and no L2: an absolute ridge of 0.001 is
# refused on its raw counts, so it compares with no_retinex_relative_1)
ROWS = {
    "earlier": ("msrcr", "relative", 1.0, "all", "cam_a"),
    "ridge_absolute": ("msrcr", "absolute", 1e-3, "all", "cam_a"),
    "cross_camera": ("msrcr", "relative", 1.0, "cross_camera", "cam_a"),
    "probe_cam_b": ("msrcr", "relative", 1.0, "all", "cam_b"),
    "xqda_original": ("msrcr", "absolute", 1e-3, "cross_camera", "cam_b"),
    "no_retinex": ("none", "absolute", 1e-3, "cross_camera", "cam_b"),
    "msrcp": ("msrcp", "absolute", 1e-3, "cross_camera", "cam_b"),
    "unnormalised": ("unnormalised", "relative", 1.0, "all", "cam_a"),
    "no_retinex_relative_1": ("none", "relative", 1.0, "all", "cam_a"),
    "no_retinex_relative_0.01": ("none", "relative", 0.01, "cross_camera", "cam_b"),
    "no_retinex_all_pairs": ("none", "absolute", 1e-3, "all", "cam_b"),
    "no_retinex_cam_a": ("none", "absolute", 1e-3, "cross_camera", "cam_a"),
    "svd_basis": ("msrcr", "absolute", 1e-3, "cross_camera", "cam_b", "svd"),
    "no_retinex_svd_basis": ("none", "absolute", 1e-3, "cross_camera", "cam_b", "svd"),
}
FEATURES = {
    "none": {"retinex": "none"},
    "msrcr": {"retinex": "msrcr"},
    "msrcp": {"retinex": "msrcp"},
    "unnormalised": {"normalize": False},
}
# Liao et al.'s published LOMO + XQDA (rank 1 / 5 / 10 / 20): VIPeR from their demo's CMC;
# CUHK01 from their paper (486 test people, both camera-A images probes).
PUBLISHED = {"viper": (40.00, 68.13, 80.51, 91.08), "cuhk01": (63.21, 83.89, 90.04, 94.16)}


def describe(paths, options, batch=256):
    """LOMO of every image (``options`` passed to ``lomo``) and images per second."""
    images = load_images(paths)
    fn = jax.jit(lambda x: lomo(x, **options))
    fn(images[:batch]).block_until_ready()  # compile
    t0 = time.perf_counter()
    out = [np.asarray(fn(images[s : s + batch])) for s in range(0, len(images), batch)]
    seconds = time.perf_counter() - t0
    return np.concatenate(out).astype(np.float32), len(images) / seconds


def run_row(name, row, sets, feats, splits, eval_cfg):
    feature, ridge, reg, pairs, probe, basis = (*row, "generalized")[:6]
    ds = sets[probe if probe in sets else next(iter(sets))]._replace(features=feats[feature])
    method = defaults.overridden(
        xqda.default_config(), ridge=ridge, reg=reg, pairs=pairs, basis=basis
    )
    ranks, kept, t0 = [], [], time.perf_counter()
    for s, split in enumerate(ds.splits[:splits]):
        train = split.train_idx
        try:
            metric, _ = xqda.fit(ds.features[train], ds.labels[train], method, cams=ds.cams[train])
        except ValueError as e:  # a setting the data refuse: the row says so and the rest run
            print(json.dumps(dict(data=ds.name, row=name, split=s, refused=str(e))), flush=True)
            return None
        kept.append(metric.projection.shape[0])
        r = evaluation.evaluate_metric(metric, ds, split, eval_cfg)
        ranks.append([r["rank1"], r["rank5"], r["rank10"], r["rank20"]])
    a = np.asarray(ranks)
    out = dict(data=ds.name, row=name, features=feature, ridge=ridge, reg=reg, pairs=pairs,
               probe=probe, basis=basis,
               rank1=round(float(a[:, 0].mean()), 2), rank1_std=round(float(a[:, 0].std()), 2),
               rank5=round(float(a[:, 1].mean()), 2), rank10=round(float(a[:, 2].mean()), 2),
               rank20=round(float(a[:, 3].mean()), 2), dims_kept=int(np.mean(kept)),
               seconds=round(time.perf_counter() - t0, 1))  # fmt: skip
    print(json.dumps(out), flush=True)
    return out


def load_sets(args):
    """{probe rule: ImageSet} of the dataset chosen: VIPeR with both probe cameras; CUHK01
    with Liao's reading (``protocol='multi_shot'``: camera A probes), for every row."""
    if args.viper:
        return {p: datasets.load("viper", args.viper, probe=p) for p in ("cam_a", "cam_b")}
    if args.orl:
        return {"cam_a": datasets.load("orl", ORL_PATH)}
    return {"cam_a": datasets.load("cuhk01", args.cuhk01, protocol="multi_shot")}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--viper", default="", help="VIPeR folder holding cam_a/ and cam_b/")
    p.add_argument("--cuhk01", default="", help="CUHK01 folder holding campus/ (instead)")
    p.add_argument("--orl", action="store_true", help="the ORL faces of data/ (instead)")
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--rows", default="all", help=f"comma-separated, from {list(ROWS)}")
    args = p.parse_args()
    names = list(ROWS) if args.rows == "all" else [r for r in args.rows.split(",") if r]
    unknown = sorted(set(names) - set(ROWS))
    if unknown:
        p.error(f"unknown rows {unknown}; expected names from {list(ROWS)}")
    if bool(args.viper) + bool(args.cuhk01) + bool(args.orl) != 1:
        p.error("give one of --viper, --cuhk01 and --orl")
    root = args.viper or args.cuhk01 or ORL_PATH
    if not os.path.isdir(root):
        p.error(f"{root!r} is not a folder")
    print(json.dumps(dict(machine=platform.machine(), cpus=os.cpu_count(),
                          device=str(jax.devices()[0]), splits=args.splits)), flush=True)
    image_sets = load_sets(args)
    paths = list(next(iter(image_sets.values())).paths)
    assert all(list(s.paths) == paths for s in image_sets.values())
    feats = {}
    for feature in sorted({ROWS[n][0] for n in names}):
        feats[feature], speed = describe(paths, FEATURES[feature])
        print(json.dumps(dict(features=feature, images=len(paths), dim=feats[feature].shape[1],
                              images_per_second=round(speed, 1))), flush=True)
    sets = {
        probe: dataset_arrays.validated_dataset(
            feats[next(iter(feats))], s.labels, s.cams, s.splits, s.name, s.same_camera_matches
        )
        for probe, s in image_sets.items()
    }
    eval_cfg = defaults.base_config().eval
    rows = [run_row(n, ROWS[n], sets, feats, args.splits, eval_cfg) for n in names]
    rows = [r for r in rows if r is not None]
    name = next(iter(sets.values())).name
    print("\n| row | features | ridge | pairs | probe | rank 1 | 5 | 10 | 20 | kept |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    if name in PUBLISHED:
        pub = " | ".join(f"{v:.2f}" for v in PUBLISHED[name])
        print(f"| Liao et al. (published) | | absolute 0.001 | cross-camera | | {pub} | |")
    for r in rows:
        ridge = f"{r['ridge']} {r['reg']:g}"
        probe = {"viper": r["probe"], "cuhk01": "cam_a (multi-shot)"}.get(name, "loader's")
        print(f"| {r['row']} | {r['features']} | {ridge} | {r['pairs']} | {probe} | "
              f"{r['rank1']:.2f} ± {r['rank1_std']:.2f} | {r['rank5']:.2f} | {r['rank10']:.2f} | "
              f"{r['rank20']:.2f} | {r['dims_kept']} |")


if __name__ == "__main__":
    main()
