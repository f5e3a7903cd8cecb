r"""Times the protocol: a Table 2 row by stage and by method, and the share of each job in
its fit; optionally against another checkout, side by side on the same machine.

  python -m benchmarks.bench_protocol --row=reduced --viper=PATH/VIPeR
  python -m benchmarks.bench_protocol --row=viper --viper=PATH/VIPeR --num_workers=2
  python -m benchmarks.bench_protocol --row=cuhk01 --cuhk01=PATH/CUHK01
  python -m benchmarks.bench_protocol --row=synthetic --baseline=/tmp/base

Rows: ``viper`` and ``cuhk01`` are the documented commands of configs/protocol.py;
``reduced`` is VIPeR's row cut to a few minutes on 2 cores (WARCA's two forms, KISSME and
Euclidean on 2 splits, a 3 x 3 lambda x eta grid cross-validated on 2 splits);
``synthetic`` the built-in synthetic protocol's WARCA columns.

Each stage (cv, runs, report) is its own command, timed from outside. Per method the
script reads the workdir: the jobs' wall time (``job_seconds``; a grid's ``timing.json``)
and their fits' (``train_seconds``), so the share of a job spent in its fit, and the
cross-validation's choice. ``--baseline=DIR`` runs the same row first with the checkout
in DIR (e.g. ``git worktree add /tmp/base <commit>``), then with this one, and prints the
ratio of their stage times and whether they chose the same points. ``--analyze=WORKDIR``
only reads a finished workdir. ``--extra=FLAG`` (repeated) adds a flag to the protocol's.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VIPER_METHODS = (
    "('warca:chi2','warca:linear','rpcca:chi2','rpcca','mlapg','frml',"
    "'svmml','svmml:released','lfda:chi2','lfda','kissme','xqda','nn')"
)
CUHK01_METHODS = (
    "('warca:chi2','warca:linear','rpcca:chi2','rpcca','mlapg','frml',"
    "'svmml','lfda:chi2','lfda','kissme','xqda','nn')"
)
FRML_GRID = "{'frml': {'lams': (1e-2,), 'etas': (1e-3,3e-3,1e-2,3e-2,1e-1,3e-1)}}"

flags.DEFINE_enum("row", "reduced", ("viper", "cuhk01", "reduced", "synthetic"), "the row timed")
flags.DEFINE_string("viper", "", "the VIPeR folder (cam_a/, cam_b/)")
flags.DEFINE_string("cuhk01", "", "the CUHK01 folder (campus/)")
flags.DEFINE_integer("num_workers", 1, "the protocol's worker processes")
flags.DEFINE_string("baseline", "", "another checkout to run first")
flags.DEFINE_string("workdir", "", "parent of the workdirs (default: a temp dir)")
flags.DEFINE_multi_string("extra", [], "more protocol flags")
flags.DEFINE_string("analyze", "", "only read this finished workdir")
FLAGS = flags.FLAGS


def row_flags(row: str, args) -> list[str]:
    """The protocol's flags for ``row`` (the documented commands of configs/protocol.py)."""
    if row == "viper":
        return [
            "--config=configs/protocol.py:viper",
            f"--config.paths={{'viper': '{args.viper}'}}",
            f"--config.methods={VIPER_METHODS}",
            f"--config.cv.grids={FRML_GRID}",
        ]
    if row == "cuhk01":
        return [
            "--config=configs/protocol.py:cuhk01",
            f"--config.paths={{'cuhk01': '{args.cuhk01}'}}",
            f"--config.methods={CUHK01_METHODS}",
            "--config.cv.lams=(1e-6,1e-5,1e-4,1e-3)",
            "--config.cv.etas=(1e-2,)",
        ]
    if row == "reduced":
        return [
            "--config=configs/protocol.py:viper",
            f"--config.paths={{'viper': '{args.viper}'}}",
            "--config.methods=('warca:chi2','warca:linear','kissme','nn')",
            "--config.data.num_splits=2",
            "--config.cv.num_splits=2",
            "--config.cv.lams=(1e-5,1e-4,1e-3)",
            "--config.cv.etas=(1e-3,1e-2,1e-1)",
        ]
    if row == "synthetic":
        return [
            "--config=configs/protocol.py:synthetic",
            "--config.methods=('warca:chi2','warca:linear','nn')",
        ]
    raise SystemExit(f"unknown row {row!r}")


def run_stages(code: str, row: list[str], workdir: str, num_workers: int, log) -> dict:
    """Runs the cv, runs and report stages with the protocol flags ``row`` and the checkout
    in ``code``; their seconds."""
    seconds = {}
    for stage in ("cv", "runs", "report"):
        cmd = [
            sys.executable, "-m", "experiments.protocol", *row, f"--workdir={workdir}",
            f"--stage={stage}", f"--num_workers={num_workers}",
        ]  # fmt: skip
        t0 = time.perf_counter()
        with open(log, "a") as out:
            subprocess.run(cmd, cwd=code, check=True, stdout=out, stderr=subprocess.STDOUT)
        seconds[stage] = time.perf_counter() - t0
        print(f"  {stage}: {seconds[stage]:.1f} s", flush=True)
    return seconds


