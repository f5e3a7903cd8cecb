"""Plots of evaluation results, drawn without touching matplotlib's global backend."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from warca_jax import workdir as workdir_lib


def _savefig(fig, path: str, **kwargs) -> None:
    """``fig.savefig`` to a temporary name, then moved onto ``path`` (never half a file)."""
    with workdir_lib.atomic_path(path) as tmp:
        fig.savefig(tmp, **kwargs)


def plot_cmc(
    curves: dict[str, np.ndarray],
    path: str | Path,
    *,
    max_rank: int = 50,
    title: str | None = None,
    figsize: tuple[float, float] = (5, 4),
) -> Path:
    """Writes a PNG of CMC curves.

    Args:
      curves: name -> [r] CMC matching rates in percent (``evaluate(...)["cmc"]``).
      path: output PNG file.
      max_rank: last rank drawn.
      title: optional figure title.
      figsize: figure size in inches.

    Returns:
      The path written.
    """
    path = Path(path)
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    # Up to 10 curves take tab10's colours; more take tab20's, and past 20 the line style
    # changes too, so that no two curves look alike.
    palette = matplotlib.colormaps["tab10" if len(curves) <= 10 else "tab20"].colors
    styles = ("-", "--", ":", "-.")
    for c, (name, cmc) in enumerate(curves.items()):
        cmc = np.asarray(cmc, dtype=float)[:max_rank]
        ranks = np.arange(1, len(cmc) + 1)
        ax.plot(
            ranks,
            cmc,
            label=f"{name} (rank-1 {cmc[0]:.1f}%)",
            color=palette[c % len(palette)],
            linestyle=styles[(c // len(palette)) % len(styles)],
        )
    ax.set_xlabel("rank")
    ax.set_ylabel("matching rate (%)")
    ax.set_xlim(1, max_rank)
    ax.set_ylim(0, 100)
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    if len(curves) <= 6:
        ax.legend(loc="lower right")
    else:  # beside the axes, where it hides no curve
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    _savefig(fig, path, format="png", dpi=100, bbox_inches="tight")
    return path


_MATCH_COLOURS = {True: "tab:green", False: "tab:red"}


def _framed(ax, colour: str, width: float = 4.0) -> None:
    """Hides an axes' ticks and draws its frame in ``colour``."""
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(True)
        spine.set_edgecolor(colour)
        spine.set_linewidth(width)


def plot_ranked_lists(
    query_labels,
    ranked_labels,
    matches,
    distances,
    path: str | Path,
    *,
    query_images=None,
    ranked_images=None,
    title: str | None = None,
) -> Path:
    """Writes a PNG of ranked lists: one row per query, its top-k gallery entries after it.

    Each gallery entry is framed green when it has the query's identity and red otherwise
    (the study's Figure 3). With images, each cell shows the image (read with Pillow);
    without, a tile with the identity number and the distance.

    Args:
      query_labels: [q] identity of each query.
      ranked_labels: [q, k] identities of its k nearest gallery entries, closest first.
      matches: [q, k] bool, whether each entry is a true match of the query.
      distances: [q, k] their distances to the query.
      path: output PNG file.
      query_images: None, or [q] image paths of the queries.
      ranked_images: None, or [q, k] image paths of the ranked entries (given together
        with ``query_images``).
      title: optional figure title.

    Returns:
      The path written.
    """
    query_labels = np.asarray(query_labels)
    ranked_labels = np.asarray(ranked_labels)
    matches = np.asarray(matches, dtype=bool)
    dists = np.asarray(distances, dtype=float)
    if query_labels.ndim != 1 or query_labels.size == 0:
        raise ValueError(f"query_labels must be a non-empty [q] array, got {query_labels.shape}")
    shape = (len(query_labels), ranked_labels.shape[-1] if ranked_labels.ndim == 2 else -1)
    for name, a in (("ranked_labels", ranked_labels), ("matches", matches), ("distances", dists)):
        if a.ndim != 2 or a.shape[0] != shape[0] or shape[1] < 1 or a.shape != shape:
            raise ValueError(f"{name} must be [q={shape[0]}, k >= 1], got shape {a.shape}")
    if (query_images is None) != (ranked_images is None):
        raise ValueError("give query_images and ranked_images together, or neither")
    if query_images is not None:
        if len(query_images) != shape[0] or any(len(r) != shape[1] for r in ranked_images):
            raise ValueError(
                f"query_images must hold {shape[0]} paths and ranked_images {shape[0]} rows of "
                f"{shape[1]}; got {len(query_images)} and {[len(r) for r in ranked_images]}"
            )
        from PIL import Image  # only this drawing reads pixels

        def show(ax, image_path):
            with Image.open(image_path) as im:
                ax.imshow(np.asarray(im.convert("RGB")), aspect="auto")

    q, k = shape
    fig = Figure(figsize=(1.0 * (k + 1) + 0.4, 1.55 * q + (0.5 if title else 0.2)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(q, k + 1, squeeze=False)
    for r in range(q):
        ax = axes[r, 0]
        if query_images is not None:
            show(ax, query_images[r])
        else:
            ax.set_facecolor("0.92")
            ax.text(0.5, 0.5, f"id {query_labels[r]}", ha="center", va="center", fontsize=9)
        _framed(ax, "black")
        ax.set_title(f"query\nid {query_labels[r]}", fontsize=7)
        for c in range(k):
            ax = axes[r, c + 1]
            colour = _MATCH_COLOURS[bool(matches[r, c])]
            if query_images is not None:
                show(ax, ranked_images[r][c])
            else:
                ax.set_facecolor("#e6f4e6" if matches[r, c] else "#f8e4e4")
                ax.text(
                    0.5,
                    0.5,
                    f"id {ranked_labels[r, c]}\nd {dists[r, c]:.3g}",
                    ha="center",
                    va="center",
                    fontsize=8,
                )
            _framed(ax, colour)
            ax.set_title(f"{c + 1}: id {ranked_labels[r, c]}\nd {dists[r, c]:.3g}", fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _savefig(fig, path, format="png", dpi=100)
    return path


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
    _savefig(fig, path, format="png", dpi=100)
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
    fig = Figure(figsize=(5, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
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
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(loc="best")
    fig.tight_layout()
    _savefig(fig, path, format="png", dpi=100)
    return path


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
    fig = Figure(figsize=(5, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name, c in curves.items():
        mean, std = c.mean(axis=1), c.std(axis=1)
        ax.errorbar(values, mean, yerr=std, fmt="o-", capsize=3, label=name)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("rank-1 (%)")
    ax.set_ylim(0, 100)
    ax.grid(True, which="both", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(loc="best")
    fig.tight_layout()
    _savefig(fig, path, format="png", dpi=100)
    return path


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
    fig = Figure(figsize=(5.5, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
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
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right")
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="0.3")
        fig.tight_layout(rect=(0, 0.03 + 0.03 * note.count("\n"), 1, 1))
    else:
        fig.tight_layout()
    _savefig(fig, path, format="png", dpi=100)
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
    fig = Figure(figsize=(8, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
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
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, title="method (rank-1)")
    fig.tight_layout()
    _savefig(fig, path, format="png", dpi=100)
    return path
