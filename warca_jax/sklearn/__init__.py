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
(``estimator_class(name)``), named after the method (``PairwiseSGD``, ``TripletSGD``,
``KISSME``, ...: ``_class_name``), and importable from this module: ``CLASS_NAMES`` lists
them, made from the method registry, so that every registered learner has its class.
Nested config sections are not hyper-parameters; they keep their defaults.

``score(X, y)`` is the leave-one-out rank-1 accuracy under the learned metric (each
sample as a query against all the others), so ``GridSearchCV`` can tune a metric
learner without a classifier after it; ``rank1_score`` is the same as a scorer.
``MetricLearner.from_metric(metric)`` (or the class of the metric's method:
``KISSME.from_metric``) wraps a given ``Metric``, e.g. one a run saved
(``Metric.load(path)``), as a fitted estimator; another method's class refuses it, naming
both. The estimators' shared base is module ``base``.

Labels ``y`` (``fit`` and ``score``) are checked once, in the base (``base.check_labels``):
integers, whole-valued floats, booleans or strings of one type are identities; NaN, inf or
None, labels mixing numbers and strings, and non-whole floats are refused in one line
before any training.

metric-learn's face, with metric-learn 0.7.0's meaning (``MahalanobisMixin``), on every
fitted estimator (module ``pairs``):

