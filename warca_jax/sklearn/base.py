"""The estimators' base: hyper-parameters from a learner's config, fit, distances, score.

``_Learner`` is what every estimator of ``warca_jax.sklearn`` shares (fit, transform,
pairwise distances, the leave-one-out rank-1 ``score`` and metric-learn's face, module
``pairs``); ``MetricLearner`` names its method, ``_Named`` estimators (``WARCA`` and the
generated classes) are one method each. The package docstring has the whole API.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from warca_jax import methods
from warca_jax.metric import Metric
from warca_jax.sklearn import conventions as _conventions
from warca_jax.sklearn import pairs as _pairs

_SCALARS = (bool, int, float, str, type(None))


def default_config(method: str):
    """A locked copy of the method's default ``method`` section (its ``default_config()``)."""
    cfg = methods.get(method).default_config()  # unknown: ValueError listing the known ones
    cfg.lock()
    return cfg


def default_params(method: str) -> dict:
    """The method's hyper-parameters and their defaults: the config's scalar fields."""
    cfg = default_config(method)
    return {k: v for k, v in cfg.items() if k not in ("name", "seed") and isinstance(v, _SCALARS)}


def _label_type(v) -> str | None:
    """The family of one label of an object array: 'number', 'str', 'bytes', or None for a
    value that is no label (None, NaN, inf, a container, ...)."""
    if isinstance(v, str | bytes):
        return "str" if isinstance(v, str) else "bytes"
    if isinstance(v, bool | np.bool_ | int | np.integer):
        return "number"
    if isinstance(v, float | np.floating):
        return "number" if np.isfinite(v) else None
    return None


def _typed_labels(y: np.ndarray) -> np.ndarray:
    """An object array of labels as an array of one type; ValueError for a value that is
    no label or for labels of several types (numbers and strings: numpy would turn the
    numbers into strings, or fail to sort them)."""
    values = y.tolist()
    first: dict[str, int] = {}
    for i, v in enumerate(values):
        family = _label_type(v)
        if family is None:
            what = "None (a missing label)" if v is None else f"{v!r} of type {type(v).__name__}"
            raise ValueError(
                f"y[{i}] is {what}; expected every label to be an integer or a string naming "
                "the sample's identity"
            )
        first.setdefault(family, i)
    if len(first) > 1:
        kinds = ", ".join(f"{type(values[i]).__name__} (first at y[{i}])" for i in first.values())
        raise ValueError(
            f"y mixes label types {kinds}; expected labels of one type (all integers or all "
            "strings)"
        )
    return np.asarray(values, dtype=str if "str" in first else None)


