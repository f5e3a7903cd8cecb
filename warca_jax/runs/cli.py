"""What every command-line entry point shares: bad input is one clear line, not a traceback.

``run(main)`` is ``absl.app.run(main)`` with three differences:

* a ``--config`` naming no config file, or a variant that its file's ``VARIANTS`` lack,
  is one line naming the config files there are or the file's variants, with the close
  match (``config_files.load_config``), instead of ml_collections' traceback; a relative
  path that exists only from the repository's root names the root to run from;
* a ``--config.a.b=v`` override naming a field the config does not have makes
  ml_collections raise a bare ``AttributeError: 'b'`` from deep inside flag parsing; here
  it becomes one line that names the override, the close match and the fields the section has,
  and exit status 1, as absl does for any other bad flag (``--workdir=``, empty, is one
  of those);
* a ``ValueError``, ``OSError`` or ``RuntimeError`` that the project's own code raises
  (``warca_jax``, ``experiments``: a bad config value, bad data, a damaged or foreign
  workdir, a missing file, a run that diverged) is printed as one line,
  ``error: <message>``, with exit status 1 (``one_line_errors``). The library's checks
  run before any work and name the field: ``error: config.method.kernel: unknown kernel
  'rbff'; expected ...``; a message that names no field is led by the command-line
  override it is about, when exactly one matches (``name_override``). An error raised
  from inside another package (NumPy, JAX, ...), and any other exception type
  (``TypeError``, ``KeyError``, ...), is a bug rather than bad input and keeps its
  traceback; ``--traceback`` shows the traceback of every error. A write that fails (a
  full disk, a size limit, a read-only folder, a name too long) is one line naming the
  file, wherever it failed (``for_the_user``); so is an error of the project's own
  classes that a worker process raised.

Ctrl-C (SIGINT) and SIGTERM end a run with one line too, naming the workdir and what it
holds finished, and that the same command resumes, with exit status 130 and 143, the
shells' numbers for those signals (``stops``); no traceback, the worker
processes of the protocol ended with it.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import signal
import sys

import jax
from absl import app, flags
from absl import logging as absl_logging
from ml_collections import config_dict
from ml_collections.config_flags import config_flags

from warca_jax.features import image_files
from warca_jax.io import bounded_reads, config_files, workdir_lock, writes
from warca_jax.runs import stops


def define_run_flags(config_help: str, workdir_help: str):
    """The ``--config`` (a config file, locked) and ``--workdir`` flags every entry point
    takes, both required; returns their flag holders."""
    config = config_flags.DEFINE_config_file("config", None, config_help, lock_config=True)
    workdir = flags.DEFINE_string("workdir", None, workdir_help)
    flags.mark_flags_as_required(["config", "workdir"])
    flags.register_validator(
        "workdir",
        lambda value: value is None or bool(value.strip()),
        message="--workdir is empty: give the folder for the outputs (created if needed)",
    )
    if "traceback" not in flags.FLAGS:
        flags.DEFINE_bool(
            "traceback",
            False,
            "Show the Python traceback of an error instead of the one line 'error: ...'.",
        )
    return config, workdir


def _config_flag_names() -> list[str]:
    return [
        name
        for name, flag in flags.FLAGS._flags().items()  # noqa: SLF001 - absl has no public list
        if isinstance(flag.parser, config_flags.ConfigFileFlagParser)
    ]


def _unknown_field(argv: list[str]) -> str | None:
    """The first ``--<config>.path=value`` of ``argv`` whose path the config lacks, explained."""
    names = _config_flag_names()
    files = {}
    for arg in argv[1:]:
        for name in names:
            if arg.startswith(f"--{name}="):
                files[name] = arg.split("=", 1)[1]
    for arg in argv[1:]:
        for name in names:
            if not arg.startswith(f"--{name}.") or name not in files:
                continue
            path = arg[len(name) + 3 :].split("=", 1)[0]
            try:
                config = config_files.load_config(files[name])
            except Exception:  # noqa: BLE001 - the file's own error is reported by absl
                return None
            node, done = config, []
            for part in path.split("."):
                if isinstance(node, config_dict.ConfigDict) and part in node:
                    node = node[part]
                    done.append(part)
                    continue
                section = ".".join([name, *done])
                if not isinstance(node, config_dict.ConfigDict):
                    return (
                        f"{arg}: {section} is a value ({node!r}), not a section: it has no "
                        f"field {part!r}"
                    )
                close = config_files._close_match(part, node.keys())
                return (
                    f"{arg}: unknown config field {part!r} in {section}{close}; its fields "
                    f"are {', '.join(sorted(node.keys()))}"
                )
    return None


def _check_config_files(argv: list[str]) -> None:
    """Exits with one line, ``error: --config=<value>: <why>``, when a ``--config`` value
    names no config file or a variant the file lacks (``config_files.load_config``: what
    exists, with the close match), or the file's ``get_config`` refuses it; ml_collections
    would show its own traceback (``--traceback`` lets it)."""
    if "--traceback" in argv:
        return
    for name in _config_flag_names():
        for i, arg in enumerate(argv[1:], 1):
            if arg.startswith(f"--{name}="):
                value = arg.split("=", 1)[1]
            elif arg == f"--{name}" and i + 1 < len(argv):  # --config PATH
                value, arg = argv[i + 1], f"--{name}={argv[i + 1]}"
            else:
                continue
            try:
                config_files.load_config(value)
            except (ValueError, OSError) as e:
                sys.stderr.write(f"error: {arg}: {one_line(e)}\n")
                sys.exit(1)


class _NoneOr:
    """A config flag's parser for a number type that also reads ``None``: a field that may
    be None (``lam``, a placeholder: None chooses it by rule) can be given None on the
    command line; a field that may not is refused with its name when it is set."""

    def __init__(self, parser):
        self.parser = parser

    def __getattr__(self, name):
        return getattr(self.parser, name)

    def parse(self, argument):
        if isinstance(argument, str) and argument.strip() == "None":
            return None
        return self.parser.parse(argument)


def _read_none_in_number_fields() -> None:
    """Registers ``_NoneOr`` parsers for float and int config fields (once)."""
    for kind, parser in ((float, flags.FloatParser()), (int, flags.IntegerParser())):
        config_flags.register_flag_parser_for_type(kind, _NoneOr(parser))


def parse_flags(argv: list[str]) -> list[str]:
    """``absl.app.parse_flags_with_usage`` that explains a bad config file or variant
    (``_check_config_files``) and an unknown config field, and reads ``None`` for a number
    field (``_NoneOr``)."""
    _check_config_files(argv)
    _read_none_in_number_fields()
    try:
        return app.parse_flags_with_usage(argv)
    except (AttributeError, KeyError) as e:
        reason = _unknown_field(argv) or f"a --config override failed: {e}"
        sys.stderr.write(f"error: {reason}\n")
        sys.exit(1)


# The project's own code: a ValueError (OSError, RuntimeError) raised there is a message
# for the user; one raised inside another package is a bug, shown with its traceback.
_OWN_CODE = tuple(os.path.join(config_files.ROOT, d) + os.sep for d in ("warca_jax", "experiments"))
USER_ERRORS = (ValueError, OSError, RuntimeError)


def raised_by_the_project(error: BaseException) -> bool:
    """Whether ``error`` was raised by the project's own code (its innermost frame is in
    ``warca_jax/`` or ``experiments/``), not from inside NumPy, JAX or another package."""
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_OWN_CODE)


def _show_traceback() -> bool:
    try:
        return "traceback" in flags.FLAGS and bool(flags.FLAGS.traceback)
    except flags.UnparsedFlagAccessError:
        return False


def one_line(error: BaseException) -> str:
    """The message of ``error`` on one line (a line break and its indent become a space)."""
    return re.sub(r"\s*\n\s*", " ", str(error).strip()) or type(error).__name__


def _config_overrides(argv: list[str]) -> list[str]:
    """The config fields that ``--<config>.path=value`` arguments of ``argv`` set, as
    ``config.path``."""
    names = _config_flag_names()
    return [
        arg[2:].split("=", 1)[0]
        for arg in argv[1:]
        if any(arg.startswith(f"--{name}.") for name in names)
    ]


def name_override(message: str, argv: list[str]) -> str:
    """``message`` led by the one command-line override it is about, when it names no
    override's field path already: the override whose field name is a word of the
    message (``--config.warca.kernel=rbff`` and ``unknown kernel 'rbff'`` give
    ``config.warca.kernel: unknown kernel 'rbff'``); unchanged when none or several are."""
    overrides = _config_overrides(argv)
    if message.startswith("config."):
        return message
    for path in overrides:  # the message names its field already
        if re.search(rf"(?<![\w.]){re.escape(path.split('.', 1)[-1])}\b", message):
            return message
    words = set(re.findall(r"[A-Za-z_]\w*", message))
    named = [p for p in overrides if p.rsplit(".", 1)[-1] in words]
    return f"{named[0]}: {message}" if len(set(named)) == 1 else message


# A write that failed because of where it wrote, never a bug, wherever it was raised.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.ENAMETOOLONG})


# Errors about a file or folder, which they name: never led by a config override.
NAMES_ITS_FILE = (writes.WriteError, workdir_lock.WorkdirInUseError)


def for_the_user(error: BaseException) -> BaseException | None:
    """``error`` as the user is to read it, or None when it is a bug (its traceback shows).

    A ``USER_ERRORS`` exception raised by the project's own code; one of the project's
    own exception classes wherever it was raised (a worker process's, re-raised by the
    pool: ``WriteError``, ``WorkdirInUseError``, ``DamagedFileError``); an ``OSError``
    of a write that failed where it wrote (a full disk, a size limit, a read-only
    folder, a name too long: ``WRITE_ERRNOS``), as a ``WriteError`` naming its file.
    """
    if not isinstance(error, USER_ERRORS) or isinstance(error, RecursionError):
        return None
    if raised_by_the_project(error) or type(error).__module__.startswith("warca_jax."):
        return error
    if isinstance(error, OSError) and error.errno in WRITE_ERRNOS and error.filename:
        return writes.write_error(error.filename, error)
    return None


def one_line_errors(main):
    """``main`` whose bad-input errors end the process with one line, ``error: <message>``,
    on stderr and exit status 1 (see the module docstring): the errors ``for_the_user``
    keeps, unless ``--traceback`` is set. Any other exception propagates with its
    traceback."""

    def wrapped(argv):
        try:
            out = main(argv)
        except stops.Interrupted as e:
            stops.stop(e.signum)
        except KeyboardInterrupt:
            stops.stop(signal.SIGINT)
        except USER_ERRORS as e:
            shown = for_the_user(e)
            if _show_traceback() or shown is None:
                raise
            message = one_line(shown)
            if not isinstance(shown, NAMES_ITS_FILE):  # "the name ... is 300 bytes long"
                message = name_override(message, sys.argv)
            sys.stderr.write(f"error: {message}\n")
            sys.stderr.flush()
            sys.exit(1)
        if stops.RECEIVED:  # a signal that something caught on the way: still a stop
            stops.stop(stops.RECEIVED[0])
        return out

    return wrapped


# JAX's backend discovery logs, at INFO, every platform it could not start ("Unable to
# initialize backend 'tpu': ... libtpu.so" on every machine without a TPU): the first
# lines a user saw. Its warnings and errors still show.
QUIET_LOGGERS = ("jax._src.xla_bridge",)
DETERMINISTIC_XLA_FLAG = "--xla_gpu_deterministic_ops=true"


def reproducible_numerics() -> None:
    """Same seed, same result, and the CPU's float32 arithmetic, on a GPU too.

    On a GPU, XLA sums with atomics by default, in an order that changes from run to run
    (two fits with one seed gave W differing by 1e-3 relative on an H100, and XQDA's
    eigenvectors flipped sign), and float32 matrix products use TF32 (10-bit mantissa:
    distances off by 1e-2 relative). This appends ``--xla_gpu_deterministic_ops=true`` to
    ``XLA_FLAGS`` and sets ``jax_default_matmul_precision`` to ``highest``, in this process
    and (through the environment) in the worker processes it starts; each only where the
    user has not chosen: an ``XLA_FLAGS`` that names ``xla_gpu_deterministic_ops``, or a
    ``JAX_DEFAULT_MATMUL_PRECISION`` already set, is left as it is. It must run before JAX's
    first computation (XLA reads its flags when the backend starts); on a CPU both are
    no-ops. Every entry point calls it (``run``), and so do the tests.
    """
    xla_flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_deterministic_ops" not in xla_flags:
        os.environ["XLA_FLAGS"] = f"{xla_flags} {DETERMINISTIC_XLA_FLAG}".strip()
    if "JAX_DEFAULT_MATMUL_PRECISION" not in os.environ:
        os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = "highest"
        jax.config.update("jax_default_matmul_precision", "highest")


def check_environment() -> None:
    """Reads each of the project's environment variables once (the array and image size
    limits), so that a value it cannot use is refused in one line naming the variable
    before any work, and never taken later for a damaged file or a refused image.

    Raises:
      bounded_reads.EnvironmentSettingError: a variable set to an unusable value.
    """
    bounded_reads.max_array_bytes()
    image_files.max_image_pixels()


def run(main) -> None:
    """Runs ``main`` as ``absl.app.run`` does, with ``parse_flags`` and ``one_line_errors``,
    refusing positional arguments and unusable environment variables
    (``check_environment``), without JAX's backend-discovery INFO lines
    (``QUIET_LOGGERS``), and with ``reproducible_numerics``."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    reproducible_numerics()
    stops.stop_on_signals()

    def no_arguments(argv):
        if len(argv) > 1:  # every entry point takes flags only
            raise app.UsageError(f"unexpected arguments: {argv[1:]}")
        check_environment()
        return main(argv)

    app.run(one_line_errors(no_arguments), flags_parser=parse_flags)


