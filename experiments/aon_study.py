r"""The AON vs Frobenius study (paper section 4.4, Fig. 2): ``warca_jax.studies.aon``.

python -m experiments.aon_study --config=configs/aon_study.py[:small] --workdir=/tmp/aon
"""

import os
import time

from absl import logging

from warca_jax.runs import cli
from warca_jax.studies import aon

_CONFIG, _WORKDIR = cli.define_run_flags(
    "Path to configs/aon_study.py[:variant].", "Folder for the study's outputs."
)


def main(argv):
    del argv  # flags only (cli.run refuses arguments)
    t0 = time.perf_counter()
    results = aon.run_study(_CONFIG.value, _WORKDIR.value)
    with open(os.path.join(_WORKDIR.value, "results.md")) as f:
        print(f.read())
    print(f"{results['runs_trained']} runs trained in {time.perf_counter() - t0:.1f}s")
    workdir = _WORKDIR.value
    cli.log_results(workdir)
    logging.info("one JSON record per run in %s", os.path.join(workdir, "runs"))


if __name__ == "__main__":
    cli.run(main)
