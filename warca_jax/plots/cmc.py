"""Plots of evaluation results, drawn without touching matplotlib's global backend: CMC
curves (``plot_cmc``: a run's mean curve, its spread over the splits and its mAP;
``plot_methods_cmc``: many methods, linear and kernel apart, as the protocol's report
draws them) and ranked lists (``plot_ranked_lists``) here, with what they share (a
figure's size, fonts and fitted axis range); a run's training curves in
``warca_jax.plots.run_plots``, the studies' plots in ``warca_jax.plots.study_plots``."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from warca_jax.io import run_files

FIGSIZE = (8.0, 5.5)  # inches: 960 x 660 pixels at DPI, readable on a laptop screen
DPI = 120
FONTS = {"title": 15, "label": 13, "tick": 11, "legend": 11}
MARGIN = 0.05  # of the data's range, above and below the curves (``fitted_range``)


def figure(figsize: tuple[float, float] = FIGSIZE, **subplots):
    """(figure, axes) on an Agg canvas of its own, laid out by constrained layout (so that a
    legend beside the axes fits in the figure's fixed size)."""
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(**subplots)


def readable(ax, *, xlabel: str, ylabel: str, title: str | None = None) -> None:
    """The labels, title and ticks of ``ax`` in ``FONTS``' sizes, and a light grid."""
    ax.set_xlabel(xlabel, fontsize=FONTS["label"])
    ax.set_ylabel(ylabel, fontsize=FONTS["label"])
    ax.tick_params(labelsize=FONTS["tick"])
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title, fontsize=FONTS["title"])


def fitted_range(*arrays, margin: float = MARGIN, floor: float = 0.0) -> tuple[float, float]:
    """(low, high) of the finite values of ``arrays`` widened by ``margin`` of their range
    (at least 1 unit on each side), never below ``floor``: the axis range of percentages
    fitted to the data, so that curves near 100 are not pressed against the frame."""
    values = np.concatenate([np.asarray(a, dtype=float).ravel() for a in arrays])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return floor, floor + 1.0
    lo, hi = float(values.min()), float(values.max())
    pad = max((hi - lo) * margin, 1.0)
    return max(floor, lo - pad), hi + pad


def _ranks(curves: dict, max_rank: int) -> int:
    """The last rank drawn: ``max_rank``, or the longest curve's length if shorter."""
    return max(1, min(max_rank, max(len(c) for c in curves.values())))


def plot_cmc(
    curves: dict[str, np.ndarray],
    path: str | Path,
    *,
    max_rank: int = 50,
    title: str | None = None,
    figsize: tuple[float, float] = FIGSIZE,
    spread: dict[str, np.ndarray] | None = None,
    maps: dict[str, float] | None = None,
) -> Path:
    """Writes a PNG of CMC curves (``figsize`` at ``DPI``: 960 x 660 pixels by default).

    Each curve's legend entry holds its rank-1 (and mAP where ``maps`` has it); with
    ``spread``, a band of +-1 std over the splits is drawn around the curve. The y axis is
    fitted to the data (``fitted_range``), the x axis ends at ``max_rank`` or where the
    curves end.

    Args:
      curves: name -> [r] CMC matching rates in percent (``evaluate(...)["cmc"]``; the
        mean over splits).
      path: output PNG file.
      max_rank: last rank drawn.
      title: optional figure title.
      figsize: figure size in inches.
      spread: name -> [splits, r] the per-split CMC curves the band is drawn from.
      maps: name -> mAP in percent, shown in the legend.

    Returns:
      The path written.
    """
    path, spread, maps = Path(path), spread or {}, maps or {}
    fig, ax = figure(figsize)
    # Up to 10 curves take tab10's colours; more take tab20's, and past 20 the line style
    # changes too, so that no two curves look alike.
    palette = matplotlib.colormaps["tab10" if len(curves) <= 10 else "tab20"].colors
    styles = ("-", "--", ":", "-.")
    last, drawn, splits = _ranks(curves, max_rank), [], 0
    for c, (name, cmc) in enumerate(curves.items()):
        cmc = np.asarray(cmc, dtype=float)[:last]
        ranks = np.arange(1, len(cmc) + 1)
        colour = palette[c % len(palette)]
        label = f"{name} (rank-1 {cmc[0]:.1f}" + (
            f", mAP {maps[name]:.1f})" if name in maps else ")"
        )
        if name in spread and len(spread[name]) > 1:
            per_split = [np.asarray(s, dtype=float) for s in spread[name]]
            length = min(len(cmc), *(len(s) for s in per_split))
            std = np.std([s[:length] for s in per_split], axis=0)
            low, high = cmc[:length] - std, np.minimum(cmc[:length] + std, 100.0)
            ax.fill_between(ranks[:length], low, high, color=colour, alpha=0.18, linewidth=0)
            drawn += [low, high]
            splits = max(splits, len(per_split))
        style = styles[(c // len(palette)) % len(styles)]
        ax.plot(ranks, cmc, label=label, color=colour, linewidth=2.0, linestyle=style)
        drawn.append(cmc)
    readable(ax, xlabel="rank", ylabel="matching rate (%)", title=title)
    ax.set_xlim(1, max(last, 2))
    ax.set_ylim(*fitted_range(*drawn))
    legend = {"fontsize": FONTS["legend"], "title_fontsize": FONTS["legend"]}
    if splits:
        legend["title"] = f"band: ±1 std over {splits} splits"
    if len(curves) <= 6:
        ax.legend(loc="lower right", **legend)
    else:  # beside the axes, where it hides no curve
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), **legend)
    run_files.write_figure(path, fig, format="png", dpi=DPI)
    return path


