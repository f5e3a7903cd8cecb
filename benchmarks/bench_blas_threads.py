r"""Workers side by side and their BLAS threads: the same fits run as the protocol's
``--num_workers`` run them, with each worker's BLAS at its default (a thread per core)
and at its share of the cores (``protocol.pool.blas_threads``, what the protocol sets).

``--workers`` processes each fit the same method config on the same training images of a
split at once (as a protocol's workers fit one method's splits), first with the BLAS
thread variables unset, then set to cores / workers; it prints each process's fit
seconds, their mean per setting, and the ratio.

  python -m benchmarks.bench_blas_threads --viper=PATH/VIPeR --label=mlapg \
      --set=max_iters=20 [--workers=2] [--cache_dir=DIR]
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

from absl import app, flags

from warca_jax.protocol import pool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_VIPER = flags.DEFINE_string("viper", "", "the VIPeR folder (cam_a/, cam_b/)")
_LABEL = flags.DEFINE_string("label", "mlapg", "the method config's label, e.g. mlapg, xqda")
_SET = flags.DEFINE_list("set", [], "method fields field=value (Python literals)")
_WORKERS = flags.DEFINE_integer("workers", 2, "processes fitting at once")
_SPLIT = flags.DEFINE_integer("split", 0, "the split whose training images are fitted")
_CACHE_DIR = flags.DEFINE_string("cache_dir", "/tmp/warca_cache", "descriptor cache ('': none)")
_CHILD = flags.DEFINE_bool("child", False, "internal: one fit, its seconds as JSON")


def one_fit() -> dict:
    """The fit of one process: the method config on the split's training images."""
    import ast

    from benchmarks import real_data
    from warca_jax.io import config_files

    ds = real_data.read("viper", _VIPER.value, cache_dir=_CACHE_DIR.value)
    label, _, variant = _LABEL.value.partition(":")
    module = config_files.load_config_module(f"configs/{label}.py")
    cfg = module.get_config(variant) if variant else module.get_config()
    method = cfg.method
    with method.unlocked():
        if "dim" in method:
            method.dim = real_data.paper_dim("viper")
        for item in _SET.value:
            field, _, value = item.partition("=")
            setattr(method, field, ast.literal_eval(value))
    train = ds.splits[_SPLIT.value].train_idx
    _, _, seconds = real_data.fit(ds, train, method, seed=0)
    return {"seconds": seconds}


def run_side_by_side(threads: int | None) -> list[float]:
    """Each worker's fit seconds, the workers started at once; ``threads`` None: the BLAS
    variables unset (each library's default), else set to it."""
    env = {k: v for k, v in os.environ.items() if k not in pool.BLAS_THREAD_VARS}
    if threads is not None:
        env.update({k: str(threads) for k in pool.BLAS_THREAD_VARS})
    argv = [a for a in sys.argv[1:] if not a.startswith("--child")]
    cmd = [sys.executable, "-m", "benchmarks.bench_blas_threads", "--child", *argv]
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(_WORKERS.value)
    ]
    out = []
    for p in procs:
        stdout, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"a worker failed (exit {p.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1])["seconds"])
    return out


def main(argv) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if not _VIPER.value:
        raise SystemExit("--viper=PATH/VIPeR is needed")
    if _CHILD.value:
        print(json.dumps(one_fit()))
        return
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    share = pool.blas_threads(_WORKERS.value)
    rows = {}
    for name, threads in (("default (a thread per core)", None), (f"shared ({share})", share)):
        start = time.perf_counter()
        seconds = run_side_by_side(threads)
        wall = time.perf_counter() - start
        rows[name] = sum(seconds) / len(seconds)
        print(
            f"{_LABEL.value} {' '.join(_SET.value)}, {_WORKERS.value} workers, BLAS {name}: "
            f"fits {', '.join(f'{s:.1f}' for s in seconds)} s, mean {rows[name]:.1f} s, "
            f"wall {wall:.1f} s",
            flush=True,
        )
    default, shared = rows.values()
    print(f"default / shared: {default:.1f} / {shared:.1f} s = {default / shared:.2f}x")


if __name__ == "__main__":
    app.run(main)
