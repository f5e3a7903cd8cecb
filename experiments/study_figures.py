r"""The CUHK03 study's figures and tables: ``warca_jax.studies.figures``.

  python -m experiments.study_figures --config=configs/study_figures.py[:variant] \
      --workdir=/tmp/figures
"""

import json
import os

from absl import logging

from warca_jax.runs import cli
from warca_jax.studies import figures

_CONFIG, _WORKDIR = cli.define_run_flags(
    "Path to configs/study_figures.py[:variant].", "Folder for the figures and tables."
)


def main(argv):
    del argv  # flags only (cli.run refuses arguments)
    results = figures.run(_CONFIG.value, _WORKDIR.value)
    print(
        json.dumps(
            {
                label: {k: round(row[k], 2) for k in ("rank1", "rank5", "rank10", "mAP")}
                for label, row in results["methods"].items()
            }
        )
    )
    workdir = _WORKDIR.value
    cli.log_results(workdir)
    logging.info("each fit's record in %s", os.path.join(workdir, "fits"))


if __name__ == "__main__":
    cli.run(main)
