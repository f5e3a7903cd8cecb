"""Plots of evaluation results, drawn without touching matplotlib's global backend: CMC
curves (``plot_cmc``) and ranked lists (``plot_ranked_lists``) here, the studies' plots in
``warca_jax.study_plots`` (importable from here too)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from warca_jax import workdir as workdir_lib
from warca_jax.study_plots import (  # noqa: F401 (the studies' plots, re-exported)
    plot_condition_numbers,
    plot_rank1_sweep,
    plot_rank1_vs_seconds,
    plot_rank_k,
    plot_validation_cost,
)


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
    workdir_lib.write_figure(path, fig, format="png", dpi=100, bbox_inches="tight")
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
    """``show(ax, image_path)``, which draws an image file into ``ax`` (read with Pillow)."""
    from PIL import Image  # only this drawing reads pixels

    def show(ax, image_path):
        with Image.open(image_path) as im:
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
    workdir_lib.write_figure(path, fig, format="png", dpi=100)
    return path
