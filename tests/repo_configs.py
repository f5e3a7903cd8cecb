"""The repository's config files (configs/*.py), loaded by path as the entry points load them.

The tests use the files themselves (they are part of what is tested), wherever pytest is
started from.
"""

import os

from warca_jax.io import config_files
from warca_jax.runs import defaults

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "configs")


def config_path(name: str) -> str:
    """configs/<name>.py, absolute."""
    return os.path.join(CONFIGS, f"{name}.py")


def config_module(name: str):
    """configs/<name>.py as a module (``get_config``, ``VARIANTS``, its constants)."""
    return config_files.load_config_module(config_path(name))


def method_section(name: str, variant: str | None = None, **overrides):
    """The method section of configs/<name>.py (of ``variant``; None: the file's default)
    with ``overrides`` (``defaults.overridden``: unlocked, an unknown field refused)."""
    module = config_module(name)
    cfg = module.get_config(variant) if variant else module.get_config()
    return defaults.overridden(cfg.method, **overrides)


def tiny_protocol():
    """configs/protocol.py:small reduced to Euclidean distance on 40 identities, no CV."""
    c = config_module("protocol").get_config("small")
    c.unlock()
    c.methods = ("nn",)
    c.cv.methods = ()
    c.data.synthetic.num_ids = 40
    c.lock()
    return c
