"""Reduction of ranks to the metrics: per query, then CMC, mAP, mINP, AUC, MAP@R, R-precision.

Both ranking engines (``sweep``, ``sort``) hand ``_query_stats`` the same thing: for each
query of a block, the 0-based rank of each of its same-identity gallery entries among the
gallery without label -1, in stable distance order. Junk removal happens here, on the
ranks: an entry's position after removal is its rank + 1 minus the junk ranked before it.
The definitions are those of the package docstring (Results).

Two areas under the CMC are reported:

- ``AUC``: the mean of CMC(r) over the whole gallery, r = 1..G (100 iff every first match
  is at rank 1). It is not the paper's Table 2c measure.
- ``AUC_top30`` (``auc_top``, ``AUC_TOP_RANKS`` = 30): the paper's Table 2c measure, the
  trapezoidal area under the CMC over ranks 1..30 divided by 30,
  ``(CMC(1)/2 + CMC(2) + ... + CMC(29) + CMC(30)/2) / 30``, i.e. MATLAB's
  ``trapz(cmc(1:30)) / 30`` on the CMC the authors' demo computes (``compute_cmc.m``,
  ``num_ranks = 30``; github.com/idiap/warca). Beyond the gallery, CMC(r) = CMC(G). A
  perfect ranking gives 100 * 29/30 = 96.67. Why this is the paper's measure (a fit of
  candidate areas to the paper's Table 2):
  docs/evaluation.md#which-area-the-papers-table-2c-reports.
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
