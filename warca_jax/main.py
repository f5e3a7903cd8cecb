r"""Command-line entry point: learn a metric and evaluate it on every split.

  python -m warca_jax.main --config=configs/warca.py --workdir=/tmp/warca \
      [--config.method.lam=1e-3] [--config.data.name=npz --config.data.path=f.npz]

Everything happens in ``warca_jax.train.train_and_evaluate``; this file only
parses flags.
"""

import json

import jax
from absl import app, flags, logging
from ml_collections import config_flags

from warca_jax import train

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Path to a config file (configs/*.py[:variant]).", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder for the run's outputs.")
_CACHE = flags.DEFINE_string(
    "compilation_cache_dir",
    "",
    "If set, JAX's persistent compilation cache: later runs reuse compiled programs.",
)
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if _CACHE.value:
        jax.config.update("jax_compilation_cache_dir", _CACHE.value)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    results = train.train_and_evaluate(_CONFIG.value, _WORKDIR.value)
    summary = {k: round(v, 2) for k, v in results["mean"].items()}
    logging.info("mean over %d splits: %s", results["num_splits"], json.dumps(summary))
    print(json.dumps({"mean": summary, "std": {k: round(v, 2) for k, v in results["std"].items()}}))


if __name__ == "__main__":
    app.run(main)
