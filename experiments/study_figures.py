r"""The CUHK03 study's figures and tables: ``warca_jax.studies.figures``.

  python -m experiments.study_figures --config=configs/study_figures.py[:variant] \
      --workdir=/tmp/figures
"""

import json

from absl import app, flags
from ml_collections import config_flags

from warca_jax import cli
from warca_jax.studies import figures

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Path to configs/study_figures.py[:variant].", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder for the figures and tables.")
flags.mark_flags_as_required(["config", "workdir"])


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


if __name__ == "__main__":
    cli.run(main)
