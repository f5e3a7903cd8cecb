"""Registry of the metric learners: one module per learner, found by discovery.

Every module in this package defines ``METHODS``, a dict from a method name (the
``method.name`` of a config) to a ``Method``:

* ``fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None,
  cams=None) -> (Metric, history)``: learns on the training part, ``features`` [N, D] and
  ``labels`` [N] (identities); ``cfg`` is the config's ``method`` section
  (configs/<learner>.py). The keyword arguments are the ones a learner may take, and each
  ``fit`` declares only those it uses: ``seed`` seeds what the learner draws (same seed,
  same result); ``log_fn`` is called with each history row and ``progress`` shows a
  progress bar (an iterative learner's); ``callback`` (see below) and ``cams`` ([N] camera
  ids of the training samples, or None, e.g. WARCA's cross-camera positives). Callers go
  through ``call_fit``, which passes a learner only what its ``fit`` declares
  (``fit_parameters``): a closed form that draws nothing takes none of them. ``history``
  is a list of dicts (empty for closed forms). It raises ``ValueError`` for bad data
  or config before any work (its ``validate``), and
  ``model_checks.TrainingDivergedError`` when training diverged or ended in a non-finite
  or degenerate model. Each learner's ``fit`` docstring says only what is its own: what
  it learns, what ``seed`` draws, its history rows;
* ``validate(features, labels, cfg)``: raises ``ValueError`` naming the problem
  when the method cannot run on this data with this config (the data through
  ``checks.training_data``, every hyperparameter through ``checks.check_number`` or a
  check of its own); called on every split before any training; returns the
  ``checks.TrainingData``;
* ``callback``: an iterative learner's ``fit`` may also take ``callback=``, called as
  ``callback(row, metric)`` after every logged chunk with the metric learned so far (its
  time left out of the rows' ``seconds``); a dict it returns is merged into that history
  row before ``log_fn`` sees it (``warca_jax.methods.learner_loop.run_in_chunks``).
  ``warca_jax.runs.pipeline`` evaluates on held-out identities this way (``data.val_fraction``);
  ``Method.takes("callback")`` says whether a learner can be watched so.

* ``kinds`` (default ``("linear",)``): the ``Metric`` kinds its ``fit`` may return; a
  metric's ``name`` is its method's name (or ``<method>_<variant>``, e.g. ``nn_cosine``),
  and a model whose kind is not one of its method's is refused (``registered_method``:
  ``call_fit`` asks it of every fit, ``load_model`` of every file a run reads again, an
  estimator's ``from_metric`` of the model it is given);

* ``default_config(variant)`` and ``variants``: the learner's default hyperparameters, the
  ``method`` section of a config, for each named variant (the first is the default);
  ``warca_jax.runs.defaults.method_config("lfda:chi2")`` reads them, and every file in
  configs/ starts from them (configs/<learner>.py).

Modules are discovered with ``pkgutil``, so adding a learner is adding a file; a helper
module without ``METHODS`` registers nothing. Each learner's module ends the same way:
``VARIANTS`` (the variants, with what sets them apart), then ``default_config``, which
starts from ``checks.new_config(name, variant, VARIANTS)`` (the variant checked, ``name``
set) and returns the ConfigDict unlocked, so that a config file or a caller can change
fields before locking it; last ``METHODS = {name: Method(fit, validate, default_config,
VARIANTS)}``.

An iterative learner's ``fit`` ends in ``learner_loop.fit_in_chunks`` (through a
``learner_loop.Loop`` of its arguments; SDML and the study's SGD, with loops of their own,
in ``learner_loop.run_in_chunks``), and every learner's model goes through
``model_checks.check_model`` before anyone sees it, so that a model with NaN or inf or one
that maps every training sample to one point is a ``model_checks.TrainingDivergedError``,
never a model.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from typing import NamedTuple

import ml_collections

from warca_jax.metric import DamagedModelError, Metric

# the keyword arguments a learner's fit may take (``call_fit`` passes the ones it declares)
FIT_KEYWORDS = ("seed", "log_fn", "progress", "callback", "cams")


@functools.cache
def fit_parameters(fit: Callable) -> frozenset[str]:
    """The names of ``FIT_KEYWORDS`` that ``fit`` declares (its signature, read once per
    function); all of them for a ``fit`` that takes ``**kwargs`` (a wrapper)."""
    params = inspect.signature(fit).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return frozenset(FIT_KEYWORDS)
    return frozenset(p.name for p in params if p.name in FIT_KEYWORDS)


class Method(NamedTuple):
    fit: Callable
    validate: Callable
    default_config: Callable[..., ml_collections.ConfigDict]
    variants: tuple[str, ...]
    # ``grid(features, labels, cfg, lams_etas, *, seed, cams)``: the fits of a
    # lambda x eta grid sharing their preparation (``warca.problem.GridFit``), or None
    grid: Callable | None = None
    # the ``Metric`` kinds its fit returns: what a saved model of this method may hold
    # (``registered_method`` refuses any other after a fit, at load and ``from_metric``)
    kinds: tuple[str, ...] = ("linear",)
    # ``fit_rows(labels, cfg, *, seed) -> int``: the fewest training rows any fit that
    # ``fit`` makes inside itself trains on (WARCA's lambda rule: its held-out fits), so
    # that an automatic D' fits them too; None: every fit trains on all the rows given
    fit_rows: Callable | None = None

    def takes(self, keyword: str) -> bool:
        """Whether this learner's ``fit`` declares ``keyword`` (one of ``FIT_KEYWORDS``)."""
        return keyword in fit_parameters(self.fit)


