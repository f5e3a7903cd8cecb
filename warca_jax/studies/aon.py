r"""The AON vs Frobenius study (paper section 4.4, Fig. 2) with WARCA, linear or kernel.

  python -m experiments.aon_study --config=configs/aon_study.py[:small] \
      --workdir=/tmp/aon

For each penalty, linear WARCA is trained on every split for every lambda of
``study.lams`` at the step size ``method.learning_rate`` (the lambda sweep), then for
every step size of ``study.etas`` at the penalty's best lambda or ``study.eta_lam`` (the
eta sweep). Every run records the test rank-1 and CMC and the condition number of the
learned map W (largest over smallest singular value): the linear form's W: [D', D], or
the kernel form's W = A Phi(X) from A K A^T (``map_singular_values``; with the linear
kernel, the map in input space that a [D', 26,960] LOMO W would be, from an [N, N] Gram
matrix). The workdir receives:

* ``config.json``: the study's config (a workdir holding another config is refused);
* ``runs/<penalty>_lam<lambda>_eta<eta>_split<s>.json``: one file per run, written as soon
  as the run ends; a study started again skips every run whose file is there;
* ``results.json``: every number, per penalty, lambda, eta and split;
* ``results.md``: the tables of mean rank-1 and condition numbers;
* the panels of Fig. 2 (``warca_jax.studies.aon_report``): ``condition_number.png``,
  ``rank1_vs_lambda.png``, ``rank1_vs_eta.png``, ``cmc.png`` and ``rank1_by_dataset.png``
  (this dataset and those of ``study.compare_workdirs``).

Only ``penalty``, ``lam`` and ``learning_rate`` differ between runs, so all runs of one
penalty reuse one compiled training program (``warca.compiled_chunk``).
"""

from __future__ import annotations

import os
import time

import ml_collections
import numpy as np
from absl import logging

from warca_jax import evaluation
from warca_jax.data import dataset_arrays
from warca_jax.io import progress_report, run_files, workdir_lock, writes
from warca_jax.maths import kernels, penalties
from warca_jax.methods import warca
from warca_jax.runs import defaults
from warca_jax.studies import aon_report, shared

PLOTS = aon_report.PLOTS


