"""The way a learner's setting travels through the code, traced on a real run of the main job.

Runs ``train_and_evaluate`` on a config file (by default WARCA's small variant, whose
lambda is chosen by the rule) under ``sys.setprofile`` and records every call, in the
repository's code, of a function that is handed the method section (a ConfigDict holding
``--field``) or an argument named ``--field`` or one of ``--aliases``: the files such a
call enters, in the order of their first visit, from loading the config file to the first
trace of the training step (``--stop``). It prints the files, the calls' file sequence and
how often the walk comes back to a file it had left. A reading aid for the package's layout
(docs/layout.md), not a timing. With ``--against=REV`` the same walk is traced on a
checkout of commit REV too (a temporary git worktree, this script run there), printed side
by side with the ratio of the file counts.

  python -m benchmarks.trace_setting
  python -m benchmarks.trace_setting --config=configs/warca.py:small --field=lam
  python -m benchmarks.trace_setting --against=288d21e
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile

import ml_collections
from absl import app, flags

flags.DEFINE_string("config", "configs/warca.py:small", "the config file (and variant) run")
flags.DEFINE_string("field", "lam", "the method section's field followed")
flags.DEFINE_list("aliases", ["hyper"], "argument names that carry the field's value too")
flags.DEFINE_string("stop", "warca/step.py:step", "file suffix:function at which the walk ends")
flags.DEFINE_string("against", None, "a git revision whose walk is traced side by side")
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


def _module(*names: str):
    """The first of ``names`` whose file is in this checkout: the package's modules moved
    between rooms (``warca_jax.io.config_files`` was ``warca_jax.config_files``), and
    ``--against`` runs this script on older checkouts."""
    for name in names:
        if os.path.exists(os.path.join(ROOT, *name.split(".")) + ".py"):
            return importlib.import_module(name)
    raise ModuleNotFoundError(f"none of {names} in {ROOT}")


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

    config_files = _module("warca_jax.io.config_files", "warca_jax.config_files")
    pipeline = _module("warca_jax.runs.pipeline", "warca_jax.pipeline")
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


def _traced_at(rev: str) -> str:
    """This script's report on a checkout of ``rev`` (a temporary git worktree)."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "tree")
        git = ["git", "-C", ROOT]
        subprocess.run([*git, "worktree", "add", "--detach", "-q", tree, rev], check=True)
        try:
            os.makedirs(os.path.join(tree, "benchmarks"), exist_ok=True)
            shutil.copy(os.path.abspath(__file__), os.path.join(tree, "benchmarks"))
            argv = [sys.executable, os.path.join("benchmarks", os.path.basename(__file__))]
            for name in ("config", "field", "stop"):
                argv.append(f"--{name}={FLAGS[name].value}")
            argv.append(f"--aliases={','.join(FLAGS.aliases)}")
            env = {**os.environ, "PYTHONPATH": tree}
            out = subprocess.run(
                argv, cwd=tree, env=env, check=True, capture_output=True, text=True
            ).stdout
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", tree], check=True)
    return out


def _report(walk: list[str]) -> tuple[str, int]:
    files, left, returns = [], set(), 0
    for i, rel in enumerate(walk):
        if rel not in files:
            files.append(rel)
        elif rel in left:
            returns += 1
        if i and walk[i - 1] != rel:
            left.add(walk[i - 1])
    lines = [f"{FLAGS.config}: the way of method.{FLAGS.field} to {FLAGS.stop}"]
    lines += [f"  {n:2d}. {rel}" for n, rel in enumerate(files, 1)]
    lines.append(
        f"{len(files)} files, {len(walk)} calls' files in sequence, "
        f"{returns} returns to a file left"
    )
    return "\n".join(lines), len(files)


def main(argv):
    del argv
    here, num_files = _report(trace(FLAGS.config, FLAGS.field, FLAGS.aliases, FLAGS.stop))
    if FLAGS.against is None:
        print(here)
        return
    there = _traced_at(FLAGS.against).strip()
    before = int(there.splitlines()[-1].split()[0])
    print(f"at {FLAGS.against}:\n{there}\n\nhere:\n{here}\n")
    print(f"files here / at {FLAGS.against}: {num_files} / {before} = {num_files / before:.2f}")


if __name__ == "__main__":
    app.run(main)
