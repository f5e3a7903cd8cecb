"""What WARCA's best penalty weight depends on: lambda against the training set's shape.

Kernel WARCA (``configs/warca.py:chi2``: chi2-RBF, preconditioned, D' = 40, 2,000 steps)
on the synthetic problem shared with the authors' C++ release
(``synthetic.make_reference_problem``: 256-d histograms, 4 images per identity, half the
identities for training, the test gallery image 0 of each test identity and its images
1-3 probes), with the training set varied one property at a time:

* its number of people (``--num_ids``: the problem's identities, half of them training),
* its images per person (``--images_per_id``: the first k of each training person's 4),

and lambda swept over ``--lams``. For each training set it prints the people, images per
person, N, the same-identity pairs the loss draws from (every pair: no cameras), D, D',
the test rank-1 at each lambda and the best lambda, as a JSON line and a markdown table.

  python -m benchmarks.bench_penalty [--num_ids=200,600,1200] [--images_per_id=2,4]
      [--lams=1e-5,1e-4,1e-3,1e-2] [--seed=1]

``--rule=reference,orl,viper=PATH,cuhk01=PATH`` measures instead the rule that chooses
lambda per fit (``warca_jax.methods.warca.lam_select``): per split (or, for the reference
problem, per training seed ``--ref_seeds``) and per WARCA form (``--forms``: chi2,
chi2_plain, linear; the configs of configs/warca.py, D' the paper's for the dataset), one
fit per lambda on the training part with ``--val_fraction`` of the people held out (their
held-out AP, per query) and one per lambda on the whole training set (its test rank-1 and
mAP). It prints a JSON line per (split, lambda), then the test scores at each fixed lambda
and under each rule of ``lam_select.choice`` (the rule's fit is the whole-set fit at the
lambda it chose), mean ± std over the splits. ``--first_split`` and ``--splits`` choose the
splits; ``--tabulate=OUT1,OUT2`` prints that table again from earlier runs' output.

  python -m benchmarks.bench_penalty --rule=viper=PATH/VIPeR,cuhk01=PATH/CUHK01,orl \\
      --forms=chi2 [--splits=10] [--first_split=0] [--val_fraction=0.2]
"""

from __future__ import annotations

import json
import os
import platform
import re
import time

import numpy as np
from absl import app, flags

from benchmarks import real_data
from warca_jax.data.synthetic import make_reference_problem
from warca_jax.io import config_files
from warca_jax.methods import held_out, warca
from warca_jax.methods.warca import config as warca_config
from warca_jax.methods.warca import lam_select
from warca_jax.runs import defaults, pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_NUM_IDS = flags.DEFINE_list("num_ids", "200,600,1200", "the problem's identities")
_IMAGES = flags.DEFINE_list("images_per_id", "2,4", "the first k images of each person")
_LAMS = flags.DEFINE_list("lams", "1e-5,1e-4,1e-3,1e-2", "the penalty weights swept")
_SEED = flags.DEFINE_integer("seed", 1, "training seed (the data is fixed)")
_RULE = flags.DEFINE_list(
    "rule", "", "datasets for the rule table instead: reference,orl,viper=PATH,cuhk01=PATH"
)
_FORMS = flags.DEFINE_list(
    "forms",
    "chi2,linear",
    "WARCA forms of the rule table: chi2, chi2_plain (the plain gradient, not preconditioned)"
    " or linear",
)
_SPLITS = flags.DEFINE_integer("splits", 10, "splits of each real dataset")
_FIRST_SPLIT = flags.DEFINE_integer("first_split", 0, "the rule table's first split")
_REF_SEEDS = flags.DEFINE_list(
    "ref_seeds", "1,2,3", "training seeds of the reference problem in the rule table"
)
_VAL_FRACTION = flags.DEFINE_float("val_fraction", 0.2, "share of the people held out")
_CACHE_DIR = flags.DEFINE_string("cache_dir", "/tmp/warca_cache", "descriptor cache ('': none)")
_TABULATE = flags.DEFINE_list(
    "tabulate", "", "the rule table of earlier --rule runs' output files, with no fit"
)


def _numbers(values, kind) -> list:
    """A list flag's values as ``kind`` (int or float), empty items skipped."""
    return [kind(v) for v in values if v]


# ----- the rule: lambda chosen on held-out training people, against every fixed lambda -----

RULES = ("smallest", "largest", "argmax")  # lam_select's rules, each measured
_CHOSEN = re.compile(r"\(([\d.eE+-]+(?:, [\d.eE+-]+)*)\)$")  # a cell's "(lam, lam, ...)"


