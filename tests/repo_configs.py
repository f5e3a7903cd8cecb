"""The repository's config files (configs/*.py), loaded by path as the entry points load them.

The tests use the files themselves (they are part of what is tested), wherever pytest is
started from.
"""

import os

from warca_jax import config_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "configs")


def config_path(name: str) -> str:
    """configs/<name>.py, absolute."""
    return os.path.join(CONFIGS, f"{name}.py")


def config_module(name: str):
    """configs/<name>.py as a module (``get_config``, ``VARIANTS``, its constants)."""
    return config_files.load_config_module(config_path(name))


def tiny_protocol():
    """configs/protocol.py:small reduced to Euclidean distance on 40 identities, no CV."""
    c = config_module("protocol").get_config("small")
    c.unlock()
    c.methods = ("nn",)
    c.cv.methods = ()
    c.data.synthetic.num_ids = 40
    c.lock()
    return c
