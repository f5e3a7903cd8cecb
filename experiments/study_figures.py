r"""The CUHK03 study's figures and tables: ``warca_jax.studies.figures``.

  python -m experiments.study_figures --config=configs/study_figures.py[:variant] \
      --workdir=/tmp/figures
"""

import json
import os

from absl import app, logging

from warca_jax import cli
from warca_jax.studies import figures

_CONFIG, _WORKDIR = cli.define_run_flags(
    "Path to configs/study_figures.py[:variant].", "Folder for the figures and tables."
)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
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
    files = sorted(n for n in os.listdir(workdir) if os.path.isfile(os.path.join(workdir, n)))
    logging.info("results in %s: %s", workdir, ", ".join(files))
    logging.info("each fit's record in %s", os.path.join(workdir, "fits"))


if __name__ == "__main__":
    cli.run(main)
