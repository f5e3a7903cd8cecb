r"""Times MLAPG on a real dataset's training split: the whole fit, and the parts of one
iteration.

  python -m benchmarks.bench_mlapg --data=cuhk01 --path=PATH/CUHK01 --cache_dir=CACHE \
      --config=configs/mlapg.py:lomo

The fit is ``mlapg.fit`` with the config's method section (``--log_every`` iterations a
row: loss, M's rank, seconds), then the split's test rank-1 and mAP. The iterations are
then run again to ``--parts_at`` (by 60 M's rank has settled on CUHK01's LOMO), where the
parts of ``mlapg.ReducedAPG.step`` are timed alone (``--reps`` calls each): the [N, N]
terms, the gradient's two products, the projection's eigendecomposition from the positive
side (the eigenpairs above 0), from the negative side, and its eigenvalues alone (the
tridiagonal reduction every side pays), and the products that turn the eigenpairs into K
and M. BLAS threads are the process's (set ``OPENBLAS_NUM_THREADS``).
"""

from __future__ import annotations

import json
import platform
import time

import numpy as np
import scipy.linalg
from absl import app, flags

from benchmarks import real_data
from warca_jax.io import config_files
from warca_jax.methods import mlapg
from warca_jax.runs import defaults

flags.DEFINE_enum("data", "cuhk01", ("cuhk01", "viper"), "the dataset")
flags.DEFINE_string("path", "", "its folder")
flags.DEFINE_string("cache_dir", "", "the descriptors' cache")
flags.DEFINE_string("config", "configs/mlapg.py:lomo", "the MLAPG config and variant")
flags.DEFINE_integer("split", 0, "the split whose training images are fitted")
flags.DEFINE_integer("log_every", 10, "iterations between the fit's rows")
flags.DEFINE_integer("reps", 3, "timed calls of each part")
flags.DEFINE_integer("parts_at", 60, "the iteration whose parts are timed")
FLAGS = flags.FLAGS


def _seconds(fn, reps: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return round((time.perf_counter() - t0) / reps, 3)


def parts(apg: mlapg.ReducedAPG, state: mlapg.ReducedState, reps: int) -> dict:
    """Seconds of each part of one iteration at ``state`` (its step size, no backtrack)."""
    x, k, m = apg.x, state.k, state.m
    terms = mlapg._gram_loss_and_coefficients(k, apg.sign, apg.weight, apg.mu)
    t, rows = np.asarray(terms[1]), np.asarray(terms[2])
    tx = rows[:, None] * x - t @ x
    a = m - 2.0 * (x.T @ tx) / np.float32(state.lipschitz)
    vecs, vals = mlapg.psd_factors(a.copy())
    return {
        "rank": int(len(vals)),
        "gram_terms": _seconds(
            lambda: np.asarray(mlapg._gram_loss_and_coefficients(k, apg.sign, apg.weight, 1.0)[1]),
            reps,
        ),
        "grad_products": _seconds(lambda: x.T @ (rows[:, None] * x - t @ x), reps),
        "eigh_positive": _seconds(lambda: mlapg.psd_factors(a.copy()), reps),
        "eigh_negative": _seconds(lambda: mlapg.psd_factors(-a), reps),
        "eigenvalues_only": _seconds(
            lambda: scipy.linalg.eigh(a, eigvals_only=True, check_finite=False), reps
        ),
        "factor_products": _seconds(
            lambda: ((x @ vecs) * vals @ (x @ vecs).T, (vecs * vals) @ vecs.T), reps
        ),
    }


def main(argv) -> None:
    del argv
    path, _, variant = FLAGS.config.partition(":")
    cfg = config_files.load_config_module(path).get_config(variant or "default")
    method = defaults.overridden(cfg.method, log_every=FLAGS.log_every)
    (_, x, y, _, scores), = real_data.splits(
        FLAGS.data, FLAGS.path, [FLAGS.split], FLAGS.cache_dir, descriptor=cfg.data.descriptor
    )  # fmt: skip
    print(json.dumps({"machine": platform.processor() or platform.machine(), "shape": x.shape}))
    t0 = time.perf_counter()
    metric, history = mlapg.fit(np.asarray(x), np.asarray(y), method)
    print(json.dumps({"fit_seconds": round(time.perf_counter() - t0, 1)}))
    for row in history:
        print(json.dumps({key: row[key] for key in ("step", "loss", "rank", "seconds")}))
    rank1, mean_ap = scores(metric)
    print(json.dumps({"rank1": round(rank1, 2), "mAP": round(mean_ap, 2)}))
    # the iterations again to --parts_at, the state kept, for the parts
    apg, _ = mlapg.solver(*mlapg.validate(np.asarray(x), np.asarray(y), method)[:2], method)
    state = apg.start(float(method.init_step))
    for _ in range(FLAGS.parts_at):
        state, _ = apg.step(state)
    print(json.dumps({"parts_seconds": parts(apg, state, FLAGS.reps)}))


if __name__ == "__main__":
    app.run(main)
