"""Variants of the colour + LBP descriptor on VIPeR: does the descriptor explain a gap?

The WARCA paper's section 4.2 gives the 2,580-d descriptor in one sentence (16-bin
histograms of RGB, YUV and HSV and uniform LBP on 6 horizontal stripes, L1-normalised per
stripe). Which 8 colour channels, where the bin edges lie and which pixels the LBP
histograms count are left open, and the MATLAB code the features were first computed with
settles them differently from ``warca_jax.features.color_lbp``'s defaults. This script
computes each variant below from VIPeR's images (the published cam_a/ cam_b/ layout), fits
each ``--labels`` config label with the protocol's VIPeR settings (D' = 100, the label's
defaults: ``bench_viper_sweep.method_config``) and prints one JSON line per (variant,
label, seed, split) and a markdown table of rank-1 / mAP, the mean over ``--splits``.

``--on=validation`` (the default) scores the protocol's cross-validation people (each
split's training people fitted but ``--val_fraction`` of them, those scored; default the
protocol's share, 20%; the figures in benchmarks/RESULTS.md used 0.3), so that a choice
made here does not look at the test people; ``--on=test`` scores the splits' test people (probe
cam_a, gallery cam_b). With several ``--seeds`` (fit seed = seed + split, the protocol
runner's rule) the table gives the mean ± std over the seeds of the split-means: the
size of a difference that the training draws alone make.

  python benchmarks/bench_viper_descriptors.py --viper=PATH/VIPeR \
      [--labels=warca:chi2,lfda:chi2] [--variants=default,centred] [--seeds=0,1,2]
"""

import argparse
import json
import platform
import time

import bench_viper_sweep as sweep
import jax
import numpy as np

from warca_jax import dataset_arrays, datasets, defaults
from warca_jax.features import color_lbp as clbp
from warca_jax.features import image_files
from warca_jax.protocol import plan

MATLAB_CHANNELS = ("R", "G", "B", "H", "S", "V_hsv", "Y", "Cb")  # RGB, HSV, YCbCr's Y and Cb
# name: (what it is, color_lbp's keyword arguments)
VARIANTS = {
    "default": ("R G B Y U V H S, 16 equal bins, LBP of every pixel (the library's)", {}),
    "rgb_hsv_ycb": ("R G B H S V Y Cb: HSV with its value, YCbCr's Y and Cb for YUV",
                    {"channels": MATLAB_CHANNELS}),
    "rgb_ycbcr_hs": ("R G B Y Cb Cr H S: JPEG YCbCr for the analogue YUV",
                     {"channels": ("R", "G", "B", "Y", "Cb", "Cr", "H", "S")}),
    "centred": ("bins centred on 0, 1/16, ..., 15/16 (MATLAB hist)", {"binning": "centred"}),
    "interior": ("LBP of each stripe's interior pixels (MATLAB lbp on the crop)",
                 {"lbp_pixels": "interior"}),
    "matlab": ("rgb_hsv_ycb + centred + interior",
               {"channels": MATLAB_CHANNELS, "binning": "centred", "lbp_pixels": "interior"}),
    "extended": ("14 channels: RGB, HSV, YCbCr, Lab, YIQ (3,156-d)",
                 {"channels": clbp.EXTENDED_CHANNELS}),
}  # fmt: skip


def describe(images: np.ndarray, options: dict, batch: int = 128) -> np.ndarray:
    """``color_lbp(images, **options)`` in batches: [n, D] float32."""
    out = [np.asarray(clbp.color_lbp(images[i : i + batch], **options))
           for i in range(0, len(images), batch)]  # fmt: skip
    feats = np.concatenate(out).astype(np.float32)
    if not np.all(np.isfinite(feats)):
        raise ValueError(f"color_lbp{options} gave non-finite features")
    return feats


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--viper", required=True, help="VIPeR's folder (cam_a/, cam_b/)")
    p.add_argument("--labels", default="warca:chi2,lfda:chi2", help="config labels")
    p.add_argument("--variants", default=",".join(VARIANTS), help="descriptor variants")
    p.add_argument("--splits", default="0,1,2,3,4", help="comma-separated split numbers")
    p.add_argument("--on", choices=("test", "validation"), default="validation")
    p.add_argument("--seeds", default="0", help="comma-separated training seeds")
    sweep.add_val_fraction_flag(p)
    a = p.parse_args()
    labels = [x for x in a.labels.split(",") if x]
    variants = [x for x in a.variants.split(",") if x]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; expected some of {list(VARIANTS)}")
    configs = {
        lab: plan.run_method_config(sweep.PROTOCOL, lab, "viper", sweep.PROTOCOL.dims.viper)
        for lab in labels
    }  # an unknown label is refused here, before any work
    splits = [int(s) for s in a.splits.split(",")]
    seeds = [int(s) for s in a.seeds.split(",")]

    image_set = datasets.load("viper", a.viper)
    images = image_files.load_images(list(image_set.paths), height=128, width=48)
    eval_cfg = defaults.base_config().eval
    print(json.dumps({"machine": platform.processor() or platform.machine(),
                      "backend": jax.default_backend(), "jax": jax.__version__,
                      "images": len(images)}))  # fmt: skip
    rows = []
    for name in variants:
        what, options = VARIANTS[name]
        start = time.perf_counter()
        feats = describe(images, options)
        seconds = time.perf_counter() - start
        ds = dataset_arrays.validated_dataset(
            feats, image_set.labels, image_set.cams, image_set.splits, image_set.name
        )
        print(json.dumps({"variant": name, "dim": feats.shape[1], "describe_seconds": seconds}))
        cells = []
        for label in labels:
            per_seed = []
            for seed in seeds:
                got = []
                for s in splits:
                    r = sweep.score(
                        ds, s, configs[label], a.on, eval_cfg, seed=seed,
                        val_fraction=a.val_fraction,
                    )
                    line = {"variant": name, "label": label, "seed": seed, "split": s, "on": a.on}
                    print(json.dumps({**line, **r}), flush=True)
                    got.append((r["rank1"], r["mAP"]))
                per_seed.append(np.mean(got, axis=0))
            mean, std = np.mean(per_seed, axis=0), np.std(per_seed, axis=0)
            if len(seeds) > 1:
                cells.append(f"{mean[0]:.2f} ± {std[0]:.2f} / {mean[1]:.2f} ± {std[1]:.2f}")
            else:
                cells.append(f"{mean[0]:.2f} / {mean[1]:.2f}")
        rows.append((name, what, feats.shape[1], cells))
    seeds_note = f", mean ± std over seeds {a.seeds}" if len(seeds) > 1 else ""
    print(f"\nrank-1 / mAP, {a.on}, splits {a.splits}{seeds_note}\n")
    print("| variant | what | dim | " + " | ".join(labels) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in labels) + " |")
    for name, what, dim, cells in rows:
        print(f"| {name} | {what} | {dim:,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