def condition_number(w) -> float:
    """Largest over smallest singular value of W: [D', D] (inf when W is rank deficient)."""
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 2 or 0 in w.shape:
        raise ValueError(f"W must be a non-empty 2-D [D', D] matrix, got shape {w.shape}")
    s = np.linalg.svd(w, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


def map_singular_values(metric) -> np.ndarray:
    """Singular values of the learned map W, largest first.

    The linear form's W: [D', D] is the metric's projection. The kernel form's map is
    W = A Phi(X) in the kernel's feature space (eq. 15-16), so W W^T = A K A^T with K the
    kernel matrix of the support (the training samples): its eigenvalues are the squared
    singular values, whatever the kernel (with the linear kernel W = A X, the map in input
    space). The metric's input scaling multiplies every singular value alike.
    """
    if metric.kind == "linear":
        return np.linalg.svd(np.asarray(metric.projection, np.float64), compute_uv=False)
    if metric.kind != "kernel":
        raise ValueError(f"the AON study needs a linear or kernel metric; got {metric.kind!r}")
    support = np.asarray(metric.support, np.float64)
    k = np.asarray(
        kernels.kernel_matrix(support, support, kernel=metric.kernel, gamma=metric.gamma),
        np.float64,
    )
    a = np.asarray(metric.projection, np.float64)
    eig = np.linalg.eigvalsh(a @ (0.5 * (k + k.T)) @ a.T)[::-1]
    return np.sqrt(np.clip(eig, 0.0, None))


def _positive_grid(values, name: str) -> tuple[float, ...]:
    values = tuple(values) if values is not None else ()
    if not values:
        raise ValueError(f"study.{name} is empty; expected at least one positive number")
    bad = [v for v in values if not (isinstance(v, int | float) and np.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"study.{name} must hold positive finite numbers; got {bad}")
    if len(set(values)) != len(values):
        raise ValueError(f"study.{name} has duplicated values: {values}")
    return tuple(float(v) for v in values)


def check_config(config) -> None:
    """Raises ValueError for a study config that cannot run, before any work.

    Checks the grids (non-empty, positive, no duplicates), the penalties, ``eta_lam`` and
    that the method is linear WARCA.
    """
    if config.method.name != "warca":
        raise ValueError(
            f"the AON study runs WARCA: method.name must be 'warca'; got {config.method.name!r}"
        )
    if config.method.kernel != "none" and config.method.kernel_approx != "none":
        raise ValueError(
            "the AON study needs the exact map: method.kernel_approx must be 'none'; got "
            f"{config.method.kernel_approx!r}"
        )
    others = config.study.get("compare_workdirs", ())
    if isinstance(others, str) or any(not isinstance(o, str) or not o for o in others):
        raise ValueError(
            "study.compare_workdirs must be a tuple of folders of finished AON studies; "
            f"got {others!r}"
        )
    pens = tuple(config.study.penalties)
    if not pens or any(p not in penalties.PENALTIES for p in pens) or len(set(pens)) != len(pens):
        raise ValueError(
            f"study.penalties must be distinct names from {penalties.PENALTIES}; got {pens}"
        )
    _positive_grid(config.study.lams, "lams")
    _positive_grid(config.study.etas, "etas")
    lam = config.study.eta_lam
    if lam is not None and not (np.isfinite(lam) and lam >= 0):
        raise ValueError(f"study.eta_lam must be None (best lambda) or >= 0; got {lam}")
    if config.study.cmc_ranks < 1:
        raise ValueError(f"study.cmc_ranks must be >= 1; got {config.study.cmc_ranks}")


def run_name(penalty: str, lam: float, eta: float, split: int) -> str:
    """The file name of one run: ``<penalty>_lam<lambda>_eta<eta>_split<s>.json``."""
    return f"{penalty}_lam{float(lam)!r}_eta{float(eta)!r}_split{split}.json"


def run_point(
    dataset: dataset_arrays.Dataset, config, *, penalty: str, lam: float, eta: float, split: int
) -> dict:
    """Trains linear WARCA with one (penalty, lambda, eta) on one split and evaluates it.

    Returns:
      {penalty, lam, eta, split, rank1, mAP, condition_number, singular_values, cmc,
      train_seconds, diverged}; a run whose training diverges is recorded with
      ``diverged`` true and no scores rather than stopping the study.
    """
    sp = dataset.splits[split]
    cfg = defaults.overridden(config.method, penalty=penalty, lam=lam, learning_rate=eta)
    record = {"penalty": penalty, "lam": lam, "eta": eta, "split": split}
    t0 = time.perf_counter()
    try:
        metric, _ = warca.fit(
            dataset.features[sp.train_idx],
            dataset.labels[sp.train_idx],
            cfg,
            seed=config.seed + split,
        )
    except FloatingPointError as e:
        return record | {"diverged": True, "error": str(e), "rank1": None, "mAP": None}
    seconds = time.perf_counter() - t0
    res = evaluation.evaluate_metric(metric, dataset, sp, config.eval, seed=config.seed + split)
    sv = map_singular_values(metric)
    return record | {
        "diverged": False,
        "rank1": float(res["rank1"]),
        "mAP": float(res["mAP"]),
        "condition_number": float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf"),
        "singular_values": sv.tolist(),
        "cmc": np.asarray(res["cmc"])[: config.study.cmc_ranks].tolist(),
        "train_seconds": seconds,
    }


class _Runs:
    """The per-run JSON files of a workdir: run a point unless its file is there."""

    def __init__(self, dataset, config, workdir: str, total: int):
        self.dataset, self.config = dataset, config
        self.folder = os.path.join(workdir, "runs")
        writes.makedirs(self.folder, within=workdir)
        bars = defaults.progress_bars(config.progress)
        self.bar = progress_report.bar(total, "aon study", show=bars, unit="fits")
        self.trained = 0

    def get(self, penalty: str, lam: float, eta: float, split: int) -> dict:
        path = os.path.join(self.folder, run_name(penalty, lam, eta, split))
        done = run_files.reuse_json(
            path, run_files.record_check(penalty=penalty, lam=lam, eta=eta, split=split)
        )
        if done is not None:
            return done
        rec = run_point(self.dataset, self.config, penalty=penalty, lam=lam, eta=eta, split=split)
        run_files.write_json(path, rec)
        self.trained += 1
        self.bar.update(1)
        rank1, cond = rec["rank1"], rec.get("condition_number")
        logging.info(
            "%s lam=%g eta=%g split %d: rank1 %s cond %s",
            penalty,
            lam,
            eta,
            split,
            "diverged" if rank1 is None else f"{rank1:.2f}",
            "-" if cond is None else f"{cond:.3g}",
        )
        return rec


def _grid(runs: _Runs, penalty, lams, etas, splits) -> list[list[dict]]:
    """Records of a 1-D sweep: [len(lams or etas)][splits], lams and etas zipped."""
    return [
        [runs.get(penalty, lam, eta, s) for s in splits]
        for lam, eta in zip(lams, etas, strict=True)
    ]


def _values(records: list[list[dict]], key: str) -> list[list[float | None]]:
    return [[r.get(key) for r in row] for row in records]


def _stats(values: list[list[float | None]]) -> tuple[list, list]:
    """Mean and std over splits per grid point; None where a split has no value."""
    a = aon_report.as_array(values)
    mean, std = a.mean(axis=1), a.std(axis=1)
    return [None if np.isnan(m) else float(m) for m in mean], [
        None if np.isnan(s) else float(s) for s in std
    ]


def _best(lams, rank1_mean) -> int:
    """Index of the highest mean rank-1 (the smaller lambda on a tie); diverged never wins."""
    scores = np.array([-np.inf if m is None else m for m in rank1_mean])
    tied = np.flatnonzero(scores == scores.max())
    return int(tied[np.argmin(np.asarray(lams)[tied])])


def _mean_cmc(records: list[dict]) -> list[float]:
    curves = [r["cmc"] for r in records if not r["diverged"]]
    if len(curves) < len(records):
        return []
    length = min(len(c) for c in curves)
    return np.mean([c[:length] for c in curves], axis=0).tolist()


def _lambda_sweep(runs, p: str, lams, eta: float, splits) -> tuple[dict, dict]:
    """(the lambda sweep of penalty ``p`` at step size ``eta``, its best point)."""
    recs = _grid(runs, p, lams, [eta] * len(lams), splits)
    rank1 = _values(recs, "rank1")
    cond = _values(recs, "condition_number")
    mean, std = _stats(rank1)
    logs = [[None if c is None else float(np.log(c)) for c in row] for row in cond]
    geo = [None if m is None else float(np.exp(m)) for m in _stats(logs)[0]]
    sweep = {
        "rank1": rank1,
        "rank1_mean": mean,
        "rank1_std": std,
        "mAP": _values(recs, "mAP"),
        "condition_number": cond,
        "condition_number_geomean": geo,
        "diverged": _values(recs, "diverged"),
    }
    i = _best(lams, mean)
    best = {
        "lam": lams[i],
        "eta": eta,
        "rank1_mean": mean[i],
        "rank1_std": std[i],
        "cmc": _mean_cmc(recs[i]),
    }
    return sweep, best


def _eta_sweep(runs, p: str, lam: float, lam_from: str, etas, splits) -> dict:
    """The step-size sweep of penalty ``p`` at penalty weight ``lam`` (chosen by ``lam_from``)."""
    recs = _grid(runs, p, [lam] * len(etas), etas, splits)
    mean, std = _stats(_values(recs, "rank1"))
    return {
        "lam": lam,
        "lam_from": lam_from,
        "rank1": _values(recs, "rank1"),
        "rank1_mean": mean,
        "rank1_std": std,
        "diverged": _values(recs, "diverged"),
    }


@workdir_lock.one_run_per_workdir
def run_study(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Runs the lambda and eta sweeps of every penalty (``config`` from configs/aon_study.py)
    and writes the study's files into ``workdir``; returns the dict of results.json.

    ``shared.open_study`` makes the workdir and resumes a study of the same config there
    (another config is refused); a bad config or data is a ValueError before any training.
    """
    check_config(config)
    dataset = shared.open_study(config, workdir, [config.method])
    pens = tuple(config.study.penalties)
    lams = [float(v) for v in config.study.lams]
    etas = [float(v) for v in config.study.etas]
    base_eta = float(config.method.learning_rate)
    splits = range(len(dataset.splits))
    runs = _Runs(dataset, config, workdir, len(pens) * len(splits) * (len(lams) + len(etas)))
    lambda_sweep, best = {}, {}
    for p in pens:
        lambda_sweep[p], best[p] = _lambda_sweep(runs, p, lams, base_eta, splits)
    eta_lam = config.study.eta_lam
    lam_from = "best lambda" if eta_lam is None else "study.eta_lam"
    eta_sweep = {}
    for p in pens:
        lam = best[p]["lam"] if eta_lam is None else float(eta_lam)
        eta_sweep[p] = _eta_sweep(runs, p, lam, lam_from, etas, splits)
    runs.bar.close()

    results = {
        "dataset": dataset.name,
        "num_splits": len(splits),
        "penalties": list(pens),
        "lams": lams,
        "etas": etas,
        "base_eta": base_eta,
        "lambda_sweep": lambda_sweep,
        "eta_sweep": eta_sweep,
        "best": best,
        "runs_trained": runs.trained,
        "notes": (
            "rank-1 in percent on each split's test query/gallery; condition_number = "
            "largest / smallest singular value of W [D', D]; best lambda = highest mean "
            "test rank-1 over splits in the lambda sweep (the smaller on a tie); None = a "
            "diverged run"
        ),
    }
    if config.eval.baseline:
        r1 = shared.euclidean_rank1(dataset, config.eval)
        results["baseline_euclidean"] = {
            "rank1": r1,
            "rank1_mean": float(np.mean(r1)),
            "rank1_std": float(np.std(r1)),
        }
    results["by_dataset"] = aon_report.by_dataset(
        results, tuple(config.study.get("compare_workdirs", ()))
    )
    run_files.write_json(os.path.join(workdir, "results.json"), results)
    run_files.write_text(os.path.join(workdir, "results.md"), aon_report.markdown(results))
    aon_report.write_plots(results, workdir, config.eval.plot_max_rank)
    return results
