"""Workdir files: one atomic writer and one verified reader for everything a run keeps.

A run's workdir is its memory across restarts: a run started again reuses what a
previous one finished. That is only safe when every file it reuses is complete and
belongs to this run, so:

* every file is written under a temporary name in the same folder and moved into
  place with ``os.replace`` (``write_json``, ``write_text``, ``write_figure``,
  ``atomic_file``; ``writes.atomic_path`` beneath them): a run killed at any instant
  leaves the old file or the new one, never half of one; the temporary file is created
  new and opened without following a link (``writes.temporary``, ``writes.no_link``), so
  a link planted in the folder is never written through;
* every file a resume relies on is read through ``reuse_json``, which checks that it
  parses and passes the caller's check (finite numbers, the right split) and returns
  None, with a log line naming the file and the reason, when it does not, so that the
  caller redoes that piece instead of trusting it;
* a write that fails (a full disk, a size limit, a read-only folder, a name too long) is
  a ``writes.WriteError`` naming the file (``writes.writing``): one line on the command
  line, and what was finished before it stays whole for the rerun;
* ``read_json`` is for files that cannot be redone (a config): a damaged one is a
  ``DamagedFileError`` naming the file;
* ``check_run_files`` records the run's config and a fingerprint of its data, and
  refuses a workdir whose config (naming the fields that differ; presentation-only
  fields such as ``progress`` and the feature cache's folder aside) or data differ from
  this run's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator

import numpy as np
from absl import logging

from warca_jax.io import bounded_reads, reads, workdir_lock, writes

CONFIG_FILE = "config.json"
DATA_FILE = "data.json"


class DamagedFileError(ValueError):
    """A workdir file that cannot be read back: truncated, corrupt or not what it should be."""


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w", **kwargs) -> Iterator:
    """Yields a file opened for writing (``open(tmp, mode, **kwargs)``) that becomes
    ``path`` on success: ``atomic_path``, its temporary opened with ``writes.no_link``.
    The one way the project writes a whole file; give writers that take a path
    (``savefig``, ``np.savez``, PIL's ``save``) this file object instead."""
    with writes.atomic_path(path) as tmp, open(tmp, mode, opener=writes.no_link, **kwargs) as f:
        yield f


def _finite_json(obj, where: str = "") -> None:
    """Raises ValueError at the first NaN or infinity in a JSON-able object."""
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError(f"refusing to write a non-finite number ({obj}) at {where or 'top level'}")
    if isinstance(obj, dict):
        for k, v in obj.items():
            _finite_json(v, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            _finite_json(v, f"{where}[{i}]")


def write_text(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` atomically."""
    with atomic_file(path, "w", encoding="utf-8") as f:
        f.write(text)


def write_json(path: str, obj) -> None:
    """Writes ``obj`` as JSON to ``path`` atomically.

    A NaN or infinity anywhere in ``obj`` is a ValueError naming its place: JSON has no
    such numbers, and a result holding one is not a result.
    """
    try:
        _finite_json(obj)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    write_text(path, json.dumps(obj, indent=1, allow_nan=False))


def write_figure(path: str, fig, **savefig) -> None:
    """Writes a matplotlib ``fig`` to ``path`` atomically (``fig.savefig(path, **savefig)``;
    the format, unless given, from ``path``'s extension)."""
    savefig.setdefault("format", os.path.splitext(path)[1][1:] or None)
    with atomic_file(path, "wb") as f:
        fig.savefig(f, **savefig)


def read_json(path: str, *, what: str = "file"):
    """Reads a JSON file (bounded); a damaged one, a FIFO or a link is a DamagedFileError."""
    try:
        with reads.open_regular(path, "r", encoding="utf-8", what=what, follow=False) as f:
            return bounded_reads.read_json(f)
    except reads.NotARegularFileError as e:
        raise DamagedFileError(str(e)) from None
    except bounded_reads.JsonLimitError as e:  # too large or deep: refused before parsing
        raise DamagedFileError(f"{path}: the {what} {e}; remove it") from None
    except json.JSONDecodeError as e:
        raise DamagedFileError(
            f"{path}: the {what} is damaged (not valid JSON: {e.msg} at line {e.lineno}, "
            f"column {e.colno}); it was probably cut short by a crash: remove it"
        ) from None
    except UnicodeDecodeError:
        raise DamagedFileError(f"{path}: the {what} is not UTF-8 text; remove it") from None


def reuse_json(path: str, check: Callable[[object], str | None] | None = None):
    """The JSON object in ``path`` if a resume can trust it, else None (with a log line).

    Args:
      path: a file a previous run wrote.
      check: returns None for a good object, or a short reason why it cannot be reused
        (a NaN, another split's results, missing keys).

    Returns:
      The object, or None when the file is absent, damaged or fails ``check``: the
      caller then redoes what it holds (and overwrites it).
    """
    if not os.path.exists(path):
        return None
    try:
        obj = read_json(path)
    except DamagedFileError as e:
        logging.warning("%s; redoing it", e)
        return None
    reason = check(obj) if check is not None else None
    if reason:
        logging.warning("%s cannot be reused (%s); redoing it", path, reason)
        return None
    return obj


def finite_numbers(obj, keys) -> str | None:
    """None if ``obj`` is a dict whose ``keys`` are all finite numbers, else the reason."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, found {type(obj).__name__}"
    for k in keys:
        v = obj.get(k)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return f"{k!r} is missing or not a number ({v!r})"
        if not math.isfinite(v):
            return f"{k!r} is not finite ({v})"
    return None


def record_check(**expected) -> Callable[[object], str | None]:
    """A ``reuse_json`` check: a JSON object with ``expected`` entries and no NaN or inf.

    E.g. ``record_check(split=3, method="warca")`` refuses another split's or method's
    record copied into this file, and a record in which any number is not finite.
    """

    def check(obj):
        if not isinstance(obj, dict):
            return f"expected a JSON object, found {type(obj).__name__}"
        for k, v in expected.items():
            if obj.get(k) != v:
                return f"its {k!r} is {obj.get(k)!r}, expected {v!r}"
        try:
            _finite_json(obj)
        except ValueError as e:
            return str(e).replace("refusing to write a", "it holds a")
        return None

    return check


def read_jsonl(path: str) -> list[dict]:
    """The rows of a JSON-lines file; lines that do not parse are dropped with a log line.

    A run killed while appending leaves a last line cut short; such a line (or any other
    that is not a JSON object) is dropped, and the file is rewritten without it by the
    callers that rewrite it.
    """
    if not os.path.exists(path):
        return []
    rows = []
    with reads.open_regular(path, "r", encoding="utf-8", errors="replace", follow=False) as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = bounded_reads.load_json(line)
            except ValueError:  # not JSON, or over bounded_reads' size or depth
                row = None
            if not isinstance(row, dict):
                logging.warning("%s line %d is damaged; dropping it", path, i)
                continue
            rows.append(row)
    return rows


def write_jsonl(path: str, rows: list[dict]) -> None:
    """Writes ``rows`` as JSON lines, atomically."""
    write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def array_fingerprint(*arrays: np.ndarray) -> str:
    """A SHA-256 of the arrays' dtypes, shapes and bytes: same data, same string."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def file_fingerprint(path: str) -> dict:
    """Size and modification time of a file (of the files in a folder, with a hash of
    their names, sizes and times): recorded beside ``array_fingerprint`` of what was read
    from it, which is what a restart compares, so the file is not read a second time."""
    if os.path.isdir(path):
        h = hashlib.sha256()
        size = 0
        mtime = 0
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                p = os.path.join(root, name)
                st = os.stat(p)
                size += st.st_size
                mtime = max(mtime, st.st_mtime_ns)
                h.update(os.path.relpath(p, path).encode("utf-8", "surrogateescape"))
                h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        return {"size": size, "mtime_ns": mtime, "listing_sha256": h.hexdigest()}
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def check_path(workdir) -> None:
    """Checked before any work: a ValueError unless ``workdir`` is a non-empty path
    (``os.makedirs("")`` would fail with a bare ``FileNotFoundError: ''``); a
    ``WriteError`` for a path the file system cannot hold or a folder that cannot be made
    (``writes.check_path``: a name or path too long, a read-only parent)."""
    if not isinstance(workdir, str | os.PathLike) or not os.fspath(workdir).strip():
        raise ValueError(
            f"workdir is empty ({workdir!r}): give the folder for the outputs (created if "
            "needed), e.g. --workdir=/tmp/run"
        )
    writes.check_path(workdir)


def prepare(workdir: str) -> None:
    """Creates ``workdir`` (an empty path, a link or a non-folder there: a clear error) and,
    within a run that holds it (``workdir_lock.one_run_per_workdir``), takes its lock."""
    check_path(workdir)
    if os.path.islink(workdir):
        raise writes.linked_folder(workdir)
    if os.path.exists(workdir) and not os.path.isdir(workdir):
        raise NotADirectoryError(
            f"workdir {workdir!r} exists and is not a folder: give a folder path (it is "
            "created if needed)"
        )
    try:
        os.makedirs(workdir, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        msg = f"workdir {workdir!r}: a part of the path is a file, not a folder"
        raise NotADirectoryError(msg) from None
    except PermissionError as e:
        raise PermissionError(f"workdir {workdir!r} cannot be created: {e.strerror}") from None
    except OSError as e:
        raise writes.write_error(workdir, e) from e
    if not os.access(workdir, os.W_OK):
        raise PermissionError(f"workdir {workdir!r} is not writable")
    workdir_lock.hold(workdir)


# Fields that change how a run looks, not what it computes: a workdir is reused across a
# change of these (config.json keeps the first run's values). ``progress``: progress bars;
# ``eval.plot_max_rank``: the ranks drawn in the CMC plot, redrawn from the results by
# every run; ``study.compare_workdirs``: the other studies the AON study's panel (e) reads.
PRESENTATION_FIELDS = ("progress", "eval.plot_max_rank", "study.compare_workdirs")
# Fields that say where a run keeps things, not what it computes: ``data.cache_dir``, the
# feature cache's folder (an entry serves only the inputs it was made from: moving it is safe).
LOCATION_FIELDS = ("data.cache_dir",)
IGNORED_FIELDS = PRESENTATION_FIELDS + LOCATION_FIELDS
# Fields added to the configs after runs were recorded without them, with the value that
# reproduces those runs: a recorded config that lacks one is read as holding that value,
# so that such a workdir is resumed rather than refused.
EARLIER_VALUES = {"data.skip_small_images": False, "method.init": "random", "method.tol": 0.0,
                  "method.tol_window": 1, "data.height": 128, "data.width": 48,
                  "data.normalize": "none"}  # fmt: skip
_ABSENT = object()


def _flatten(obj, prefix: str = "") -> dict:
    """A JSON object's leaves by dotted path (an empty object is a leaf)."""
    if not isinstance(obj, dict) or (prefix and not obj):
        return {prefix: obj}
    out = {}
    for k, v in obj.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _ignored(path: str, ignore) -> bool:
    return any(path == f or path.startswith(f + ".") for f in ignore)


def config_differences(old, new, *, ignore=IGNORED_FIELDS) -> list[str]:
    """``"path old -> new"`` for every leaf in which two JSON configs differ, in path order.

    ``ignore`` names fields (dotted paths, a section for all its fields) left out; a field
    that only one config has shows ``(absent)`` on the other side, unless it is one of
    ``EARLIER_VALUES`` (then the other side holds the value earlier runs had).
    """
    a, b = _flatten(old), _flatten(new)

    def show(v):
        return "(absent)" if v is _ABSENT else repr(v)

    out = []
    for path in sorted(set(a) | set(b)):
        earlier = EARLIER_VALUES.get(path, _ABSENT)
        va, vb = a.get(path, earlier), b.get(path, earlier)
        if va != vb and not _ignored(path, ignore):
            out.append(f"{path} {show(va)} -> {show(vb)}")
    return out


def computed_fields(config: dict) -> dict:
    """``config`` (a JSON object) without the fields that do not change what a run
    computes: ``IGNORED_FIELDS``, and ``EARLIER_VALUES`` fields at their earlier value."""
    flat = _flatten(config)
    return {
        path: value
        for path, value in flat.items()
        if not _ignored(path, IGNORED_FIELDS) and EARLIER_VALUES.get(path, _ABSENT) != value
    }


def describe_differences(diffs: list[str], *, shown: int = 3) -> str:
    """The first ``shown`` differences, then ``and N more (their fields)``."""
    text = ", ".join(diffs[:shown])
    rest = [d.split(" ", 1)[0] for d in diffs[shown:]]
    if rest:
        names = ", ".join(rest[:8]) + (", ..." if len(rest) > 8 else "")
        text += f" and {len(rest)} more ({names})"
    return text


def check_run_files(workdir: str, config_text: str, data: dict, *, ignore=IGNORED_FIELDS) -> None:
    """Records the run's config and data fingerprint, or refuses a workdir of another run.

    Args:
      workdir: an existing folder.
      config_text: the run's config as JSON text.
      data: a JSON-able fingerprint of the data the run reads (``data["content"]`` is
        compared; anything else, such as the file's mtime, is recorded only).
      ignore: config fields that do not make another run (``IGNORED_FIELDS``: progress
        bars, the plot's ranks, the feature cache's folder); every other field must be
        equal.

    Raises:
      ValueError: the workdir holds a run with another config (the message names the
        fields that differ, with both values), or with this config on other data (the
        data file changed since).
      DamagedFileError: config.json is damaged.
    """
    cfg_path = os.path.join(workdir, CONFIG_FILE)
    data_path = os.path.join(workdir, DATA_FILE)
    if os.path.exists(cfg_path):
        old = read_json(cfg_path, what="config file of the earlier run")
        diffs = config_differences(old, json.loads(config_text), ignore=ignore)
        if diffs:
            raise ValueError(
                f"{workdir} holds a run with a different config ({cfg_path}): "
                f"{describe_differences(diffs)}; use a new workdir or remove it to start over"
            )
        old_data = reuse_json(data_path) if os.path.exists(data_path) else None
        if old_data is not None and old_data.get("content") != data.get("content"):
            source = (old_data.get("source") or {}).get("path", old_data.get("name"))
            raise ValueError(
                f"{workdir} holds a run of this config on other data: {source} changed "
                f"since that run (the hash of its arrays differs from the one in "
                f"{data_path}); use a new workdir, or remove it to start over"
            )
    else:
        write_text(cfg_path, config_text)
    write_json(data_path, data)
