"""The lambda rule's successive halving against the rule at the end of training.

A default WARCA fit (``lam`` None) chooses lambda on people held out of its training set
(``warca_jax.methods.warca.lam_select``): the lambdas of ``lam_grid`` train on the rest
as one ``GridFit`` and are compared at the rungs of ``lam_select.rungs``, the losers
stopped there. Per split (or, for the synthetic problem shared with the C++ release, per
training seed) and WARCA form, this script trains every lambda on the training part to
the end instead, scoring the held-out people at each rung and at the end, so that one
training gives both choices:

* **end**: the rule with every lambda trained to ``num_iters`` (the rule as it was);
* **halving**: the rule through the rungs (``lam_select.halve``, as a default fit runs it);

with the held-out fits' seconds each way (halving: each lambda's seconds up to the rung
where it stopped, with the held-out scoring), the whole-training-set fit at each chosen
lambda (its seconds, test rank-1 and mAP), and the cost of a default fit over a fit at a
given lambda, (held-out seconds + fit seconds) / fit seconds. It prints a JSON line per
split and form, then a table per dataset and form.

  python -m benchmarks.bench_lam_rule --data=reference,orl,viper=PATH/VIPeR,\\
      cuhk01=PATH/CUHK01 --forms=chi2 [--splits=10] [--first_split=0] [--ref_seeds=1,2]
"""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np
from absl import app, flags

from benchmarks import real_data
from warca_jax import datasets, evaluation
from warca_jax.io import config_files
from warca_jax.methods import held_out, warca
from warca_jax.methods.warca import config as warca_config
from warca_jax.methods.warca import lam_select
from warca_jax.runs import defaults

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_DATA = flags.DEFINE_list(
    "data", "main,reference,orl", "main (the main job's data),reference,orl,viper=PATH,cuhk01=PATH"
)
_FORMS = flags.DEFINE_list("forms", "chi2", "WARCA forms: chi2 (the kernel form) or linear")
_SPLITS = flags.DEFINE_integer("splits", 10, "splits of each real dataset")
_FIRST_SPLIT = flags.DEFINE_integer("first_split", 0, "the first split")
_REF_SEEDS = flags.DEFINE_list("ref_seeds", "1,2", "training seeds of the reference problem")
_CACHE_DIR = flags.DEFINE_string("cache_dir", "/tmp/warca_cache", "descriptor cache ('': none)")


def held_out_trajectory(x, y, cams, cfg, seed):
    """Every lambda of ``cfg.lam_grid`` trained on the training part to the end as one
    ``GridFit``, scored on the held-out people at each rung and at the end.

    Returns (grid, rungs, {step: {point: APs}}, {step: {point: seconds so far}}), or None
    when nothing can be held out.
    """
    grid = tuple(float(v) for v in cfg.lam_grid)
    held = held_out.split(y, cfg.lam_val_fraction, seed=seed)
    if isinstance(held, str):
        return None
    tr, va = held.train, held.val
    c_tr, c_va = (None, None) if cams is None else (cams[tr], cams[va])
    points = warca.GridFit(
        x[tr], y[tr], cfg, [(lam, cfg.learning_rate) for lam in grid], seed=seed, cams=c_tr
    )
    rungs = lam_select.rungs(int(cfg.num_iters), int(cfg.log_every), len(grid))
    steps = sorted({s for s, _ in rungs} | {int(cfg.num_iters)})
    aps, seconds = {}, {}
    for step in steps:
        points.advance(step)
        aps[step], seconds[step] = {}, {}
        for p in points.live():
            t = time.perf_counter()
            aps[step][p] = lam_select.held_out_ap(points.metric(p), x[va], y[va], c_va)
            points.seconds[p] += time.perf_counter() - t  # the scoring is part of the rule
            seconds[step][p] = points.seconds[p]
    return grid, rungs, aps, seconds


def both_choices(grid, rungs, aps, seconds, num_iters):
    """(end choice, halving choice, end seconds, halving seconds) from one trajectory."""
    end = lam_select.choice(grid, [aps[num_iters][p] for p in range(len(grid))])
    stopped = {}

    def scores(step, live):
        for p in live:
            stopped[p] = step
        return {p: aps[step][p] for p in live}

    halved, _ = lam_select.halve(grid, rungs, scores)
    end_s = sum(seconds[num_iters].values())
    halving_s = sum(seconds[step][p] for p, step in stopped.items())
    return end, halved, end_s, halving_s


