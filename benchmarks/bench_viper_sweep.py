"""One field of one learner swept on VIPeR: the measurements behind the baselines' defaults.

The learners' docstrings (LFDA's ridge, FRML's step, SVMML's settings) quote what this
script prints. For a config label (``lfda``, ``frml``, ``svmml``, ``warca:chi2``, ...) it
fits the label's default method config, with D' = 100 (the protocol's VIPeR output
dimension, for the paper's methods) and ``--field`` set to each of ``--values``, on VIPeR
read from its images (the published cam_a/ cam_b/ layout, the 2,580-d colour + LBP
descriptor, the loader's 316/316 random splits), and prints one JSON line per (value,
split) and a markdown table of rank-1 / mAP, mean over ``--splits``:

* ``--on=test``: fitted on the split's training people, scored on its test people (probe
  cam_a, gallery cam_b), as the protocol's runs are;
* ``--on=validation``: fitted on 70% of the split's training people and scored on the
  other 30% (the protocol's cross-validation split, ``protocol.datasets.validation_split``,
  seed 0): a choice made here does not look at the test people.

``--probe=random`` draws each test person's probe camera at random (the rule the WARCA
paper's section 4.1 states) instead of cam_a, and ``--probe=cam_b`` takes the probes from
cam_b and the gallery from cam_a; the training people are the same.

``--seeds`` fits each split once per training seed, seed + split being the seed of the fit
on split ``split`` (the protocol runner's rule, so ``--seeds=0`` is the protocol's run),
and adds the mean and standard deviation over the seeds of the split-mean to the table:
how far a result moves with the training draws alone. ``--split_seeds`` draws the loader's
random splits with each seed (0: the protocol's splits) and adds the same mean and
deviation over them: how far a 10-split mean moves with the people drawn for testing.

``--fixed=field=value,...`` holds other fields of the label's config at a value (a
second axis of a grid, one value per run).

  python benchmarks/bench_viper_sweep.py --viper=PATH/VIPeR --label=lfda --field=reg \
      --values=0.18,1,2 --splits=0,1,2 [--on=validation] [--cache_dir=/tmp/warca_cache]
"""

import argparse
import itertools
import json
import platform
import time

import jax
import numpy as np

from warca_jax import datasets, defaults, evaluation, pipeline
from warca_jax.datasets import two_camera
from warca_jax.protocol import plan
from warca_jax.protocol.datasets import validation_split

# the protocol's VIPeR config: its output dimension, per-label settings and CV split
PROTOCOL = defaults.load_config_module("configs/protocol.py").get_config("viper")


def _value(text: str, current):
    """``text`` parsed as the type of the field's current value."""
    if isinstance(current, bool):
        return text.lower() in ("1", "true", "yes")
    if isinstance(current, str):
        return text
    return type(current)(float(text)) if isinstance(current, int) else float(text)


def method_config(label: str, field: str, text: str, fixed: str = ""):
    """The method section the protocol's VIPeR run of ``label`` uses (D' = 100 for the paper's
    methods; ``plan.run_method_config``) with ``field`` = ``text`` and the ``fixed``
    settings (``"field=value,..."``, e.g. ``"learning_rate=0.1"``)."""
    current = plan.method_config(label)
    pairs = [(field, text)] + [item.partition("=")[::2] for item in fixed.split(",") if item]
    values = {}
    for name, value in pairs:
        if name not in current:
            raise ValueError(f"{label} has no field {name!r}; its fields: {sorted(current.keys())}")
        values[name] = _value(value, current[name])
    return plan.run_method_config(PROTOCOL, label, "viper", PROTOCOL.dims.viper, **values)


