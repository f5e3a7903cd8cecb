"""The studies' plots: what the AON study (``plot_condition_numbers``, ``plot_rank1_sweep``,
``plot_rank1_by_dataset``), the training-time study (``plot_rank1_vs_seconds``) and the CUHK03
study's figures (``plot_rank_k``, ``plot_validation_cost``) draw; the CMC curves and ranked
lists are ``warca_jax.plots.cmc``'. Drawn without touching matplotlib's global backend.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from warca_jax.io import run_files


def _axes(figsize: tuple[float, float]):
    """(figure, its one axes) on an Agg canvas of its own."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _finish(fig, ax, path, title: str | None, legend: dict, *, note: str | None = None):
    """The axes' title (when given) and legend (``ax.legend(**legend)``), ``note`` under the
    axes (when given), a tight layout, and the PNG written to ``path``, which it returns."""
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(**legend)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="0.3")
        fig.tight_layout(rect=(0, 0.03 + 0.03 * note.count("\n"), 1, 1))
    else:
        fig.tight_layout()
    run_files.write_figure(path, fig, format="png", dpi=100)
    return path


def plot_rank_k(
    curves: dict[str, np.ndarray],
    path: str | Path,
    *,
    max_rank: int,
    title: str | None = None,
) -> Path:
    """Writes a PNG of rank-k matching rates of many methods (the study's Figures 1-2).

    Like ``plot_cmc`` but for a dozen curves: markers at every rank, integer ticks, and the
    legend (with each method's rank-1) beside the axes rather than over the curves.

    Args:
      curves: name -> [r] rank-k matching rates in percent, k = 1 .. r (r >= max_rank).
      path: output PNG file.
      max_rank: last rank k drawn.
      title: optional figure title.

    Returns:
      The path written.
    """
    if not curves:
        raise ValueError("plot_rank_k needs at least one curve")
    fig, ax = _axes((8, 4.2))
    markers = "osD^v<>ph*"
    for n, (name, curve) in enumerate(curves.items()):
        curve = np.asarray(curve, dtype=float)[:max_rank]
        if curve.ndim != 1 or curve.size == 0:
            raise ValueError(f"curve {name!r} must be a non-empty [r] array, got {curve.shape}")
        ranks = np.arange(1, len(curve) + 1)
        style = "-" if n < 10 else "--"  # the colour cycle repeats after 10
        ax.plot(
            ranks,
            curve,
            style,
            marker=markers[n % len(markers)],
            markersize=3,
            label=f"{name} ({curve[0]:.1f})",
        )
    ax.set_xlabel("rank k")
    ax.set_ylabel("rank-k matching rate (%)")
    ax.set_xlim(0.5, max_rank + 0.5)
    ax.set_ylim(0, 100)
    step = max(1, int(np.ceil(max_rank / 10)))
    ax.set_xticks(np.unique(np.r_[1, np.arange(step, max_rank + 1, step)]))
    ax.grid(True, alpha=0.3)
    legend = dict(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, title="method (rank-1)")
    return _finish(fig, ax, path, title, legend)


