"""torchreid's ``evaluate_rank`` on this package's evaluation: same arguments, same results.

``evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50,
use_metric_cuhk03=False)`` takes the arguments of ``torchreid.metrics.evaluate_rank``
(KaiyangZhou/deep-person-reid, ``torchreid/metrics/rank.py``) and returns what it returns,
``(cmc, mAP)`` as fractions in [0, 1]: ``cmc`` a float32 array of length
``min(max_rank, num_gallery)``, ``mAP`` a float. The numbers are those of
``evaluate_distances`` (``single_shot_evaluate_distances`` for the CUHK03 mode), divided by
100. On the Market-1501 mode both give the same CMC and mAP to float32 precision
(tests/sklearn/test_ecosystem_faces.py checks it against torchreid's own code). Where they part:

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
* what torchreid accepts, accepted here too: infinite distances (ranked first or last, as
  its sort ranks them; ties among them in gallery order) and identities or cameras of any
  comparable kind, strings included (compared for equality only, as torchreid does; -1
  marks junk among integer identities alone). A NaN distance, which no sort can rank, is
  a ValueError naming where it is.
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
    dist = _ranked_where_infinite(dist)
    ranks = min(int(max_rank), dist.shape[1]) if dist.shape[1] else int(max_rank)
    ids = (*_as_codes(q_pids, g_pids, "pids"), *_as_codes(q_camids, g_camids, "camids"))
    multi = evaluate_distances(dist, *ids, max_rank=ranks)
    if not use_metric_cuhk03:
        cmc = multi["cmc"]
    else:  # CMC(G) up to the G gallery identities (the default length), cut at max_rank
        single = single_shot_evaluate_distances(
            dist, *ids, repeats=CUHK03_REPEATS, seed=seed, draw="per_query"
        )
        cmc = single["cmc"][:ranks]
    return (np.asarray(cmc, np.float64) / 100.0).astype(np.float32), multi["mAP"] / 100.0


def _ranked_where_infinite(dist: np.ndarray) -> np.ndarray:
    """``dist`` itself when finite; otherwise each row's stable ranks (0 .. G - 1), which
    order the gallery as the distances do (infinities first or last, ties in gallery
    order) and so give the same CMC and AP. NaN is refused."""
    if not np.issubdtype(dist.dtype, np.number) or np.isfinite(dist).all():
        return dist  # finite, or for evaluate_distances to refuse by its own message
    if np.isnan(dist).any():
        q, g = np.argwhere(np.isnan(dist))[0]
        raise ValueError(
            f"distmat holds NaN (first at query {q}, gallery {g}): distances must be numbers "
            "(+inf and -inf are accepted, ranked last and first)"
        )
    order = np.argsort(dist, axis=1, kind="stable")
    ranks = np.empty(dist.shape, np.float32)
    np.put_along_axis(ranks, order, np.arange(dist.shape[1], dtype=np.float32)[None], axis=1)
    return ranks


def _as_codes(query, gallery, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Query and gallery identities (or cameras) as integers: integer ones as they are (-1
    junk), others (strings, ...) by equality, as codes 0, 1, ... of their distinct values."""
    q, g = np.asarray(query), np.asarray(gallery)
    if q.dtype.kind in "iu" and g.dtype.kind in "iu" or q.ndim != 1 or g.ndim != 1:
        return q, g  # integers, or a shape for evaluate_distances to refuse
    if q.dtype.kind == "f" or g.dtype.kind == "f":
        return q, g  # evaluate_distances says whether the floats are whole numbers
    try:
        both = np.concatenate([q.astype(object), g.astype(object)])
        _, codes = np.unique(both, return_inverse=True)
    except TypeError as e:  # values that cannot be ordered together (e.g. str and int)
        raise ValueError(f"q_{what} and g_{what} must be of one comparable kind: {e}") from None
    return codes[: len(q)].astype(np.int64), codes[len(q) :].astype(np.int64)
