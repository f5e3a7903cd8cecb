"""The figures of one run of the main job (``pipeline.train_and_evaluate``).

* ``cmc.png``: the method's mean CMC over the splits with a band of +-1 std over them and
  its mAP in the legend, beside the Euclidean baseline's (``cmc.plot_cmc``);
* ``curves.png``: the training curves of an iterative learner (one whose registry entry
  ``takes("callback")``, i.e. that logs a history to metrics.jsonl), against the step: the
  loss, a ranking measure that moves (``RANKING_MEASURES``: WARCA's ``closer_frac``, or
  the learner's own), and with ``data.val_fraction`` > 0 the validation rank-1 and mAP;
  one thin line per split and their mean (``plot_training_curves``). A closed-form
  learner has no history and writes none.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib import ticker

from warca_jax.io import run_files
from warca_jax.plots import cmc

# The ranking measure drawn beside the loss: the first of these that a run logs and that
# moves, with its panel's title.
RANKING_MEASURES = (
    ("closer_frac", "negatives nearer than the positive"),
    ("expected_accuracy", "expected leave-one-out accuracy"),
    ("mean_rank", "mean rank of the sampled pairs"),
    ("violated_frac", "pairs with a violated constraint"),
    ("violated", "violated constraints"),
    ("active_triplets", "active triplets"),
)
VALIDATION = (("val_rank1", "rank-1", "tab:blue"), ("val_mAP", "mAP", "tab:orange"))
PANEL = (5.0, 4.2)  # inches per panel, at cmc.DPI (exact in binary: whole pixels)


def _by_split(rows: list[dict], key: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """split -> (steps, values) of the rows that hold a number under ``key``."""
    out: dict[int, list] = {}
    for r in rows:
        v = r.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v):
            out.setdefault(int(r.get("split", 0)), []).append((float(r["step"]), float(v)))
    return {s: tuple(np.array(a).T) for s, a in sorted(out.items())}


def _mean_curve(series: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """The mean over splits at the steps every split logged (None: one split, or fewer
    than two such steps)."""
    if len(series) < 2:
        return None
    common = set.intersection(*(set(steps.tolist()) for steps, _ in series.values()))
    if len(common) < 2:
        return None
    steps = np.array(sorted(common))
    values = [np.interp(steps, s, v) for s, v in series.values()]
    return steps, np.mean(values, axis=0)


def _moves(series: dict) -> bool:
    values = np.concatenate([v for _, v in series.values()]) if series else np.zeros(0)
    return values.size > 1 and float(np.ptp(values)) > 0


def _draw(ax, series: dict, colour: str, name: str) -> list[np.ndarray]:
    """One thin line per split and their mean bold (or, without a mean, each split's line
    of medium weight); the values drawn."""
    mean = _mean_curve(series)
    few = max(len(s) for s, _ in series.values()) <= 3  # a line of three points or fewer
    for i, (steps, values) in enumerate(series.values()):
        ax.plot(
            steps,
            values,
            color=colour,
            marker="o" if few else None,
            lw=0.9 if mean is not None else 1.6,
            alpha=0.35 if mean is not None else 0.8,
            label=name if mean is None and i == 0 else None,
        )
    if mean is not None:
        ax.plot(*mean, color=colour, lw=2.6, label=name)
    return [v for _, v in series.values()]


def _y_scale(values: list[np.ndarray]) -> dict | None:
    """The y scale of a panel (``Axes.set_yscale``'s arguments) when its positive values
    span more than a factor of 10: log, or, for values that reach 0 (WARCA's
    ``closer_frac`` once no negative is nearer), symlog, linear below the decade of the
    smallest positive value, so that the steps down to 0 stay apart. None: linear."""
    v = np.concatenate(values)
    positive = v[v > 0]
    if v.min() < 0 or positive.size == 0 or positive.max() / positive.min() <= 10:
        return None
    if v.min() > 0:
        return {"value": "log"}
    return {"value": "symlog", "linthresh": float(10 ** np.floor(np.log10(positive.min())))}


def _panels(rows: list[dict]) -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    """(title, y label, [(column, legend name, colour)]) of each panel the rows can fill."""
    panels = [("training loss (minibatch)", "loss", [("loss", "loss", "tab:red")])]
    for key, title in RANKING_MEASURES:
        if _moves(_by_split(rows, key)):
            panels.append((title, key, [(key, key, "tab:green")]))
            break
    if any(_by_split(rows, key) for key, _, _ in VALIDATION):
        columns = [(k, f"val {n}", c) for k, n, c in VALIDATION]
        panels.append(("validation: held-out identities", "%", columns))
    return [p for p in panels if any(_by_split(rows, k) for k, _, _ in p[2])]


def plot_training_curves(rows: list[dict], path: str | Path, *, title: str | None = None) -> Path:
    """Writes a PNG of training curves from history rows (metrics.jsonl's lines).

    One panel per measure the rows hold (``_panels``: the loss, a moving ranking measure,
    the validation rank-1 and mAP), against ``step``; each split a thin line and the mean
    over the splits bold (at the steps they all logged). A measure spanning more than a
    factor of 10 is drawn on a log axis, or a symlog one when it reaches 0 (``_y_scale``).
    ``PANEL`` inches per panel at ``cmc.DPI``.

    Raises:
      ValueError: no row holds a step and a loss.
    """
    rows = [r for r in rows if isinstance(r.get("step"), int | float)]
    panels = _panels(rows)
    if not panels:
        raise ValueError("no history row holds a step and a loss: nothing to draw")
    fig, axes = cmc.figure((PANEL[0] * len(panels), PANEL[1]), ncols=len(panels), squeeze=False)
    for ax, (panel, ylabel, columns) in zip(axes[0], panels, strict=True):
        drawn = []
        for key, name, colour in columns:
            series = _by_split(rows, key)
            if series:
                drawn += _draw(ax, series, colour, name)
        cmc.readable(ax, xlabel="step", ylabel=ylabel)
        ax.set_title(panel, fontsize=cmc.FONTS["label"])
        scale = _y_scale(drawn)
        if scale:
            ax.set_yscale(**scale)
        elif ylabel == "%":
            ax.set_ylim(*cmc.fitted_range(*drawn))
        else:  # few ticks, written short: 0.0005, not 0.00050
            ax.yaxis.set_major_locator(ticker.MaxNLocator(5, steps=[1, 2, 2.5, 5, 10]))
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:.4g}"))
        if len(columns) > 1:
            ax.legend(fontsize=cmc.FONTS["legend"] - 1)
    if title:
        fig.suptitle(title, fontsize=cmc.FONTS["title"])
    run_files.write_figure(path, fig, format="png", dpi=cmc.DPI)
    return Path(path)


def _mean_and_splits(curves: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    length = min(len(c) for c in curves)
    per_split = np.array([c[:length] for c in curves], dtype=float)
    return per_split.mean(axis=0), per_split


def write_run_figures(
    workdir: str, results: dict, *, iterative: bool, max_rank: int, title: str
) -> list[str]:
    """Writes cmc.png and, for an ``iterative`` learner, curves.png into ``workdir``.

    ``results``: the run's results.json (its ``splits`` hold each split's CMC, mAP and
    the baseline's); curves.png is drawn from the workdir's metrics.jsonl. Returns the
    paths written.
    """
    splits, method = results["splits"], results["method"]
    mean, per_split = _mean_and_splits([r["cmc"] for r in splits])
    curves, spread = {method: mean}, {method: per_split}
    maps = {method: results["mean"]["mAP"]}
    if all("baseline_euclidean" in r for r in splits):  # eval.baseline
        base = [r["baseline_euclidean"] for r in splits]
        curves["euclidean"], spread["euclidean"] = _mean_and_splits([b["cmc"] for b in base])
        maps["euclidean"] = float(np.mean([b["mAP"] for b in base]))
    path = os.path.join(workdir, "cmc.png")
    cmc.plot_cmc(curves, path, max_rank=max_rank, title=title, spread=spread, maps=maps)
    written = [path]
    metrics = os.path.join(workdir, "metrics.jsonl")
    if iterative and os.path.exists(metrics):
        rows = run_files.read_jsonl(metrics)
        if _panels([r for r in rows if isinstance(r.get("step"), int | float)]):
            path = os.path.join(workdir, "curves.png")
            note = "1 split" if len(splits) == 1 else f"{len(splits)} splits thin, their mean bold"
            plot_training_curves(rows, path, title=f"{title}: training ({note})")
            written.append(path)
    return written