def plot_validation_cost(
    curves: dict[str, tuple[np.ndarray, np.ndarray]],
    path: str | Path,
    *,
    title: str | None = None,
) -> Path:
    """Writes a PNG of validation cost against epoch, one panel per optimiser.

    The optimisers' costs have different scales (the study's eq. 6 is unbounded below,
    eq. 7 is a non-negative hinge), so each gets its own panel and y axis; the lowest
    cost (the parameters an SGD fit returns) is marked.

    Args:
      curves: name -> (epochs [c], validation costs [c]), one point per validation check.
      path: output PNG file.
      title: optional figure title.

    Returns:
      The path written.
    """
    if not curves:
        raise ValueError("plot_validation_cost needs at least one curve")
    fig = Figure(figsize=(4.2 * len(curves), 3.4))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(curves), squeeze=False)[0]
    for ax, (name, (epochs, costs)) in zip(axes, curves.items(), strict=True):
        epochs = np.asarray(epochs, dtype=float)
        costs = np.asarray(costs, dtype=float)
        if epochs.shape != costs.shape or epochs.ndim != 1 or epochs.size == 0:
            raise ValueError(
                f"curve {name!r}: epochs and costs must be non-empty [c] arrays of one shape, "
                f"got {epochs.shape} and {costs.shape}"
            )
        ax.plot(epochs, costs, "o-", markersize=3)
        best = int(np.argmin(costs))
        ax.plot(epochs[best], costs[best], "*", markersize=10, color="tab:red", label="lowest")
        ax.set_xlabel("epoch")
        ax.set_ylabel("validation cost")
        ax.set_title(name, fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    run_files.write_figure(path, fig, format="png", dpi=100)
    return path


def _split_grid(values, curves: dict, what: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Checks a positive 1-D grid and curves of shape [len(grid), splits]; returns arrays."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or values.size == 0 or not np.all(values > 0):
        raise ValueError(f"the {what} grid must be a non-empty 1-D array of positive numbers")
    if not curves:
        raise ValueError(f"need at least one curve of {what}")
    out = {}
    for name, c in curves.items():
        c = np.asarray(c, dtype=float)
        if c.ndim != 2 or c.shape[0] != values.size or c.shape[1] == 0:
            raise ValueError(
                f"curve {name!r} must be [{values.size} {what} values, splits >= 1], "
                f"got shape {c.shape}"
            )
        out[name] = c
    return values, out


def plot_condition_numbers(
    lams,
    curves: dict[str, np.ndarray],
    path: str | Path,
    *,
    title: str | None = None,
) -> Path:
    """Writes a log-log PNG of the learned map's condition number against lambda (Fig. 2a).

    Args:
      lams: [L] positive penalty weights.
      curves: name -> [L, S] condition numbers per lambda and split; NaN (a diverged run)
        and inf are not drawn. Each split is a faint dot, the line their geometric mean.
      path: output PNG file.
      title: optional figure title.

    Returns:
      The path written.
    """
    lams, curves = _split_grid(lams, curves, "lambda")
    path = Path(path)
    fig, ax = _axes((5, 4))
    for name, c in curves.items():
        ok = np.isfinite(c) & (c > 0)
        logs = np.where(ok, np.log(np.where(ok, c, 1.0)), 0.0)
        count = ok.sum(axis=1)
        geo = np.where(count > 0, np.exp(logs.sum(axis=1) / np.maximum(count, 1)), np.nan)
        (line,) = ax.plot(lams, geo, "o-", label=name)
        xs = np.broadcast_to(lams[:, None], c.shape)
        ax.plot(xs[ok], c[ok], ".", color=line.get_color(), alpha=0.35)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("lambda")
    ax.set_ylabel("condition number of W (s_max / s_min)")
    ax.grid(True, which="both", alpha=0.3)
    return _finish(fig, ax, path, title, {"loc": "best"})


def plot_rank1_sweep(
    values,
    curves: dict[str, np.ndarray],
    path: str | Path,
    *,
    xlabel: str,
    title: str | None = None,
) -> Path:
    """Writes a PNG of rank-1 (mean +- std over splits) against a log-scaled grid (Fig. 2b, c).

    Args:
      values: [L] positive grid values (lambda or step size).
      curves: name -> [L, S] rank-1 in percent per grid value and split; a grid value with a
        NaN (a diverged run) in any split is not drawn.
      path: output PNG file.
      xlabel: the grid's name, for the x axis.
      title: optional figure title.

    Returns:
      The path written.
    """
    values, curves = _split_grid(values, curves, xlabel)
    path = Path(path)
    fig, ax = _axes((5, 4))
    for name, c in curves.items():
        mean, std = c.mean(axis=1), c.std(axis=1)
        ax.errorbar(values, mean, yerr=std, fmt="o-", capsize=3, label=name)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("rank-1 (%)")
    ax.set_ylim(0, 100)
    ax.grid(True, which="both", alpha=0.3)
    return _finish(fig, ax, path, title, {"loc": "best"})


def plot_rank1_by_dataset(
    datasets: list[str],
    bars: dict[str, list[tuple[float | None, float | None]]],
    path: str | Path,
    *,
    title: str | None = None,
) -> Path:
    """Writes a PNG of grouped bars: rank-1 (mean +- std) per dataset and penalty (Fig. 2e).

    Args:
      datasets: [G] dataset names, one group of bars each.
      bars: name -> [G] (mean, std) rank-1 in percent; (None, None) leaves a gap.
      path: output PNG file.
      title: optional figure title.

    Returns:
      The path written.
    """
    if not datasets or not bars or any(len(v) != len(datasets) for v in bars.values()):
        raise ValueError(
            f"plot_rank1_by_dataset needs one (mean, std) per dataset for every name; got "
            f"{len(datasets)} datasets and lengths {[len(v) for v in bars.values()]}"
        )
    path = Path(path)
    fig, ax = _axes((max(5.0, 1.2 * len(datasets) + 2.6), 4))
    width = 0.8 / len(bars)
    x = np.arange(len(datasets))
    for i, (name, values) in enumerate(bars.items()):
        mean = np.array([np.nan if m is None else m for m, _ in values], float)
        std = np.array([0.0 if s is None else s for _, s in values], float)
        pos = x - 0.4 + width * (i + 0.5)
        ax.bar(pos, mean, width, yerr=std, capsize=3, label=name)
        for px, m in zip(pos, mean, strict=True):
            if np.isfinite(m):
                ax.text(px, m + 1, f"{m:.1f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, datasets)
    ax.set_ylabel("rank-1 (%)")
    ax.set_ylim(0, 118)  # room above 100 for the legend, in one row
    ax.set_yticks(range(0, 101, 20))
    ax.grid(True, axis="y", alpha=0.3)
    return _finish(fig, ax, path, title, {"loc": "upper center", "ncol": len(bars)})


def plot_rank1_vs_seconds(
    curves: dict[str, list[tuple[np.ndarray, np.ndarray]]],
    path: str | Path,
    *,
    title: str | None = None,
    note: str | None = None,
) -> Path:
    """Writes a PNG of test rank-1 against training seconds (Fig. 3).

    Args:
      curves: name -> one (seconds [c], rank1 [c]) pair per split, sampled at the same
        training steps in every split. Each split is drawn faintly; the bold line is the
        mean over splits of the seconds and of the rank-1 at each sampled step.
      path: output PNG file.
      title: optional figure title.
      note: optional small text under the axes (e.g. how compilation time is counted).

    Returns:
      The path written.
    """
    if not curves:
        raise ValueError("plot_rank1_vs_seconds needs at least one method's curves")
    path = Path(path)
    fig, ax = _axes((5.5, 4.2))
    for name, splits in curves.items():
        pairs = [(np.asarray(t, float), np.asarray(r, float)) for t, r in splits]
        lengths = {t.shape for t, _ in pairs} | {r.shape for _, r in pairs}
        if not pairs or len(lengths) != 1 or len(next(iter(lengths))) != 1:
            raise ValueError(
                f"{name!r}: every split needs 1-D seconds and rank-1 of one common length, "
                f"got shapes {sorted(lengths)}"
            )
        seconds = np.stack([t for t, _ in pairs])
        rank1 = np.stack([r for _, r in pairs])
        (line,) = ax.plot(seconds.mean(0), rank1.mean(0), "o-", markersize=3, label=name)
        for t, r in zip(seconds, rank1, strict=True):
            ax.plot(t, r, "-", color=line.get_color(), alpha=0.25, linewidth=1)
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("test rank-1 (%)")
    ax.set_ylim(0, 100)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    return _finish(fig, ax, path, title, {"loc": "lower right"}, note=note)
