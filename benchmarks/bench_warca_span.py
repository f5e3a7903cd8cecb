"""A linear learner in the span of its training features against the full form, side by side.

With no more training images than features (VIPeR's 2,580-d colour + LBP descriptor on
632 training images, CUHK01's on 1,940, ORL's on 200), linear WARCA trains W = W' B on
the k <= N - 1 coordinates of the span of the centred training features
(``method.span``, the default) instead of all D; so does FRML (``--method=frml``). Per split
this script fits ``configs/<method>.py`` (WARCA linear, D' the paper's for the dataset,
lambda ``--lam``, or for WARCA chosen by the default rule when empty; step ``--eta``) with
``span`` True and False, one after the other, and
prints one JSON line each: the fit's seconds (its compilation included) and seconds per
step (the fit's last logged chunks), test rank-1 and mAP; then a table, mean ± std over
the splits, with the ratio of the two forms' times.

  python -m benchmarks.bench_warca_span --data=viper=PATH/VIPeR,cuhk01=PATH/CUHK01,orl \\
      [--method=warca] [--splits=10] [--lam=1e-4] [--eta=1e-2] [--cache_dir=/tmp/warca_cache]
"""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np
from absl import app, flags

from benchmarks import real_data
from warca_jax.io import config_files
from warca_jax.runs import defaults, pipeline

_DATA = flags.DEFINE_list("data", "orl", "orl,viper=PATH,cuhk01=PATH")
_METHOD = flags.DEFINE_enum("method", "warca", ("warca", "frml"), "the linear learner")
_SPLITS = flags.DEFINE_integer("splits", 10, "splits of each dataset")
_FIRST_SPLIT = flags.DEFINE_integer("first_split", 0, "the first split")
_LAM = flags.DEFINE_string("lam", "", "lambda ('': chosen per fit by the default rule)")
_ETA = flags.DEFINE_float("eta", 1e-2, "Adam's step size")
_CACHE_DIR = flags.DEFINE_string("cache_dir", "/tmp/warca_cache", "descriptor cache ('': none)")


def _config(name: str, span: bool):
    module = config_files.load_config_module(f"configs/{_METHOD.value}.py")
    base = module.get_config("linear" if _METHOD.value == "warca" else "default").method
    lam = float(_LAM.value) if _LAM.value else None
    if lam is None and _METHOD.value != "warca":
        lam = base.lam  # FRML's own L2 weight
    return defaults.overridden(
        base, dim=real_data.paper_dim(name), lam=lam, learning_rate=_ETA.value, span=span
    )


def main(argv) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    print(f"# {platform.node()}, {os.cpu_count()} CPUs", flush=True)
    rows = []
    for item in _DATA.value:
        name, _, path = item.partition("=")
        which = range(_FIRST_SPLIT.value, _FIRST_SPLIT.value + _SPLITS.value)
        for s, x, y, cams, scores in real_data.splits(name, path, which, _CACHE_DIR.value):
            for span in (True, False):
                t = time.perf_counter()
                cfg = _config(name, span)
                metric, hist = pipeline.fit_method(x, y, cfg, seed=s, cams=cams)
                seconds = time.perf_counter() - t
                rank1, m_ap = scores(metric)
                step_s = np.diff([r["seconds"] for r in hist[-5:]]).mean() / hist[0]["step"]
                row = dict(method=_METHOD.value, data=name, split=s, span=span, n=len(y),
                           d=x.shape[1], seconds=round(seconds, 2), step_ms=round(1e3 * step_s, 2),
                           lam=hist[-1].get("lam", _LAM.value), rank1=rank1, mAP=m_ap)  # fmt: skip
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("\n| data | splits | span: rank-1 / mAP | full: rank-1 / mAP | span: s a fit, ms a step "
          "| full | full / span |")  # fmt: skip
    print("| " + " | ".join(["---"] * 7) + " |")
    for name in dict.fromkeys(r["data"] for r in rows):
        cells = [name, str(sum(r["data"] == name and r["span"] for r in rows))]
        times = []
        for span in (True, False):
            part = [r for r in rows if r["data"] == name and r["span"] == span]
            a = np.asarray([(r["rank1"], r["mAP"]) for r in part])
            cells.append(f"{a[:, 0].mean():.2f} ± {a[:, 0].std():.2f} / {a[:, 1].mean():.2f}")
            times.append((np.mean([r["seconds"] for r in part]),
                          np.mean([r["step_ms"] for r in part])))  # fmt: skip
        cells += [f"{t:.1f} s, {ms:.2f} ms" for t, ms in times]
        cells.append(f"{times[1][0] / times[0][0]:.2f}x")
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    app.run(main)
