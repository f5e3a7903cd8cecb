"""Successive halving over a cross-validation grid: the rungs and who goes on.

A grid of ``n`` points is compared at rungs: every live point is trained to the rung's
step and scored on the validation splits, and the best ``ceil(n / factor)`` by mean score
go on to the next rung; the last rung is the full training. Because a point's training
does not depend on where it is stopped, a point that reaches the end is the model its own
fit gives (``warca.problem.GridFit``).
"""

from __future__ import annotations

import math


def rungs(num_iters: int, log_every: int, num_points: int, factor: int) -> list[int]:
    """The steps at which successive halving by ``factor`` compares ``num_points`` points.

    Each rung keeps the best ``ceil(n / factor)`` of its ``n`` points; there are as many
    rungs as leave at least 3 points for the last (``num_iters``), or, in a grid too small
    for that (fewer than ``3 factor`` points), one rung that leaves at least 2: no point
    is chosen without another trained to the end beside it. The k-th rung from the end is
    at ``num_iters / factor^k`` steps, on a multiple of ``log_every``. A factor below 2,
    or too few points (3 or fewer), is the whole grid at ``num_iters``: one rung.
    """
    if factor < 2:
        return [num_iters]
    k = 0
    while num_points / factor ** (k + 1) >= 3:
        k += 1
    if k == 0 and 2 <= math.ceil(num_points / factor) < num_points:
        k = 1
    out = []
    for i in range(k, 0, -1):
        step = int(round(num_iters / factor**i / log_every)) * log_every
        step = max(step, log_every)
        if step < num_iters and (not out or step > out[-1]):
            out.append(step)
    return [*out, num_iters]


def survivors(means: dict[int, float], factor: int) -> list[int]:
    """The best ``ceil(len / factor)`` points by mean score (ties: the first in grid order)."""
    keep = math.ceil(len(means) / factor)
    order = sorted(means, key=lambda p: (-means[p], p))
    return sorted(order[:keep])
