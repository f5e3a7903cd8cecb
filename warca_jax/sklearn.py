"""scikit-learn estimators over the method registry (needs the optional ``scikit-learn``).

Every registered method is an estimator whose hyper-parameters are the fields of its
default ``method`` section, with the learner's defaults (``methods.get(name).default_config()``,
what the files in configs/ start from)::

    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from warca_jax.sklearn import WARCA, MetricLearner, estimator

    pipe = make_pipeline(StandardScaler(), WARCA(dim=16), KNeighborsClassifier(1))
    kissme = estimator("kissme", seed=0)  # any registered method, by name
    same = MetricLearner("kissme", params={"seed": 0})  # the generic form

``WARCA`` is written out; the class of any other method is made from its config
(``estimator_class(name)``), and the names in ``CLASS_NAMES`` (``PairwiseSGD``,
``TripletSGD``, ``KISSME``, ...) are importable from this module once their method
exists. Nested config sections are not hyper-parameters; they keep their defaults.

``score(X, y)`` is the leave-one-out rank-1 accuracy under the learned metric (each
sample as a query against all the others), so ``GridSearchCV`` can tune a metric
learner without a classifier after it; ``rank1_score`` is the same as a scorer.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from warca_jax import methods
from warca_jax.metric import EMBEDDING_KINDS

CLASS_NAMES = {
    "PairwiseSGD": "pairwise_sgd",
    "TripletSGD": "triplet_sgd",
    "KISSME": "kissme",
    "XQDA": "xqda",
    "LFDA": "lfda",
    "RPCCA": "rpcca",
    "MLAPG": "mlapg",
    "LMNN": "lmnn",
    "FRML": "frml",
    "SVMML": "svmml",
    "NCA": "nca",
    "MMC": "mmc",
    "ITML": "itml",
    "SDML": "sdml",
    "LSML": "lsml",
    "RCA": "rca",
    "SCML": "scml",
}
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


def rank1_score(estimator, x, y) -> float:
    """Leave-one-out rank-1: the share of samples whose nearest other sample has their label.

    Samples that are the only one of their label are not counted. A scorer
    (``scoring=rank1_score`` in ``GridSearchCV``) for any fitted ``MetricLearner``.
    """
    y = np.asarray(y)
    dist = np.array(estimator.pairwise_distances(x), dtype=np.float64)
    np.fill_diagonal(dist, np.inf)
    has_match = np.array([np.sum(y == v) > 1 for v in y])
    if not has_match.any():
        raise ValueError("rank1_score needs a label with two or more samples")
    nearest = np.argmin(dist, axis=1)
    return float(np.mean(y[nearest][has_match] == y[has_match]))


class _Learner(TransformerMixin, BaseEstimator):
    """fit / transform / distances / score for a method of the registry."""

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

    def fit(self, X, y):
        """Learns the metric on features X [N, D] and labels y [N] (any hashable labels)."""
        name, _ = self._method_and_params()
        cfg = self._config()
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D [N], got shape {y.shape}")
        _, codes = np.unique(y, return_inverse=True)  # identities as 0..K-1
        x = np.asarray(X)
        self.metric_, self.history_ = methods.get(name).fit(x, codes, cfg, seed=self.seed)
        self.n_features_in_ = x.shape[1] if x.ndim == 2 else 0
        return self

    def transform(self, X) -> np.ndarray:
        """Embeds X [n, D] -> [n, D'], where Euclidean distance is the learned distance."""
        check_is_fitted(self, "metric_")
        if self.metric_.kind not in EMBEDDING_KINDS:
            raise ValueError(
                f"{self.metric_.name or type(self).__name__} learns a {self.metric_.kind!r} "
                "metric, which has no embedding whose Euclidean distance is the learned "
                "one; use pairwise_distances(X, Y) instead"
            )
        return self.metric_.transform(np.asarray(X))

    def pairwise_distances(self, X, Y=None) -> np.ndarray:
        """[n, m] learned distances between the rows of X and Y (Y = X by default)."""
        check_is_fitted(self, "metric_")
        return np.asarray(self.metric_.pairwise_distances(X, X if Y is None else Y))

    def get_mahalanobis_matrix(self) -> np.ndarray:
        """M [D, D] with d(x, y)^2 = (x - y)^T M (x - y), for linear metrics."""
        check_is_fitted(self, "metric_")
        if self.metric_.kind not in ("linear", "identity"):
            raise ValueError(
                f"a {self.metric_.kind!r} metric has no Mahalanobis matrix in input space"
            )
        return self.metric_.mahalanobis_matrix()

    def score(self, X, y) -> float:
        """Leave-one-out rank-1 accuracy on (X, y) (``rank1_score``)."""
        return rank1_score(self, X, y)


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


class _Named(_Learner):
    """A learner whose hyper-parameters are its ``__init__`` arguments (besides ``seed``)."""

    method_name = ""

    def _method_and_params(self):
        return self.method_name, {k: v for k, v in self.get_params().items() if k != "seed"}


class WARCA(_Named):
    """WARCA (Jose & Fleuret, ECCV 2016); the hyper-parameters of configs/warca.py.

    See configs/warca.py for every field; ``kernel != "none"`` learns a kernel metric
    (``transform`` embeds new samples; it has no Mahalanobis matrix). ``lam`` defaults to the
    primal form's 1e-4; the kernel configs use 1e-3 (benchmarks/RESULTS.md, "Defaults on real
    descriptors"), so pass ``lam=1e-3`` with a kernel.
    """

    method_name = "warca"

    def __init__(
        self,
        *,
        dim: int = 40,
        lam: float = 1e-4,
        learning_rate: float = 1e-2,
        schedule: str = "cosine",
        normalize: str = "msd",
        num_iters: int = 2000,
        batch_size: int = 512,
        kernel: str = "none",
        kernel_gamma: float = 0.0,
        kernel_approx: str = "none",
        num_landmarks: int = 2000,
        penalty: str = "aon",
        penalty_mode: str = "coupled",
        margin: float = 1.0,
        weighting: str = "harmonic",
        sampler: str = "exact",
        candidate_pool: int = 0,
        max_tries: int = 0,
        gradient: str = "closed_form",
        preconditioned: bool = True,
        log_every: int = 100,
        num_devices: int = 0,
        seed: int = 0,
    ):
        self.dim = dim
        self.lam = lam
        self.learning_rate = learning_rate
        self.schedule = schedule
        self.normalize = normalize
        self.num_iters = num_iters
        self.batch_size = batch_size
        self.kernel = kernel
        self.kernel_gamma = kernel_gamma
        self.kernel_approx = kernel_approx
        self.num_landmarks = num_landmarks
        self.penalty = penalty
        self.penalty_mode = penalty_mode
        self.margin = margin
        self.weighting = weighting
        self.sampler = sampler
        self.candidate_pool = candidate_pool
        self.max_tries = max_tries
        self.gradient = gradient
        self.preconditioned = preconditioned
        self.log_every = log_every
        self.num_devices = num_devices
        self.seed = seed


def _class_name(method: str) -> str:
    names = {v: k for k, v in CLASS_NAMES.items()}
    return names.get(method, "".join(p.capitalize() for p in method.split("_")))


@functools.cache
def estimator_class(method: str) -> type:
    """The estimator class of a registered method, its ``__init__`` made from its config.

    The keyword-only arguments of ``__init__`` are the config's scalar fields with the
    config file's defaults, and ``seed``; sklearn's ``get_params`` reads them from its
    signature, so ``clone``, ``set_params`` and ``GridSearchCV`` work as for ``WARCA``.
    """
    if method == "warca":
        return WARCA
    defaults = dict(default_params(method), seed=0)

    def __init__(self, **kwargs):
        unknown = sorted(set(kwargs) - set(defaults))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no hyper-parameters {unknown}")
        for key, value in defaults.items():
            setattr(self, key, kwargs.get(key, value))

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [
        inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=v) for k, v in defaults.items()
    ]
    __init__.__signature__ = inspect.Signature(params)
    name = _class_name(method)
    doc = f"The {method!r} method as an estimator; hyper-parameters of its config file."
    cls = type(name, (_Named,), {"__init__": __init__, "method_name": method, "__doc__": doc})
    cls.__module__ = __name__
    globals()[name] = cls  # so that pickle finds the class by its name
    return cls


def estimator(method: str, **params) -> _Learner:
    """An estimator of the registered ``method`` with the given hyper-parameters."""
    return estimator_class(method)(**params)


def __getattr__(name: str):
    """``from warca_jax.sklearn import PairwiseSGD``: the classes of registered methods by name."""
    if name in CLASS_NAMES:
        return estimator_class(CLASS_NAMES[name])
    if name[:1].isupper():  # a generated class, looked up by pickle in a fresh process
        for method in methods.registry():
            if _class_name(method) == name:
                return estimator_class(method)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
