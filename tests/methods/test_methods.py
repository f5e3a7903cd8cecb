"""The method registry and every config file in configs/."""

import pkgutil
import re

import numpy as np
import pytest
from repo_configs import CONFIGS, config_module

from warca_jax import methods
from warca_jax.metric import Metric


def test_registry_finds_warca_and_rejects_unknown_names():
    assert "warca" in methods.registry()
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        methods.get("nope")


def _is_driver_config(config) -> bool:
    """A driver's config (the protocol's, a study's): no method section; checked for locking."""
    if "method" in config:
        return False
    with pytest.raises(AttributeError):
        config.not_a_field = 1
    return True


@pytest.mark.parametrize("name", [m.name for m in pkgutil.iter_modules([CONFIGS])])
def test_every_config_names_a_registered_method_and_is_locked(name):
    module = config_module(name)
    config = module.get_config()
    if _is_driver_config(config):
        return
    assert config.method.name in methods.registry()
    with pytest.raises(AttributeError):
        config.method.not_a_field = 1


def _documented_variants():
    """(config, variant) for every variant a config's docstring lists under 'Variants'."""
    out = []
    for info in pkgutil.iter_modules([CONFIGS]):
        doc = config_module(info.name).__doc__ or ""
        listed = doc.split("Variants", 1)[1].split("\n\n", 1)[0] if "Variants" in doc else ""
        out += [(info.name, v) for v in re.findall(r"^  (\w+) {2,}", listed, flags=re.M)]
    return out


@pytest.mark.parametrize("name,variant", _documented_variants())
def test_every_documented_variant_loads_and_is_locked(name, variant):
    config = config_module(name).get_config(variant)
    if _is_driver_config(config):
        return
    assert config.method.name in methods.registry()
    with pytest.raises(AttributeError):
        config.method.not_a_field = 1
    if variant == "large":  # settings for 7,368 x 2,048 problems: cheaper than the default.
        default = config_module(name).get_config()
        assert config.method.to_dict() != default.method.to_dict()


def test_documented_variants_include_the_large_ones():
    found = {name for name, variant in _documented_variants() if variant == "large"}
    assert {"lmnn", "mlapg", "svmml", "rpcca", "pairwise_sgd", "triplet_sgd"} <= found


def test_overridden_copies_and_refuses_unknown_fields():
    from warca_jax.runs import defaults

    warca = config_module("warca")

    base = warca.get_config().method
    changed = defaults.overridden(base, lam=0.5)
    assert changed.lam == 0.5 and base.lam != 0.5
    with pytest.raises(KeyError, match="lerning_rate"):
        defaults.overridden(base, lerning_rate=0.1)


def test_each_fit_declares_only_what_it_uses_and_call_fit_passes_only_that():
    """A closed form takes no log_fn nor progress (a deterministic one no seed); call_fit
    gives a learner only the keyword arguments its fit declares."""
    takes = {name: methods.fit_parameters(m.fit) for name, m in methods.registry().items()}
    for name in ("kissme", "rca", "kmeans_nn"):
        assert takes[name] == {"seed"}, name
    for name in ("lfda", "nn", "kernel_nn", "mahalanobis"):
        assert takes[name] == set(), name
    assert takes["xqda"] == {"cams"}
    assert takes["warca"] == set(methods.FIT_KEYWORDS)
    assert takes["nca"] == takes["mlapg"] == {"log_fn", "progress", "callback"}
    assert takes["triplet_sgd"] == {"seed", "log_fn", "progress"}
    assert "warca" in methods.with_callback() and "triplet_sgd" not in methods.with_callback()

    seen = []
    model = Metric("linear", 2, projection=np.eye(2, dtype=np.float32), name="kissme")

    def closed(features, labels, cfg, *, seed=0):
        seen.append(seed)
        return model, []

    def wrapper(features, labels, cfg, **kwargs):  # takes everything it is given
        seen.append(sorted(kwargs))
        return model, []

    cfg = config_module("kissme").get_config().method
    learner = methods.Method(closed, None, None, ())
    got = methods.call_fit(learner, 1, 2, cfg, seed=4, cams=[0], log_fn=print, progress=True)
    assert got == (model, []) and seen == [4]
    methods.call_fit(learner._replace(fit=wrapper), 1, 2, cfg, seed=4)
    assert seen[-1] == sorted(methods.FIT_KEYWORDS)
    with pytest.raises(ValueError, match=r"method 'kissme' takes no callback: .* one of \["):
        methods.call_fit(learner, 1, 2, cfg, callback=lambda row, metric: None)


@pytest.mark.parametrize(
    "name, kind, match",
    [
        ("kissme", "identity", r"field 'kind': method 'kissme' learns 'linear' metrics, not "),
        ("mine", "linear", r"field 'name': 'mine' names no registered method"),
    ],
)
def test_call_fit_refuses_a_model_its_method_does_not_learn(name, kind, match):
    """A learner whose fit returns a kind its method does not declare (``Method.kinds``), or
    a model under another name, is the learner's fault: ``call_fit``, through which every
    fit of the library goes, refuses it (``registered_method``) before anyone sees it."""
    eye = np.eye(2, dtype=np.float32)
    wrong = Metric(kind, 2, projection=eye if kind == "linear" else None, name=name)
    learner = methods.Method(lambda features, labels, cfg: (wrong, []), None, None, ())
    cfg = config_module("kissme").get_config().method
    with pytest.raises(ValueError, match=match):
        methods.call_fit(learner, 1, 2, cfg)
