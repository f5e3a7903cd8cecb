"""WARCA's penalty weight, chosen on identities held out of its training set (``lam`` None).

Why: the lambda that lets W reach the margin depends on the data, by a hundredfold
between datasets, and no statistic of the training set's shape predicts it
(docs/penalty.md), so a fit measures it on its own training identities, as the paper's
protocol does across splits with its cross-validation:

* ``held_out.split`` holds ``lam_val_fraction`` of the training identities out (seeded);
* the lambdas of ``lam_grid`` train on the rest as one ``problem.GridFit`` (the data, the
  start and the compiled program prepared once), compared at rungs by successive halving
  (``rungs``): at each rung every live lambda is scored by the average precision of every
  held-out image as a query against the other held-out images (with cameras, a
  same-camera image of the query's identity is left out, as in the re-id test), and the
  first ``ceil(n / FACTOR)`` in the rule's order go on; the others stop there;
* the rule (``ranking``): the weakest penalty whose held-out AP is within one standard
  error of the best one's (paired over the held-out queries) comes first; the lambda left
  at the last rung is used on all the training identities.

Why the weakest: the best lambda falls as the training set grows (docs/penalty.md), so the
training part's best is at or above the whole set's; among the lambdas the held-out
people cannot tell apart, the weakest is the one nearest the whole set's best. Why rungs:
4 lambdas trained to the end on 80% of the data cost 3.2 fits; halved at
``num_iters / 9`` and ``num_iters / 3`` they cost under one, and their choice was measured
against the one at the end (docs/penalty.md). Where nothing can be held out, the
grid's weakest lambda is used; a grid of one lambda is used as it is. The protocol's
cross-validation sets lambda itself (``protocol.plan.run_method_config``).
"""

from __future__ import annotations

import math

import numpy as np
from absl import logging

from warca_jax.methods import held_out, model_checks
from warca_jax.methods.warca.problem import GridFit

# each rung keeps the first ceil(n / FACTOR) of its n lambdas; 1: every lambda to the end
FACTOR = 3
RULES = ("smallest", "largest", "argmax")


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


