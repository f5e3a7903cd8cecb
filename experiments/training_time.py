r"""Test rank-1 against training time (the paper's Fig. 3): ``warca_jax.studies.training_time``.

  python -m experiments.training_time --config=configs/training_time.py[:small] \
      --workdir=/tmp/training_time
"""

import os
import time

from absl import logging

from warca_jax.runs import cli
from warca_jax.studies import training_time

_CONFIG, _WORKDIR = cli.define_run_flags(
    "Path to configs/training_time.py[:variant].", "Folder for the study's outputs."
)


def main(argv):
    del argv  # flags only (cli.run refuses arguments)
    t0 = time.perf_counter()
    results = training_time.run_study(_CONFIG.value, _WORKDIR.value)
    for name, res in results["methods"].items():
        m = res["mean"]
        print(
            f"{name}: rank-1 {m['rank1'][-1]:.1f} after {m['seconds'][-1]:.2f}s of training "
            f"({m['step'][-1]} steps); compilation ~{res['compile_seconds_estimate']:.2f}s"
        )
    print(f"study done in {time.perf_counter() - t0:.1f}s")
    workdir = _WORKDIR.value
    cli.log_results(workdir)
    logging.info("each method's per-split curves in %s", os.path.join(workdir, "curves"))


if __name__ == "__main__":
    cli.run(main)
