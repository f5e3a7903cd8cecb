"""scikit-learn's own estimator checks on every estimator, and the conventions they test.

``parametrize_with_checks`` runs scikit-learn's ``check_estimator`` suite, one test per
check, over every registered method's estimator (slow: each fit compiles its programs
for the checks' data shapes); the quick tests below pin what the suite relies on: a
default ``dim`` follows the data and an explicit one is refused, float64 in is float64
out, and a learner whose metric embeds nothing has no ``transform``.
"""

from unittest import mock

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from warca_jax import methods  # noqa: E402
from warca_jax import sklearn as wsk  # noqa: E402
from warca_jax.data.synthetic import make_synthetic
from warca_jax.sklearn import conventions  # noqa: E402

# Few iterations, and what the checks' small data (2 or 3 identities, 10 to 50 samples of
# 1 to 10 features) allow: the defaults' validation ids, chunklets, impostors and logging
# periods are sized for re-id training sets.
QUICK = {
    "warca": dict(num_iters=20, lam=1e-3, batch_size=64, log_every=10),
    "frml": dict(num_iters=20, log_every=10),
    "itml": dict(max_iter=20),
    "kmeans_nn": dict(iterations=5),
    "lmnn": dict(num_iters=20, num_impostors=3),
    "lsml": dict(max_iter=20),
    "mlapg": dict(max_iters=20),
    "mmc": dict(max_iter=10, max_proj=100),
    "nca": dict(num_iters=10),
    # a narrow RBF kernel: its kernel matrix on the checks' few 2-d points is of full rank,
    # the small-sample case NFST needs (at the default bandwidth, 1 / the mean distance,
    # its spectrum falls below span_rtol from the 18th of 30 eigenvalues)
    "nfst": dict(kernel_gamma=50.0),
    "pairwise_sgd": dict(num_epochs=2, num_val_ids=0),
    "rca": dict(n_chunks=3),
    "rpcca": dict(num_iters=50),
    # RDA-AdaGrad's step scale 1 / gamma for unit-scale features: at metric-learn's 5e-3 the
    # weights overshoot on the checks' few points, every iterate's objective stays above
    # F(0) = 1 and the best w kept is 0, which SCML refuses
    "scml": dict(max_iter=100, output_iter=50, gamma=100.0),
    "sdml": dict(max_iter=50),
    "svmml": dict(num_iters=50),
    "triplet_sgd": dict(num_epochs=2, num_val_ids=0),
    # the original's ridge (0.001): at 0.1 relative the checks' random labels leave XQDA's
    # largest generalised eigenvalue at 0.93, no direction that separates them, which XQDA
    # refuses rather than return a metric that is not one
    "xqda": dict(reg=1e-3),
}
# class name -> {check: why the estimator cannot pass it}: at most one each, none for WARCA
EXPECTED_FAILED: dict[str, dict[str, str]] = {
    "NFST": {
        "check_methods_subset_invariance": (
            "its transform is a float32 kernel row times A, and the kernel rows of the "
            "check's one-row batches and of its whole batch are computed by programs of "
            "different shapes, which round differently (about 1e-6, the narrow bandwidth "
            "above amplifying the distances' rounding), over the check's 1e-7 tolerance; "
            "where a CPU's programs round alike the check passes"
        )
    },
}


def _expected_failed(estimator) -> dict[str, str]:
    name = type(estimator).__name__
    return EXPECTED_FAILED.get(name, {})


@pytest.mark.slow
@parametrize_with_checks(
    [wsk.estimator(m, **QUICK.get(m, {})) for m in sorted(methods.registry())],
    expected_failed_checks=_expected_failed,
)
def test_scikit_learn_accepts_the_estimator(estimator, check):
    check(estimator)


def test_the_expected_failures_are_few_and_none_is_warcas():
    names = {wsk.estimator_class(m).__name__ for m in methods.registry()}
    assert set(EXPECTED_FAILED) <= names
    assert "WARCA" not in EXPECTED_FAILED
    assert all(len(checks) == 1 for checks in EXPECTED_FAILED.values())


X, Y, _ = make_synthetic(
    num_ids=6, images_per_id=4, num_cams=2, dim=5, signal_dim=3, num_nuisance=1, seed=0
)


def test_a_default_dim_follows_the_data_and_an_explicit_one_is_refused():
    # LFDA's default dim is 40; the data have 5 features: a 5-d embedding, logged
    with mock.patch.object(conventions.absl_logging, "info") as info:
        est = wsk.LFDA().fit(X, Y)
    assert est.transform(X).shape == (len(X), 5) and est.dim == 40  # the param kept
    assert "the features' dimension" in info.call_args.args[0] % info.call_args.args[1:]
    with pytest.raises(ValueError, match=r"output dim must be in \[1, 5\].*got 6"):
        wsk.LFDA(dim=6).fit(X, Y)
    assert wsk.LFDA(dim=3).fit(X, Y).transform(X).shape == (len(X), 3)


def test_input_is_checked_in_scikit_learns_words_and_float64_comes_back():
    est = wsk.KISSME().fit(X, Y)
    assert est.n_features_in_ == 5
    assert est.transform(X.astype(np.float64)).dtype == np.float64
    assert est.transform(X.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="Reshape your data"):
        est.transform(X[0])
    with pytest.raises(ValueError, match="X has 4 features, but KISSME is expecting 5"):
        est.transform(X[:, :4])
    with pytest.raises(ValueError, match="Input X contains NaN"):
        wsk.KISSME().fit(np.where(X > 1, np.nan, X), Y)
    with pytest.raises(ValueError, match="requires y to be passed"):
        wsk.KISSME().fit(X, None)


def test_a_metric_without_an_embedding_has_no_transform():
    est = wsk.KernelNN(kernel="rbf")
    assert not hasattr(est, "transform") and not hasattr(est, "fit_transform")
    assert est.__sklearn_tags__().transformer_tags is None
    est.fit(X, Y)
    no_embedding = "no embedding .* use pairwise_distances"
    with pytest.raises(conventions.NoEmbeddingError, match=no_embedding):
        est.transform(X)
    assert est.pairwise_distances(X[:3]).shape == (3, 3)
    assert wsk.WARCA().__sklearn_tags__().transformer_tags.preserves_dtype == [
        "float64",
        "float32",
    ]
