"""Re-identification evaluation: CMC, rank-k, mAP, mINP, AUC and the paper's AUC_top30.

Public API: ``evaluate`` (features), ``evaluate_distances`` (a distance matrix),
``evaluate_metric`` (a learned ``Metric`` on a dataset's split, module ``learned``),
``single_shot_evaluate`` and ``single_shot_evaluate_distances`` (CUHK03 single-shot;
``draw="per_query"``, torchreid's draw and the default, or ``draw="gallery"``, the former
one), ``GALLERY_CHUNK``; ``k_reciprocal``, ``k_reciprocal_features`` and
``evaluate_reranked`` (k-reciprocal re-ranking, Zhong et al. CVPR 2017, module ``rerank``);
``evaluate_rank`` (torchreid's ``evaluate_rank``: its arguments, ``(cmc, mAP)`` as
fractions, from this package's evaluation; module ``torchreid``, whose docstring says where
the two part);
``DISTANCES``, ``pairwise_distances`` and ``row_block`` are re-exported
from ``warca_jax.maths.distances``.

Design (one concern per module; names with a leading underscore are private to the package):

- ``checks``: input validation. Every bad input is a ValueError naming what and where,
  raised before any work is dispatched.
- ``sweep``: the count sweep, the ranking engine of ``evaluate``: the gallery of features
  sharded by rows over a device mesh, the ranks counted tile by tile.
- ``sort``: the host sort, the ranking engine of ``evaluate_distances``: 64-bit keys of a
  given distance matrix, sorted by NumPy.
- ``blocks``: the protocol block by block, shared by both engines: same-identity entries
  (true matches and junk), query blocks, and the pipeline that dispatches one block while
  the host reduces the previous one.
- ``metrics``: reduction of ranks to per-query first match, AP and INP, then to the results.
- ``rerank``: k-reciprocal re-ranking of distances, blocked over rows (memory bound in its
  docstring), and the evaluation of re-ranked features.
- ``multi_shot``: ``evaluate`` and ``evaluate_distances``. ``single_shot``: the
  single-shot pair (its docstring: the two draws and the mAP each reports).
- ``torchreid``: torchreid's ``evaluate_rank`` face over ``multi_shot`` and ``single_shot``.

Why two engines: both give the rank above, but of different input, and neither can
stand in for the other. The sweep computes the distances of features itself, tile by tile
on the devices, never holds a ``b x ng`` block and scales to a gallery sharded over many
devices; it cannot rank a matrix it is given. The sort ranks a given matrix: the distances
of learners whose distance is not a feature distance (``warca_jax.runs.pipeline``), and the column
subsets of single-shot. Ranking features by sorting ``pairwise_distances`` instead of the
sweep would hold ``b x ng`` keys per block, and its distances, computed in other block
shapes, may differ from the sweep's in the last bit and so break ties differently.

Protocol (Market-1501 / CUHK03): for every query, gallery entries of the same identity
*and* the same camera are junk and removed, and gallery entries labelled ``-1`` are always
removed. Label ``0`` (distractors) is an ordinary negative. The ranking is a stable sort on
distance: equal distances keep gallery order. A query with no true match left in the
gallery is skipped and counted in ``num_skipped``. Every metric needs, per query, only the
0-based rank of each same-identity gallery entry j in that stable order:
``rank_j = #{m : d_m < d_j or (d_m == d_j and m < j)}`` over the gallery without label -1.

Results: a dict of plain Python numbers and one numpy array. All rates are percentages in
[0, 100]; G is the number of gallery entries not labelled -1.

- ``cmc``: [max_rank] numpy array, CMC(r) = % of valid queries whose first true match is
  at position <= r (max_rank defaults to G; beyond G it repeats).
- ``rank1``, ``rank5``, ``rank10``, ``rank20``: CMC at r (CMC(G) when G < r).
- ``mAP``: mean over valid queries of AP = mean over true matches of precision at their
  position.
- ``mINP``: mean of (number of true matches) / (position of the last true match).
- ``AUC``: normalised area under the CMC curve over the whole gallery, mean of CMC(r)
  for r = 1..G; 100 iff every first match is at rank 1. Not the paper's Table 2c.
- ``AUC_top30``: the paper's Table 2c AUC, the trapezoidal area under CMC(1..30)
  divided by 30 (CMC(r) = CMC(G) beyond G; 96.67 for a perfect ranking); the
  definition and the evidence for it are in ``metrics``' docstring.
- ``MAP_at_R``: MAP@R (Musgrave, Belongie and Lim, "A Metric Learning Reality Check",
  ECCV 2020): with R the query's number of true matches, the mean over r = 1..R of
  precision at r counted only where position r holds a true match; ``R_precision``: the
  share of true matches among the first R positions. Both over valid queries.
- ``num_queries``, ``num_valid``, ``num_skipped``: ints.

Scale: rankings do not change under a common positive rescaling of query and gallery, so
``evaluate`` and ``single_shot_evaluate`` rank features divided by a common power of two
when their largest magnitude is outside ``distances.SAFE_MAGNITUDE`` (exact; nothing
changes at ordinary scales), and the ranking functions of distance matrices do the same
for distances outside ``[2**-100, 2**100]``. Any finite input is ranked correctly; NaN or
inf, labels that are not integers, mismatched lengths, empty sets and a protocol with no
true match at all are refused with a ValueError saying what and where.
"""

from warca_jax.evaluation.learned import evaluate_metric
from warca_jax.evaluation.multi_shot import evaluate, evaluate_distances
from warca_jax.evaluation.rerank import evaluate_reranked, k_reciprocal
from warca_jax.evaluation.single_shot import single_shot_evaluate, single_shot_evaluate_distances
from warca_jax.evaluation.sweep import GALLERY_CHUNK
from warca_jax.evaluation.torchreid import evaluate_rank
from warca_jax.maths.distances import DISTANCES, pairwise_distances, row_block

__all__ = [
    "DISTANCES",
    "GALLERY_CHUNK",
    "evaluate",
    "evaluate_distances",
    "evaluate_metric",
    "evaluate_rank",
    "evaluate_reranked",
    "k_reciprocal",
    "pairwise_distances",
    "row_block",
    "single_shot_evaluate",
    "single_shot_evaluate_distances",
]
