"""The checks of a run's config before any work, and messages that name the field.

``train_and_evaluate`` (``run_plan.check_run_config``) refuses a config that cannot run
before it loads data, trains or writes anything, and every refusal starts with the config
field it is about, so that one line says what to change:

* ``check_settings``: the workdir path, the ``method`` section against the method its
  ``name`` names (``check_method_section``: ``--config.method.name=lfda`` on WARCA's
  config names the fields LFDA needs), ``data.batch_size``;
* ``named_fields``: a ``ValueError`` raised inside it (a learner's ``validate``, the data
  settings) comes out with its message led by the field (``field_message``):
  ``config.method.kernel: unknown kernel 'rbff'; expected ...``;
* ``check_config_file``: the workdir's record of the run (config.json, data.json), or a
  refusal of a workdir of another run naming the fields that differ
  (``workdir.check_run_files``; presentation-only fields such as ``progress`` aside).

The command line prints such an error as that one line (``warca_jax.runs.cli``).
"""

from __future__ import annotations

import contextlib
import math
import os
import re

import numpy as np
from absl import logging as absl_logging
from ml_collections import config_dict

from warca_jax import datasets, methods
from warca_jax.data import dataset_arrays
from warca_jax.features.extraction import check_batch_size
from warca_jax.io import config_files, run_files

_DOTTED = re.compile(r"(?:config\.)?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)")
# the repository's configs/, named in a hint (never read or imported)
_CONFIGS = os.path.join(config_files.ROOT, "configs")


def _has_field(config, path: str) -> bool:
    node = config
    for part in path.split("."):
        if not isinstance(node, config_dict.ConfigDict) or part not in node:
            return False
        node = node[part]
    return True


def field_message(config, message: str, *, section: str | None = None, where: str = "") -> str:
    """``message`` starting with the config field it is about, ``config.<path>``.

    A message that starts with a field's dotted path (``data.val_fraction must be ...``,
    ``method.num_iters must be ...``) gets the ``config.`` prefix; otherwise, with
    ``section``, the first word of the message that is a field of that section (but
    ``name``) names it (``unknown kernel 'rbff'`` -> ``config.method.kernel: unknown kernel
    'rbff'``); otherwise ``where`` (e.g. the dataset and split of bad training data) leads.
    """
    m = _DOTTED.match(message)
    if m and _has_field(config, m.group(1)):
        return message if message.startswith("config.") else f"config.{message}"
    if section is not None:
        fields = set(config[section].keys()) - {"name"}
        for word in re.findall(r"[A-Za-z_]\w*", message):
            if word in fields:
                return f"config.{section}.{word}: {message}"
    return f"{where}: {message}" if where else message


def _renamed(error: ValueError, message: str) -> ValueError:
    """``error`` with ``message``, of its own class where it can be, with its traceback
    (so that where it was raised stays visible: ``cli.raised_by_the_project``)."""
    try:
        new = type(error)(message)
    except Exception:  # noqa: BLE001 - a class with another signature
        new = ValueError(message)
    return new.with_traceback(error.__traceback__)


@contextlib.contextmanager
def named_fields(config, *, section: str | None = None, where: str = ""):
    """A ``ValueError`` raised inside comes out led by its field (``field_message``)."""
    try:
        yield
    except ValueError as e:
        message = field_message(config, str(e), section=section, where=where)
        raise _renamed(e, message) from None


def _config_hint(name: str, method: methods.Method) -> str:
    """Where a method's own config starts: its file in configs/ (named after the method or
    its module), else its defaults."""
    module = method.fit.__module__.split(".")
    for stem in (name, module[module.index("methods") + 1] if "methods" in module else name):
        if os.path.isfile(os.path.join(_CONFIGS, f"{stem}.py")):
            return f"configs/{stem}.py"
    return f"warca_jax.runs.defaults.method_config({name!r})"


def check_method_section(section, where: str = "method") -> methods.Method:
    """The ``method`` section has exactly the fields of the method its ``name`` names;
    returns that method (the run's one look-up in the registry).

    Changing only ``method.name`` (``--config.method.name=lfda`` on WARCA's config) leaves
    the other method's fields: refused, naming the fields the named method needs, the
    missing ones and the ones it does not know, before any work.

    Raises:
      ValueError: an unknown method, or a section of another method's fields.
    """
    name = section.get("name")
    try:
        method = methods.get(name)
    except ValueError as e:
        raise ValueError(f"config.{where}.name: {e}") from None
    want, have = set(method.default_config().keys()), set(section.keys())
    if want == have:
        return method
    owners = sorted(methods.registry().items())
    owner = next((n for n, m in owners if set(m.default_config().keys()) == have), None)
    missing, unknown = sorted(want - have), sorted(have - want)
    parts = [f"missing: {', '.join(missing)}"] if missing else []
    parts += [f"unknown to {name}: {', '.join(unknown)}"] if unknown else []
    whose = f"is {owner}'s" if owner else f"does not match {name}'s"
    raise ValueError(
        f"config.{where}.name is {name!r} but the {where} section {whose}: {name} needs the "
        f"fields {sorted(want)} ({'; '.join(parts)}); start from {_config_hint(name, method)}"
    )


