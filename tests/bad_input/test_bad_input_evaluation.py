"""Evaluation at any finite scale, and clear errors for bad evaluation input.

Rankings do not change under a common positive rescaling of query and gallery, so every
ranking function must give the numbers of the unscaled data whatever the scale (the
squared-distance expansion used to overflow around 1e19 and underflow around 1e-19, and
XLA on a CPU flushes subnormals to zero); bad input must be a ValueError that says what
is wrong and where.
"""

import numpy as np
import pytest
from evaluation_reference import assert_matches_reference, random_protocol, reference

from warca_jax import datasets, evaluation
from warca_jax.evaluation import (
    evaluate,
    evaluate_distances,
    pairwise_distances,
    single_shot_evaluate,
    single_shot_evaluate_distances,
)
from warca_jax.maths import kernels
from warca_jax.maths.distances import DEGREE
from warca_jax.metric import Metric
from warca_jax.runs import defaults

METRICS_KEYS = ("rank1", "rank5", "mAP", "mINP", "AUC", "num_valid", "num_skipped")


def problem(seed=0, nq=30, ng=80, d=16, ids=10):
    """Non-negative features with an identity signal (usable by every metric)."""
    rng = np.random.default_rng(seed)
    ql, gl, qc, gc = random_protocol(rng, nq=nq, ng=ng, ids=ids)
    centres = rng.random((ids + 3, d))
    feats = centres[np.concatenate([ql, gl])] + rng.random((nq + ng, d))  # rank-1 56 to 68
    feats = feats.astype(np.float32)
    return feats[:nq], feats[nq:], ql, gl, qc, gc


def same_metrics(a, b):
    for key in METRICS_KEYS:
        assert a[key] == b[key], (key, a[key], b[key])
    np.testing.assert_array_equal(a["cmc"], b["cmc"])


