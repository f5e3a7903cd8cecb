"""``evaluate_metric``: a learned ``Metric`` on one split of a dataset, evaluated.

What the driver (``warca_jax.runs.pipeline``), the protocol, the studies and the tests call to
evaluate a model: the split's query and gallery embedded by the metric and ranked by the
sweep (``evaluate``), or, for a metric with a distance of its own, its query-gallery matrix
ranked by the sort (``evaluate_distances``); single-shot and re-ranking as ``eval_cfg`` says.
"""

from __future__ import annotations

from warca_jax.data.dataset_arrays import Dataset, Split, evaluation_cams
from warca_jax.evaluation.multi_shot import evaluate, evaluate_distances
from warca_jax.evaluation.rerank import evaluate_reranked, k_reciprocal
from warca_jax.evaluation.single_shot import single_shot_evaluate, single_shot_evaluate_distances
from warca_jax.metric import EMBEDDING_KINDS, Metric


def evaluate_metric(
    metric: Metric, dataset: Dataset, split: Split, eval_cfg, *, seed: int = 0
) -> dict:
    """Embeds the split's query and gallery with ``metric`` and evaluates them."""
    x = dataset.features
    q, g = split.query_idx, split.gallery_idx
    ids = (dataset.labels[q], dataset.labels[g], *evaluation_cams(dataset, q, g))
    rerank = bool(eval_cfg.get("rerank", False))  # absent in older configs
    if metric.kind not in EMBEDDING_KINDS:  # a distance of its own: rank its matrix
        dist = metric.pairwise_distances(x[q], x[g])
        if rerank:
            dist = k_reciprocal(
                dist, metric.pairwise_distances(x[q], x[q]), metric.pairwise_distances(x[g], x[g])
            )
        if eval_cfg.single_shot:
            return single_shot_evaluate_distances(dist, *ids, repeats=eval_cfg.repeats, seed=seed)
        return evaluate_distances(dist, *ids)
    emb = (metric.transform(x[q]), metric.transform(x[g]))
    if rerank:
        return evaluate_reranked(
            *emb, *ids, distance=metric.distance, single_shot=eval_cfg.single_shot,
            repeats=eval_cfg.repeats, seed=seed,
        )  # fmt: skip
    if eval_cfg.single_shot:
        return single_shot_evaluate(
            *emb, *ids, distance=metric.distance, repeats=eval_cfg.repeats, seed=seed
        )
    return evaluate(*emb, *ids, distance=metric.distance)