* ``components_``: the learned linear map L [D', D], ``transform(X) == X @ components_.T``
  (up to float32; the metric's input and feature scale factors folded in), for a metric
  whose distance is Euclidean after a linear map (linear kinds, and the identity of ``nn``
  with the Euclidean distance); any other (kernel, kernel distance, cosine, chi2, SVMML,
  k-means) raises an ``AttributeError`` saying why, so ``hasattr`` is False.
* ``get_mahalanobis_matrix()``: M = L^T L [D, D] (a ValueError where there is no L).
* ``pair_distance(pairs)``: [n] learned distances of ``pairs`` [n, 2, D]; ``pair_score``
  is its negative (higher: more similar). ``get_metric()``: ``(u, v) -> distance`` for
  scikit-learn's ``metric=`` (``KNeighborsClassifier(metric=est.get_metric())``). Both for
  every kind but ``kmeans_nn``'s search, whose distance needs a gallery.

The generated classes' docstrings list their hyper-parameters with defaults and meanings
(module ``docstrings``, from the comments in each learner's ``default_config`` source).
"""

from __future__ import annotations

import functools
import inspect

from warca_jax import methods
from warca_jax.sklearn import docstrings as _docstrings
from warca_jax.sklearn.base import (
    MetricLearner,
    _Learner,
    _Named,
    default_config,
    default_params,
    rank1_score,
)

# How a word of a method's name is spelled in its class name: upper-cased (the learners'
# names are acronyms: KISSME, XQDA, NN, SGD, WARCA, ...) unless it is one of these.
_WORDS = {
    "kernel": "Kernel",
    "kmeans": "KMeans",
    "mahalanobis": "Mahalanobis",
    "pairwise": "Pairwise",
    "triplet": "Triplet",
}


def _class_name(method: str) -> str:
    """The class name of a registered method: its words spelled by ``_WORDS`` (KISSME,
    PairwiseSGD, KMeansNN, ...)."""
    return "".join(_WORDS.get(word, word.upper()) for word in method.split("_"))


def _capitalized(method: str) -> str:
    """The name a generated class had before ``_class_name`` (``Nn``, ``Kissme``), for old
    pickles."""
    return "".join(p.capitalize() for p in method.split("_"))


# class name -> method: every registered method's but WARCA's (written out below); made
# from the registry, so a new learner's class is listed with no change here
CLASS_NAMES = {_class_name(m): m for m in sorted(methods.registry()) if m != "warca"}
# The public names: ``from warca_jax.sklearn import *`` and ``dir(warca_jax.sklearn)``.
__all__ = [
    "CLASS_NAMES",
    "WARCA",
    "MetricLearner",
    *CLASS_NAMES,
    "default_config",
    "default_params",
    "estimator",
    "estimator_class",
    "rank1_score",
]


class WARCA(_Named):
    """WARCA (Jose & Fleuret, ECCV 2016) as a scikit-learn estimator.

    The hyper-parameters and defaults of ``warca_jax.methods.warca.default_config()``
    (configs/warca.py starts from them). ``kernel != "none"`` learns a kernel metric
    (``transform`` embeds new samples; no ``components_`` nor Mahalanobis matrix). ``lam``
    None chooses the penalty inside ``fit`` on held-out training identities
    (``warca_jax.methods.warca.lam_select``); a number is used as it is.

    Parameters
    ----------
    dim : int, default=40
        Output dimension D' (the paper: 200 Market-1501, 100 VIPeR, 40 others).
    lam : float or None, default=None
        Penalty weight lambda (eq. 11, 12, 18); None: chosen from the config's ``lam_grid``
        (1e-5 ... 1e-2) on ``lam_val_fraction`` of the training identities held out.
    lam_val_fraction : float, default=0.2
        Share of the training identities held out to choose lambda when ``lam`` is None.
    positives : str, default='cross_camera'
        The positive pairs: 'cross_camera' needs camera ids, which ``fit(X, y)`` does not
        take, so this estimator trains on every same-identity pair either way ('all').
    learning_rate : float, default=0.01
        Adam step size eta (its peak with schedule='cosine').
    schedule : str, default='cosine'
        'cosine': the step falls from learning_rate to 0 over num_iters; 'constant'.
    normalize : str, default='msd'
        'msd': inputs divided by their mean squared training distance (scale-free); 'none'.
    num_iters : int, default=2000
        Adam iterations.
    batch_size : int, default=512
        Same-identity pairs per minibatch.
    kernel : str, default='none'
        'none' (primal W) or linear | rbf | chi2 | chi2_rbf | laplacian (kernel form).
    kernel_gamma : float, default=0.0
        Kernel bandwidth (0: 1 / mean training distance).
    kernel_approx : str, default='none'
        'none': the exact N x N kernel; 'nystroem': linear WARCA on Nystroem features.
    num_landmarks : int, default=2000
        Nystroem landmarks (kernel_approx='nystroem').
    penalty : str, default='aon'
        'aon' ||W W^T - I||^2 (eq. 10), 'frobenius' ||W||^2 or 'none'.
    penalty_mode : str, default='coupled'
        The penalty's gradient added before Adam ('coupled') or after it ('decoupled').
    margin : float, default=1.0
        gamma of the hinge, fixed at 1 in the paper.
    weighting : str, default='harmonic'
        Rank weighting L(r): 'harmonic' or 'uniform'.
    sampler : str, default='exact'
        Violator rank: 'exact' count among the candidates or 'wsabie' estimate.
    candidate_pool : int, default=0
        Random candidates shared by a step (0: all training points).
    max_tries : int, default=0
        wsabie: give up after this many tries (0: no cap).
    gradient : str, default='closed_form'
        'closed_form' (eq. 20-24) or 'autodiff'.
    preconditioned : bool, default=True
        Kernel form: the K^-1 preconditioned update (eq. 23-25).
    log_every : int, default=100
        Steps between rows of ``history_``.
    num_devices : int, default=0
        Devices of the training mesh (0: all of jax.devices()).
    init : str, default='pca'
        The initial W: the training data's top D' principal axes ('pca'), or random
        orthonormal rows ('random').
    span : bool, default=True
        Primal form with no more samples than features: W trained on the coordinates of
        the span of the centred training samples (the same distances, a cheaper step).
    seed : int, default=0
        Seed of the initialisation and of the minibatch draws.

    After ``fit``: ``metric_`` (the learned ``warca_jax.metric.Metric``), ``history_``,
    ``n_features_in_``, and metric-learn's face (``components_``,
    ``get_mahalanobis_matrix()``, ``get_metric()``, ``pair_distance``, ``pair_score``;
    ``warca_jax.sklearn``'s docstring).
    """

    method_name = "warca"

    def __init__(
        self,
        *,
        dim: int = 40,
        lam: float | None = None,
        lam_val_fraction: float = 0.2,
        positives: str = "cross_camera",
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
        init: str = "pca",
        span: bool = True,
        seed: int = 0,
    ):
        self.dim = dim
        self.lam = lam
        self.lam_val_fraction = lam_val_fraction
        self.positives = positives
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
        self.init = init
        self.span = span
        self.seed = seed


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
    doc = _docstrings.estimator_doc(method, defaults)
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
            # the class's name, or its earlier one ("Nn", before _class_name named it "NN")
            if name in (_class_name(method), _capitalized(method)):
                return estimator_class(method)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (``__all__``), without the imports this module uses."""
    return sorted(set(__all__) | {k for k in globals() if k.startswith("__")})
