"""WARCA's penalty weight, chosen on identities held out of its training set.

Why: the lambda that lets W reach the margin depends on the data (docs/methods.md,
"What WARCA needs beyond the paper"), so a fit can measure it on its own training
identities, as the paper's protocol does across splits with its cross-validation:

* ``held_out.split`` holds ``val_fraction`` of the training identities out (seeded);
* one fit per lambda of ``lam_grid`` on the rest, each scored by the average precision of
  every held-out image as a query against the other held-out images (with cameras, a
  same-camera image of the query's identity is left out, as in the re-id test);
* the largest lambda whose held-out AP is within one standard error of the best one's
  (paired over the held-out queries: the one-standard-error rule, which prefers the
  stronger penalty unless the data show it costs) is then used on all the training
  identities.

On a smaller training part a stronger penalty wins, so the choice is biased toward the
stronger penalty (``benchmarks/bench_real_ordering.py``'s select table, in
benchmarks/RESULTS.md); hence it is an option (``lam_grid``), not the default.

A fit given fewer than 4 identities with two or more images, or an empty ``lam_grid``,
uses ``cfg.lam`` as it is. The protocol's cross-validation sets lambda itself and empties
the grid (``protocol.plan.run_method_config``).
"""

from __future__ import annotations

import copy

import numpy as np
from absl import logging

from warca_jax.methods import held_out


def with_lam(cfg, lam: float):
    """An unlocked copy of ``cfg`` that trains with ``lam`` (its grid emptied)."""
    out = copy.deepcopy(cfg)
    out.unlock()
    out.lam, out.lam_grid = float(lam), ()
    return out


def check(cfg) -> None:
    """Raises ValueError for a ``lam_grid`` or ``val_fraction`` that cannot run."""
    grid = tuple(cfg.lam_grid)
    for v in grid:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (np.isfinite(v) and v >= 0):
            raise ValueError(f"lam_grid must hold finite numbers >= 0; got {grid!r}")
    if grid and not (isinstance(cfg.val_fraction, float) and 0.0 < cfg.val_fraction < 1.0):
        raise ValueError(f"val_fraction must be a float in (0, 1); got {cfg.val_fraction!r}")


def held_out_ap(metric, x, labels, cams) -> np.ndarray:
    """Average precision of each held-out image as a query against the other held-out images.

    A match is another image of the query's identity from another camera; images of its
    identity from its own camera (itself included) are left out of its ranking, as the re-id
    test leaves them out. Without cameras every image is its own camera. Queries with no
    match are dropped. Returns [queries] AP in percent.
    """
    z = np.asarray(metric.transform(x), np.float64)
    labels = np.asarray(labels)
    cams = np.arange(len(labels)) if cams is None else np.asarray(cams)
    sq = np.sum(z * z, axis=1)
    d = sq[:, None] + sq[None, :] - 2.0 * z @ z.T
    same = labels[:, None] == labels[None, :]
    junk = same & (cams[:, None] == cams[None, :])
    good = same & ~junk
    d = np.where(junk, np.inf, d)
    order = np.argsort(d, axis=1, kind="stable")
    hits = np.take_along_axis(good, order, axis=1)
    hits = hits[:, : max(1, int((~junk).sum(1).max()))]
    cum = np.cumsum(hits, axis=1)
    ranks = np.arange(1, hits.shape[1] + 1)
    n_good = good.sum(1)
    keep = n_good > 0
    ap = np.sum(np.where(hits, cum / ranks, 0.0), axis=1)[keep] / n_good[keep]
    return 100.0 * ap


def one_se_choice(grid, aps) -> int:
    """The index of the largest lambda whose held-out AP is within one standard error of the
    best's: the mean per-query difference to the best is at most its standard error (the
    one-standard-error rule of cross-validation; the queries are paired)."""
    means = [float(np.mean(a)) for a in aps]
    best = int(np.argmax(means))
    ok = []
    for k, a in enumerate(aps):
        diff = aps[best] - a
        se = float(np.std(diff, ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
        if float(np.mean(diff)) <= se:
            ok.append(k)
    return max(ok, key=lambda k: grid[k])


def choose(fit, x, labels, cams, cfg, *, seed: int) -> tuple[float, str]:
    """(the lambda to train with, a note saying how it was chosen).

    ``fit(x, labels, cams, cfg, seed)`` is WARCA's fit with an empty grid.
    """
    grid = tuple(float(v) for v in cfg.lam_grid)
    if not grid:
        return float(cfg.lam), "lam as configured"
    held = held_out.split(np.asarray(labels), cfg.val_fraction, seed=seed)
    if isinstance(held, str):
        return float(cfg.lam), f"lam as configured ({held})"
    tr, va = held.train, held.val
    labels = np.asarray(labels)
    cams = None if cams is None else np.asarray(cams)
    train_cams, val_cams = (None, None) if cams is None else (cams[tr], cams[va])
    aps = []
    for lam in grid:
        metric, _ = fit(x[tr], labels[tr], train_cams, with_lam(cfg, lam), seed)
        aps.append(held_out_ap(metric, x[va], labels[va], val_cams))
    if not len(aps[0]):
        return float(cfg.lam), "lam as configured (no held-out query has a match)"
    best = one_se_choice(grid, aps)
    note = (
        f"{held.num_ids} held-out identities chose lam {grid[best]:g} (held-out mAP "
        + ", ".join(f"{g:g}: {np.mean(a):.2f}" for g, a in zip(grid, aps, strict=True))
        + "; the largest lambda within one standard error of the best)"
    )
    logging.info("WARCA: %s", note)
    return grid[best], note