def _config(form: str):
    base = config_files.load_config_module(os.path.join(ROOT, "configs", "warca.py"))
    return base.get_config("linear" if form == "linear" else "chi2")


def main_job_splits(form: str, which: range):
    """The main job's built-in data (``configs/warca.py``, the histogram variant for the
    chi2 form), each split as (fit seed, x, labels, cams, test scorer), seeded and scored
    as the main job seeds and scores them."""
    config = _config(form)
    ds = datasets.from_config(config.data)
    out = []
    for s in which:
        split = ds.splits[s]
        tr = split.train_idx

        def scores(metric, split=split, seed=config.seed + s):
            r = evaluation.evaluate_metric(metric, ds, split, config.eval, seed=seed)
            return float(r["rank1"]), float(r["mAP"])

        out.append((config.seed + s, ds.features[tr], ds.labels[tr], ds.cams[tr], scores))
    return out


def rows(name, form, splits):
    """One JSON line per split: both choices, their test scores and costs."""
    out = []
    for s, x, y, cams, scores in splits:
        cfg = _config(form).method
        if name != "main":  # the main job's D' is its config's (40 of 64 features)
            cfg = defaults.overridden(cfg, dim=real_data.paper_dim(name))
        y = np.asarray(y)
        got = held_out_trajectory(x, y, cams, cfg, s)
        if got is None:
            continue
        grid, rungs, aps, seconds = got
        end, halved, end_s, halving_s = both_choices(grid, rungs, aps, seconds, cfg.num_iters)
        test, fit_s = {}, None
        for p in dict.fromkeys((end, halved)):
            t = time.perf_counter()
            metric, _ = warca.fit(x, y, warca_config.at_lam(cfg, grid[p]), seed=s, cams=cams)
            fit_s = fit_s or time.perf_counter() - t  # the first, compiled with it
            test[p] = scores(metric)
        row = dict(
            data=name, form=form, split=s,
            end_lam=grid[end], halving_lam=grid[halved],
            end=test[end], halving=test[halved],
            held_out_s_end=round(end_s, 2), held_out_s_halving=round(halving_s, 2),
            fit_s=round(fit_s, 2),
            cost_end=round((end_s + fit_s) / fit_s, 2),
            cost_halving=round((halving_s + fit_s) / fit_s, 2),
            held_out_map={str(step): {f"{grid[p]:g}": round(float(np.mean(a)), 2)
                                      for p, a in by_p.items()} for step, by_p in aps.items()},
        )  # fmt: skip
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def table(all_rows) -> None:
    """Per dataset and form: splits, agreement, test rank-1 ± std / mAP and cost each way."""
    print(
        "\n| data | form | splits | same choice | the rule at the end | halving "
        "| default fit / fixed fit, end | halving |"
    )
    print("| " + " | ".join(["---"] * 8) + " |")
    for key in sorted({(r["data"], r["form"]) for r in all_rows}):
        part = [r for r in all_rows if (r["data"], r["form"]) == key]
        cells = [key[0], key[1], str(len(part))]
        cells.append(f"{sum(r['end_lam'] == r['halving_lam'] for r in part)} of {len(part)}")
        for way in ("end", "halving"):
            a = np.asarray([r[way] for r in part])
            lams = [r[f"{way}_lam"] for r in part]
            counts = ", ".join(f"{v:g} x{lams.count(v)}" for v in sorted(set(lams)))
            cells.append(
                f"{a[:, 0].mean():.2f} ± {a[:, 0].std():.2f} / {a[:, 1].mean():.2f} ({counts})"
            )
        for way in ("end", "halving"):
            c = np.asarray([r[f"cost_{way}"] for r in part])
            cells.append(f"{c.mean():.2f}x")
        print("| " + " | ".join(cells) + " |", flush=True)


def main(argv) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    print(f"# {platform.node()}, {os.cpu_count()} CPUs", flush=True)
    all_rows = []
    for item in _DATA.value:
        name, _, path = item.partition("=")
        which = range(_FIRST_SPLIT.value, _FIRST_SPLIT.value + _SPLITS.value)
        for form in _FORMS.value:
            if name == "main":
                splits = main_job_splits(form, which)
            elif name == "reference":
                splits = real_data.reference_splits([int(v) for v in _REF_SEEDS.value if v])
            else:
                splits = real_data.splits(name, path, which, _CACHE_DIR.value)
            all_rows += rows(name, form, splits)
    table(all_rows)


if __name__ == "__main__":
    app.run(main)