def log_results(workdir: str) -> list[str]:
    """Logs where a run's results went (the files at the top of ``workdir``); returns them."""
    files = sorted(n for n in os.listdir(workdir) if os.path.isfile(os.path.join(workdir, n)))
    absl_logging.info("results in %s: %s", workdir, ", ".join(files))
    return files


# The measures on which a learned metric below Euclidean distance is worth a warning.
BELOW_BASELINE_MEASURES = ("rank1", "mAP")


def log_summary(results: dict) -> None:
    """Logs the mean over the splits of a run's results (results.json) with Euclidean
    distance's beside each measure when the run evaluated it (``eval.baseline``), and warns
    in one line when the method is below it on ``BELOW_BASELINE_MEASURES``."""
    mean = results["mean"]
    base = results.get("baseline_euclidean", {}).get("mean", {})
    compared = [k for k in mean if k in base and not k.endswith("seconds") and k != "num_skipped"]
    shown = ", ".join(
        f"{k} {v:.2f}" + (f" ({base[k]:.2f})" if k in compared else "") for k, v in mean.items()
    )
    n = results["num_splits"]
    over = f"{n} split" if n == 1 else f"{n} splits"
    note = " (Euclidean distance in brackets)" if compared else ""
    absl_logging.info("mean over %s%s: %s", over, note, shown)
    below = [k for k in BELOW_BASELINE_MEASURES if k in compared and mean[k] < base[k]]
    if below:
        absl_logging.warning(
            "%s scores below Euclidean distance on the same features: %s (mean over %s)",
            results.get("method", "the method"),
            ", ".join(f"{k} {mean[k]:.2f} < {base[k]:.2f}" for k in below),
            over,
        )
