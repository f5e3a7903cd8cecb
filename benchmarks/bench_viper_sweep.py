"""One field of one learner swept on VIPeR or CUHK01: the measurements behind the baselines'
defaults and behind the diagnosis of their gaps to the paper.

docs/methods.md (LFDA's ridge, FRML's step, SVMML's settings) quotes what this script
prints. For a config label (``lfda``, ``frml``, ``svmml``, ``warca:chi2``, ...) it
fits the label's default method config, with the protocol's output dimension for the
paper's methods (D' = 100 on VIPeR, 40 on CUHK01) and ``--field`` set to each of
``--values``, on VIPeR (``--viper``: the published cam_a/ cam_b/ layout, the loader's
316/316 random splits) or CUHK01 (``--cuhk01``: the published campus/ layout, the loader's
default protocol, 486 test people) read from its images with the 2,580-d colour + LBP
descriptor, and prints one JSON line per (value, split) and a markdown table of rank-1 /
mAP, mean over ``--splits``:

* ``--on=test``: fitted on the split's training people, scored on its test people, as the
  protocol's runs are;
* ``--on=validation``: fitted on the split's training people but ``--val_fraction`` of
  them (default: the protocol's ``cv.val_fraction``) and scored on those (the protocol's
  cross-validation split, ``identity_splits.validation_split``, seed 0): a choice made
  here does not look at the test people.

On VIPeR, ``--probe=random`` draws each test person's probe camera at random (the rule the WARCA
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

  python -m benchmarks.bench_viper_sweep --viper=PATH/VIPeR --label=lfda --field=reg \\
      --values=0.18,1,2 --splits=0,1,2 [--on=validation] [--cache_dir=/tmp/warca_cache]
  python -m benchmarks.bench_viper_sweep --cuhk01=PATH/CUHK01 --label=mlapg \\
      --field=pca_dim --values=40,100 --splits=0,1,2
"""

import itertools
import json
import platform

import jax
import numpy as np
from absl import app, flags

from benchmarks import real_data
from warca_jax import datasets
from warca_jax.data import identity_splits
from warca_jax.datasets import two_camera
from warca_jax.io import config_files
from warca_jax.protocol import plan

# the protocol's config of each dataset: its output dimension, per-label settings, CV split
_PROTOCOL_MODULE = config_files.load_config_module("configs/protocol.py")
PROTOCOLS = {name: _PROTOCOL_MODULE.get_config(name) for name in ("viper", "cuhk01")}
# the protocol's share of training people held out for validation (the same on every dataset)
VAL_FRACTION = PROTOCOLS["viper"].cv.val_fraction


flags.DEFINE_string("viper", "", "VIPeR's folder (cam_a/, cam_b/)")
flags.DEFINE_string("cuhk01", "", "CUHK01's folder (campus/), instead of VIPeR")
flags.DEFINE_string("label", None, "config label, e.g. lfda or warca:chi2", required=True)
flags.DEFINE_string("field", None, "a field of the label's method config", required=True)
flags.DEFINE_string("values", None, "comma-separated values of the field", required=True)
flags.DEFINE_string("splits", "0,1,2", "comma-separated split numbers")
flags.DEFINE_enum("on", "test", ("test", "validation"), "score the test or validation people")
flags.DEFINE_float(
    "val_fraction", VAL_FRACTION, "--on=validation: the share of the training people held out"
)
flags.register_validator(
    "val_fraction", lambda value: 0.0 < value < 1.0, "--val_fraction must be in (0, 1)"
)
flags.DEFINE_string("cache_dir", "", "descriptor cache folder")
flags.DEFINE_enum(
    "probe",
    "cam_a",
    two_camera.PROBES,
    "the splits' probe rule (datasets/two_camera.py): cam_a, cam_b or the paper's random",
)
flags.DEFINE_string("fixed", "", "other fields held fixed: field=value,...")
flags.DEFINE_string("seeds", "0", "comma-separated training seeds")
flags.DEFINE_string("split_seeds", "0", "comma-separated seeds of the splits")
FLAGS = flags.FLAGS


