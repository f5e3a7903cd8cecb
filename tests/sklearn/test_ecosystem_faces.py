"""metric-learn's face of the estimators and torchreid's ``evaluate_rank``, against the
numbers of metric-learn 0.7.0 and torchreid frozen in tests/reference_data (its README says how)."""

import os
import pickle

import numpy as np
import pytest

pytest.importorskip("sklearn")

from repo_configs import ROOT
from sklearn.neighbors import KNeighborsClassifier  # noqa: E402

from warca_jax import evaluation  # noqa: E402
from warca_jax import sklearn as wsk  # noqa: E402
from warca_jax.metric import Metric  # noqa: E402

DATA = os.path.join(ROOT, "tests", "reference_data")
# float32 arithmetic (our transform) against metric-learn's float64
F32 = dict(rtol=1e-5, atol=1e-5)


def _load(name: str) -> dict:
    with np.load(os.path.join(DATA, name), allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


@pytest.fixture(scope="module")
def ml_ref():
    return _load("metric_learn_0_7_0_reference.npz")


@pytest.fixture(scope="module")
def reid_ref():
    return _load("torchreid_rank_reference.npz")


# ------------------------------------------------------------------ metric-learn's face


def test_a_given_linear_map_answers_as_metric_learn(ml_ref):
    est = wsk.MetricLearner.from_metric(
        Metric("linear", 5, projection=ml_ref["L"], name="mahalanobis")
    )
    np.testing.assert_array_equal(est.components_, ml_ref["L"])
    np.testing.assert_allclose(est.get_mahalanobis_matrix(), ml_ref["mahalanobis_matrix"], 1e-5)
    pairs = ml_ref["pairs"]
    np.testing.assert_allclose(est.pair_distance(pairs), ml_ref["pair_distance"], **F32)
    np.testing.assert_allclose(est.pair_score(pairs), ml_ref["pair_score"], **F32)
    np.testing.assert_allclose(est.get_metric()(ml_ref["X"][0], ml_ref["X"][1]),
                               ml_ref["metric_0_1"], **F32)  # fmt: skip
    np.testing.assert_allclose(est.transform(ml_ref["X"][:7]), ml_ref["transform"], **F32)
    assert est.n_features_in_ == 5 and est.history_ == []


def test_a_fitted_estimator_with_its_metric_replaced_answers_the_same(ml_ref):
    x, y = ml_ref["X"], np.repeat(np.arange(12), 5)
    est = wsk.estimator("mahalanobis").fit(x, y)
    est.metric_ = Metric("linear", 5, projection=ml_ref["L"])
    np.testing.assert_array_equal(est.components_, ml_ref["L"])
    np.testing.assert_allclose(est.pair_distance(ml_ref["pairs"]), ml_ref["pair_distance"], **F32)


def test_mahalanobis_features_is_metric_learns_covariance(ml_ref):
    x, y = ml_ref["X"], np.repeat(np.arange(12), 5)
    est = wsk.Mahalanobis(covariance="features").fit(x, y)
    ours, theirs = est.get_mahalanobis_matrix(), ml_ref["covariance_M"]
    # inv(C + 1e-6 trace(C) / D I) against inv(C): the same matrix up to a scalar near 1
    scale = np.sum(ours * theirs) / np.sum(theirs * theirs)
    assert abs(scale - 1) < 1e-3
    assert np.linalg.norm(ours / scale - theirs) <= 1e-4 * np.linalg.norm(theirs)
    np.testing.assert_allclose(x[:9] @ est.components_.T, est.transform(x[:9]), **F32)


@pytest.mark.parametrize("input_scale, feature_scale", [(0.37, 2.0**-3), (5.0, 2.0**40)])
def test_components_fold_in_the_metrics_scale_factors(ml_ref, input_scale, feature_scale):
    x = ml_ref["X"] / feature_scale  # the user's features, of any size
    metric = Metric("linear", 5, projection=ml_ref["L"].astype(np.float32), name="mahalanobis",
                    input_scale=input_scale, feature_scale=feature_scale)  # fmt: skip
    est = wsk.MetricLearner.from_metric(metric)
    emb = est.transform(x)
    np.testing.assert_allclose(x @ est.components_.T, emb, rtol=1e-5, atol=1e-5 * abs(emb).max())
    pairs = ml_ref["pairs"] / feature_scale
    expected = input_scale * ml_ref["pair_distance"]
    np.testing.assert_allclose(est.pair_distance(pairs), expected, rtol=1e-5)
    np.testing.assert_allclose(
        est.get_mahalanobis_matrix(), est.components_.T @ est.components_, rtol=1e-12
    )


def test_scale_of_fitted_tiny_features_is_in_components(ml_ref):
    x, y = ml_ref["X"] * 1e-30, np.repeat(np.arange(12), 5)
    est = wsk.Mahalanobis().fit(x, y)
    assert est.metric_.feature_scale != 1.0
    emb = est.transform(x[:9])
    atol = 1e-5 * abs(emb).max()
    np.testing.assert_allclose(x[:9] @ est.components_.T, emb, rtol=1e-4, atol=atol)


def _kernel_metric(x):
    rng = np.random.default_rng(0)
    proj = rng.normal(size=(3, 10)).astype(np.float32)
    return Metric("kernel", 5, projection=proj, support=x[:10].astype(np.float32),
                  kernel="rbf", gamma=0.05, name="warca")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("which", ["kernel", "kernel_distance", "cosine"])
def test_metrics_without_a_map_have_no_components_but_a_distance(ml_ref, which):
    x = ml_ref["X"]
    metric = {
        "kernel": _kernel_metric(x),
        "kernel_distance": Metric(
            "kernel_distance", 5, kernel="rbf", gamma=0.05, name="kernel_nn_rbf"
        ),
        "cosine": Metric("identity", 5, distance="cosine", name="nn_cosine"),
    }[which]
    est = wsk.MetricLearner.from_metric(metric)
    assert not hasattr(est, "components_")
    with pytest.raises(AttributeError, match="no linear map"):
        est.components_  # noqa: B018
    with pytest.raises(ValueError, match="no Mahalanobis matrix"):
        est.get_mahalanobis_matrix()
    pairs = ml_ref["pairs"]
    full = est.pairwise_distances(pairs[:, 0], pairs[:, 1])
    np.testing.assert_allclose(est.pair_distance(pairs), np.diagonal(full), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(est.pair_score(pairs), -est.pair_distance(pairs))
    d01 = est.get_metric()(x[0], x[1])
    np.testing.assert_allclose(d01, est.pairwise_distances(x[:1], x[1:2])[0, 0], 1e-5, 1e-6)


@pytest.mark.slow
def test_get_metric_serves_a_neighbours_classifier(ml_ref):
    x, y = ml_ref["X"], np.repeat(np.arange(12), 5)
    for metric in (Metric("linear", 5, projection=ml_ref["L"], name="xqda"), _kernel_metric(x)):
        est = wsk.MetricLearner.from_metric(metric)
        knn = KNeighborsClassifier(1, metric=est.get_metric()).fit(x[::2], y[::2])
        # the same neighbours as the learned distances give
        nearest = np.argmin(est.pairwise_distances(x[1::2], x[::2]), axis=1)
        np.testing.assert_array_equal(knn.predict(x[1::2]), y[::2][nearest])
        again = pickle.loads(pickle.dumps(est.get_metric()))
        assert again(x[0], x[3]) == est.get_metric()(x[0], x[3])


def test_identity_metric_and_bad_pairs(ml_ref):
    est = wsk.MetricLearner.from_metric(Metric("identity", 5, name="nn_euclidean"))
    np.testing.assert_array_equal(est.components_, np.eye(5))
    pairs = ml_ref["pairs"]
    np.testing.assert_allclose(est.pair_distance(pairs),
                               np.linalg.norm(pairs[:, 0] - pairs[:, 1], axis=1))  # fmt: skip
    with pytest.raises(ValueError, match=r"\[n, 2, 5\]"):
        est.pair_distance(pairs[:, :, :4])
    bad = pairs.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        est.pair_distance(bad)
    assert est.pair_distance(pairs[:0]).shape == (0,)


def test_unfitted_and_kmeans_estimators(ml_ref):
    assert not hasattr(wsk.WARCA(), "components_")
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        wsk.WARCA().pair_distance(ml_ref["pairs"])
    est = wsk.KMeansNN(num_clusters=2).fit(ml_ref["X"], np.repeat(np.arange(12), 5))
    assert not hasattr(est, "components_")
    with pytest.raises(ValueError, match="pairwise_distances"):
        est.pair_distance(ml_ref["pairs"])
    with pytest.raises(TypeError, match="Metric"):
        wsk.MetricLearner.from_metric(np.eye(5))


def test_from_metric_takes_the_method_of_the_metric(ml_ref):
    metric = Metric("linear", 5, projection=ml_ref["L"], name="kissme")
    assert wsk.MetricLearner.from_metric(metric).method == "kissme"
    assert wsk.MetricLearner.from_metric(metric, method="kissme").method == "kissme"
    assert type(wsk.KISSME.from_metric(metric, reg=0.5)).__name__ == "KISSME"
    warca = Metric("linear", 5, projection=ml_ref["L"], name="warca")
    assert wsk.WARCA.from_metric(warca, dim=3).dim == 3


# ------------------------------------------------------------------ torchreid's face


def _reid_inputs(ref):
    return [ref[k] for k in ("distmat", "q_pids", "g_pids", "q_camids", "g_camids")]


@pytest.mark.parametrize("max_rank", [50, 10])
def test_evaluate_rank_is_torchreids(reid_ref, max_rank):
    cmc, mAP = evaluation.evaluate_rank(*_reid_inputs(reid_ref), max_rank=max_rank)
    expected = reid_ref[f"cmc_{max_rank}"]
    assert cmc.dtype == np.float32 and cmc.shape == expected.shape == (max_rank,)
    np.testing.assert_allclose(cmc, expected, rtol=1e-6)
    assert isinstance(mAP, float)
    np.testing.assert_allclose(mAP, reid_ref[f"mAP_{max_rank}"], rtol=1e-6)


def test_evaluate_rank_cuhk03_is_the_seeded_single_shot(reid_ref):
    args = _reid_inputs(reid_ref)
    cmc, mAP = evaluation.evaluate_rank(*args, use_metric_cuhk03=True, seed=3)
    single = evaluation.single_shot_evaluate_distances(*args, repeats=10, seed=3)
    np.testing.assert_allclose(cmc, (single["cmc"][:50] / 100).astype(np.float32))
    # the mAP is torchreid's eval_cuhk03's: over the whole gallery, as the market mode's
    assert mAP == evaluation.evaluate_rank(*args)[1]
    again, _ = evaluation.evaluate_rank(*args, max_rank=50, use_metric_cuhk03=True, seed=3)
    np.testing.assert_array_equal(cmc, again)
    # one gallery image per identity: nothing to draw, both modes rank the same gallery
    g_pids = reid_ref["g_pids"]
    _, first = np.unique(g_pids, return_index=True)
    cols = np.sort(first)
    sub = [args[0][:, cols], args[1], g_pids[cols], args[3], args[4][cols]]
    one, one_map = evaluation.evaluate_rank(*sub, max_rank=20, use_metric_cuhk03=True)
    market, market_map = evaluation.evaluate_rank(*sub, max_rank=20)
    np.testing.assert_allclose(one, market, rtol=1e-6)
    assert one_map == market_map


def test_evaluate_rank_drops_gallery_label_minus_one(reid_ref):
    args = _reid_inputs(reid_ref)
    g_pids = args[2].copy()
    junk = np.arange(len(g_pids)) % 7 == 3
    g_pids[junk] = -1
    cmc, mAP = evaluation.evaluate_rank(args[0], args[1], g_pids, args[3], args[4], max_rank=20)
    kept = ~junk
    ref_cmc, ref_map = evaluation.evaluate_rank(
        args[0][:, kept], args[1], g_pids[kept], args[3], args[4][kept], max_rank=20
    )
    np.testing.assert_array_equal(cmc, ref_cmc)
    assert mAP == ref_map


def test_evaluate_rank_takes_what_torchreid_takes_infinities_and_string_ids(reid_ref):
    # torchreid sorts the distances and compares the ids for equality: infinite distances
    # and string ids are its input too. Side by side with its frozen output: string ids
    # for the same identities, and the distances with each query's 10 farthest
    # non-matches at +inf and its nearest image at -inf (the same ranking), give its numbers
    dist, q_pids, g_pids, q_cams, g_cams = _reid_inputs(reid_ref)
    named = [np.array([f"person {p}" for p in a]) for a in (q_pids, g_pids)]
    cams = [np.array([f"cam {c}" for c in a]) for a in (q_cams, g_cams)]
    cmc, mAP = evaluation.evaluate_rank(dist, *named, *cams)
    np.testing.assert_allclose(cmc, reid_ref["cmc_50"], rtol=1e-6)
    np.testing.assert_allclose(mAP, reid_ref["mAP_50"], rtol=1e-6)
    far = dist.astype(np.float64)
    order = np.argsort(far, axis=1)
    match = q_pids[:, None] == g_pids[None, :]
    for r in range(len(far)):
        far[r, [c for c in order[r][::-1] if not match[r, c]][:10]] = np.inf
        far[r, order[r][0]] = -np.inf
    cmc, mAP = evaluation.evaluate_rank(far, q_pids, g_pids, q_cams, g_cams, max_rank=10)
    np.testing.assert_allclose(cmc, reid_ref["cmc_10"], rtol=1e-6)
    np.testing.assert_allclose(mAP, reid_ref["mAP_10"], rtol=1e-6)
    far[3, 7] = np.nan  # no sort ranks it: refused, naming where
    with pytest.raises(ValueError, match=r"NaN \(first at query 3, gallery 7\)"):
        evaluation.evaluate_rank(far, q_pids, g_pids, q_cams, g_cams)
    mixed = np.array([str(p) if i % 2 else p for i, p in enumerate(q_pids)], dtype=object)
    with pytest.raises(ValueError, match="q_pids and g_pids must be of one comparable kind"):
        evaluation.evaluate_rank(dist, mixed, g_pids, q_cams, g_cams)


def test_evaluate_rank_short_gallery_and_bad_input(reid_ref):
    args = _reid_inputs(reid_ref)
    cut = [args[0][:, :30], args[1], args[2][:30], args[3], args[4][:30]]
    cmc, _ = evaluation.evaluate_rank(*cut)  # torchreid: max_rank = num_gallery when larger
    assert cmc.shape == (30,)
    with pytest.raises(ValueError, match="max_rank"):
        evaluation.evaluate_rank(*args, max_rank=0)
    with pytest.raises(ValueError, match="2-D"):
        evaluation.evaluate_rank(args[0][0], *args[1:])
    assert "evaluate_rank" in evaluation.__all__
