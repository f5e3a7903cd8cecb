r"""Test rank-1 against training time of WARCA and rPCCA (paper section 4.5, Fig. 3).

  python -m experiments.training_time \
      --config=configs/training_time.py[:small] --workdir=DIR

Both methods are trained on every split; after every ``log_every`` steps the fit's
``callback`` evaluates the metric learned so far on the split's query/gallery and records
(seconds, step, rank-1). ``seconds`` is training time only: the evaluations are left out
(``training.run_in_chunks``) and so is JIT compilation, because every timed fit follows an
untimed warm-up fit of the same config on the same split that stops after its first chunk
(``warm_up``); its first-chunk seconds (compilation plus one chunk) are recorded beside
the curve. The workdir receives:

* ``config.json``: the study's config (a workdir holding another config is refused);
* ``curves/<method>_split<s>.json``: one curve per method and split, written when its fit
  ends; a study started again keeps these and trains only the missing ones;
* ``curves.json``: every curve, the mean curve of each method (mean over splits of the
  seconds and of the rank-1 at each sampled step) and the warm-up times;
* ``training_time.png``: test rank-1 against training seconds, each split faint and the
  mean curve bold.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable

import ml_collections
import numpy as np
from absl import logging

from warca_jax import evaluation, methods
from warca_jax.data import dataset_arrays
from warca_jax.io import run_files, workdir_lock
from warca_jax.plots import study_plots
from warca_jax.studies import shared

METHODS = ("warca", "rpcca")  # the config's sections, each a method section of its config
PLOT = "training_time.png"
_NOTE = (
    "seconds: training only; JIT compilation (done in an untimed warm-up fit)\n"
    "and the rank-1 evaluations are not counted"
)


class _WarmUpDone(Exception):
    """Raised by the warm-up callback to stop a fit after its first chunk."""


def check_config(config) -> None:
    """Raises ValueError for a config that cannot run, before any work."""
    for name in METHODS:
        cfg = config[name]
        if cfg.name != name:
            raise ValueError(f"section {name!r} must be {name}'s method section; got {cfg.name!r}")
        if cfg.log_every < 1 or cfg.num_iters < 1 or cfg.num_iters % cfg.log_every:
            raise ValueError(
                f"{name}: num_iters ({cfg.num_iters}) must be a positive multiple of log_every "
                f"({cfg.log_every}), so that every timed chunk runs the warmed-up program"
            )


def _registered_fit(name: str) -> Callable:
    """``fit(x, y, cfg, *, seed, callback)`` of the registered learner ``name``
    (``methods.call_fit``)."""
    return functools.partial(methods.call_fit, methods.get(name))


def warm_up(fit: Callable, x, y, cfg, *, seed: int) -> float:
    """Runs ``fit`` until its first logged chunk and returns that chunk's ``seconds``.

    Those seconds hold the JIT compilation of the training program plus ``log_every``
    steps; the fit is then stopped, and a later fit of the same config and data shapes
    reuses the compiled program.
    """
    first = {}

    def stop(row, metric):
        del metric
        first["seconds"] = row["seconds"]
        raise _WarmUpDone

    try:
        fit(x, y, cfg, seed=seed, callback=stop)
    except _WarmUpDone:
        return float(first["seconds"])
    raise RuntimeError(f"{cfg.name}.fit ended without calling its callback")


def rank1_curve(
    dataset: dataset_arrays.Dataset,
    split: int,
    cfg,
    eval_cfg,
    *,
    seed: int,
    fit: Callable | None = None,
) -> dict:
    """Trains ``cfg`` on one split and samples test rank-1 after every logged chunk.

    Args:
      dataset: the data; ``split`` indexes ``dataset.splits``.
      split: the split trained on and evaluated on.
      cfg: a method section (configs/warca.py or configs/rpcca.py).
      eval_cfg: the evaluation section (warca_jax/runs/defaults.py).
      seed: the fit's seed.
      fit: the learner (default: the registered ``cfg.name``'s, ``_registered_fit``).

    Returns:
      {seconds, step, rank1, loss}: lists with one entry per ``log_every`` steps
      (``seconds``: training time since the fit started, evaluations excluded), plus
      ``eval_seconds`` (the evaluations' total time, not in ``seconds``) and ``final_rank1``.
    """
    fit = fit or _registered_fit(cfg.name)
    sp = dataset.splits[split]
    x, y = dataset.features[sp.train_idx], dataset.labels[sp.train_idx]
    curve = {"seconds": [], "step": [], "rank1": [], "loss": [], "eval_seconds": 0.0}

    def sample(row, metric):
        t0 = time.perf_counter()
        res = evaluation.evaluate_metric(metric, dataset, sp, eval_cfg, seed=seed)
        curve["seconds"].append(float(row["seconds"]))
        curve["step"].append(int(row["step"]))
        curve["rank1"].append(float(res["rank1"]))
        curve["loss"].append(float(row["loss"]))
        curve["eval_seconds"] += time.perf_counter() - t0

    metric, _ = fit(x, y, cfg, seed=seed, callback=sample)
    curve["final_rank1"] = float(evaluation.evaluate_metric(metric, dataset, sp, eval_cfg)["rank1"])
    return curve


def _mean_curve(curves: list[dict]) -> dict:
    steps = curves[0]["step"]
    if any(c["step"] != steps for c in curves):
        raise ValueError("the splits' curves are sampled at different steps")
    return {
        "step": steps,
        "seconds": np.mean([c["seconds"] for c in curves], axis=0).tolist(),
        "rank1": np.mean([c["rank1"] for c in curves], axis=0).tolist(),
        "rank1_std": np.std([c["rank1"] for c in curves], axis=0).tolist(),
    }


def _method_curves(name: str, dataset, config, workdir: str) -> dict:
    """Method ``name``'s curves on every split (a split's finished curve reused from the
    workdir), their mean and its compilation estimate."""
    cfg, fit = config[name], _registered_fit(name)
    per_split = []
    for s, sp in enumerate(dataset.splits):
        path = os.path.join(workdir, "curves", f"{name}_split{s}.json")
        done = run_files.reuse_json(path, run_files.record_check(split=s))
        if done is not None:
            per_split.append(done)
            continue
        seed = config.seed + s
        x, y = dataset.features[sp.train_idx], dataset.labels[sp.train_idx]
        warm = warm_up(fit, x, y, cfg, seed=seed)
        curve = rank1_curve(dataset, s, cfg, config.eval, seed=seed, fit=fit)
        curve = {"split": s, "warm_up_first_chunk_seconds": warm, **curve}
        run_files.write_json(path, curve)
        logging.info(
            "%s split %d: rank1 %.1f after %.2fs of training (warm-up chunk %.2fs)",
            name,
            s,
            curve["rank1"][-1],
            curve["seconds"][-1],
            warm,
        )
        per_split.append(curve)
    warm = [c["warm_up_first_chunk_seconds"] for c in per_split]
    first = [c["seconds"][0] for c in per_split]
    return {
        "splits": per_split,
        "mean": _mean_curve(per_split),
        "warm_up_first_chunk_seconds": warm,
        "compile_seconds_estimate": float(max(w - f for w, f in zip(warm, first, strict=True))),
    }


@workdir_lock.one_run_per_workdir
def run_study(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Trains every method on every split, sampling test rank-1, and writes the study's
    files (module docstring) into ``workdir``: what curves.json holds is returned.

    ``config``: configs/training_time.py's. The workdir is opened by ``shared.open_study``
    (a finished curve there is reused); bad config or data: ValueError, nothing trained.
    """
    check_config(config)
    dataset = shared.open_study(
        config, workdir, [config[name] for name in METHODS], folder="curves"
    )
    out = {name: _method_curves(name, dataset, config, workdir) for name in METHODS}
    results = {
        "dataset": dataset.name,
        "num_splits": len(dataset.splits),
        "methods": out,
        "notes": (
            f"{' '.join(_NOTE.split())}. warm_up_first_chunk_seconds: per split, the first "
            "chunk (compilation + log_every steps) of the untimed warm-up fit before the "
            "timed fit; "
            "compile_seconds_estimate: the largest, over splits, of the warm-up chunk's "
            "seconds minus the timed fit's first-chunk seconds (splits after the first reuse "
            "the compiled program). rank-1 in percent on each split's test query/gallery."
        ),
    }
    if config.eval.baseline:
        r1 = shared.euclidean_rank1(dataset, config.eval)
        results["baseline_euclidean"] = {"rank1": r1, "rank1_mean": float(np.mean(r1))}
    run_files.write_json(os.path.join(workdir, "curves.json"), results)
    study_plots.plot_rank1_vs_seconds(
        {name: [(c["seconds"], c["rank1"]) for c in out[name]["splits"]] for name in METHODS},
        os.path.join(workdir, PLOT),
        title=f"test rank-1 vs training time on {dataset.name}",
        note=_NOTE,
    )
    return results
