"""Config files (configs/*.py) read by path, as the entry points' ``--config`` flag reads them.

* ``load_config(path)``: the config of ``configs/warca.py:chi2`` (its ``get_config``, called
  with the variant), for notebooks and tests;
* ``load_config_module(file)``: the file as a module (its ``get_config``, ``VARIANTS`` and
  constants).

A missing file or variant is one line naming the config files or variants there are, with
the close match. The defaults the files start from are ``warca_jax.runs.defaults``'s.
"""

import difflib
import importlib.util
import os

import ml_collections

# The repository's root (the folder above the warca_jax package) and its config files, which the
# entry points find from there.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _close_match(name: str, names, prefix: str = "") -> str:
    """' (did you mean <prefix>X?)' for the close match X of ``name`` among ``names``, else
    ''."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f" (did you mean {prefix + close[0]!r}?)" if close else ""


def _missing_file(file: str) -> str:
    """Why ``file`` is no config file: the repository's root to run from, or the config
    files there are, with the close match."""
    cwd = os.getcwd()
    if not os.path.isabs(file) and os.path.isfile(os.path.join(ROOT, file)) and cwd != ROOT:
        return (
            f"no config file {file!r} in the current folder {cwd}: the commands run from the "
            f"repository's root, {ROOT} (cd there first)"
        )
    configs = os.path.join(ROOT, "configs")
    names = []
    # the folder of the path as given, else the repository's configs/ (from here if inside)
    for folder in (os.path.dirname(file), configs if cwd != ROOT else "configs"):
        if os.path.isdir(folder or "."):
            names = sorted(n for n in os.listdir(folder or ".") if n.endswith(".py"))
        if names:
            break
    if not names:
        return f"no config file {file!r} (from {cwd}); run from the repository's root"
    close = _close_match(os.path.basename(file), names, os.path.join(folder, ""))
    where = os.path.join(folder or ".", "")
    return f"no config file {file!r}{close}; the config files in {where}: {', '.join(names)}"


def load_config_module(file: str):
    """A config file (e.g. ``configs/warca.py``) as a module: its ``get_config``, its constants.

    A relative path is taken from the current folder (run from the repository's root, as
    the entry points are).

    Raises:
      FileNotFoundError: no such file, in one line naming the config files there are, with
        the close match, or the repository's root when the file is there.
      ValueError: the file has no ``get_config``.
    """
    file = os.path.expanduser(str(file))
    if not os.path.isfile(file):
        raise FileNotFoundError(_missing_file(file))
    name = "_warca_jax_config_" + os.path.splitext(os.path.basename(file))[0]
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
        raise ValueError(f"{file} is not a config file: it has no get_config()")
    return module


def load_config(path: str) -> ml_collections.ConfigDict:
    """The config of a config file, ``path[:variant]`` (e.g. ``configs/warca.py:chi2``).

    The file is read as the entry points' ``--config`` flag reads it: its ``get_config``,
    called with the variant when one is given (``load_config_module`` for the rest).

    Raises:
      ValueError: a variant that the file's ``VARIANTS`` do not hold, in one line naming
        them, with the close match.
    """
    file, _, variant = str(path).partition(":")
    module = load_config_module(file)
    known = getattr(module, "VARIANTS", None)
    if variant and isinstance(known, tuple) and variant not in known:
        raise ValueError(
            f"{file} has no variant {variant!r}{_close_match(variant, known)}; its variants "
            f"are {', '.join(known)}"
        )
    return module.get_config(variant) if variant else module.get_config()
