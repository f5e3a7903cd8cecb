r"""The command line of the protocol: ``python -m experiments.protocol``.

  python -m experiments.protocol --config=configs/protocol.py:synthetic \
      --workdir=/tmp/protocol \
      [--num_workers=2] [--stage=all|cv|runs|report] [--num_shards=N --shard_index=I]

Config fields are overridden as ``--config.<field>=<value>`` (configs/protocol.py).
"""

import json
import os

from absl import flags, logging
from ml_collections.config_flags import config_flags

from warca_jax.protocol.runner import STAGES, run_protocol
from warca_jax.runs import cli

_CONFIG, _WORKDIR = cli.define_run_flags(
    "configs/protocol.py[:variant]", "Folder of the protocol's runs and reports."
)
_STAGE = flags.DEFINE_enum("stage", "all", STAGES, "Which stage to run.")
_WORKERS = flags.DEFINE_integer("num_workers", 1, "Local processes running jobs in parallel.")
_SHARDS = flags.DEFINE_integer("num_shards", 1, "Machines sharing the workdir.")
_SHARD = flags.DEFINE_integer("shard_index", 0, "This machine's shard, in [0, num_shards).")


def main(argv):
    del argv  # flags only (cli.run refuses arguments)
    results = run_protocol(
        _CONFIG.value,
        _WORKDIR.value,
        stage=_STAGE.value,
        num_workers=_WORKERS.value,
        num_shards=_SHARDS.value,
        shard_index=_SHARD.value,
        # the fields set on the command line: their requests are refused, not dropped
        explicit=tuple(config_flags.get_override_values(flags.FLAGS["config"])),
    )
    entries = [e for res in results.values() for e in res.values()]
    workdir = _WORKDIR.value
    if os.path.exists(os.path.join(workdir, "table2.md")):
        cli.log_results(workdir)
    else:  # a stage without the report, or a shard of the runs
        logging.info(
            "runs in %s; the tables and CMC plots: --stage=report", os.path.join(workdir, "runs")
        )
    print(
        json.dumps(
            {
                "workdir": _WORKDIR.value,
                "runs_done": sum(e["num_done"] for e in entries),
                "not_applicable": sum(e["status"] == "not_applicable" for e in entries),
            }
        )
    )


if __name__ == "__main__":
    cli.run(main)
