"""The report: the runs' outcomes gathered (``collect``), the tables, CMC plots, results.json.

``table2.md`` / ``table2_{rank1,rank5,auc,auc_top30}.csv`` are the paper's Table 2 (rows
datasets, columns methods; ``AUC_top30`` is its Table 2c measure, ``AUC`` the area over
the whole gallery: ``warca_jax.evaluation.metrics``), ``study.md`` / ``study.csv`` the
study's rank-1, rank-10 and mAP per dataset and method, ``cmc_<dataset>.png`` one CMC
plot per dataset with every method (as the WARCA paper's Fig. 1: linear methods solid,
kernel methods dashed, the best ``CMC_TOP`` by rank-1 named with it, the rest grey).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable

import numpy as np

from warca_jax.io import run_files
from warca_jax.plots import cmc
from warca_jax.protocol.datasets import DataInfo
from warca_jax.protocol.fields import safe
from warca_jax.protocol.jobs import outcome
from warca_jax.protocol.plan import Plan, run_method_config
from warca_jax.protocol.runs import run_jobs

TABLE2_MEASURES = (
    ("rank1", "Rank 1"),
    ("rank5", "Rank 5"),
    ("AUC", "AUC (whole gallery)"),
    ("AUC_top30", "AUC_top30 (the paper's Table 2c AUC: trapz(CMC(1..30)) / 30)"),
)
STUDY_MEASURES = ("rank1", "rank10", "mAP")
CMC_TOP = 5  # methods named, in colour, in the CMC plots (the others thin grey lines)
DISPLAY = {  # column names of the paper's Table 2 and the study
    "warca:chi2": "WARCA-chi2",
    "warca:linear": "WARCA-L",
    "warca:kernel": "WARCA-kernel",
    "rpcca:chi2": "rPCCA-chi2",
    "rpcca": "rPCCA-L",
    "mlapg": "MLAPG",
    "frml": "FRML",
    "svmml": "SVMML",
    "svmml:released": "SVMML-released",
    "lfda:chi2": "LFDA-chi2",
    "lfda": "LFDA-L",
    "kissme": "KISSME",
    "nn": "kNN Euclidean",
    "nn:manhattan": "kNN Manhattan",
    "nn:cosine": "kNN cosine",
    "nn:chi2": "kNN chi2",
    "kmeans_nn": "k-means + kNN",
    "mahalanobis": "Mahalanobis",
    "xqda": "XQDA",
    "lmnn": "LMNN",
    "pairwise_sgd": "pairwise SGD",
    "triplet_sgd": "triplet SGD",
    "nca": "NCA",
    "mmc": "MMC",
    "itml": "ITML",
    "sdml": "SDML",
    "lsml": "LSML",
    "rca": "RCA",
    "scml": "SCML",
    "nfst": "NFST",
}


def _summary(per_split: list[dict]) -> dict:
    keys = (
        *("rank1", "rank5", "rank10", "rank20", "mAP", "mINP", "AUC", "AUC_top30"),
        "train_seconds",
    )
    out = {
        k: {
            "mean": float(np.mean([r[k] for r in per_split])),
            "std": float(np.std([r[k] for r in per_split])),
        }
        for k in keys
    }
    length = min(len(r["cmc"]) for r in per_split)
    out["cmc"] = np.mean([r["cmc"][:length] for r in per_split], axis=0).tolist()
    return out


def _failure_text(failed: dict[str, str]) -> str:
    """'split 0, 2: reason; split 1: other reason'."""
    by_reason: dict[str, list[str]] = {}
    for s, reason in failed.items():
        by_reason.setdefault(reason, []).append(s)
    return "; ".join(
        f"split{'s' if len(ss) > 1 else ''} {', '.join(ss)}: {r}" for r, ss in by_reason.items()
    )


def collect(plan: Plan, workdir: str, data: dict[str, DataInfo]) -> dict:
    """dataset -> method -> entry, read through the verified reader (``outcome``).

    An entry has ``status`` and ``num_splits`` and ``num_done`` (the splits with a
    result), and then:

    * ``done``: the mean and std over the finished splits of every measure, and the mean
      CMC curve (``_summary``);
    * ``failed``: ``failed``, split -> reason, for the splits that failed (no numbers);
    * ``not_applicable``: ``reason``, why the learner refused the dataset.

    A method with no outcome yet has no entry.
    """
    by_run: dict[tuple[str, str], list[dict]] = {}
    for job in run_jobs(plan, workdir, data, strict=False):
        by_run.setdefault((job["dataset"], job["label"]), []).append(job)
    results = {}
    for name in plan.datasets:
        num_splits = data[name].num_splits if name in data else 0
        results[name] = {}
        for label in plan.runs(name):
            if (name, label) in plan.not_applicable:
                results[name][label] = {
                    "status": "not_applicable",
                    "reason": plan.not_applicable[(name, label)],
                    "num_done": 0,
                    "num_splits": num_splits,
                }
                continue
            rows, failed = [], {}
            for job in by_run.get((name, label), []):
                got = outcome(job)
                if got is None:
                    continue
                if got[0] == "done":
                    rows.append(got[1])
                else:
                    failed[str(job["split"])] = got[1]
            common = {"num_done": len(rows), "num_splits": num_splits}
            if failed:
                results[name][label] = {"status": "failed", "failed": failed, **common}
            elif rows:
                results[name][label] = {"status": "done", **_summary(rows), **common}
    return results


class _Notes:
    """Numbered notes under a table: the reasons behind its n/a and failed cells."""

    def __init__(self):
        self.texts: list[str] = []

    def mark(self, text: str) -> str:
        text = " ".join(text.split())  # one line
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def lines(self) -> list[str]:
        if not self.texts:
            return []
        return ["Notes:", "", *[f"{i}. {t}" for i, t in enumerate(self.texts, 1)], ""]


def _cell(entry: dict | None, key: str, notes: _Notes | None = None, who: str = "") -> str:
    if entry is None:
        return "-"
    status = entry.get("status", "done")
    if status != "done":
        if status == "not_applicable":
            word, text = "n/a", f"{who}: not applicable: {entry['reason']}"
        else:
            word, text = "failed", f"{who}: failed on {_failure_text(entry['failed'])}"
        return word if notes is None else f"{word} {notes.mark(text)}"
    m, s = entry[key]["mean"], entry[key]["std"]
    partial = (
        ""
        if entry["num_done"] == entry["num_splits"]
        else f" ({entry['num_done']}/{entry['num_splits']})"
    )
    return f"{m:.2f} ± {s:.2f}{partial}"


def _note_text(entry: dict) -> str:
    """The study.csv note of an entry: '' for results, else why there are none."""
    if entry["status"] == "not_applicable":
        return f"not applicable: {entry['reason']}"
    if entry["status"] == "failed":
        return f"failed on {_failure_text(entry['failed'])}"
    return ""


def _md_table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _write_csv(path: str, rows: list[list]) -> None:
    with run_files.atomic_file(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def _done(entry: dict | None) -> bool:
    return entry is not None and entry.get("status", "done") == "done"


def _table2_csv(plan: Plan, results: dict, key: str) -> list[list]:
    """The rows of ``table2_<key>.csv``: mean and std columns per method."""
    names = [DISPLAY.get(m, m) for m in plan.methods]
    rows = [["dataset", *[f"{n} {p}" for n in names for p in ("mean", "std")]]]
    for name in plan.datasets:
        row = [name]
        for m in plan.methods:
            e = results[name].get(m)
            if e is None:
                row += ["", ""]
            elif not _done(e):
                row += ["n/a" if e["status"] == "not_applicable" else "failed", ""]
            else:
                row += [f"{e[key]['mean']:.4f}", f"{e[key]['std']:.4f}"]
        rows.append(row)
    return rows


def _write_table2(plan: Plan, workdir: str, results: dict) -> list[str]:
    """table2.md (every measure, the best in bold) and table2_<measure>.csv."""
    written = []
    labels = plan.methods
    names = [DISPLAY.get(m, m) for m in labels]
    parts = ["# Table 2: rank 1, rank 5, AUC and AUC_top30 (mean ± std over splits, %)", ""]
    notes = _Notes()
    for key, title in TABLE2_MEASURES:
        rows = []
        for name in plan.datasets:
            res = results[name]
            best = max((res[m][key]["mean"] for m in labels if _done(res.get(m))), default=None)
            cells = []
            for m, n in zip(labels, names, strict=True):
                cell = _cell(res.get(m), key, notes, f"{n} on {name}")
                if _done(res.get(m)) and res[m][key]["mean"] == best:
                    cell = f"**{cell}**"
                cells.append(cell)
            rows.append([name, *cells])
        parts += [f"## {title}", "", _md_table(["dataset", *names], rows), ""]
        path = os.path.join(workdir, f"table2_{key.lower()}.csv")
        _write_csv(path, _table2_csv(plan, results, key))
        written.append(path)
    parts += notes.lines()
    path = os.path.join(workdir, "table2.md")
    run_files.write_text(path, "\n".join(parts))
    written.append(path)
    return written


def _study_csv_row(name: str, m: str, e: dict) -> list:
    if _done(e):
        return [
            name,
            m,
            e["num_done"],
            *[f"{e[k][p]:.4f}" for k in STUDY_MEASURES for p in ("mean", "std")],
            f"{e['train_seconds']['mean']:.3f}",
            "",
        ]
    return [name, m, e["num_done"], *[""] * (2 * len(STUDY_MEASURES) + 1), _note_text(e)]


def _write_study(plan: Plan, workdir: str, results: dict) -> list[str]:
    """study.md (one table per dataset) and study.csv (one row per dataset and method)."""
    parts = ["# Rank 1, rank 10 and mAP per dataset (mean ± std over splits, %)", ""]
    notes = _Notes()
    csv_rows = [
        [
            "dataset",
            "method",
            "splits",
            *[f"{k} {p}" for k in STUDY_MEASURES for p in ("mean", "std")],
            "train_seconds",
            "note",
        ]
    ]
    for name in plan.datasets:
        rows = []
        for m in plan.methods:
            n = DISPLAY.get(m, m)
            e = results[name].get(m)
            if m not in plan.runs(name):
                continue
            rows.append(
                [
                    n,
                    *[_cell(e, k, notes, f"{n} on {name}") for k in STUDY_MEASURES],
                    f"{e['train_seconds']['mean']:.2f}" if _done(e) else "-",
                ]
            )
            if e is not None:
                csv_rows.append(_study_csv_row(name, m, e))
        parts += [
            f"## {name}",
            "",
            _md_table(["method", "rank-1", "rank-10", "mAP", "train (s)"], rows),
            "",
        ]
    parts += notes.lines()
    csv_path = os.path.join(workdir, "study.csv")
    _write_csv(csv_path, csv_rows)
    path = os.path.join(workdir, "study.md")
    run_files.write_text(path, "\n".join(parts))
    return [csv_path, path]


def is_kernel(label: str, method_cfg) -> bool:
    """Whether the run of ``label`` is a kernel method (dashed in the CMC plots): its method
    config names a kernel (``kernel`` not 'none'), its label ends in ':chi2', or it is
    ``kernel_nn``."""
    kernel = str(method_cfg.get("kernel", "none"))
    return kernel != "none" or label.endswith(":chi2") or label.split(":")[0] == "kernel_nn"


def _write_cmc_plots(plan: Plan, workdir: str, results: dict) -> list[str]:
    """cmc_<dataset>.png: every method done, linear solid and kernel dashed, the best
    ``CMC_TOP`` by rank-1 named and strong (``cmc.plot_methods_cmc``)."""
    written = []
    for name in plan.datasets:
        done = [m for m in plan.methods if _done(results[name].get(m))]
        curves = {DISPLAY.get(m, m): results[name][m]["cmc"] for m in done}
        kernel = {
            DISPLAY.get(m, m)
            for m in done
            if is_kernel(m, run_method_config(plan.config, m, name, plan.dim(name)))
        }
        if curves:
            path = os.path.join(workdir, f"cmc_{safe(name)}.png")
            cmc.plot_methods_cmc(
                curves,
                path,
                kernel=kernel,
                top=CMC_TOP,
                max_rank=plan.config.eval.plot_max_rank,
                title=f"CMC on {name}",
            )
            written.append(path)
    return written


def write_report(plan: Plan, workdir: str, results: dict) -> list[str]:
    """Writes the tables, the CMC plots and results.json; returns the files written.

    Cells: ``mean ± std`` over the splits done (``(k/n)`` when only k of n are), ``-``
    for a run skipped or not done, ``n/a [i]`` / ``failed [i]`` with note i giving the
    reason. The CSV tables hold ``n/a`` / ``failed`` in the mean column (study.csv: the
    reason in its ``note`` column).
    """
    written = _write_table2(plan, workdir, results)
    written += _write_study(plan, workdir, results)
    written += _write_cmc_plots(plan, workdir, results)
    path = os.path.join(workdir, "results.json")
    run_files.write_json(path, results)
    written.append(path)
    return written
