"""No-learning baselines (nn, kernel_nn) and the Mahalanobis distance."""

import itertools

import ml_collections
import numpy as np
import pytest

from warca_jax.data import synthetic
from warca_jax.maths import kernels
from warca_jax.methods import baselines
from warca_jax.metric import Metric


def _cfg(name, **fields):
    return ml_collections.ConfigDict(dict(name=name, **fields))


def _rank_order(metric, problem):
    ds, s = problem.dataset, problem.split
    dist = metric.pairwise_distances(ds.features[s.query_idx], ds.features[s.gallery_idx])
    return np.argsort(dist, axis=1, kind="stable")


@pytest.mark.slow
def test_nn_euclidean_is_the_baseline_and_other_distances_differ(reid):
    metric, hist = baselines.fit_nn(reid.x_train, reid.y_train, _cfg("nn", distance="euclidean"))
    assert hist == [] and metric.kind == "identity"
    res = reid.score(metric)
    assert res["rank1"] == reid.euclidean["rank1"] and res["mAP"] == reid.euclidean["mAP"]
    cos, _ = baselines.fit_nn(reid.x_train, reid.y_train, _cfg("nn", distance="cosine"))
    assert cos.distance == "cosine"
    assert reid.score(cos)["mAP"] != reid.euclidean["mAP"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "kernel, distance, hist",
    [("rbf", "euclidean", False), ("laplacian", "manhattan", False), ("chi2", "chi2", True)],
)
def test_kernel_distances_rank_as_their_base_distance(reid, reid_hist, kernel, distance, hist):
    # exp(-g d) and sqrt(2 - 2 exp(-g d)) are increasing in d, and the chi2 kernel's
    # feature-space distance is sqrt(chi2): the study's finding that these kernels change
    # nothing, which also fails if the bandwidth underflows the kernel into ties.
    problem = reid_hist if hist else reid
    cfg = _cfg("kernel_nn", kernel=kernel, kernel_gamma=0.0)
    metric, _ = baselines.fit_kernel_nn(problem.x_train, problem.y_train, cfg)
    assert metric.kind == "kernel_distance"
    assert metric.gamma == pytest.approx(kernels.default_gamma(problem.x_train, kernel), rel=1e-6)
    base = Metric("identity", problem.x_train.shape[1], distance=distance)
    same = _rank_order(metric, problem)[:, :10] == _rank_order(base, problem)[:, :10]
    assert same.mean() > 0.99
    assert problem.score(metric)["rank1"] == problem.score(base)["rank1"]


@pytest.mark.slow
def test_kernel_nn_keeps_an_explicit_gamma(reid):
    cfg = _cfg("kernel_nn", kernel="rbf", kernel_gamma=0.25)
    assert baselines.fit_kernel_nn(reid.x_train, reid.y_train, cfg)[0].gamma == 0.25


@pytest.mark.slow
def test_mahalanobis_matrix_is_the_inverse_covariance():
    x, y, _ = synthetic.make_synthetic(
        num_ids=12, images_per_id=3, dim=6, signal_dim=2, num_nuisance=1
    )
    x64 = x.astype(np.float64)
    for kind in ("features", "within_class"):
        cfg = _cfg("mahalanobis", covariance=kind, reg=1e-6)
        metric, _ = baselines.fit_mahalanobis(x, y, cfg)
        if kind == "features":
            cov = np.cov(x64, rowvar=False)
        else:  # explicit enumeration of the ordered same-identity pairs
            diffs = [
                x64[i] - x64[j] for i, j in itertools.permutations(range(len(y)), 2) if y[i] == y[j]
            ]
            cov = np.mean([np.outer(d, d) for d in diffs], axis=0)
        expected = np.linalg.inv(cov + 1e-6 * np.trace(cov) / 6 * np.eye(6))
        np.testing.assert_allclose(metric.mahalanobis_matrix(), expected, rtol=2e-3, atol=1e-5)


@pytest.mark.slow
def test_mahalanobis_within_class_beats_euclidean_features_does_not(reid):
    # Measured on this split: within_class 53.5 rank-1, features 6.5, Euclidean 23.5. The
    # features covariance whitens away the identity signal (it ignores labels), as the
    # study found on CUHK03.
    within, _ = baselines.fit_mahalanobis(
        reid.x_train, reid.y_train, _cfg("mahalanobis", covariance="within_class", reg=1e-6)
    )
    reid.assert_beats_euclidean(within, rank1=20, mAP=25)
    feats, _ = baselines.fit_mahalanobis(
        reid.x_train, reid.y_train, _cfg("mahalanobis", covariance="features", reg=1e-6)
    )
    assert reid.score(feats)["rank1"] < reid.euclidean["rank1"]


def test_singular_covariance_is_regularised_with_a_warning():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 30)).astype(np.float32)  # D > N: rank-deficient covariance
    y = np.repeat(np.arange(5), 2)
    with pytest.warns(RuntimeWarning, match="singular"):
        metric, _ = baselines.fit_mahalanobis(
            x, y, _cfg("mahalanobis", covariance="features", reg=1e-6)
        )
    assert metric.is_finite()


@pytest.mark.parametrize(
    "fit, fields, mutate, match",
    [
        (baselines.fit_nn, dict(distance="hamming"), None, "unknown distance 'hamming'"),
        (baselines.fit_nn, dict(distance="chi2"), None, "chi2 distance needs non-negative"),
        (baselines.fit_nn, dict(distance="cosine"), "nan", "NaN or inf"),
        (
            baselines.fit_kernel_nn,
            dict(kernel="poly", kernel_gamma=0.0),
            None,
            "unknown kernel 'poly'",
        ),
        (baselines.fit_kernel_nn, dict(kernel="chi2_rbf", kernel_gamma=0.0), None, "non-negative"),
        (baselines.fit_mahalanobis, dict(covariance="full", reg=1e-6), None, "unknown covariance"),
        (baselines.fit_mahalanobis, dict(covariance="features", reg=0.0), None, "reg"),
        (
            baselines.fit_mahalanobis,
            dict(covariance="features", reg=1e-6),
            "labels",
            "labels has 19 entries but the features have 20",
        ),
        (
            baselines.fit_mahalanobis,
            dict(covariance="within_class", reg=1e-6),
            "singletons",
            "2 identities with two or more",
        ),
    ],
)
def test_bad_input_is_refused(fit, fields, mutate, match):
    x, y, _ = synthetic.make_synthetic(
        num_ids=10, images_per_id=2, dim=8, signal_dim=2, num_nuisance=1
    )
    if mutate == "nan":
        x[3, 2] = np.nan
    elif mutate == "labels":
        y = y[:-1]
    elif mutate == "singletons":
        y = np.arange(len(y))
    with pytest.raises(ValueError, match=match):
        fit(x, y, _cfg("m", **fields))
