"""Reduction of ranks to the metrics: per query, then CMC, mAP, mINP, AUC, MAP@R, R-precision.

Both ranking engines (``sweep``, ``sort``) hand ``_query_stats`` the same thing: for each
query of a block, the 0-based rank of each of its same-identity gallery entries among the
gallery without label -1, in stable distance order. Junk removal happens here, on the
ranks: an entry's position after removal is its rank + 1 minus the junk ranked before it.
The definitions are those of the package docstring (Results).

Two areas under the CMC are reported:

- ``AUC``: the mean of CMC(r) over the whole gallery, r = 1..G (100 iff every first match
  is at rank 1). It is not the paper's Table 2c: 97.5 for WARCA-chi2 on VIPeR against
  the paper's 81.87.
- ``AUC_top30`` (``auc_top``, ``AUC_TOP_RANKS`` = 30): the paper's Table 2c measure, the
  trapezoidal area under the CMC over ranks 1..30 divided by 30,
  ``(CMC(1)/2 + CMC(2) + ... + CMC(29) + CMC(30)/2) / 30``, i.e. MATLAB's
  ``trapz(cmc(1:30)) / 30`` on the CMC the authors' demo computes (``compute_cmc.m``,
  ``num_ranks = 30``; github.com/idiap/warca). Beyond the gallery, CMC(r) = CMC(G). A
  perfect ranking gives 100 * 29/30 = 96.67.

Evidence for the second (from the paper's Table 2a/b/c, 10 methods x 8 single-shot
datasets, Market-1501 left out). For each of the 80 cells, a CMC curve through its
rank-1 and rank-5 was fitted (binormal scores: genuine N(mu, s^2) against G-1 N(0, 1)
impostors, G = 100, 119, 486, 316, 225, 36, 95, 60; it predicts Table 3's CUHK03 rank-10
and rank-20, 97.52 and 99.11, as 97.57 and 99.20), and each candidate computed on it
against the cell's AUC (RMS residual over the 80 cells, mean residual):

- the mean over the whole gallery (today's ``AUC``): RMS 21.2, bias +18.1;
- the mean or the trapezoid over the top share f of the gallery, ceil(f G), best f: RMS
  11.6 or more at any f (no share fits CUHK03 and VIPeR at once);
- a fixed number of ranks K, the same on every dataset: trapz(CMC(1..K)) / K at K = 30,
  RMS 0.86, bias -0.55, largest 2.1 (best K = 31: RMS 0.67); with CMC(0) = 0 prepended,
  trapz([0, CMC(1..30)]) / 30: RMS 0.72 (its best K); sum(CMC(1..K)) / K: best K = 27,
  RMS 1.09 (K = 30: 1.72); trapz / (K - 1): best K = 27, RMS 1.21 (K = 30: 2.13).
  Fitted per dataset, the K of trapz(CMC(1..K)) / K is 30, 31 or 32 on every dataset
  (CUHK03 included: RMS 0.49 at K = 30), while K / G would range from 0.06 to 0.89.

The binormal curve underestimates real CMC tails: on 18 real VIPeR curves of this
project (6 methods x 3 splits) it is 1.7 (sd 1.9) low on trapz(CMC(1..30)) / 30; adding
that correction moves the best K of the trapezoid to 28 (RMS 0.71; K = 30: RMS 1.31,
bias +1.14). So the data pin a fixed depth of about 30 ranks and a trapezoidal area; which
trapezoid variant (they differ by CMC(1) / 60 at most) is fixed by the authors' code's
num_ranks = 30, not by the table.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np

_RANKS = (1, 5, 10, 20)  # the rank-k rates reported
AUC_TOP_RANKS = 30  # ranks of the paper's Table 2c AUC (``AUC_top30``, module docstring)


def auc_top(cmc_full: np.ndarray, num_ranks: int = AUC_TOP_RANKS) -> float:
    """trapz(CMC(1..num_ranks)) / num_ranks, CMC(r) = CMC(G) for r > G (module docstring).

    Args:
      cmc_full: [G] the CMC over the whole gallery, in %.
      num_ranks: the ranks the area covers (30: the paper's Table 2c).
    """
    if num_ranks < 1:
        raise ValueError(f"num_ranks must be a positive int, got {num_ranks!r}")
    c = np.asarray(cmc_full, np.float64)[np.minimum(np.arange(num_ranks), len(cmc_full) - 1)]
    return float((c.sum() - (c[0] + c[-1]) / 2) / num_ranks)


@jax.jit
def _query_stats(rank, good, junk):
    """Per-query metrics from the ranks of the same-identity entries.

    Args:
      rank: [b, k] int32 0-based rank of each same-identity gallery entry among all
        gallery entries (label -1 already removed), in stable distance order.
      good: [b, k] bool, true match (same identity, other camera).
      junk: [b, k] bool, same identity and same camera (removed from the ranking).

    Returns:
      first: [b] 1-based position of the first true match after junk removal.
      ap: [b] average precision. inp: [b] inverse negative penalty. num_good: [b].
      map_r: [b] MAP@R and r_prec: [b] R-precision (Musgrave et al., ECCV 2020), R the
        query's number of true matches.
    """
    # The seam between the two engines and this reduction (checked when traced: no cost).
    chex.assert_rank(rank, 2)
    chex.assert_equal_shape((rank, good, junk))
    chex.assert_type((rank, good, junk), (jnp.int32, bool, bool))
    before = rank[:, None, :] < rank[:, :, None]  # [b, j, k]: entry k ranks before j
    pos = rank + 1 - jnp.sum(before & junk[:, None, :], axis=-1)
    hits = 1 + jnp.sum(before & good[:, None, :], axis=-1)
    num_good = jnp.sum(good, axis=1)
    first = jnp.min(jnp.where(good, pos, jnp.iinfo(jnp.int32).max), axis=1)
    ap = jnp.sum(jnp.where(good, hits / pos, 0.0), axis=1) / jnp.maximum(num_good, 1)
    inp = num_good / jnp.maximum(jnp.max(jnp.where(good, pos, 0), axis=1), 1)
    # MAP@R and R-precision: the true matches within the first R positions, R = num_good
    in_r = good & (pos <= num_good[:, None])
    r = jnp.maximum(num_good, 1)
    map_r = jnp.sum(jnp.where(in_r, hits / pos, 0.0), axis=1) / r
    r_prec = jnp.sum(in_r, axis=1) / r
    return first, ap, inp, num_good, map_r, r_prec


NUM_STATS = 6  # the per-query arrays _query_stats returns


def _summary(first, ap, inp, num_good, map_r, r_prec, *, g: int, max_rank: int | None) -> dict:
    """The results dict (package docstring: Results) from the per-query metrics.

    Args:
      first, ap, inp, num_good, map_r, r_prec: [nq] per-query outputs of ``_query_stats``,
        in query order.
      g: gallery entries not labelled -1. max_rank: CMC length (None: g).
    """
    valid = num_good > 0
    num_valid = int(valid.sum())
    if num_valid == 0:  # every query was checked to have a true match before ranking
        raise RuntimeError("no query with a true match was ranked")
    hist = np.bincount(first[valid] - 1, minlength=g)[:g]
    cmc_full = 100.0 * np.cumsum(hist) / num_valid
    max_rank = g if max_rank is None else int(max_rank)
    cmc = cmc_full[np.minimum(np.arange(max_rank), g - 1)]
    result = {"cmc": cmc}
    for r in _RANKS:
        result[f"rank{r}"] = float(cmc_full[min(r, g) - 1])
    nq = len(num_good)
    result.update(
        mAP=float(100.0 * ap[valid].mean()),
        mINP=float(100.0 * inp[valid].mean()),
        AUC=float(cmc_full.mean()),
        AUC_top30=auc_top(cmc_full),
        MAP_at_R=float(100.0 * map_r[valid].mean()),
        R_precision=float(100.0 * r_prec[valid].mean()),
        num_queries=int(nq),
        num_valid=num_valid,
        num_skipped=int(nq - num_valid),
    )
    return result
