"""WARCA's penalty weight, chosen on identities held out of its training set (``lam`` None).

Why: the lambda that lets W reach the margin depends on the data, by a hundredfold
between datasets, and no statistic of the training set's shape predicts it
(docs/penalty.md), so a fit measures it on its own training identities, as the paper's
protocol does across splits with its cross-validation:

* ``held_out.split`` holds ``val_fraction`` of the training identities out (seeded);
* one fit per lambda of ``lam_grid`` on the rest, each scored by the average precision of
  every held-out image as a query against the other held-out images (with cameras, a
  same-camera image of the query's identity is left out, as in the re-id test);
* the weakest penalty whose held-out AP is within one standard error of the best one's
  (paired over the held-out queries) is then used on all the training identities.

Why the weakest: the best lambda falls as the training set grows (docs/penalty.md), so the
training part's best is at or above the whole set's; among the lambdas the held-out
people cannot tell apart, the weakest is the one nearest the whole set's best. Where
nothing can be held out, the grid's weakest lambda is used. The protocol's
cross-validation sets lambda itself (``protocol.plan.run_method_config``).
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
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not (number and np.isfinite(v) and v >= 0):
            raise ValueError(f"lam_grid must hold finite numbers >= 0; got {grid!r}")
    if cfg.lam is not None:
        return
    if not grid:
        raise ValueError(
            "lam is None (chosen from lam_grid on held-out identities) but lam_grid is "
            "empty: give lam a number, or lam_grid its values"
        )
    if not (isinstance(cfg.val_fraction, float) and 0.0 < cfg.val_fraction < 1.0):
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


RULES = ("smallest", "largest", "argmax")


def choice(grid, aps, rule: str = "smallest") -> int:
    """The index of the lambda that ``rule`` takes from the held-out APs ``aps[k]`` of
    ``grid[k]`` (per query, the queries paired across the grid).

    * ``smallest``: the weakest penalty whose held-out AP is within one standard error of
      the best's (the mean paired difference to the best at most its standard error);
    * ``largest``: the strongest such penalty (the one-standard-error rule as it is
      usually stated, which prefers the simpler model);
    * ``argmax``: the best held-out AP.
    """
    means = [float(np.mean(a)) for a in aps]
    best = int(np.argmax(means))
    if rule == "argmax":
        return best
    ok = []
    for k, a in enumerate(aps):
        diff = aps[best] - a
        se = float(np.std(diff, ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
        if float(np.mean(diff)) <= se:
            ok.append(k)
    if rule == "largest":
        return max(ok, key=lambda k: grid[k])
    return min(ok, key=lambda k: grid[k])


def choose(fit, x, labels, cams, cfg, *, seed: int) -> tuple[float, str]:
    """(the lambda to train with, a note saying how it was chosen), for ``cfg.lam`` None.

    ``fit(x, labels, cams, cfg, seed)`` is WARCA's fit at a given lambda. Where nothing can
    be held out (too few identities) or no held-out query has a match, the weakest lambda
    of the grid, the rule's choice when the held-out data tell the lambdas apart nowhere.
    """
    grid = tuple(float(v) for v in cfg.lam_grid)
    weakest = min(grid)
    held = held_out.split(np.asarray(labels), cfg.val_fraction, seed=seed)
    if isinstance(held, str):
        return _said(weakest, f"lam {weakest:g}, the grid's weakest: {held}")
    tr, va = held.train, held.val
    labels = np.asarray(labels)
    cams = None if cams is None else np.asarray(cams)
    train_cams, val_cams = (None, None) if cams is None else (cams[tr], cams[va])
    aps = []
    for lam in grid:
        metric, _ = fit(x[tr], labels[tr], train_cams, with_lam(cfg, lam), seed)
        aps.append(held_out_ap(metric, x[va], labels[va], val_cams))
    if not len(aps[0]):
        return _said(weakest, f"lam {weakest:g}, the grid's weakest: no held-out query has a match")
    best = choice(grid, aps, "smallest")
    note = (
        f"{held.num_ids} held-out identities chose lam {grid[best]:g} (held-out mAP "
        + ", ".join(f"{g:g}: {np.mean(a):.2f}" for g, a in zip(grid, aps, strict=True))
        + "; the weakest penalty within one standard error of the best)"
    )
    return _said(grid[best], note)


def _said(lam: float, note: str) -> tuple[float, str]:
    """(``lam``, ``note``), the note logged: how a fit's lambda was chosen."""
    logging.info("WARCA: %s", note)
    return lam, note
