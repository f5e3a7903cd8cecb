"""Timing and cross-check scripts; their results are in benchmarks/RESULTS.md.

Each script runs from the repository's root as a module, e.g.
``python -m benchmarks.bench_penalty --lams=1e-3,1e-2``; its flags are absl flags
(``--help`` lists them). Results go to stdout; absl's log (the learners' progress) to
stderr, ``--verbosity=-1`` keeping only its warnings.
"""

import logging
import sys

# JAX's backend discovery logs, at INFO, every platform it could not start; absl shows
# INFO: quiet, as the entry points keep it (warca_jax.cli.QUIET_LOGGERS).
logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)

# absl's help flags (``-?`` is --help's short name).
_HELP_FLAGS = ("help", "helpshort", "helpfull", "helpxml", "?")


def _asks_for_help(args) -> bool:
    """Whether the command line ``args`` holds a help flag (before any ``--``)."""
    for arg in args:
        if arg == "--":
            return False
        name, _, value = arg.lstrip("-").partition("=")
        if arg.startswith("-") and name in _HELP_FLAGS and value.lower() not in ("false", "0"):
            return True
    return False


def run(main) -> None:
    """``absl.app.run(main)``, except that ``--help`` exits 0 once the flags are printed.

    absl exits 1 there, the status of a failure, so a loop over the scripts could not
    tell a script that lists its flags from one that no longer imports.
    """
    from absl import app  # here: bench_vs_reference times its imports from its first line

    try:
        app.run(main)
    except SystemExit as exit_:
        if exit_.code == 1 and _asks_for_help(sys.argv[1:]):
            raise SystemExit(0) from None
        raise
