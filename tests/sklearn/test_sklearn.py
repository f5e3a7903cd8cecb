"""The scikit-learn face: estimators, pipelines, grid search, params, distances."""

import inspect
import pickle

import learner_checks
import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from warca_jax import methods  # noqa: E402
from warca_jax import sklearn as wsk  # noqa: E402
from warca_jax.data import synthetic
from warca_jax.metric import Metric  # noqa: E402

# Few iterations and one shape for every WARCA fit below, so that its program compiles once.
FAST = dict(num_iters=200, batch_size=128, log_every=100)
TRIPLET = dict(num_epochs=10, num_val_ids=5)


@pytest.fixture(scope="module")
def problem():
    """40 identities x 6 images, 24-d; two images of each identity held out for testing."""
    x, y, _ = synthetic.make_synthetic(
        num_ids=40, images_per_id=6, dim=24, signal_dim=4, num_nuisance=3, seed=0
    )
    rng = np.random.default_rng(0)
    test = np.zeros(len(y), bool)
    for v in np.unique(y):
        test[rng.choice(np.flatnonzero(y == v), 2, replace=False)] = True
    return x[~test], y[~test], x[test], y[test]


def test_warca_defaults_are_its_config_files():
    sig = inspect.signature(wsk.WARCA)
    defaults = {k: p.default for k, p in sig.parameters.items() if k != "seed"}
    assert defaults == wsk.default_params("warca")
    assert wsk.estimator_class("warca") is wsk.WARCA


@pytest.mark.parametrize("method", sorted(m for m in methods.registry() if m != "warca"), ids=str)
def test_every_method_with_a_config_has_an_estimator(method):
    try:
        defaults = wsk.default_params(method)
    except ValueError as err:
        pytest.skip(str(err))  # a method without a config file has no defaults to expose
    est = wsk.estimator(method)
    assert type(est).__name__ == wsk._class_name(method)
    assert est.get_params() == dict(defaults, seed=0)
    twin = clone(est)
    assert twin is not est and twin.get_params() == est.get_params()
    with pytest.raises(TypeError, match="no hyper-parameters"):
        wsk.estimator(method, not_a_field=1)


@pytest.mark.slow
def test_pipeline_beats_the_same_pipeline_without_warca(problem):
    xtr, ytr, xte, yte = problem
    plain = make_pipeline(StandardScaler(), KNeighborsClassifier(1)).fit(xtr, ytr)
    learned = make_pipeline(StandardScaler(), wsk.WARCA(dim=8, **FAST), KNeighborsClassifier(1))
    learned.fit(xtr, ytr)
    # Measured: 0.175 without WARCA, 0.59 with it.
    assert learned.score(xte, yte) >= plain.score(xte, yte) + 0.25
    assert learned[1].transform(xte).shape == (len(yte), 8)


def _slow(*values, id):
    return pytest.param(*values, marks=pytest.mark.slow, id=id)


@pytest.mark.parametrize(
    "method, params, gain, dim",
    [
        # Measured: 1-NN accuracy 0.275 without LSML, 0.3375 with it (240 quadruplets, one
        # per similar pair: LSML's side information is thin here).
        _slow("lsml", dict(seed=0), 0.05, None, id="lsml"),
        # Measured: 0.275 without MMC, 0.425 with it (projection "exact": tens of
        # eigendecompositions per try, not thousands).
        _slow(
            "mmc", dict(max_iter=15, num_constraints=2000, projection="exact"), 0.1, 24, id="mmc"
        ),
        # Measured: 0.275 without NCA, 0.49 with it (0.40 with dim = 4 or 24).
        _slow("nca", dict(num_iters=30, dim=8), 0.15, 8, id="nca"),
        # Measured: 0.275 without RCA, 0.625 with it (0.425 with dim = D = 24).
        pytest.param("rca", dict(n_chunks=80, dim=4, seed=0), 0.25, 4, id="rca"),
        # Measured: 0.275 without SCML, 0.425 with it (400 steps, test_scml's; seed 0 is the
        # lowest of seeds 0-7, which give 0.425-0.6125).
        _slow("scml", dict(seed=0, max_iter=400, output_iter=200), 0.1, None, id="scml"),
    ],
)
def test_a_learner_in_a_pipeline_beats_the_same_pipeline_without_it(method, params, gain, dim):
    """``gain``: the least 1-NN accuracy gain asserted; ``dim``: the output dim (None: not
    checked)."""
    xtr, ytr, xte, yte = learner_checks.split_problem()
    est = wsk.estimator(method, **params)
    learned, plain = learner_checks.knn_accuracies(est, xtr, ytr, xte, yte)
    assert learned >= plain + gain
    if dim is not None:
        assert est.transform(xte).shape == (len(yte), dim)


@pytest.mark.slow
def test_grid_search_clones_the_estimator_and_picks_a_parameter(problem):
    xtr, ytr, _, _ = problem
    # The learning rate lives in the optimiser state, so all fits share one program.
    est = wsk.TripletSGD(**TRIPLET)
    search = GridSearchCV(est, {"learning_rate": [1e-7, 1e-3]}, cv=2).fit(xtr, ytr)
    # Measured mean leave-one-out rank-1: 0.39 with 1e-7 (no learning), 0.59 with 1e-3.
    assert search.best_params_ == {"learning_rate": 1e-3}
    scores = search.cv_results_["mean_test_score"]
    assert scores[1] >= scores[0] + 0.1
    assert not hasattr(est, "metric_") and est.learning_rate == 1e-3  # the original is untouched
    assert search.best_estimator_ is not est
    assert search.best_estimator_.metric_.projection.shape == (24, 24)


