"""torchreid's ``evaluate_rank`` on this package's evaluation: same arguments, same results.

``evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50,
use_metric_cuhk03=False)`` takes the arguments of ``torchreid.metrics.evaluate_rank``
(KaiyangZhou/deep-person-reid, ``torchreid/metrics/rank.py``) and returns what it returns,
``(cmc, mAP)`` as fractions in [0, 1]: ``cmc`` a float32 array of length
``min(max_rank, num_gallery)``, ``mAP`` a float. The numbers are those of
``evaluate_distances`` (``single_shot_evaluate_distances`` for the CUHK03 mode), divided by
100. On the Market-1501 mode both give the same CMC and mAP to float32 precision
(tests/test_ecosystem_faces.py checks it against torchreid's own code). Where they part:

* gallery label -1: removed here for every query (Market-1501's junk images, the protocol
  of ``warca_jax.evaluation``); torchreid counts it as an ordinary negative, because its
  dataset loaders drop junk images when they read a dataset, so its galleries hold none.
  A gallery without -1 gives the same numbers.
* ties in distance: gallery order here (a stable sort); torchreid's ``np.argsort``
  (quicksort) leaves their order unspecified.
* ``use_metric_cuhk03=True``: torchreid's ``eval_cuhk03`` draws one gallery image per
  identity, for each query, 10 times, from NumPy's global, unseeded random state, so its
  CMC differs from run to run and only the Market-1501 mode is reproducible number for
  number. Here the same draw (``draw="per_query"``, 10 repeats) comes from ``seed``; the
  mAP is torchreid's, the AP over the whole gallery after junk removal (its CMC is
  single-shot, its mAP not). The CMC has at most one entry per gallery identity.
* a protocol with no query to evaluate is a ValueError naming why (torchreid asserts);
  ``use_cython`` is accepted and ignored (torchreid's Cython code computes the same).
"""

from __future__ import annotations

import numpy as np

from warca_jax.evaluation.checks import _check_positive_int
from warca_jax.evaluation.multi_shot import evaluate_distances
from warca_jax.evaluation.single_shot import single_shot_evaluate_distances

CUHK03_REPEATS = 10  # torchreid's eval_cuhk03: num_repeats = 10


def evaluate_rank(
    distmat,
    q_pids,
    g_pids,
    q_camids,
    g_camids,
    max_rank: int = 50,
    use_metric_cuhk03: bool = False,
    use_cython: bool = True,
    *,
    seed: int = 0,
) -> tuple[np.ndarray, float]:
    """CMC and mAP as ``torchreid.metrics.evaluate_rank`` returns them (module docstring).

    Args:
      distmat: [num_query, num_gallery] distances (a numpy array, or anything
        ``np.asarray`` reads), finite.
      q_pids, q_camids: [num_query] integer identities and cameras of the queries.
      g_pids, g_camids: [num_gallery] those of the gallery (label -1: junk, removed).
      max_rank: the CMC's length at most (torchreid's default 50).
      use_metric_cuhk03: CUHK03's single-shot CMC (one gallery image per identity, drawn
        per query, averaged over 10 draws from ``seed``) instead of Market-1501's.
      use_cython: torchreid's choice of implementation; ignored.
      seed: seed of the CUHK03 draws (torchreid draws unseeded).

    Returns:
      (cmc, mAP): cmc a float32 array, CMC(r) for r = 1..min(max_rank, num_gallery) (no
      longer than the number of gallery identities with ``use_metric_cuhk03``), the
      share of queries with a true match whose first true match is within the top r;
      mAP, the mean average precision over those queries. Both fractions in [0, 1].

    Raises:
      ValueError: bad input (the checks of ``evaluate_distances``), ``max_rank`` not a
        positive int, or no query with a true match in the gallery.
    """
    del use_cython
    _check_positive_int("max_rank", max_rank)
    dist = np.asarray(distmat)
    if dist.ndim != 2:
        raise ValueError(f"distmat must be 2-D [num_query, num_gallery], got shape {dist.shape}")
    ranks = min(int(max_rank), dist.shape[1]) if dist.shape[1] else int(max_rank)
    ids = (q_pids, g_pids, q_camids, g_camids)
    multi = evaluate_distances(dist, *ids, max_rank=ranks)
    if not use_metric_cuhk03:
        cmc = multi["cmc"]
    else:  # CMC(G) up to the G gallery identities (the default length), cut at max_rank
        single = single_shot_evaluate_distances(
            dist, *ids, repeats=CUHK03_REPEATS, seed=seed, draw="per_query"
        )
        cmc = single["cmc"][:ranks]
    return (np.asarray(cmc, np.float64) / 100.0).astype(np.float32), multi["mAP"] / 100.0