def check_settings(config, workdir) -> methods.Method:
    """The checks that need no data: the workdir path (not empty), the ``method``
    section (``check_method_section``) and ``data.batch_size`` (an integer >= 1); returns
    the method the section names.

    Raises:
      ValueError: the first problem, led by its field.
    """
    run_files.check_path(workdir)
    with named_fields(config):
        method = check_method_section(config.method)
        check_batch_size(config.data.get("batch_size", 256))
    return method


def content_fingerprint(dataset: dataset_arrays.Dataset) -> str:
    """The SHA-256 of a dataset's features, labels, cameras and splits, and of its
    ``same_camera_matches`` when set (another evaluation of the same arrays)."""
    arrays = [dataset.features, dataset.labels, dataset.cams]
    for split in dataset.splits:
        arrays.extend(split)
    if dataset.same_camera_matches:
        arrays.append(np.ones(1, np.int64))
    return run_files.array_fingerprint(*arrays)


def data_fingerprint(dataset: dataset_arrays.Dataset, data_cfg) -> dict:
    """What identifies the data of a run: a hash of its arrays and splits, and its source.

    ``content`` (compared on restart) hashes the features, labels, cameras and every
    split as loaded; ``source`` (recorded only) is the size and mtime of the file, or a
    hash of the folder listing, that ``data.path`` names.
    """
    out = {"name": dataset.name, "content": content_fingerprint(dataset)}
    path = os.path.expanduser(data_cfg.get("path", "") or "")
    if path and os.path.exists(path):
        out["source"] = {"path": os.path.abspath(path), **run_files.file_fingerprint(path)}
    return out


def check_config_file(workdir: str, config, dataset: dataset_arrays.Dataset | None = None) -> None:
    """Records config.json (and data.json), or refuses a workdir of another run.

    A workdir whose config.json differs from ``config`` in any field but the
    presentation-only ones (``workdir.PRESENTATION_FIELDS``: ``progress``,
    ``eval.plot_max_rank``) and the feature cache's folder (``data.cache_dir``), or whose
    data.json records other data (the file changed since), is a ValueError naming the
    fields that differ (old and new values): results of two runs are never mixed.
    Re-exported by ``pipeline``.
    """
    text = config.to_json_best_effort(indent=1, sort_keys=True)
    data = {} if dataset is None else data_fingerprint(dataset, config.data)
    run_files.check_run_files(workdir, text, data)


def fit_dim_to_data(config, dataset: dataset_arrays.Dataset, method=None, train_sets=None) -> None:
    """The main job's D' when the user set none (``auto_dim``): on a dataset whose paper
    D' is known (``datasets.PAPER_DIMS``) that D', and never more than the features'
    dimension, or for a kernel form than the training images of the smallest fit the run
    makes: ``train_sets`` (each split's training rows, less ``data.val_fraction``'s
    held-out identities; default the splits' training parts), and inside a fit those that
    ``method.fit_rows`` says (WARCA's lambda rule: its held-out fits). Logged, and written
    to config.json with the rest. Only a method whose config has a D' (``method.dim`` > 0;
    0 means the full dimension) is changed."""
    dim = config.method.get("dim")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
        return
    name = str(config.data.name)
    want = datasets.PAPER_DIMS.get(name, dim)
    why = f"the paper's D' on {name}" if name in datasets.PAPER_DIMS else "the config's"
    sets = train_sets or [sp.train_idx for sp in dataset.splits]
    labels = [dataset.labels[t] for t in sets]
    nd = int(dataset.features.shape[1])
    cap, what = methods.dim_bound(method, config.method, nd, labels, seed=config.seed)
    if what == "the number of training images" and config.data.get("val_fraction", 0.0):
        what += " less data.val_fraction's held-out identities"
    if want > cap:
        want, why = cap, f"{what} ({why}, {want}, exceeds it)"
    if want != dim:
        config.method.dim = want
        absl_logging.info(
            "method.dim = %d, %s (--config.method.dim sets it: a value the data cannot take "
            "is refused)",
            want,
            why,
        )


def check_validation_config(config, method: methods.Method) -> float:
    """Checks ``data.val_fraction`` and ``eval.keep_best`` for ``method`` (the one
    ``config.method.name`` names); returns the fraction.

    Raises:
      ValueError: a fraction outside [0, 1), ``keep_best`` without a fraction, or a
        fraction for a method that cannot be evaluated during training.
    """
    fraction = float(config.data.get("val_fraction", 0.0))  # absent in older configs
    keep_best = bool(config.eval.get("keep_best", False))
    if not (math.isfinite(fraction) and 0.0 <= fraction < 1.0):
        raise ValueError(
            f"data.val_fraction must be in [0, 1): the share of each split's training "
            f"identities held out for validation (0: none); got {fraction}"
        )
    if keep_best and not fraction:
        raise ValueError(
            "eval.keep_best=True selects the model on held-out identities: set "
            "data.val_fraction > 0 (e.g. 0.2) or keep_best=False"
        )
    name = config.method.name
    if fraction and not method.takes("callback"):
        raise ValueError(
            f"data.val_fraction={fraction}: validation during training needs an iterative "
            f"learner, one of {methods.with_callback()}; method {name!r} has no training "
            "steps to watch (a closed form, or a validation schedule of its own): set "
            "data.val_fraction=0"
        )
    return fraction
