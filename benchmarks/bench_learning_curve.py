r"""A learner's test rank-1 and mAP along its iterations, per split: one fit per split, scored
at every logged step through ``fit``'s callback (the model it has learned so far), so
one run gives the result of every shorter training at once for a learner whose steps do
not depend on their count (MLAPG, rPCCA; not WARCA, whose step size decays over
``num_iters``).

  python -m benchmarks.bench_learning_curve --data=viper --path=PATH/VIPeR \
      --config=configs/mlapg.py --splits=0,1,2 --set=log_every=25
  python -m benchmarks.bench_learning_curve --data=cuhk01 --path=PATH/CUHK01 \
      --config=configs/mlapg.py:lomo --descriptor=lomo --splits=0
  python -m benchmarks.bench_learning_curve --data=orl --config=configs/mlapg.py
  python -m benchmarks.bench_learning_curve --data=reference --config=configs/mlapg.py

``--set=field=value,...`` changes the method config (``tol=0`` runs every step). Prints a
JSON line per logged step (split, step, loss, the model's rank where the learner logs
one, rank-1, mAP, seconds) and a table of the mean over the splits at each step.
"""

from __future__ import annotations

import collections
import json
import platform
import time

import jax
import ml_collections
import numpy as np
from absl import app, flags

from benchmarks import real_data
from warca_jax.io import config_files
from warca_jax.runs import pipeline

flags.DEFINE_enum("data", "viper", ("viper", "cuhk01", "orl", "reference"), "the data")
flags.DEFINE_string("path", "", "the dataset's folder (ORL: data/orl_faces by default)")
flags.DEFINE_string("descriptor", "color_lbp", "image descriptor")
flags.DEFINE_string("cache_dir", "", "descriptor cache folder")
flags.DEFINE_string("config", "configs/mlapg.py", "config file[:variant] of the learner")
flags.DEFINE_string("splits", "0", "comma-separated splits (reference: training seeds)")
flags.DEFINE_string("set", "", "method fields changed: field=value,...")
FLAGS = flags.FLAGS


def method_config(spec: str, changes: str) -> ml_collections.ConfigDict:
    """The ``method`` section of config ``spec`` with ``changes`` (field=value,...)."""
    m = ml_collections.ConfigDict(config_files.load_config(spec).method.to_dict())
    for item in filter(None, changes.split(",")):
        field, value = item.split("=", 1)
        kind = type(m[field])
        m[field] = value if kind is str else kind(float(value))
    return m


def parts(data: str, path: str, splits: list[int], descriptor: str, cache_dir: str):
    """(split, x, labels, cams, scorer) of each split (of each training seed on the C++
    release's problem)."""
    if data == "reference":
        return real_data.reference_splits(splits)
    return real_data.splits(data, path, splits, cache_dir, descriptor=descriptor)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    m = method_config(FLAGS.config, FLAGS.set)  # before any work
    splits = [int(s) for s in FLAGS.splits.split(",")]
    print(json.dumps({"machine": platform.processor() or platform.machine(),
                      "backend": jax.default_backend(), "jax": jax.__version__}))  # fmt: skip
    rows = collections.defaultdict(list)
    for s, x, y, cams, scores in parts(
        FLAGS.data, FLAGS.path, splits, FLAGS.descriptor, FLAGS.cache_dir
    ):
        t0 = time.perf_counter()

        def callback(row, metric, s=s, scores=scores, t0=t0):
            r1, ap = scores(metric)
            line = {"split": s, "step": row["step"], "loss": round(float(row["loss"]), 5),
                    "rank": row.get("rank"), "rank1": round(r1, 2), "mAP": round(ap, 2),
                    "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
            rows[row["step"]].append(line)
            print(json.dumps(line), flush=True)

        # the C++ release's problem: each split is a training seed; a real split fits with 0
        seed = s if FLAGS.data == "reference" else 0
        pipeline.fit_method(x, y, m, seed=seed, cams=cams, callback=callback)
    print(f"\n| {FLAGS.config} on {FLAGS.data}, splits {FLAGS.splits} | step | rank-1 | mAP |")
    print("| --- | --- | --- | --- |")
    for step in sorted(rows):
        got = rows[step]
        note = "" if len(got) == len(splits) else f" ({len(got)} splits)"
        r1 = np.mean([g["rank1"] for g in got])
        ap = np.mean([g["mAP"] for g in got])
        print(f"| {note} | {step} | {r1:.2f} | {ap:.2f} |")


if __name__ == "__main__":
    app.run(main)
