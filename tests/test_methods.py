"""The method registry and every config file in configs/."""

import importlib
import pkgutil

import pytest

import configs
from warca_jax import methods


def test_registry_finds_warca_and_rejects_unknown_names():
    assert "warca" in methods.registry()
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        methods.get("nope")


@pytest.mark.parametrize(
    "name", [m.name for m in pkgutil.iter_modules(configs.__path__) if m.name != "common"]
)
def test_every_config_names_a_registered_method_and_is_locked(name):
    module = importlib.import_module(f"configs.{name}")
    config = module.get_config()
    assert config.method.name in methods.registry()
    with pytest.raises(AttributeError):
        config.method.not_a_field = 1


def test_overridden_copies_and_refuses_unknown_fields():
    from configs import common, warca

    base = warca.get_config().method
    changed = common.overridden(base, lam=0.5)
    assert changed.lam == 0.5 and base.lam != 0.5
    with pytest.raises(KeyError, match="lerning_rate"):
        common.overridden(base, lerning_rate=0.1)
