"""Plots of evaluation results, drawn without touching matplotlib's global backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def plot_cmc(
    curves: dict[str, np.ndarray],
    path: str | Path,
    *,
    max_rank: int = 50,
    title: str | None = None,
) -> Path:
    """Writes a PNG of CMC curves.

    Args:
      curves: name -> [r] CMC matching rates in percent (``evaluate(...)["cmc"]``).
      path: output PNG file.
      max_rank: last rank drawn.
      title: optional figure title.

    Returns:
      The path written.
    """
    path = Path(path)
    fig = Figure(figsize=(5, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name, cmc in curves.items():
        cmc = np.asarray(cmc, dtype=float)[:max_rank]
        ranks = np.arange(1, len(cmc) + 1)
        ax.plot(ranks, cmc, label=f"{name} (rank-1 {cmc[0]:.1f}%)")
    ax.set_xlabel("rank")
    ax.set_ylabel("matching rate (%)")
    ax.set_xlim(1, max_rank)
    ax.set_ylim(0, 100)
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(loc="lower right")
    fig.savefig(path, format="png", dpi=100)
    return path
