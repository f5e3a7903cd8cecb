"""The way a learner's setting travels through the code, traced on a real run of the main job.

Runs ``train_and_evaluate`` on a config file (by default WARCA's small variant, whose
lambda is chosen by the rule) under ``sys.setprofile`` and records every call, in the
repository's code, of a function that is handed the method section (a ConfigDict holding
``--field``) or an argument named ``--field`` or one of ``--aliases``: the files such a
call enters, in the order of their first visit, from loading the config file to the first
trace of the training step (``--stop``). It prints the files, the calls' file sequence and
how often the walk comes back to a file it had left. A reading aid for the package's layout
(docs/layout.md), not a timing.

  python -m benchmarks.trace_setting
  python -m benchmarks.trace_setting --config=configs/warca.py:small --field=lam
"""

from __future__ import annotations

import os
import sys
import tempfile

import ml_collections
from absl import app, flags

from warca_jax.io import config_files
from warca_jax.runs import pipeline

flags.DEFINE_string("config", "configs/warca.py:small", "the config file (and variant) run")
flags.DEFINE_string("field", "lam", "the method section's field followed")
flags.DEFINE_list("aliases", ["hyper"], "argument names that carry the field's value too")
flags.DEFINE_string("stop", "warca/step.py:step", "file suffix:function at which the walk ends")
FLAGS = flags.FLAGS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _carries(frame, field: str, names: set[str]) -> bool:
    code = frame.f_code
    for name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
        if name in names:
            return True
        value = frame.f_locals.get(name)
        if isinstance(value, ml_collections.ConfigDict) and field in value:
            return True
    return False


def trace(spec: str, field: str, aliases: list[str], stop: str) -> list[str]:
    """The files entered by calls that carry ``field``, in call order (repeats collapsed)."""
    stop_file, _, stop_function = stop.partition(":")
    names = {field, *aliases}
    walk, done = [], [False]

    def profile(frame, event, arg):
        if done[0] or event != "call":
            return
        path = frame.f_code.co_filename
        if not path.startswith(ROOT) or os.sep + "benchmarks" + os.sep in path:
            return
        rel = os.path.relpath(path, ROOT)
        if rel.endswith(stop_file) and frame.f_code.co_name == stop_function:
            walk.append(rel)
            done[0] = True
        elif _carries(frame, field, names) and (not walk or walk[-1] != rel):
            walk.append(rel)

    with tempfile.TemporaryDirectory() as workdir:
        sys.setprofile(profile)
        try:
            config = config_files.load_config(spec)
            config.unlock()
            config.data.num_splits = 1
            config.lock()
            pipeline.train_and_evaluate(config, workdir)
        finally:
            sys.setprofile(None)
    return walk


def main(argv):
    del argv
    walk = trace(FLAGS.config, FLAGS.field, FLAGS.aliases, FLAGS.stop)
    files, left, returns = [], set(), 0
    for i, rel in enumerate(walk):
        if rel not in files:
            files.append(rel)
        elif rel in left:
            returns += 1
        if i and walk[i - 1] != rel:
            left.add(walk[i - 1])
    print(f"{FLAGS.config}: the way of method.{FLAGS.field} to {FLAGS.stop}")
    for n, rel in enumerate(files, 1):
        print(f"  {n:2d}. {rel}")
    print(
        f"{len(files)} files, {len(walk)} calls' files in sequence, "
        f"{returns} returns to a file left"
    )


if __name__ == "__main__":
    app.run(main)
