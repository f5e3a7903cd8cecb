"""The AON study's report: results.md and the panels of the paper's Fig. 2.

(a) ``condition_number.png``, (b) ``rank1_vs_lambda.png``, (c) ``rank1_vs_eta.png``,
(d) ``cmc.png`` and (e) ``rank1_by_dataset.png``: rank-1 at each penalty's best lambda on
this study's dataset and on those of the finished studies named in
``study.compare_workdirs`` (their ``results.json``).
"""

from __future__ import annotations

import os

import numpy as np

from warca_jax.io import run_files
from warca_jax.plots import cmc, study_plots

PLOTS = (
    "condition_number.png",
    "rank1_vs_lambda.png",
    "rank1_vs_eta.png",
    "cmc.png",
    "rank1_by_dataset.png",
)


def as_array(values) -> np.ndarray:
    """[grid, splits] floats with NaN for None (a diverged run)."""
    return np.array([[np.nan if v is None else v for v in row] for row in values], float)


def best_rank1(results: dict) -> dict[str, tuple[float | None, float | None]]:
    """penalty -> (mean, std) test rank-1 at its best lambda, from a study's results."""
    return {p: (b["rank1_mean"], b["rank1_std"]) for p, b in results["best"].items()}


def by_dataset(results: dict, compare_workdirs) -> list[dict]:
    """Panel (e)'s rows: this study's dataset, then each finished study of
    ``compare_workdirs`` (its ``results.json``, refused with the path when missing or
    damaged), as {dataset, workdir, rank1: penalty -> (mean, std)}."""
    rows = [{"dataset": results["dataset"], "workdir": "", "rank1": best_rank1(results)}]
    for folder in compare_workdirs:
        path = os.path.join(os.path.expanduser(folder), "results.json")
        if not os.path.isfile(path):
            raise ValueError(
                f"study.compare_workdirs: {path} not found; expected the folder of a finished "
                "AON study (python -m experiments.aon_study ... --workdir=FOLDER)"
            )
        other = run_files.read_json(path, what="AON study results")
        if not isinstance(other, dict) or "best" not in other or "dataset" not in other:
            raise ValueError(f"study.compare_workdirs: {path} is not an AON study's results.json")
        rows.append({"dataset": other["dataset"], "workdir": folder, "rank1": best_rank1(other)})
    return rows


def _fmt(mean, std=None, digits=1) -> str:
    if mean is None:
        return "diverged"
    return f"{mean:.{digits}f}" + ("" if std is None else f" ± {std:.{digits}f}")


def markdown(results: dict) -> str:
    """results.md: the lambda and eta sweeps' tables, the best lambdas, panel (e)'s rows."""
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
    rows = results.get("by_dataset", [])
    if rows:
        lines += ["", "Rank-1 at each penalty's best lambda, on every dataset (panel e):", ""]
        lines += ["| dataset | " + " | ".join(pens) + " |", "|---|" + "---|" * len(pens)]
        for row in rows:
            cells = [_fmt(*row["rank1"].get(p, (None, None))) for p in pens]
            lines.append(f"| {row['dataset']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_plots(results: dict, workdir: str, max_rank: int) -> list[str]:
    """Draws panels (a) to (e) of the paper's Fig. 2 into ``workdir``; returns the paths."""
    pens, name = results["penalties"], results["dataset"]
    lam_sw, eta_sw = results["lambda_sweep"], results["eta_sweep"]
    paths = [
        study_plots.plot_condition_numbers(
            results["lams"],
            {p: as_array(lam_sw[p]["condition_number"]) for p in pens},
            os.path.join(workdir, PLOTS[0]),
            title=f"condition number of W on {name}",
        ),
        study_plots.plot_rank1_sweep(
            results["lams"],
            {p: as_array(lam_sw[p]["rank1"]) for p in pens},
            os.path.join(workdir, PLOTS[1]),
            xlabel="lambda",
            title=f"rank-1 vs lambda on {name} (eta {results['base_eta']:g})",
        ),
        study_plots.plot_rank1_sweep(
            results["etas"],
            {f"{p} (lambda {eta_sw[p]['lam']:g})": as_array(eta_sw[p]["rank1"]) for p in pens},
            os.path.join(workdir, PLOTS[2]),
            xlabel="step size eta",
            title=f"rank-1 vs eta on {name}",
        ),
        cmc.plot_cmc(
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
    rows = results.get("by_dataset", [])
    if rows:
        paths.append(
            study_plots.plot_rank1_by_dataset(
                [r["dataset"] for r in rows],
                {p: [r["rank1"].get(p, (None, None)) for r in rows] for p in pens},
                os.path.join(workdir, PLOTS[4]),
                title="rank-1 at the best lambda, by dataset",
            )
        )
    return [str(p) for p in paths]