def ranking(grid, aps, rule: str = "smallest") -> list[int]:
    """The indices of ``grid`` in the order ``rule`` prefers them, from the held-out APs
    ``aps[k]`` of ``grid[k]`` (per query, the queries paired across the grid).

    The lambdas within one standard error of the best held-out AP (the mean paired
    difference to the best at most its standard error) come first:

    * ``smallest``: those, weakest penalty first (the rule of a default fit);
    * ``largest``: those, strongest first (the one-standard-error rule as it is usually
      stated, which prefers the simpler model);
    * ``argmax``: every lambda by its mean held-out AP.

    then the others by their mean held-out AP (ties: grid order).
    """
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; expected one of {RULES}")
    means = [float(np.mean(a)) for a in aps]
    by_mean = sorted(range(len(aps)), key=lambda k: (-means[k], k))
    if rule == "argmax":
        return by_mean
    best = by_mean[0]
    ok = []
    for k, a in enumerate(aps):
        diff = aps[best] - a
        se = float(np.std(diff, ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
        if float(np.mean(diff)) <= se:
            ok.append(k)
    ok.sort(key=lambda k: grid[k], reverse=rule == "largest")
    return ok + [k for k in by_mean if k not in ok]


def choice(grid, aps, rule: str = "smallest") -> int:
    """The index of the lambda that ``rule`` takes (the first of ``ranking``)."""
    return ranking(grid, aps, rule)[0]


def rungs(num_iters: int, log_every: int, num_points: int, factor: int = FACTOR):
    """[(step, keep)]: successive halving of ``num_points`` lambdas down to one.

    At each step the live lambdas are scored and the first ``keep`` go on; the last keep
    is 1. With k rungs the i-th (from 1) is at ``num_iters / factor^(k - i + 1)`` steps,
    on a multiple of ``log_every`` (at least one chunk, at most ``num_iters``): 4 lambdas
    by 3 are compared at num_iters / 9 (2 go on) and num_iters / 3 (1). Rungs that fall
    on one step are one. ``factor`` 1: every lambda trained to ``num_iters``, one rung.
    """
    if num_points <= 1:
        return []
    if factor <= 1:
        return [(num_iters, 1)]
    keeps, n = [], num_points
    while n > 1:
        n = math.ceil(n / factor)
        keeps.append(n)
    out: list[tuple[int, int]] = []
    for i, keep in enumerate(keeps):
        step = round(num_iters / factor ** (len(keeps) - i) / log_every) * log_every
        step = min(max(step, log_every), num_iters)
        if out and out[-1][0] == step:
            out[-1] = (step, keep)
        else:
            out.append((step, keep))
    return out


def fit_rows(labels, cfg, *, seed: int) -> int:
    """The fewest training rows a ``fit`` with ``cfg`` trains on at ``seed``: the rule's
    held-out fits' (``choose``, with ``lam`` None and a grid of two or more), else all."""
    labels = np.asarray(labels)
    if cfg.get("lam", 0.0) is not None or len(tuple(cfg.lam_grid)) < 2:
        return len(labels)
    held = held_out.split(labels, cfg.lam_val_fraction, seed=seed, field="lam_val_fraction")
    return len(labels) if isinstance(held, str) else len(held.train)


def choose(x, labels, cams, cfg, *, seed: int, factor: int = FACTOR) -> tuple[float, str]:
    """(the lambda to train with, a note saying how it was chosen), for ``cfg.lam`` None.

    The held-out fits are ``GridFit`` points at seed ``seed`` (each, trained to a step, the
    model ``fit`` gives at its lambda there). Where nothing can be held out (too few
    identities) or no held-out query has a match, the weakest lambda of the grid, the
    rule's choice when the held-out data tell the lambdas apart nowhere.

    Raises:
      model_checks.TrainingDivergedError: every lambda of the grid diverged.
    """
    grid = tuple(float(v) for v in cfg.lam_grid)
    weakest = min(grid)
    if len(grid) == 1:
        return _said(grid[0], f"lam {grid[0]:g}, the grid's only value")
    held = held_out.split(
        np.asarray(labels), cfg.lam_val_fraction, seed=seed, field="lam_val_fraction"
    )
    if isinstance(held, str):
        return _said(weakest, f"lam {weakest:g}, the grid's weakest: {held}")
    tr, va = held.train, held.val
    labels = np.asarray(labels)
    cams = None if cams is None else np.asarray(cams)
    train_cams, val_cams = (None, None) if cams is None else (cams[tr], cams[va])
    points = GridFit(
        x[tr], labels[tr], cfg, [(lam, cfg.learning_rate) for lam in grid],
        seed=seed, cams=train_cams,
    )  # fmt: skip

    def scores(step, live):
        points.advance(step, live)
        for p in points.live(live):  # a model stopped early is checked as a final one is
            if points.steps[p] < points.num_iters:
                points.check_model(p)
        live = points.live(live)
        if not live:
            raise model_checks.TrainingDivergedError(
                "WARCA: every lambda of lam_grid diverged on the held-out fits: "
                + "; ".join(points.failed.values())
            )
        return {p: held_out_ap(points.metric(p), x[va], labels[va], val_cams) for p in live}

    steps = rungs(int(cfg.num_iters), int(cfg.log_every), len(grid), factor)
    chosen, seen = halve(grid, steps, scores, stop=points.drop)
    if chosen is None:
        return _said(weakest, f"lam {weakest:g}, the grid's weakest: no held-out query has a match")
    note = (
        f"{held.num_ids} held-out identities chose lam {grid[chosen]:g} (held-out mAP at "
        + "; ".join(
            f"step {step}: " + ", ".join(f"{grid[p]:g}: {np.mean(a):.2f}" for p, a in aps.items())
            for step, aps in seen
        )
        + "; the weakest penalty within one standard error of the best goes on)"
    )
    return _said(grid[chosen], note)


def halve(grid, steps, scores, *, stop=None):
    """Successive halving of the lambdas ``grid`` over the rungs ``steps`` (``rungs``).

    ``scores(step, live)`` trains the live points (indices of ``grid``) to ``step`` and
    returns {point: its held-out APs} for those still alive; ``stop(point)``, if given, is
    called for each point that does not go on. Returns (the point left, [(step, that
    rung's scores)]), or (None, ...) when no held-out query has a match.
    """
    live, seen = list(range(len(grid))), []
    for step, keep in steps:
        aps = scores(step, live)
        live = list(aps)
        seen.append((step, aps))
        if not len(aps[live[0]]):
            return None, seen
        order = ranking([grid[p] for p in live], [aps[p] for p in live], "smallest")
        going = sorted(live[k] for k in order[:keep])
        for p in live:
            if p not in going and stop is not None:
                stop(p)
        live = going
    return live[0], seen


def _said(lam: float, note: str) -> tuple[float, str]:
    """(``lam``, ``note``), the note logged: how a fit's lambda was chosen."""
    logging.info("WARCA: %s", note)
    return lam, note