def score(ds, s: int, cfg, on: str, eval_cfg, seed: int = 0) -> dict:
    """rank-1, mAP and training seconds of ``cfg`` on split ``s`` (test or validation),
    fitted with seed ``seed + s`` (the protocol runner's)."""
    split = ds.splits[s]
    if on == "validation":
        cv = PROTOCOL.cv
        split = validation_split(ds, s, fraction=cv.val_fraction, seed=PROTOCOL.data.seed)
    x, y = ds.features[split.train_idx], ds.labels[split.train_idx]
    start = time.perf_counter()
    metric, _ = pipeline.fit_method(x, y, cfg, seed=seed + s)
    seconds = time.perf_counter() - start
    r = evaluation.evaluate_metric(metric, ds, split, eval_cfg)
    return {"rank1": float(r["rank1"]), "mAP": float(r["mAP"]), "train_seconds": seconds}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--viper", required=True, help="VIPeR's folder (cam_a/, cam_b/)")
    p.add_argument("--label", required=True, help="config label, e.g. lfda or warca:chi2")
    p.add_argument("--field", required=True, help="a field of the label's method config")
    p.add_argument("--values", required=True, help="comma-separated values of the field")
    p.add_argument("--splits", default="0,1,2", help="comma-separated split numbers")
    p.add_argument("--on", choices=("test", "validation"), default="test")
    p.add_argument("--cache_dir", default="", help="descriptor cache folder")
    p.add_argument(
        "--probe",
        choices=two_camera.PROBES,
        default="cam_a",
        help="the splits' probe rule (datasets/two_camera.py): cam_a, cam_b or the paper's random",
    )
    p.add_argument("--fixed", default="", help="other fields held fixed: field=value,...")
    p.add_argument("--seeds", default="0", help="comma-separated training seeds")
    p.add_argument("--split_seeds", default="0", help="comma-separated seeds of the splits")
    a = p.parse_args()
    values = [v for v in a.values.split(",") if v]
    configs = [method_config(a.label, a.field, v, a.fixed) for v in values]  # before any work
    splits = [int(s) for s in a.splits.split(",")]
    seeds = [int(s) for s in a.seeds.split(",")]
    split_seeds = [int(s) for s in a.split_seeds.split(",")]
    ds = datasets.read(
        "viper", a.viper, descriptor="color_lbp", cache_dir=a.cache_dir, probe=a.probe
    )
    # each split seed's splits, on the features described once (the loader's seed draws only
    # the splits)
    sets = {
        k: ds._replace(splits=datasets.load("viper", a.viper, probe=a.probe, seed=k).splits)
        for k in split_seeds
    }
    eval_cfg = defaults.base_config().eval
    print(json.dumps({"machine": platform.processor() or platform.machine(),
                      "backend": jax.default_backend(), "jax": jax.__version__}))  # fmt: skip
    rows = []
    for text, cfg in zip(values, configs, strict=True):
        runs = []  # the split-mean (rank-1, mAP) of each (split seed, training seed)
        for k, seed in itertools.product(split_seeds, seeds):
            got = []
            for s in splits:
                r = score(sets[k], s, cfg, a.on, eval_cfg, seed=seed)
                line = {"label": a.label, a.field: text, "split": s, "seed": seed}
                print(json.dumps({**line, "split_seed": k, "on": a.on, **r}))
                got.append((r["rank1"], r["mAP"]))
            runs.append(np.mean(got, axis=0))
            name = f"{a.field}={text}"
            name += f", split seed {k}" if len(split_seeds) > 1 else ""
            name += f", seed {seed}" if len(seeds) > 1 else ""
            rows.append((name, f"{runs[-1][0]:.2f}", f"{runs[-1][1]:.2f}"))
        if len(runs) > 1:
            mean, std = np.mean(runs, axis=0), np.std(runs, axis=0)
            spread = [f"{m:.2f} ± {d:.2f}" for m, d in zip(mean, std, strict=True)]
            over = f"{len(split_seeds)} split seeds x {len(seeds)} training seeds"
            rows.append((f"{a.field}={text}, mean ± std over {over}", *spread))
    where = f"{a.on}, splits {a.splits} (split seeds {a.split_seeds}), probe {a.probe}"
    where += f", {a.fixed}" if a.fixed else ""
    print(f"\n| {a.label}, {where} | rank-1 | mAP |\n| --- | --- | --- |")
    for name, r1, m in rows:
        print(f"| {name} | {r1} | {m} |")


if __name__ == "__main__":
    main()
