"""Registry of the metric learners: one module per learner, found by discovery.

Every module in this package defines ``METHODS``, a dict from a method name (the
``method.name`` of a config) to a ``Method``:

* ``fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False)
  -> (Metric, history)``: learns on the training part; ``cfg`` is the config's
  ``method`` section; ``history`` is a list of dicts (empty for closed forms);
* ``validate(features, labels, cfg)``: raises ``ValueError`` naming the problem
  when the method cannot run on this data with this config (the data through
  ``_checks.training_data``, every hyperparameter through ``_checks.check_number`` or a
  check of its own); called on every split before any training; returns the
  ``_checks.TrainingData``;
* ``takes_callback`` (default False): True for an iterative learner whose ``fit`` also
  takes ``callback=``, called as ``callback(row, metric)`` after every logged chunk
  with the metric learned so far (its time left out of the rows' ``seconds``); a dict
  it returns is merged into that history row before ``log_fn`` sees it
  (``warca_jax.training.run_in_chunks``). ``warca_jax.train`` evaluates on held-out
  identities this way (``data.val_fraction``).

Modules are discovered with ``pkgutil``, so adding a learner is adding a file.

The registry hands out each ``fit`` wrapped (``checked_fit``): whatever the learner, its
result goes through ``training.check_model`` before anyone sees it, so that a model with
NaN or inf or one that maps every training sample to one point is a
``training.TrainingDivergedError``, never a model (the learners check their own results
the same way, for callers of their ``fit`` outside the registry).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from typing import NamedTuple


class Method(NamedTuple):
    fit: Callable
    validate: Callable
    takes_callback: bool = False


def with_callback() -> list[str]:
    """The names of the methods whose ``fit`` takes ``callback=``, sorted."""
    return sorted(name for name, m in registry().items() if m.takes_callback)


_REGISTRY: dict[str, Method] = {}


def checked_fit(name: str, fit: Callable) -> Callable:
    """``fit`` whose result is checked by ``training.check_model`` before it is returned.

    Raises:
      training.TrainingDivergedError: the learner returned a non-finite or degenerate
        model.
    """

    @functools.wraps(fit)
    def fit_and_check(features, labels, cfg, *args, **kwargs):
        from warca_jax import training

        metric, history = fit(features, labels, cfg, *args, **kwargs)
        training.check_model(metric, method=name, features=features, hint=_hint(history))
        return metric, history

    fit_and_check.unchecked = fit
    return fit_and_check


def _hint(history: list) -> str:
    if history:
        return "lower learning_rate (or raise a regulariser)"
    return "raise the regulariser (reg) or check the training data"


def registry() -> dict[str, Method]:
    """All methods, importing the modules of this package on first use."""
    if not _REGISTRY:
        for info in pkgutil.iter_modules(__path__):
            module = importlib.import_module(f"{__name__}.{info.name}")
            for name, method in getattr(module, "METHODS", {}).items():
                if name in _REGISTRY:
                    raise RuntimeError(f"method {name!r} is defined twice")
                _REGISTRY[name] = method._replace(fit=checked_fit(name, method.fit))
    return _REGISTRY


def get(name: str) -> Method:
    """The method called ``name``; ValueError listing the known ones otherwise."""
    methods = registry()
    if name not in methods:
        raise ValueError(f"unknown method {name!r}; expected one of {sorted(methods)}")
    return methods[name]
