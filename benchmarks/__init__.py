"""Timing and cross-check scripts; their results are in benchmarks/RESULTS.md.

Each script runs from the repository's root as a module, e.g.
``python -m benchmarks.bench_penalty --lams=1e-3,1e-2``; its flags are absl flags
(``--help`` lists them). Results go to stdout; absl's log (the learners' progress) to
stderr, ``--verbosity=-1`` keeping only its warnings.
"""

import logging

# JAX's backend discovery logs, at INFO, every platform it could not start; absl shows
# INFO: quiet, as the entry points keep it (warca_jax.runs.cli.QUIET_LOGGERS).
logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