# ----------------------------------------------------------------------------- any scale
@pytest.mark.slow
@pytest.mark.parametrize(
    "metric, scale, dtype",
    [
        ("euclidean", 1e25, np.float32),
        ("euclidean", 1e-25, np.float32),
        ("euclidean", 1e30, np.float32),
        ("euclidean", 1e-30, np.float32),
        ("sqeuclidean", 1e20, np.float32),
        ("sqeuclidean", 1e-20, np.float32),
        ("cosine", 1e25, np.float32),
        ("cosine", 1e-25, np.float32),
        ("chi2", 1e25, np.float32),
        ("chi2", 1e-25, np.float32),
        ("manhattan", 2.0**140, np.float64),  # beyond float32's range: finite float64
        ("manhattan", 2.0**-150, np.float64),  # below float32's subnormals
        ("euclidean", 1e60, np.float64),
    ],
)
def test_evaluate_ranks_the_same_at_any_scale(metric, scale, dtype):
    xq, xg, *ids = problem()
    want = evaluate(xq, xg, *ids, distance=metric, block_size=8)
    got = evaluate(
        xq.astype(dtype) * scale, xg.astype(dtype) * scale, *ids, distance=metric, block_size=8
    )
    same_metrics(got, want)


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "chi2"])
def test_single_shot_evaluate_ranks_the_same_at_any_scale(metric):
    xq, xg, *ids = problem(1)
    want = single_shot_evaluate(xq, xg, *ids, distance=metric, repeats=3)
    for scale in (1e30, 1e-30):
        got = single_shot_evaluate(xq * scale, xg * scale, *ids, distance=metric, repeats=3)
        same_metrics(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("single_shot", [False, True])
def test_nn_baseline_ranks_the_same_at_any_scale(single_shot):
    """The nearest-neighbour baseline (and every results.json's Euclidean baseline)."""
    cfg = defaults.base_config(small=True)
    cfg.eval.single_shot = single_shot
    cfg.eval.repeats = 2
    dataset = datasets.from_config(cfg.data)
    split = dataset.splits[0]
    metric = Metric("identity", dataset.features.shape[1], name="euclidean")
    want = evaluation.evaluate_metric(metric, dataset, split, cfg.eval)
    for scale in (1e30, 1e-30):
        scaled = dataset._replace(features=(dataset.features * scale).astype(np.float32))
        same_metrics(evaluation.evaluate_metric(metric, scaled, split, cfg.eval), want)


@pytest.mark.parametrize(
    "metric, power",
    [("euclidean", 70), ("euclidean", -70), ("sqeuclidean", -62), ("cosine", 70)]
    + [("cosine", -70), ("chi2", 70), ("chi2", -70), ("manhattan", -120)],
)
def test_pairwise_distances_exact_at_any_scale(metric, power):
    """d(c x, c y) = c**p d(x, y), bit for bit, for a power of two c."""
    xq, xg, *_ = problem(2, nq=12, ng=20, d=8)
    want = np.ldexp(np.asarray(pairwise_distances(xq, xg, distance=metric)), DEGREE[metric] * power)
    got = np.asarray(
        pairwise_distances(
            np.ldexp(xq.astype(np.float64), power),
            np.ldexp(xg.astype(np.float64), power),
            distance=metric,
        )
    )
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("scale, match", [(1e25, "beyond float32's range"), (1e-25, "below")])
def test_pairwise_distances_refuses_distances_float32_cannot_hold(scale, match):
    xq, xg, *_ = problem(3, nq=4, ng=5, d=4)
    with pytest.raises(ValueError, match=match):
        pairwise_distances(xq * scale, xg * scale, distance="sqeuclidean")


def test_kernel_bandwidth_of_scaled_histograms():
    """x1e30 histograms were reported as 'all identical' (chi2 distances overflowed)."""
    x = problem(4, nq=10, ng=30)[1] / 16.0
    want = kernels.default_gamma(x, "chi2_rbf")
    got = kernels.default_gamma(x * np.float32(1e30), "chi2_rbf")
    np.testing.assert_allclose(got * 1e30, want, rtol=1e-5)


@pytest.mark.parametrize("scale", [1e60, 1e-60])
def test_evaluate_distances_ranks_float64_distances_of_any_scale(scale):
    rng = np.random.default_rng(5)
    ql, gl, qc, gc = random_protocol(rng)
    dist = rng.random((31, 57))
    want = evaluate_distances(dist, ql, gl, qc, gc)
    same_metrics(evaluate_distances(dist * scale, ql, gl, qc, gc), want)
    ss = single_shot_evaluate_distances(dist * scale, ql, gl, qc, gc, repeats=2)
    same_metrics(ss, single_shot_evaluate_distances(dist, ql, gl, qc, gc, repeats=2))


def test_evaluate_distances_orders_subnormal_distances():
    """Subnormal float32 distances keep their order (XLA on a CPU compares them as 0)."""
    rng = np.random.default_rng(6)
    ql, gl, qc, gc = random_protocol(rng)
    dist = (rng.random((31, 57)) * 1e-40).astype(np.float32)
    dist[:, 0] = 1.0  # a normal largest distance: no rescaling
    assert_matches_reference(
        evaluate_distances(dist, ql, gl, qc, gc), reference(dist, ql, gl, qc, gc)
    )


# ----------------------------------------------------------------------------- bad input
X, G = np.ones((3, 4)), np.ones((5, 4))
IDS = dict(query_labels=[1, 2, 3], gallery_labels=[1, 2, 3, 4, 5])
CAMS = dict(query_cams=[1, 1, 1], gallery_cams=[2, 2, 2, 2, 2])
NAN_Q = X.copy()
NAN_Q[2, 1:] = np.nan
INF_G = G.copy()
INF_G[4, 3] = -np.inf


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(query_labels=np.array(["a", "b", "c"])), r"query_labels must hold integers.*<U1"),
        (dict(gallery_cams=["c1"] * 5), r"gallery_cams must hold integers.*<U2"),
        (dict(query_labels=[1.5, 2, 3]), r"not whole numbers \(first at index 0: 1.5\)"),
        (dict(query_labels=[1, 2]), "query_labels has 2 entries but the query features have 3"),
        (dict(gallery_cams=[1, 2]), "gallery_cams has 2 entries but the gallery features have 5"),
        (dict(query_features=NAN_Q), r"query features hold 3 NaN or inf values \(first at row 2"),
        (dict(gallery_features=INF_G), r"gallery features hold 1 NaN or inf .* row 4, column 3"),
        (dict(gallery_features=np.ones((5, 3))), r"shapes \(3, 4\) and \(5, 3\)"),
        (dict(query_features=np.full((3, 4), "1")), "query features must be real numbers"),
        (dict(gallery_features=-G, distance="chi2"), "gallery features: min -1"),
        (
            dict(gallery_features=np.ones((0, 4)), gallery_labels=[], gallery_cams=[]),
            "empty gallery",
        ),
        (
            dict(query_features=np.ones((0, 4)), query_labels=[], query_cams=[]),
            "no queries to evaluate",
        ),
        (dict(gallery_labels=[-1] * 5), "all its 5 labels are -1"),
        (dict(gallery_cams=[1] * 5), "3 only entries from their own camera"),
        (dict(gallery_labels=[7, 8, 9, 7, 8]), "3 have no gallery entry with their label"),
    ],
)
def test_evaluate_bad_input_is_a_clear_error(kwargs, match):
    args = dict(query_features=X, gallery_features=G, **IDS, **CAMS) | kwargs
    with pytest.raises(ValueError, match=match):
        evaluate(**args)


@pytest.mark.parametrize("single_shot", [False, True])
@pytest.mark.parametrize(
    "dist, kwargs, match",
    [
        (np.where(np.arange(15).reshape(3, 5) == 8, np.nan, 1.0), {}, r"row 1, column 3"),
        (np.ones((3, 5)), dict(gallery_cams=[1, 2]), "gallery_cams has 2 entries but dist has 5"),
        (np.ones((3, 5)), dict(query_labels=["x", "y", "z"]), "query_labels must hold integers"),
        (np.ones((3, 0)), dict(gallery_labels=[], gallery_cams=[]), "empty gallery"),
        (np.ones((3, 5)), dict(gallery_cams=[1] * 5), "no query has a true match.*own camera"),
    ],
)
def test_evaluate_distances_bad_input_is_a_clear_error(single_shot, dist, kwargs, match):
    fn = single_shot_evaluate_distances if single_shot else evaluate_distances
    args = dict(**IDS, **CAMS) | kwargs
    with pytest.raises(ValueError, match=match):
        fn(dist, **args)
