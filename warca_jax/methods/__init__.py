"""Registry of the metric learners: one module per learner, found by discovery.

Every module in this package defines ``METHODS``, a dict from a method name (the
``method.name`` of a config) to a ``Method``:

* ``fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False)
  -> (Metric, history)``: learns on the training part, ``features`` [N, D] and
  ``labels`` [N] (identities); ``cfg`` is the config's ``method`` section
  (configs/<learner>.py); ``seed`` seeds what the learner draws (same seed, same result;
  unused by a deterministic learner); ``log_fn`` is called with each history row and
  ``progress`` shows a progress bar; ``history`` is a list of dicts (empty for closed
  forms, which ignore ``log_fn`` and ``progress``). It raises ``ValueError`` for bad data
  or config before any work (its ``validate``), and
  ``learner_loop.TrainingDivergedError`` when training diverged or ended in a non-finite
  or degenerate model. Each learner's ``fit`` docstring says only what is its own: what
  it learns, what ``seed`` draws, its history rows;
* ``validate(features, labels, cfg)``: raises ``ValueError`` naming the problem
  when the method cannot run on this data with this config (the data through
  ``checks.training_data``, every hyperparameter through ``checks.check_number`` or a
  check of its own); called on every split before any training; returns the
  ``checks.TrainingData``;
* ``takes_callback`` (default False): True for an iterative learner whose ``fit`` also
  takes ``callback=``, called as ``callback(row, metric)`` after every logged chunk
  with the metric learned so far (its time left out of the rows' ``seconds``); a dict
  it returns is merged into that history row before ``log_fn`` sees it
  (``warca_jax.learner_loop.run_in_chunks``). ``warca_jax.pipeline`` evaluates on held-out
  identities this way (``data.val_fraction``).

* ``kinds`` (default ``("linear",)``): the ``Metric`` kinds its ``fit`` may return; a
  metric's ``name`` is its method's name (or ``<method>_<variant>``, e.g. ``nn_cosine``),
  and a model whose kind is not one of its method's is refused
  (``warca_jax.model_checks.registered_method``);

* ``default_config(variant)`` and ``variants``: the learner's default hyperparameters, the
  ``method`` section of a config, for each named variant (the first is the default);
  ``warca_jax.defaults.method_config("lfda:chi2")`` reads them, and every file in
  configs/ starts from them (configs/<learner>.py).

Modules are discovered with ``pkgutil``, so adding a learner is adding a file; a helper
module without ``METHODS`` registers nothing. Each learner's module ends the same way:
``VARIANTS`` (the variants, with what sets them apart), then ``default_config``, which
starts from ``checks.new_config(name, variant, VARIANTS)`` (the variant checked, ``name``
set) and returns the ConfigDict unlocked, so that a config file or a caller can change
fields before locking it; last ``METHODS = {name: Method(fit, validate, default_config,
VARIANTS, takes_callback=...)}``.

An iterative learner's ``fit`` ends in ``learner_loop.fit_in_chunks`` (through a
``learner_loop.Loop`` of its arguments; SDML and the study's SGD, with loops of their own,
in ``learner_loop.run_in_chunks``), and every learner's model goes through
``learner_loop.check_model`` before anyone sees it, so that a model with NaN or inf or one
that maps every training sample to one point is a ``learner_loop.TrainingDivergedError``,
never a model.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import NamedTuple

import ml_collections


class Method(NamedTuple):
    fit: Callable
    validate: Callable
    default_config: Callable[..., ml_collections.ConfigDict]
    variants: tuple[str, ...]
    takes_callback: bool = False
    # fit takes ``cams=`` ([N] camera ids of the training samples, or None)
    takes_cams: bool = False
    # ``grid(features, labels, cfg, lams_etas, *, seed, cams)``: the fits of a
    # lambda x eta grid sharing their preparation (``warca.grid.GridFit``), or None
    grid: Callable | None = None
    # the ``Metric`` kinds its fit returns: what a saved model of this method may hold
    # (``model_checks.registered_method`` refuses any other at save, load and fit)
    kinds: tuple[str, ...] = ("linear",)


def with_callback() -> list[str]:
    """The names of the methods whose ``fit`` takes ``callback=``, sorted."""
    return sorted(name for name, m in registry().items() if m.takes_callback)


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
