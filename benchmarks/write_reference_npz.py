"""Writes the shared synthetic problem as a generic ``.npz`` that every entry point reads.

  python benchmarks/write_reference_npz.py OUT.npz [--train_images 2400] [--kind hist]

``warca_jax.synthetic.make_reference_problem`` (the problem bench_vs_reference.py runs
against the C++ release) with ``--train_images`` training images, as many test images,
as ``features``, ``labels``, ``cams`` and one fixed split (``train_idx``, ``query_idx`` =
images 1-3 of each test identity, ``gallery_idx`` = image 0), so that e.g. the
training-time study runs on it:

  python -m experiments.training_time \\
      --config=configs/training_time.py --workdir=/tmp/tt \\
      --config.data.name=npz --config.data.path=OUT.npz
"""

import argparse

import numpy as np

from warca_jax import synthetic


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("out")
    ap.add_argument("--train_images", type=int, default=2400)
    ap.add_argument("--kind", choices=("hist", "gauss"), default="hist")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.train_images < 8 or args.train_images % 4:
        ap.error(f"--train_images must be a multiple of 4, at least 8; got {args.train_images}")
    p = synthetic.make_reference_problem(num_ids=args.train_images // 2, seed=args.seed)
    xtr, xte = p[f"{args.kind}_train"], p[f"{args.kind}_test"]
    n_tr = len(xtr)
    test_ids = p["test_labels"] + p["train_labels"].max() + 1
    train_cams = np.tile(np.arange(4), n_tr // 4)
    test_idx = np.arange(n_tr, n_tr + len(xte))
    np.savez(
        args.out,
        features=np.concatenate([xtr, xte]).astype(np.float32),
        labels=np.concatenate([p["train_labels"], test_ids]),
        cams=np.concatenate([train_cams, p["test_cams"]]),
        train_idx=np.arange(n_tr),
        query_idx=test_idx[p["test_cams"] != 0],
        gallery_idx=test_idx[p["test_cams"] == 0],
    )
    print(f"wrote {args.out}: {n_tr} training and {len(xte)} test images, {xtr.shape[1]}-d")


if __name__ == "__main__":
    main()
