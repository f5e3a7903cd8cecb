"""What every command-line entry point shares: flag parsing that explains a bad override.

``run(main)`` is ``absl.app.run(main)`` with one difference. A ``--config.a.b=v`` override
naming a field the config does not have makes ml_collections raise a bare
``AttributeError: 'b'`` from deep inside flag parsing; here it becomes one line that
names the override and lists the fields the section does have, and exit status 1, as
absl does for any other bad flag.
"""

from __future__ import annotations

import sys

from absl import app, flags
from ml_collections import config_dict
from ml_collections.config_flags import config_flags

from warca_jax import defaults


def define_run_flags(config_help: str, workdir_help: str):
    """The ``--config`` (a config file, locked) and ``--workdir`` flags every entry point
    takes, both required; returns their flag holders."""
    config = config_flags.DEFINE_config_file("config", None, config_help, lock_config=True)
    workdir = flags.DEFINE_string("workdir", None, workdir_help)
    flags.mark_flags_as_required(["config", "workdir"])
    return config, workdir


def _config_flag_names() -> list[str]:
    return [
        name
        for name, flag in flags.FLAGS._flags().items()  # noqa: SLF001 - absl has no public list
        if isinstance(flag.parser, config_flags.ConfigFileFlagParser)
    ]


def _unknown_field(argv: list[str]) -> str | None:
    """The first ``--<config>.path=value`` of ``argv`` whose path the config lacks, explained."""
    names = _config_flag_names()
    files = {}
    for arg in argv[1:]:
        for name in names:
            if arg.startswith(f"--{name}="):
                files[name] = arg.split("=", 1)[1]
    for arg in argv[1:]:
        for name in names:
            if not arg.startswith(f"--{name}.") or name not in files:
                continue
            path = arg[len(name) + 3 :].split("=", 1)[0]
            try:
                config = defaults.load_config(files[name])
            except Exception:  # noqa: BLE001 - the file's own error is reported by absl
                return None
            node, done = config, []
            for part in path.split("."):
                if isinstance(node, config_dict.ConfigDict) and part in node:
                    node = node[part]
                    done.append(part)
                    continue
                section = ".".join([name, *done])
                if not isinstance(node, config_dict.ConfigDict):
                    return (
                        f"{arg}: {section} is a value ({node!r}), not a section: it has no "
                        f"field {part!r}"
                    )
                return (
                    f"{arg}: unknown config field {part!r} in {section}; its fields are "
                    f"{sorted(node.keys())}"
                )
    return None


def parse_flags(argv: list[str]) -> list[str]:
    """``absl.app.parse_flags_with_usage`` that explains an unknown config field."""
    try:
        return app.parse_flags_with_usage(argv)
    except (AttributeError, KeyError) as e:
        reason = _unknown_field(argv) or f"a --config override failed: {e}"
        sys.stderr.write(f"FATAL Flags parsing error: {reason}\n")
        sys.stderr.write("Pass --helpshort or --helpfull to see help on flags.\n")
        sys.exit(1)


def run(main) -> None:
    """Runs ``main`` as ``absl.app.run`` does, with ``parse_flags``."""
    app.run(main, flags_parser=parse_flags)