def call_fit(
    learner: Method,
    features,
    labels,
    cfg,
    *,
    seed: int = 0,
    cams=None,
    log_fn: Callable[[dict], None] | None = None,
    progress: bool = False,
    callback: Callable | None = None,
):
    """``learner.fit(features, labels, cfg, ...)`` with the keyword arguments its ``fit``
    declares; returns its (Metric, history), the Metric one its method learns
    (``registered_method``: a ValueError otherwise, the learner's fault).

    What a learner does not declare is not passed: ``seed`` to a learner that draws nothing,
    ``log_fn`` and ``progress`` to a closed form, ``cams`` to a learner that uses no
    cameras (ignored). A ``callback`` for a learner that takes none is a ValueError: it
    would never be called.
    """
    takes = fit_parameters(learner.fit)
    if callback is not None and "callback" not in takes:
        raise ValueError(
            f"method {cfg.name!r} takes no callback: evaluating during training "
            f"needs an iterative learner, one of {with_callback()}"
        )
    given = dict(seed=seed, cams=cams, log_fn=log_fn, progress=progress, callback=callback)
    metric, history = learner.fit(
        features, labels, cfg, **{k: v for k, v in given.items() if k in takes}
    )
    registered_method(metric)  # a learner returning a kind its method does not declare
    return metric, history


def dim_bound(method: Method | None, cfg, num_features: int, train_labels, *, seed: int = 0):
    """(cap, what): the largest output dimension D' that fits of ``cfg`` can take, and what
    bounds it; the one rule of every automatic D' (the main job's
    ``config_checks.fit_dim_to_data``, the estimators' default ``dim``).

    A primal map W [D', D] is bounded by the features' dimension ``num_features``; a
    kernel form's A [D', N] (``cfg.kernel`` set) by the training rows of its smallest
    fit: the fewest of ``train_labels`` (one label array [N] per fit; fit ``s`` seeded
    ``seed + s``), or fewer where ``method.fit_rows`` says a fit trains inside itself on
    fewer (WARCA's lambda rule: its held-out fits).
    """
    if str(cfg.get("kernel", "none")) in ("none", ""):
        return int(num_features), "the features' dimension"
    cap = min(len(labels) for labels in train_labels)
    rows = getattr(method, "fit_rows", None)
    if rows is not None:
        inner = min(rows(labels, cfg, seed=seed + s) for s, labels in enumerate(train_labels))
        if inner < cap:
            return (
                inner,
                "the training images of the smallest fit (the lambda rule's held-out fits)",
            )
    return cap, "the number of training images"


def with_callback() -> list[str]:
    """The names of the methods whose ``fit`` takes ``callback=``, sorted."""
    return sorted(name for name, m in registry().items() if m.takes("callback"))


_REGISTRY: dict[str, Method] = {}


def registry() -> dict[str, Method]:
    """All methods, importing the modules of this package on first use."""
    if not _REGISTRY:
        for info in pkgutil.iter_modules(__path__):
            module = importlib.import_module(f"{__name__}.{info.name}")
            for name, method in getattr(module, "METHODS", {}).items():
                if name in _REGISTRY:
                    raise RuntimeError(f"method {name!r} is defined twice")
                _REGISTRY[name] = method
    return _REGISTRY


def get(name: str) -> Method:
    """The method called ``name``; ValueError listing the known ones otherwise."""
    methods = registry()
    if name not in methods:
        raise ValueError(f"unknown method {name!r}; expected one of {sorted(methods)}")
    return methods[name]


def registered_method(metric: Metric) -> str:
    """The registered method ``metric`` belongs to; ValueError naming the field otherwise.

    A model's ``name`` is its method's name, or the method's name, ``_`` and a variant
    (``nn_cosine``, ``kernel_nn_rbf``: the longest registered name that starts it), and its
    ``kind`` is one of the kinds that method declares (``Method.kinds``): a file claiming
    to be a KISSME model while holding a kernel map, or naming no learner at all, would
    otherwise be used (or wrapped as an estimator) as what it is not.
    """
    methods = registry()
    name = metric.name
    found = name if name in methods else None
    if found is None and isinstance(name, str):
        prefixes = [m for m in methods if name.startswith(m + "_")]
        found = max(prefixes, key=len) if prefixes else None
    if found is None:
        raise ValueError(
            f"field 'name': {name!r} names no registered method; expected a method's name "
            f"(or <method>_<variant>, e.g. 'nn_cosine') among {sorted(methods)}"
        )
    kinds = methods[found].kinds
    if metric.kind not in kinds:
        raise ValueError(
            f"field 'kind': method {found!r} learns {' or '.join(repr(k) for k in kinds)} "
            f"metrics, not {metric.kind!r} ones: this is not a {found} model"
        )
    return found


def load_model(path) -> Metric:
    """``Metric.load``, and the model one its ``name``'s method learns
    (``registered_method``): a ``DamagedModelError`` naming the file otherwise. What a
    workdir's rerun and the protocol read a saved model with."""
    metric = Metric.load(path)
    try:
        registered_method(metric)
    except ValueError as e:
        why = f"not a model of a registered method: {e}"
        raise DamagedModelError(f"{path} is damaged ({why})") from e
    return metric