def _value(text: str, current):
    """``text`` parsed as the type of the field's current value."""
    if isinstance(current, bool):
        return text.lower() in ("1", "true", "yes")
    if isinstance(current, str):
        return text
    return type(current)(float(text)) if isinstance(current, int) else float(text)


def method_config(label: str, field: str, text: str, fixed: str = "", dataset: str = "viper"):
    """The method section the protocol's run of ``label`` on ``dataset`` uses (its output
    dimension for the paper's methods; ``plan.run_method_config``) with ``field`` = ``text``
    and the ``fixed`` settings (``"field=value,..."``, e.g. ``"learning_rate=0.1"``)."""
    current = plan.method_config(label)
    pairs = [(field, text)] + [item.partition("=")[::2] for item in fixed.split(",") if item]
    values = {}
    for name, value in pairs:
        if name not in current:
            raise ValueError(f"{label} has no field {name!r}; its fields: {sorted(current.keys())}")
        values[name] = _value(value, current[name])
    protocol = PROTOCOLS[dataset]
    # the output dimension is the protocol's unless it is the field swept or held fixed
    dim = values.pop("dim", protocol.dims.get(dataset, protocol.default_dim))
    return plan.run_method_config(protocol, label, dataset, dim, **values)


def score(
    ds, s: int, cfg, on: str, eval_cfg, seed: int = 0, val_fraction: float = VAL_FRACTION
) -> dict:
    """rank-1, mAP and training seconds of ``cfg`` on split ``s`` (test or validation: the
    protocol's split holding ``val_fraction`` of the training people out), fitted with seed
    ``seed + s`` (the protocol runner's)."""
    split = ds.splits[s]
    if on == "validation":
        split = identity_splits.validation_split(
            ds, s, fraction=val_fraction, seed=PROTOCOLS["viper"].data.seed
        )
    metric, _, seconds = real_data.fit(ds, split.train_idx, cfg, seed=seed + s, cams=False)
    r = real_data.score(metric, ds, split, eval_cfg)
    return {"rank1": float(r["rank1"]), "mAP": float(r["mAP"]), "train_seconds": seconds}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    a = FLAGS
    if bool(a.viper) == bool(a.cuhk01):
        raise app.UsageError("give one of --viper=PATH or --cuhk01=PATH")
    name, path = ("viper", a.viper) if a.viper else ("cuhk01", a.cuhk01)
    if name == "cuhk01" and a.probe != "cam_a":
        raise app.UsageError(
            "--probe applies to VIPeR; CUHK01's splits follow its loader's protocol"
        )
    values = [v for v in a.values.split(",") if v]
    configs = [method_config(a.label, a.field, v, a.fixed, name) for v in values]  # before work
    splits = [int(s) for s in a.splits.split(",")]
    seeds = [int(s) for s in a.seeds.split(",")]
    split_seeds = [int(s) for s in a.split_seeds.split(",")]
    options = {"probe": a.probe} if name == "viper" else {}
    ds = real_data.read(name, path, cache_dir=a.cache_dir, **options)
    # each split seed's splits, on the features described once (the loader's seed draws only
    # the splits)
    sets = {
        k: ds._replace(splits=datasets.load(name, path, seed=k, **options).splits)
        for k in split_seeds
    }
    eval_cfg = real_data.eval_config()
    print(json.dumps({"machine": platform.processor() or platform.machine(),
                      "backend": jax.default_backend(), "jax": jax.__version__}))  # fmt: skip
    rows = []
    for text, cfg in zip(values, configs, strict=True):
        runs = []  # the split-mean (rank-1, mAP) of each (split seed, training seed)
        for k, seed in itertools.product(split_seeds, seeds):
            got = []
            for s in splits:
                r = score(sets[k], s, cfg, a.on, eval_cfg, seed=seed, val_fraction=a.val_fraction)
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
    where = f"{name}, {a.on}, splits {a.splits} (split seeds {a.split_seeds})"
    where += f", probe {a.probe}" if name == "viper" else ""
    where += f", {a.fixed}" if a.fixed else ""
    print(f"\n| {a.label}, {where} | rank-1 | mAP |\n| --- | --- | --- |")
    for name, r1, m in rows:
        print(f"| {name} | {r1} | {m} |")


if __name__ == "__main__":
    app.run(main)
