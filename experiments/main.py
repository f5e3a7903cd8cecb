r"""Command-line entry point: learn a metric and evaluate it on every split.

  python -m experiments.main --config=configs/warca.py --workdir=/tmp/warca \
      [--config.method.lam=1e-3] [--config.data.name=npz --config.data.path=f.npz]

Everything happens in ``warca_jax.runs.pipeline.train_and_evaluate``; this file only
parses flags.
"""

import json
import os

import jax
from absl import flags, logging
from ml_collections.config_flags import config_flags

from warca_jax.runs import cli, pipeline

_CONFIG, _WORKDIR = cli.define_run_flags(
    "Path to a config file (configs/*.py[:variant]).", "Folder for the run's outputs."
)
_CACHE = flags.DEFINE_string(
    "compilation_cache_dir",
    "",
    "If set, JAX's persistent compilation cache: later runs reuse compiled programs.",
)
_DISTRIBUTED = flags.DEFINE_bool(
    "distributed",
    False,
    "Call jax.distributed.initialize() first, so that the device mesh spans every host "
    "running this command (Cloud TPU, SLURM and Open MPI find their peers; elsewhere give "
    "--coordinator_address, --num_processes and --process_id). Process 0 writes "
    "--workdir, process i > 0 its copy in --workdir/process_i (no two write one file).",
)
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "--distributed: host:port of process 0 (default: detected)."
)
_NUM_PROCESSES = flags.DEFINE_integer(
    "num_processes", None, "--distributed: number of processes (default: detected)."
)
_PROCESS_ID = flags.DEFINE_integer(
    "process_id", None, "--distributed: this process's index (default: detected)."
)


def main(argv):
    del argv  # flags only (cli.run refuses arguments)
    if _DISTRIBUTED.value:
        jax.distributed.initialize(
            coordinator_address=_COORDINATOR.value,
            num_processes=_NUM_PROCESSES.value,
            process_id=_PROCESS_ID.value,
        )
        logging.info(
            "process %d of %d; %d devices in all",
            jax.process_index(),
            jax.process_count(),
            jax.device_count(),
        )
    if _CACHE.value:
        jax.config.update("jax_compilation_cache_dir", _CACHE.value)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    workdir = _WORKDIR.value
    if jax.process_index() > 0:
        workdir = os.path.join(workdir, f"process_{jax.process_index()}")
    # D' follows the data (the paper's D' on its datasets, at most the features') unless
    # the command line sets it
    auto_dim = "method.dim" not in config_flags.get_override_values(flags.FLAGS["config"])
    results = pipeline.train_and_evaluate(_CONFIG.value, workdir, auto_dim=auto_dim)
    cli.log_summary(results)  # the mean, Euclidean distance's beside it
    summary = {k: round(v, 2) for k, v in results["mean"].items()}
    shown = ("results.json", "cmc.png", "curves.png", "metrics.jsonl", "config.json")
    last = results["num_splits"] - 1
    logging.info(
        "results in %s: %s, and per split split_{0..%d}.json, model_split{0..%d}.npz",
        workdir,
        ", ".join(n for n in shown if os.path.exists(os.path.join(workdir, n))),
        last,
        last,
    )
    print(json.dumps({"mean": summary, "std": {k: round(v, 2) for k, v in results["std"].items()}}))


if __name__ == "__main__":
    cli.run(main)