def check_labels(y, n_samples: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(codes [N] in 0..K-1, classes [K]) of identity labels ``y``; ValueError otherwise.

    What scikit-learn's classifiers accept as targets: integers (floats of whole values
    included), booleans or strings of one type; ``classes[codes]`` gives the labels back.
    Refused, in one line naming the first bad label: NaN, inf or None (a missing label,
    which would merge its samples into one identity), labels mixing types (numbers and
    strings, which numpy cannot order), floats that are not whole numbers (a regression
    target, scikit-learn's "continuous"), other dtypes, a y that is not 1-D, and a y whose
    length is not ``n_samples``.
    """
    if not isinstance(y, np.ndarray) and isinstance(y, list | tuple):
        y = np.asarray(y, dtype=object)  # not np.asarray(y): [1, "a"] would be ["1", "a"]
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D [N], got shape {y.shape}")
    if n_samples is not None and len(y) != n_samples:
        raise ValueError(f"y has {len(y)} labels but X has {n_samples} samples")
    if y.dtype.kind == "O":
        y = _typed_labels(y)
    if y.dtype.kind == "f":
        bad = ~np.isfinite(y)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"y holds {int(bad.sum())} NaN or inf labels (first y[{i}] = {y[i]}); expected "
                "every sample's identity (NaN would merge those samples into one identity)"
            )
        if np.any(y != np.round(y)):
            i = int(np.flatnonzero(y != np.round(y))[0])
            raise ValueError(
                f"y holds floats that are not whole numbers (first y[{i}] = {y[i]}): a "
                "continuous target, not identities; expected integer or string labels"
            )
    elif y.dtype.kind not in "biuUS" and len(y):
        raise ValueError(f"y has dtype {y.dtype}; expected integer or string labels")
    classes, codes = np.unique(y, return_inverse=True)
    return codes.reshape(-1), classes


def rank1_score(estimator, x, y) -> float:
    """Leave-one-out rank-1: the share of samples whose nearest other sample has their label.

    Samples that are the only one of their label are not counted. A scorer
    (``scoring=rank1_score`` in ``GridSearchCV``) for any fitted ``MetricLearner``; ``y``
    is checked as ``fit`` checks it (``check_labels``).
    """
    dist = np.array(estimator.pairwise_distances(x), dtype=np.float64)
    codes, _ = check_labels(y, dist.shape[0])
    np.fill_diagonal(dist, np.inf)
    has_match = np.bincount(codes)[codes] > 1
    if not has_match.any():
        raise ValueError("rank1_score needs a label with two or more samples")
    nearest = np.argmin(dist, axis=1)
    return float(np.mean(codes[nearest][has_match] == codes[has_match]))


class _Learner(TransformerMixin, BaseEstimator):
    """fit / transform / distances / score for a method of the registry, and metric-learn's
    face (the package docstring)."""

    @classmethod
    def from_metric(cls, metric: Metric, **params) -> _Learner:
        """A fitted estimator whose learned metric is ``metric`` (e.g. ``Metric.load(path)``).

        ``params`` are the constructor's (hyper-parameters for a refit, which ``clone``
        keeps); ``MetricLearner`` takes ``method`` from the metric. ``history_`` is empty.

        Raises:
          TypeError: ``metric`` is not a ``Metric``.
          ValueError: the metric is no model of a registered method (its ``name`` names
            none, or its kind is not that method's: ``methods.registered_method``), or
            it is another method's than this estimator's (``WARCA.from_metric`` of a KISSME
            model, ``MetricLearner.from_metric(m, method="lfda")`` of one); both methods
            are named. An estimator must not answer as a method whose model it does not hold.
        """
        if not isinstance(metric, Metric):
            raise TypeError(f"from_metric needs a warca_jax Metric, got {type(metric).__name__}")
        try:
            found = methods.registered_method(metric)
        except ValueError as e:
            raise ValueError(f"from_metric: {e}") from None
        if issubclass(cls, MetricLearner):
            wanted = params.setdefault("method", found)
        else:
            wanted = cls.method_name
        if wanted != found:
            raise ValueError(
                f"from_metric: the metric is a model of method {found!r} (name "
                f"{metric.name!r}), not of {wanted!r}; wrap it with "
                f"warca_jax.sklearn.estimator_class({found!r}).from_metric"
            )
        est = cls(**params)
        est.metric_, est.history_, est.n_features_in_ = metric, [], metric.input_dim
        return est

    def _method_and_params(self) -> tuple[str, dict]:
        raise NotImplementedError

    def _config(self):
        name, params = self._method_and_params()
        cfg = default_config(name)
        for key, value in params.items():
            if key not in cfg or key == "name":
                raise ValueError(
                    f"{name} has no hyper-parameter {key!r}; expected one of "
                    f"{sorted(default_params(name))}"
                )
            try:
                cfg[key] = value
            except (TypeError, ValueError) as err:  # ConfigDict refuses a change of type
                raise ValueError(f"{name}: bad value {value!r} for {key!r}: {err}") from err
        return cfg

    def __sklearn_tags__(self):
        """Tags as scikit-learn reads them (``conventions.tags``): a transformer that needs
        y, of dense real features; transform keeps float64 and float32."""
        return _conventions.tags(self, super().__sklearn_tags__())

    def _explicit_dim(self) -> bool:
        """Whether ``dim`` was set by the user (not at the learner's default)."""
        raise NotImplementedError

    def fit(self, X, y):
        """Learns the metric on features X [N, D] and identity labels y [N].

        X: checked as scikit-learn's estimators check it (``validate_data``). y: integers
        or strings of one type (``check_labels``: NaN, None or mixed types are refused
        before any work), encoded as identities 0..K-1 for the learner. A default ``dim``
        larger than the data allow is lowered to what they allow (``conventions.fit_dim``);
        ``dim`` as the user set it is the learner's to accept or refuse.
        """
        cfg = self._config()
        if y is None:  # scikit-learn's message for a supervised estimator without y
            validate_data(self, X, y=None)
        x = _conventions.check_x(self, X, reset=True)
        codes, _ = check_labels(y, x.shape[0])
        _conventions.check_signs(self, x)
        _conventions.fit_dim(self, cfg, x.shape[1], codes, explicit=self._explicit_dim())
        learner = methods.get(cfg.name)
        self.metric_, self.history_ = methods.call_fit(learner, x, codes, cfg, seed=self.seed)
        if "max_iter" in cfg:  # scikit-learn's n_iter_ of an iterative estimator
            self.n_iter_ = _conventions.n_iter(self.history_, cfg)
        return self

    def transform(self, X) -> np.ndarray:
        """Embeds X [n, D] -> [n, D'], where Euclidean distance is the learned distance.

        float32 X gives float32, any other float64. A linear map (``components_``) is applied
        in X's precision, so that a row's embedding does not depend on the rows beside it
        (float32 products of different shapes round differently); a kernel metric embeds
        in float32. Only where the metric embeds: otherwise reading ``transform`` raises
        ``conventions.NoEmbeddingError`` (a ValueError and an AttributeError) saying why.
        """
        check_is_fitted(self, "metric_")
        x = _conventions.check_x(self, X)
        if x.dtype == np.float64 and _pairs.has_linear_map(self.metric_):
            return self.metric_.finite_output(_pairs.embed_linear(self.metric_, x))
        return np.asarray(self.metric_.transform(x), dtype=x.dtype)

    def pairwise_distances(self, X, Y=None) -> np.ndarray:
        """[n, m] learned distances between the rows of X and Y (Y = X by default)."""
        check_is_fitted(self, "metric_")
        x = _conventions.check_x(self, X)
        y = x if Y is None else _conventions.check_x(self, Y)
        return np.asarray(self.metric_.pairwise_distances(x, y))

    @property
    def components_(self) -> np.ndarray:
        """The learned linear map L [D', D] (float64), ``transform(X) == X @ L.T``.

        Raises AttributeError where the learned distance is not ``||L (x - y)||`` (a kernel
        metric, a kernel's distance, cosine or chi2 nearest neighbours, SVMML, k-means).
        """
        check_is_fitted(self, "metric_")
        return _pairs.linear_map(self.metric_)

    def get_mahalanobis_matrix(self) -> np.ndarray:
        """M = L^T L [D, D] with d(x, y)^2 = (x - y)^T M (x - y), for linear metrics.

        Raises:
          ValueError: a metric without a linear map (``components_`` says why).
        """
        check_is_fitted(self, "metric_")
        try:
            lmap = _pairs.linear_map(self.metric_)
        except _pairs.NoLinearMapError as err:
            raise ValueError(
                f"a {self.metric_.kind!r} metric has no Mahalanobis matrix in input space: {err}"
            ) from err
        return lmap.T @ lmap

    def pair_distance(self, pairs) -> np.ndarray:
        """[n] learned distances of ``pairs`` [n, 2, D] (metric-learn's ``pair_distance``)."""
        check_is_fitted(self, "metric_")
        return _pairs.pair_distances(self.metric_, pairs)

    def pair_score(self, pairs) -> np.ndarray:
        """[n] similarity of each pair, ``-pair_distance(pairs)``: higher is more similar."""
        return -self.pair_distance(pairs)

    def get_metric(self) -> _pairs.PointDistance:
        """The learned distance as a function ``(u, v) -> float`` of two 1-D samples.

        For scikit-learn's ``metric=``: ``KNeighborsClassifier(metric=est.get_metric())``.
        """
        check_is_fitted(self, "metric_")
        return _pairs.PointDistance(self.metric_)

    def score(self, X, y) -> float:
        """Leave-one-out rank-1 accuracy on (X, y) (``rank1_score``)."""
        return rank1_score(self, X, y)


# after the class, so that scikit-learn's set_output wrapper (of methods a class defines)
# is inside the guard
_Learner.transform = _conventions.EmbeddingsOnly(_Learner.transform)
_Learner.fit_transform = _conventions.EmbeddingsOnly(TransformerMixin.fit_transform)


class MetricLearner(_Learner):
    """Any registered method by name: ``MetricLearner("kissme", params={...}, seed=0)``.

    Args:
      method: the registered method name (``method.name`` of its config file).
      params: hyper-parameters overriding the config file's defaults.
      seed: PRNG seed of the fit.
    """

    def __init__(self, method: str = "warca", params: dict | None = None, seed: int = 0):
        self.method = method
        self.params = params
        self.seed = seed

    def _method_and_params(self):
        return self.method, dict(self.params or {})

    def _explicit_dim(self) -> bool:
        return "dim" in (self.params or {})


class _Named(_Learner):
    """A learner whose hyper-parameters are its ``__init__`` arguments (besides ``seed``)."""

    method_name = ""

    def _method_and_params(self):
        return self.method_name, {k: v for k, v in self.get_params().items() if k != "seed"}

    def _explicit_dim(self) -> bool:
        # the constructor's default is the learner's: at it, dim follows the data
        return self.get_params().get("dim") != default_params(self.method_name).get("dim")
