r"""The AON vs Frobenius study (paper section 4.4, Fig. 2) with linear WARCA.

  python -m experiments.aon_study --config=configs/aon_study.py[:small] \
      --workdir=/tmp/aon

For each penalty, linear WARCA is trained on every split for every lambda of
``study.lams`` at the step size ``method.learning_rate`` (the lambda sweep), then for
every step size of ``study.etas`` at the penalty's best lambda or ``study.eta_lam`` (the
eta sweep). Every run records the test rank-1 and CMC and the condition number of the
learned W: [D', D] (largest over smallest singular value). The workdir receives:

* ``config.json``: the study's config (a workdir holding another config is refused);
* ``runs/<penalty>_lam<lambda>_eta<eta>_split<s>.json``: one file per run, written as soon
  as the run ends; a study started again skips every run whose file is there;
* ``results.json``: every number, per penalty, lambda, eta and split;
* ``results.md``: the tables of mean rank-1 and condition numbers;
* ``condition_number.png``, ``rank1_vs_lambda.png``, ``rank1_vs_eta.png``, ``cmc.png``.

Only ``penalty``, ``lam`` and ``learning_rate`` differ between runs, so all runs of one
penalty reuse one compiled training program (``warca.compiled_chunk``).
"""

from __future__ import annotations

import os
import time

import ml_collections
import numpy as np
from absl import logging
from tqdm.auto import tqdm

from warca_jax import data as data_lib
from warca_jax import defaults, evaluation, losses, plots
from warca_jax import workdir as workdir_lib
from warca_jax.methods import warca
from warca_jax.studies import shared

PLOTS = ("condition_number.png", "rank1_vs_lambda.png", "rank1_vs_eta.png", "cmc.png")