def rule_rows(name, form, splits, grid, val_fraction, dim):
    """Per split: the held-out AP of each lambda (fits on the training part) and the test
    (rank-1, mAP) of each lambda (fits on the whole training set), one JSON line each."""
    base = config_files.load_config_module(os.path.join(ROOT, "configs", "warca.py"))
    rows = []
    for s, x, y, cams, scores in splits:
        cfg = base.get_config("linear" if form == "linear" else "chi2").method
        over = {"preconditioned": False} if form == "chi2_plain" else {}
        cfg = defaults.overridden(cfg, dim=dim, lam_val_fraction=val_fraction, **over)
        held = held_out.split(np.asarray(y), val_fraction, seed=s)
        row = {"data": name, "form": form, "split": s, "held_ap": {}, "test": {}}
        for lam in grid:
            one = warca_config.at_lam(cfg, lam)
            t = time.perf_counter()
            if not isinstance(held, str):
                c_tr = None if cams is None else cams[held.train]
                c_va = None if cams is None else cams[held.val]
                m, _ = pipeline.fit_method(x[held.train], y[held.train], one, seed=s, cams=c_tr)
                row["held_ap"][lam] = lam_select.held_out_ap(m, x[held.val], y[held.val], c_va)
            m, _ = pipeline.fit_method(x, y, one, seed=s, cams=cams)
            row["test"][lam] = scores(m)
            rank1, m_ap = row["test"][lam]
            seconds = round(time.perf_counter() - t, 1)
            line = dict(data=name, form=form, split=s, lam=lam, rank1=rank1, mAP=m_ap)
            line["seconds"] = seconds
            if lam in row["held_ap"]:
                ap = row["held_ap"][lam]
                line["held_out_mAP"] = round(float(np.mean(ap)), 2)
                line["held_out_ap"] = [round(float(v), 3) for v in ap]  # per query: other rules
            print(json.dumps(line), flush=True)
        rows.append(row)
    return rows


def _rule_lam(row, grid, rule):
    """The lambda ``rule`` takes on this split: from its held-out APs, or as a logged table
    recorded it (``rows_from_logs``, a run that logged no per-query AP)."""
    if row.get("chosen"):
        return row["chosen"][rule]
    if not row["held_ap"]:
        return None
    return grid[lam_select.choice(grid, [row["held_ap"][lam] for lam in grid], rule)]


def rule_table(rows, grid) -> None:
    """Test rank-1 (± std over splits) / mAP at each fixed lambda and under each rule, with
    the lambdas each rule chose."""
    print("\n| data | form | splits | " + " | ".join(f"{lam:g}" for lam in grid)
          + " | " + " | ".join(f"rule {r}" for r in RULES) + " |")  # fmt: skip
    print("| " + " | ".join(["---"] * (3 + len(grid) + len(RULES))) + " |")
    keys = sorted({(r["data"], r["form"]) for r in rows}, key=str)
    for key in keys:
        part = [r for r in rows if (r["data"], r["form"]) == key]
        cells = [key[0], key[1], str(len(part))]
        for lam in grid:
            a = np.asarray([r["test"][lam] for r in part])
            cells.append(f"{a[:, 0].mean():.2f} ± {a[:, 0].std():.2f} / {a[:, 1].mean():.2f}")
        for rule in RULES:
            chosen = [_rule_lam(r, grid, rule) for r in part]
            got = [r["test"][lam] for r, lam in zip(part, chosen, strict=True) if lam is not None]
            if not got:
                cells.append("n/a")
                continue
            a = np.asarray(got)
            counts = ", ".join(f"{lam:g} x{chosen.count(lam)}" for lam in grid if lam in chosen)
            cells.append(f"{a[:, 0].mean():.2f} ± {a[:, 0].std():.2f} / {a[:, 1].mean():.2f} "
                         f"({counts})")  # fmt: skip
        print("| " + " | ".join(cells) + " |")