def test_params_map_onto_the_config_and_bad_ones_are_refused(problem):
    xtr, ytr, _, _ = problem
    est = wsk.WARCA().set_params(lam=0.5, kernel="rbf")
    cfg = est._config()
    assert cfg.lam == 0.5 and cfg.kernel == "rbf" and cfg.num_iters == 2000
    with pytest.raises(ValueError, match="Invalid parameter"):
        est.set_params(lamda=1.0)
    with pytest.raises(ValueError, match="no hyper-parameter 'nope'"):
        wsk.MetricLearner("warca", params={"nope": 1}).fit(xtr, ytr)
    with pytest.raises(ValueError, match="bad value 'big' for 'dim'"):
        wsk.WARCA(dim="big").fit(xtr, ytr)
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        wsk.MetricLearner("nope").fit(xtr, ytr)
    with pytest.raises(ValueError, match="output dim"):  # the method's own validation
        wsk.WARCA(dim=25, **FAST).fit(xtr, ytr)


@pytest.mark.slow
def test_mahalanobis_matrix_gives_the_learned_distances(problem):
    xtr, ytr, xte, _ = problem
    est = wsk.WARCA(dim=8, **FAST).fit(xtr, ytr)
    m = est.get_mahalanobis_matrix()
    diff = xte[:5, None, :] - xte[None, :7, :]
    expected = np.maximum(np.einsum("ijd,de,ije->ij", diff, m, diff), 0)
    # squared: the float32 rounding of ||a||^2 + ||b||^2 - 2 a.b (about 1e-5 of the
    # squared norms) becomes 1e-3 after a square root at a zero distance (a == b)
    got = est.pairwise_distances(xte[:5], xte[:7]) ** 2
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5 * expected.max())
    assert est.score(xte, np.arange(len(xte)) // 2) == wsk.rank1_score(
        est, xte, np.arange(len(xte)) // 2
    )


def test_non_embedding_metrics_have_no_transform_nor_matrix(problem):
    xtr, _, _, _ = problem
    est = wsk.MetricLearner("warca")
    est.metric_ = Metric("kernel_distance", xtr.shape[1], kernel="rbf", name="rbf_distance")
    with pytest.raises(ValueError, match="no embedding .* use pairwise_distances"):
        est.transform(xtr)
    with pytest.raises(ValueError, match="no Mahalanobis matrix"):
        est.get_mahalanobis_matrix()
    assert est.pairwise_distances(xtr[:3]).shape == (3, 3)


@pytest.mark.slow
def test_generic_and_generated_forms_agree_and_pickle(problem):
    xtr, ytr, xte, _ = problem
    a = wsk.MetricLearner("triplet_sgd", params=TRIPLET, seed=1).fit(xtr, ytr)
    from warca_jax.sklearn import TripletSGD

    str_labels = np.array([f"id{v:03d}" for v in ytr])  # any labels, here in the same order
    b = TripletSGD(**TRIPLET, seed=1).fit(xtr, str_labels)
    np.testing.assert_array_equal(a.metric_.projection, b.metric_.projection)
    c = pickle.loads(pickle.dumps(b))
    assert type(c) is TripletSGD and c.get_params() == b.get_params()
    np.testing.assert_array_equal(c.transform(xte), b.transform(xte))


def test_the_public_names_are_the_estimators_and_their_helpers():
    public = set(wsk.__all__)
    assert {"WARCA", "MetricLearner", "estimator", "estimator_class", "rank1_score"} <= public
    assert set(wsk.CLASS_NAMES) <= public
    # every registered method's class is listed, under its name
    assert {wsk.estimator_class(m).__name__ for m in methods.registry()} <= public
    assert not {"BaseEstimator", "TransformerMixin", "functools", "inspect", "np"} & set(dir(wsk))
    assert public <= set(dir(wsk))
    namespace = {}
    exec("from warca_jax.sklearn import *", namespace)  # noqa: S102
    assert public == set(namespace) - {"__builtins__"}
    assert namespace["KISSME"] is wsk.estimator_class("kissme")
    assert pickle.loads(pickle.dumps(wsk.NN())).__class__ is wsk.NN
    assert wsk.Nn is wsk.NN  # the generated name before CLASS_NAMES named it, for old pickles


@pytest.mark.parametrize("method", sorted(methods.registry()), ids=str)
def test_docstrings_list_every_parameter_and_its_default(method):
    cls = wsk.estimator_class(method)
    doc = inspect.getdoc(cls)
    params = inspect.signature(cls).parameters
    assert "seed" in params
    lines = doc.splitlines()
    for name, p in params.items():
        kind = "float or None" if p.default is None else type(p.default).__name__
        line = f"{name} : {kind}, default={p.default!r}"
        assert line in lines, f"{cls.__name__}'s docstring lacks {line!r}"
        meaning = lines[lines.index(line) + 1]
        assert meaning.startswith("    ") and len(meaning.strip()) > 3, (name, meaning)
    # the meanings are the comments of the learner's default_config, where it has them
    if method == "kissme":
        assert "fraction of variance PCA keeps" in doc
    if method == "pairwise_sgd":  # the comment of the branch that sets the default
        assert "eq. 6 is unbounded below" in doc and "eq. 7 alone" not in doc
    if method == "triplet_sgd":
        assert "eq. 7 alone" in doc and "eq. 6 is unbounded below" not in doc


def test_class_names_come_from_the_registry():
    """CLASS_NAMES is every registered method but WARCA, each under its class's name."""
    assert set(wsk.CLASS_NAMES.values()) == set(methods.registry()) - {"warca"}
    for name, method in wsk.CLASS_NAMES.items():
        assert wsk.estimator_class(method).__name__ == name
    assert wsk._class_name("warca") == wsk.WARCA.__name__
    assert wsk.CLASS_NAMES["KMeansNN"] == "kmeans_nn" and wsk.CLASS_NAMES["NN"] == "nn"