def plot_methods_cmc(
    curves: dict[str, np.ndarray],
    path: str | Path,
    *,
    kernel: set[str] | frozenset[str] = frozenset(),
    top: int = 5,
    max_rank: int = 50,
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Path:
    """Writes a PNG of many methods' CMC curves, as the WARCA paper's Fig. 1 draws them.

    Linear methods are solid lines and kernel methods (the names in ``kernel``) dashed;
    the ``top`` methods by rank-1 are drawn strong in tab10's colours and named in the
    legend with their rank-1, best first; the others are thin grey lines under them, one
    legend entry for all, and the legend goes beside the axes, where it hides none. The y
    axis is fitted to the data (``fitted_range``).

    Args:
      curves: name -> [r] mean CMC matching rates in percent.
      path: output PNG file.
      kernel: the names of the kernel methods.
      top: how many methods are drawn strong and named.
      max_rank: last rank drawn.
      title: optional figure title.
      figsize: figure size in inches (at ``DPI``; default 9 x 6, 11 x 6 with grey lines).

    Returns:
      The path written.
    """
    path = Path(path)
    fig, ax = figure(figsize or ((11.0 if len(curves) > top else 9.0), 6.0))
    last = _ranks(curves, max_rank)
    order = sorted(curves, key=lambda n: -float(np.asarray(curves[n], dtype=float)[0]))
    best, rest = order[:top], order[top:]
    palette = matplotlib.colormaps["tab10"].colors
    for name in rest:
        cmc = np.asarray(curves[name], dtype=float)[:last]
        style = "--" if name in kernel else "-"
        ax.plot(np.arange(1, len(cmc) + 1), cmc, color="0.6", lw=1.0, alpha=0.8, ls=style)
    for c, name in enumerate(best):
        cmc = np.asarray(curves[name], dtype=float)[:last]
        style = "--" if name in kernel else "-"
        label = f"{name} (rank-1 {cmc[0]:.1f})"
        colour = palette[c % len(palette)]
        ax.plot(np.arange(1, len(cmc) + 1), cmc, color=colour, lw=2.4, ls=style, label=label)
    handles, labels = ax.get_legend_handles_labels()
    if rest:
        handles.append(Line2D([], [], color="0.6", linewidth=1.0))
        labels.append(f"{len(rest)} others (grey)")
    handles += [Line2D([], [], color="black", linestyle=s, linewidth=1.6) for s in ("-", "--")]
    labels += ["linear method", "kernel method"]
    readable(ax, xlabel="rank", ylabel="matching rate (%)", title=title)
    ax.set_xlim(1, max(last, 2))
    ax.set_ylim(*fitted_range(*(np.asarray(c, dtype=float)[:last] for c in curves.values())))
    beside = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0)} if rest else {}
    ax.legend(handles, labels, fontsize=FONTS["legend"], **(beside or {"loc": "lower right"}))
    run_files.write_figure(path, fig, format="png", dpi=DPI)
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


def _ranked_arrays(query_labels, ranked_labels, matches, distances, query_images, ranked_images):
    """(query_labels [q], ranked_labels [q, k], matches [q, k] bool, distances [q, k] float)
    as arrays, checked against each other and against the image paths (given together or
    not at all); ValueError naming the one that does not fit."""
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
    if query_images is not None and (
        len(query_images) != shape[0] or any(len(r) != shape[1] for r in ranked_images)
    ):
        raise ValueError(
            f"query_images must hold {shape[0]} paths and ranked_images {shape[0]} rows of "
            f"{shape[1]}; got {len(query_images)} and {[len(r) for r in ranked_images]}"
        )
    return query_labels, ranked_labels, matches, dists


def _image_drawer():
    """``show(ax, image_path)``, which draws an image file into ``ax`` as the descriptors
    read it (``features.images.open_image``: upright, its pixel count bounded)."""
    from warca_jax.features import image_files  # only this drawing reads pixels

    def show(ax, image_path):  # a FIFO or device in an image's place: refused, not opened
        with image_files.open_image(image_path) as im:
            ax.imshow(np.asarray(im.convert("RGB")), aspect="auto")

    return show


def _cell(ax, text: str, *, image, show, tile: str, fontsize: float, frame: str) -> None:
    """One cell of the ranked lists: the ``image`` drawn by ``show`` (None: a tile of colour
    ``tile`` with ``text``), framed in ``frame``."""
    if show is not None:
        show(ax, image)
    else:
        ax.set_facecolor(tile)
        ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=fontsize)
    _framed(ax, frame)


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
    query_labels, ranked_labels, matches, dists = _ranked_arrays(
        query_labels, ranked_labels, matches, distances, query_images, ranked_images
    )
    show = None if query_images is None else _image_drawer()
    q, k = ranked_labels.shape
    fig = Figure(figsize=(1.0 * (k + 1) + 0.4, 1.55 * q + (0.5 if title else 0.2)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(q, k + 1, squeeze=False)
    for r in range(q):
        query = f"id {query_labels[r]}"
        image = None if show is None else query_images[r]
        _cell(axes[r, 0], query, image=image, show=show, tile="0.92", fontsize=9, frame="black")
        axes[r, 0].set_title(f"query\n{query}", fontsize=7)
        for c in range(k):
            entry = f"id {ranked_labels[r, c]}\nd {dists[r, c]:.3g}"
            image = None if show is None else ranked_images[r][c]
            tile = "#e6f4e6" if matches[r, c] else "#f8e4e4"
            frame = _MATCH_COLOURS[bool(matches[r, c])]
            _cell(axes[r, c + 1], entry, image=image, show=show, tile=tile, fontsize=8, frame=frame)
            axes[r, c + 1].set_title(f"{c + 1}: {entry}", fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    run_files.write_figure(path, fig, format="png", dpi=100)
    return path