def rows_from_logs(paths, grid):
    """The rule table's rows from the output of earlier ``--rule`` runs: their JSON lines,
    and, for a run that logged no per-query AP, the lambdas its printed table says each rule
    chose (in the order of that run's splits)."""
    rows = []
    for path in paths:
        found, tables = {}, {}
        with open(path, encoding="utf-8") as f:
            for text in f:
                if text.startswith("{"):
                    line = json.loads(text)
                    key = (line["data"], line["form"], line["split"])
                    empty = {"data": key[0], "form": key[1], "split": key[2], "held_ap": {}}
                    row = found.setdefault(key, {**empty, "test": {}})
                    row["test"][line["lam"]] = (line["rank1"], line["mAP"])
                    if "held_out_ap" in line:
                        row["held_ap"][line["lam"]] = np.asarray(line["held_out_ap"])
                elif text.startswith("| ") and not text.startswith("| data"):
                    cells = [c.strip() for c in text.strip().strip("|").split("|")]
                    # an older table's per-split lambdas, "(0.001, 0.01, ...)"; today's give
                    # counts, "(0.001 x3, ...)", beside JSON lines that hold each held-out AP
                    lists = [_CHOSEN.search(c) for c in cells[-len(RULES) :]]
                    if all(lists):
                        tables[(cells[0], cells[1])] = {
                            rule: [float(v) for v in m.group(1).split(",")]
                            for rule, m in zip(RULES, lists, strict=True)
                        }
        for key, row in sorted(found.items(), key=lambda kv: str(kv[0])):
            if len(row["test"]) < len(grid):
                continue  # a split the run did not finish
            if len(row["held_ap"]) < len(grid):
                table = tables[key[:2]]
                order = sorted(s for (d, f, s) in found if (d, f) == key[:2])
                at = order.index(key[2])
                row["chosen"] = {rule: table[rule][at] for rule in RULES}
            rows.append(row)
    return rows


def main(argv) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    lams = _numbers(_LAMS.value, float)
    if _TABULATE.value:
        rule_table(rows_from_logs([p for p in _TABULATE.value if p], lams), lams)
        return
    if _RULE.value:
        print(f"# {platform.node()}, {os.cpu_count()} CPUs", flush=True)
        rows = []
        for item in _RULE.value:
            name, _, path = item.partition("=")
            if name == "reference":
                splits = real_data.reference_splits(_numbers(_REF_SEEDS.value, int))
            else:
                chosen = range(_FIRST_SPLIT.value, _FIRST_SPLIT.value + _SPLITS.value)
                splits = real_data.splits(name, path, chosen, _CACHE_DIR.value)
            dim = real_data.paper_dim(name)
            for form in _FORMS.value:
                rows += rule_rows(name, form, splits, lams, _VAL_FRACTION.value, dim)
        rule_table(rows, lams)
        return
    base = config_files.load_config_module(os.path.join(ROOT, "configs", "warca.py"))
    print(f"# {platform.node()}, {os.cpu_count()} CPUs", flush=True)
    rows = []
    for num_ids in _numbers(_NUM_IDS.value, int):
        prob = make_reference_problem(num_ids, seed=0)
        x, y = prob["hist_train"], prob["train_labels"]
        first = np.arange(len(y)) - np.searchsorted(y, y)  # image index within its person
        for k in _numbers(_IMAGES.value, int):
            keep = first < k
            xs, ys = x[keep], y[keep]
            people = len(np.unique(ys))
            scores = {}
            for lam in lams:
                cfg = base.get_config("chi2").method
                cfg.lam = lam
                t = time.perf_counter()
                metric, _ = warca.fit(xs, ys, cfg, seed=_SEED.value)
                seconds = time.perf_counter() - t
                test = (prob["hist_test"], prob["test_labels"], prob["test_cams"])
                scores[lam] = real_data.reference_scores(metric, *test)[0]
                line = dict(num_ids=num_ids, images_per_id=k, lam=lam, rank1=scores[lam],
                            fit_s=round(seconds, 1))  # fmt: skip
                print(json.dumps(line), flush=True)
            best = max(scores, key=lambda lam: (scores[lam], -lam))
            pairs = people * k * (k - 1) // 2
            shape = dict(people=people, images_per_id=k, n=len(ys), pairs=pairs, d=xs.shape[1])
            rows.append(dict(shape, dim=int(cfg.dim), scores=scores, best=best))
    print("\n| people | images / person | N | same-identity pairs | D | D' | "
          + " | ".join(f"rank-1 at {lam:g}" for lam in lams) + " | best lambda |")  # fmt: skip
    print("| " + " | ".join(["---"] * (7 + len(lams))) + " |")
    for r in rows:
        cells = [r["people"], r["images_per_id"], r["n"], r["pairs"], r["d"], r["dim"]]
        cells += [f"{r['scores'][lam]:.2f}" for lam in lams] + [f"{r['best']:g}"]
        print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    app.run(main)