def _read(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def analyze(workdir: str) -> dict:
    """Per stage and method: jobs, job seconds, fit seconds; the CV choices; rank-1."""
    out = {"cv": {}, "runs": {}, "chosen": {}, "rank1": {}}
    for folder in sorted(glob.glob(os.path.join(workdir, "cv", "*", "*"))):
        label = os.path.basename(folder)
        results = [_read(p) for p in glob.glob(os.path.join(folder, "split_*", "*", "result.json"))]
        fit = sum(r["train_seconds"] for r in results)
        timing = os.path.join(folder, "timing.json")
        if os.path.exists(timing):  # one job for the whole grid
            t = _read(timing)
            job, jobs, fit = t["job_seconds"], 1, t["train_seconds"]
            steps = sum(
                r["points"] * (r["step"] - (t["rungs"][i - 1]["step"] if i else 0))
                for i, r in enumerate(t["rungs"])
            )
        else:
            have = [r["job_seconds"] for r in results if "job_seconds" in r]
            job = sum(have) if len(have) == len(results) else None
            jobs, steps = len(results), None
        out["cv"][label] = dict(jobs=jobs, points=len(results), job_s=job, fit_s=fit, steps=steps)
        sel = os.path.join(folder, "selected.json")
        if os.path.exists(sel):
            s = _read(sel)
            out["chosen"][label] = (s["lam"], s["learning_rate"], round(s["mean"], 2))
    for folder in sorted(glob.glob(os.path.join(workdir, "runs", "*", "*"))):
        label = os.path.basename(folder)
        results = [_read(p) for p in glob.glob(os.path.join(folder, "split_*", "split_*.json"))]
        have = [r["job_seconds"] for r in results if "job_seconds" in r]
        out["runs"][label] = dict(
            jobs=len(results),
            job_s=sum(have) if have and len(have) == len(results) else None,
            fit_s=sum(r.get("train_seconds", 0.0) for r in results),
        )
    res = os.path.join(workdir, "results.json")
    if os.path.exists(res):
        for ds, methods in _read(res).items():
            for label, entry in methods.items():
                if isinstance(entry, dict) and "rank1" in entry:
                    r = entry["rank1"]
                    out["rank1"][f"{ds} {label}"] = f"{r['mean']:.2f} ± {r['std']:.2f}"
    return out


def _fmt(v, spec=".1f") -> str:
    return "-" if v is None else format(v, spec)


def print_table(name: str, stages: dict | None, a: dict) -> None:
    print(f"\n## {name}")
    if stages:
        total = sum(stages.values())
        print(" | ".join(f"{k} {v:.1f} s" for k, v in stages.items()) + f" | total {total:.1f} s")
    print("| stage | method | jobs | job seconds | fit seconds | fit share | steps |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for stage in ("cv", "runs"):
        for label, r in a[stage].items():
            share = r["fit_s"] / r["job_s"] if r["job_s"] else None
            print(
                f"| {stage} | {label} | {r['jobs']} | {_fmt(r['job_s'])} | {_fmt(r['fit_s'])} "
                f"| {_fmt(share, '.2f')} | {_fmt(r.get('steps'), 'd')} |"
            )
    for label, chosen in a["chosen"].items():
        print(f"chosen {label}: lambda {chosen[0]:g}, eta {chosen[1]:g}, mean {chosen[2]}")
    for key, v in a["rank1"].items():
        print(f"rank-1 {key}: {v}")


def main(argv) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    args = FLAGS
    if args.analyze:
        print_table(args.analyze, None, analyze(args.analyze))
        return
    if args.row in ("viper", "reduced") and not args.viper:
        raise SystemExit(f"--row={args.row} needs --viper=PATH/VIPeR")
    if args.row == "cuhk01" and not args.cuhk01:
        raise SystemExit("--row=cuhk01 needs --cuhk01=PATH/CUHK01")
    row = row_flags(args.row, args) + args.extra
    parent = args.workdir or tempfile.mkdtemp(prefix="bench_protocol_")
    os.makedirs(parent, exist_ok=True)
    runs = [("baseline", os.path.abspath(args.baseline))] if args.baseline else []
    runs.append(("this checkout", ROOT))
    found = {}
    for name, code in runs:
        workdir = os.path.join(parent, "baseline" if name == "baseline" else "current")
        print(f"{name} ({code}) -> {workdir}", flush=True)
        stages = run_stages(code, row, workdir, args.num_workers, workdir + ".log")
        found[name] = (stages, analyze(workdir))
        print_table(f"{name}: {args.row}, {args.num_workers} workers", *found[name])
    if len(found) == 2:
        (s0, a0), (s1, a1) = found["baseline"], found["this checkout"]
        print("\n## baseline / this checkout")
        for stage in s0:
            print(f"{stage}: {s0[stage]:.1f} s / {s1[stage]:.1f} s = {s0[stage] / s1[stage]:.2f}x")
        t0, t1 = sum(s0.values()), sum(s1.values())
        print(f"total: {t0:.1f} s / {t1:.1f} s = {t0 / t1:.2f}x")
        for label in a0["chosen"]:
            same = a0["chosen"][label][:2] == a1["chosen"].get(label, (None, None))[:2]
            print(f"{label}: chose {a0['chosen'][label]} / {a1['chosen'].get(label)}: "
                  f"{'same' if same else 'DIFFERENT'}")  # fmt: skip
        for key in a0["rank1"]:
            print(f"rank-1 {key}: {a0['rank1'][key]} / {a1['rank1'].get(key)}")
    print(json.dumps({"benchmark": "protocol", "row": args.row, "workdirs": parent}))


if __name__ == "__main__":
    app.run(main)