def condition_number(w) -> float:
    """Largest over smallest singular value of W: [D', D] (inf when W is rank deficient)."""
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 2 or 0 in w.shape:
        raise ValueError(f"W must be a non-empty 2-D [D', D] matrix, got shape {w.shape}")
    s = np.linalg.svd(w, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")


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
    if config.method.name != "warca" or config.method.kernel != "none":
        raise ValueError(
            "the AON study runs linear WARCA: method.name must be 'warca' and method.kernel "
            f"'none'; got {config.method.name!r} and {config.method.kernel!r}"
        )
    pens = tuple(config.study.penalties)
    if not pens or any(p not in losses.PENALTIES for p in pens) or len(set(pens)) != len(pens):
        raise ValueError(
            f"study.penalties must be distinct names from {losses.PENALTIES}; got {pens}"
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
    dataset: data_lib.Dataset, config, *, penalty: str, lam: float, eta: float, split: int
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
    w = np.asarray(metric.projection, np.float64)
    return record | {
        "diverged": False,
        "rank1": float(res["rank1"]),
        "mAP": float(res["mAP"]),
        "condition_number": condition_number(w),
        "singular_values": np.linalg.svd(w, compute_uv=False).tolist(),
        "cmc": np.asarray(res["cmc"])[: config.study.cmc_ranks].tolist(),
        "train_seconds": seconds,
    }


class _Runs:
    """The per-run JSON files of a workdir: run a point unless its file is there."""

    def __init__(self, dataset, config, workdir: str, total: int):
        self.dataset, self.config = dataset, config
        self.folder = os.path.join(workdir, "runs")
        os.makedirs(self.folder, exist_ok=True)
        bars = defaults.progress_bars(config.progress)
        self.bar = tqdm(total=total, desc="aon study", disable=not bars)
        self.trained = 0

    def get(self, penalty: str, lam: float, eta: float, split: int) -> dict:
        path = os.path.join(self.folder, run_name(penalty, lam, eta, split))
        done = workdir_lib.reuse_json(
            path, workdir_lib.record_check(penalty=penalty, lam=lam, eta=eta, split=split)
        )
        if done is not None:
            return done
        rec = run_point(self.dataset, self.config, penalty=penalty, lam=lam, eta=eta, split=split)
        workdir_lib.write_json(path, rec)
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


def _as_array(values) -> np.ndarray:
    """[grid, splits] floats with NaN for None (a diverged run)."""
    return np.array([[np.nan if v is None else v for v in row] for row in values], float)


def _stats(values: list[list[float | None]]) -> tuple[list, list]:
    """Mean and std over splits per grid point; None where a split has no value."""
    a = _as_array(values)
    mean, std = a.mean(axis=1), a.std(axis=1)
    return [None if np.isnan(m) else float(m) for m in mean], [
        None if np.isnan(s) else float(s) for s in std
    ]


def _best(lams, rank1_mean) -> int:
    """Index of the highest mean rank-1 (the smaller lambda on a tie); diverged never wins."""
    scores = np.array([-np.inf if m is None else m for m in rank1_mean])
    tied = np.flatnonzero(scores == scores.max())
    return int(tied[np.argmin(np.asarray(lams)[tied])])


def _fmt(mean, std=None, digits=1) -> str:
    if mean is None:
        return "diverged"
    return f"{mean:.{digits}f}" + ("" if std is None else f" ± {std:.{digits}f}")


def _markdown(results: dict) -> str:
    pens = results["penalties"]
    lines = [
        f"# AON vs Frobenius on {results['dataset']} ({results['num_splits']} splits)",
        "",
        f"Lambda sweep at eta = {results['base_eta']:g}: test rank-1 (%) mean ± std over "
        "splits, and the geometric mean of the condition number of W.",
        "",
        "| lambda | " + " | ".join(f"{p} rank-1 | {p} cond" for p in pens) + " |",
        "|---|" + "---|---|" * len(pens),
    ]
    for i, lam in enumerate(results["lams"]):
        cells = []
        for p in pens:
            sw = results["lambda_sweep"][p]
            cond = sw["condition_number_geomean"][i]
            cells += [
                _fmt(sw["rank1_mean"][i], sw["rank1_std"][i]),
                "diverged" if cond is None else f"{cond:.3g}",
            ]
        lines.append(f"| {lam:g} | " + " | ".join(cells) + " |")
    lines += ["", "Eta sweep: test rank-1 (%) mean ± std over splits.", ""]
    lines += [
        "| eta | "
        + " | ".join(f"{p} (lambda {results['eta_sweep'][p]['lam']:g})" for p in pens)
        + " |"
    ]
    lines += ["|---|" + "---|" * len(pens)]
    for i, eta in enumerate(results["etas"]):
        cells = [
            _fmt(results["eta_sweep"][p]["rank1_mean"][i], results["eta_sweep"][p]["rank1_std"][i])
            for p in pens
        ]
        lines.append(f"| {eta:g} | " + " | ".join(cells) + " |")
    lines += ["", f"Best lambda of each penalty (at eta = {results['base_eta']:g}):", ""]
    for p in pens:
        b = results["best"][p]
        lines.append(f"- {p}: lambda {b['lam']:g}, rank-1 {_fmt(b['rank1_mean'], b['rank1_std'])}")
    base = results.get("baseline_euclidean")
    if base:
        lines.append(f"- Euclidean: rank-1 {_fmt(base['rank1_mean'], base['rank1_std'])}")
    return "\n".join(lines) + "\n"


def _write_plots(results: dict, workdir: str, max_rank: int) -> list[str]:
    pens, name = results["penalties"], results["dataset"]
    lam_sw, eta_sw = results["lambda_sweep"], results["eta_sweep"]
    paths = [
        plots.plot_condition_numbers(
            results["lams"],
            {p: _as_array(lam_sw[p]["condition_number"]) for p in pens},
            os.path.join(workdir, PLOTS[0]),
            title=f"condition number of W on {name}",
        ),
        plots.plot_rank1_sweep(
            results["lams"],
            {p: _as_array(lam_sw[p]["rank1"]) for p in pens},
            os.path.join(workdir, PLOTS[1]),
            xlabel="lambda",
            title=f"rank-1 vs lambda on {name} (eta {results['base_eta']:g})",
        ),
        plots.plot_rank1_sweep(
            results["etas"],
            {f"{p} (lambda {eta_sw[p]['lam']:g})": _as_array(eta_sw[p]["rank1"]) for p in pens},
            os.path.join(workdir, PLOTS[2]),
            xlabel="step size eta",
            title=f"rank-1 vs eta on {name}",
        ),
        plots.plot_cmc(
            {
                f"{p} (lambda {results['best'][p]['lam']:g})": results["best"][p]["cmc"]
                for p in pens
                if results["best"][p]["cmc"]
            },
            os.path.join(workdir, PLOTS[3]),
            max_rank=max_rank,
            title=f"CMC at the best lambda on {name}",
        ),
    ]
    return [str(p) for p in paths]


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
    workdir_lib.write_json(os.path.join(workdir, "results.json"), results)
    with open(os.path.join(workdir, "results.md"), "w") as f:
        f.write(_markdown(results))
    _write_plots(results, workdir, config.eval.plot_max_rank)
    return results
