"""The paper's ordering with the default configs, on every real dataset at hand.

Table 2's central claim is that WARCA is first: WARCA-chi2 above LFDA-chi2 and linear
WARCA above KISSME, on every dataset. This script fits the four default configs
(``configs/warca.py:chi2``, ``configs/lfda.py:chi2``, ``configs/warca.py``,
``configs/kissme.py``) with no per-dataset setting but the paper's output dimension
(100 on VIPeR, 40 elsewhere), on

* VIPeR read from its images (``--viper``, the published cam_a/ cam_b/ layout),
* CUHK01 read from its images (``--cuhk01``, the published campus/ layout, 486 test
  people; the loader's default protocol, Xiong et al.'s gallery draw: one random gallery
  image per test person and its other three images probes, cameras ignored;
  ``--cuhk01_protocol=single_shot``: one camera-A probe and one camera-B gallery image;
  ``multi_shot``: both of each),
* the ORL faces shipped in data/orl_faces,

each with the 2,580-d colour + LBP descriptor and the loader's 10 random splits, the
training cameras passed as the pipeline passes them. It prints one JSON line per
(dataset, method) and a markdown table of rank-1 / mAP, mean ± std over the splits, with
whether each ordering holds. ``--lam_chi2`` / ``--lam_linear`` (a fixed lambda instead of
the held-out choice from ``lam_grid``), ``--positives`` and ``--init`` override WARCA's defaults (to
measure what a default change does).

  python -m benchmarks.bench_real_ordering --viper=PATH/VIPeR --cuhk01=PATH/CUHK01 \\
      [--datasets=viper,cuhk01,orl] [--splits=10] [--cache_dir=/tmp/warca_cache] \\
      [--tables=ordering,lam,positives,subsample,select,gallery,people]

Tables (``--tables``; each on the first ``--splits`` splits):
  ordering   the four default configs, the table above.
  lam        WARCA-chi2 at lambda 1e-3 ... 1e-6 and WARCA-L at 1e-4 ... 1e-6 (fixed, no
             held-out choice), with the last logged training numbers: the minibatch hinge,
             the AON penalty and the share of negatives inside the margin (margin_frac).
  positives  CUHK01: WARCA-chi2 with every same-identity pair (positives='all') against the
             cross-camera pairs, at lambda 1e-3 and 1e-5.
  subsample  CUHK01: WARCA-chi2 at lambda 1e-3 ... 1e-5 trained on part of each split's
             training set (one image per camera of each person: 970 images; or all four
             images of 158 people: 632, VIPeR's size), tested on the same people.
  select     WARCA-chi2 with lambda chosen per fit from 1e-6 ... 1e-3 on 30% of the
             training people held out (``lam_grid``, the one-standard-error rule).
  people     VIPeR and CUHK01: the four default configs trained on the first 30 (VIPeR:
             60), 60, 120, 240 or all training people of each split, tested on the same test people
             (how the ordering depends on the training set's size).
  gallery    CUHK01: the four default configs fitted once per split and scored two ways:
             the loader's single shot (``protocol='single_shot'``), and the reading of
             Xiong et al.'s released code (docs/datasets.md; the loader's default): one
             random image of each test person is its gallery image, its other three are
             probes, cameras ignored (so one probe is the gallery image's same-camera
             twin), here 10 gallery draws per split (the loader draws one).
"""

import functools
import json
import os
import platform
import time

import jax
import numpy as np
from absl import app, flags

from benchmarks import real_data
from warca_jax import evaluation
from warca_jax.io import config_files
from warca_jax.runs import defaults

_configs = {
    name: config_files.load_config_module(f"configs/{name}.py")
    for name in ("warca", "lfda", "kissme")
}
TABLES = ("ordering", "lam", "positives", "subsample", "select", "gallery", "people")
METHODS = (
    ("warca:chi2", "warca", "chi2"),
    ("lfda:chi2", "lfda", "chi2"),
    ("warca:linear", "warca", "linear"),
    ("kissme", "kissme", None),
)
ORDERINGS = (("warca:chi2", "lfda:chi2"), ("warca:linear", "kissme"))

flags.DEFINE_string("viper", "", "VIPeR folder holding cam_a/ and cam_b/")
flags.DEFINE_string("cuhk01", "", "CUHK01 folder holding campus/")
_DATASETS = flags.DEFINE_list("datasets", "viper,cuhk01,orl", "of viper, cuhk01, orl")
flags.DEFINE_integer("splits", 10, "the first this many splits")
flags.DEFINE_string("cache_dir", "", "descriptor cache ('': none)")
flags.DEFINE_float("lam_chi2", None, "WARCA-chi2's lambda (default: its config's)")
flags.DEFINE_float("lam_linear", None, "WARCA-L's lambda (default: its config's)")
flags.DEFINE_string("positives", "", "WARCA's positives (default: its config's)")
flags.DEFINE_string("init", "", "WARCA's initial W, random or pca (default: its config's)")
flags.DEFINE_string("cuhk01_protocol", "", "CUHK01's protocol (default: the loader's)")
_TABLES = flags.DEFINE_list("tables", "ordering", ",".join(TABLES) + " (docstring)")
FLAGS = flags.FLAGS


def method_config(file: str, variant, dim: int, args):
    """The default ``method`` section of ``configs/<file>.py[:variant]`` at output dim ``dim``."""
    module = _configs[file]
    method = (module.get_config(variant) if variant else module.get_config()).method
    over = {"dim": dim} if "dim" in method else {}
    if file == "warca":
        lam = args.lam_chi2 if variant == "chi2" else args.lam_linear
        if lam is not None:  # that lambda, not the held-out choice
            over["lam"], over["lam_grid"] = lam, ()
        if args.positives:
            over["positives"] = args.positives
        if args.init:
            over["init"] = args.init
    return defaults.overridden(method, **over)


def load(name: str, args, protocol=None):
    protocol = protocol or args.cuhk01_protocol
    options = {"protocol": protocol} if name == "cuhk01" and protocol else {}
    root = "" if name == "orl" else getattr(args, name)
    return real_data.read(name, root, cache_dir=args.cache_dir, **options)


def score(ds, method, splits: int, part=None, last=None, each=None):
    """Rank-1 and mAP of ``method`` on the first ``splits`` splits, and the seconds.

    ``part(train_idx)``: the training images used (default: all of the split's);
    ``last``: a list that receives each fit's last logged training row;
    ``each(s, split, metric)``: called with every fitted metric (to score it another way).
    """
    rows, t0 = [], time.perf_counter()
    for s, split in enumerate(ds.splits[:splits]):
        train = split.train_idx if part is None else part(ds, split.train_idx)
        metric, history, _ = real_data.fit(ds, train, method, seed=s)
        if last is not None and history:
            last.append(history[-1])
        if each is not None:
            each(s, split, metric)
        r = real_data.score(metric, ds, split)
        rows.append((r["rank1"], r["mAP"]))
    a = np.asarray(rows)
    return a, time.perf_counter() - t0


def gallery_draw_scores(ds, split, metric, draws: int, seed: int):
    """Mean rank-1 and mAP under Xiong et al.'s reading: per test person one random gallery
    image, the rest probes, no camera rule (query and gallery get distinct camera ids)."""
    test = np.concatenate([split.query_idx, split.gallery_idx])
    people = np.unique(ds.labels[test])
    images = np.flatnonzero(np.isin(ds.labels, people))
    z = np.asarray(metric.transform(ds.features[images]))
    labels = ds.labels[images]
    rows = []
    for d in range(draws):
        rng = np.random.default_rng([seed, d])
        gallery = np.array([rng.choice(np.flatnonzero(labels == p)) for p in people])
        probe = np.setdiff1d(np.arange(len(images)), gallery)
        r = evaluation.evaluate(
            z[probe],
            z[gallery],
            labels[probe],
            labels[gallery],
            np.zeros(len(probe), np.int64),
            np.ones(len(gallery), np.int64),
        )
        rows.append((r["rank1"], r["mAP"]))
    return np.mean(rows, axis=0)


def gallery_table(ds, args):
    """The ``gallery`` table: single shot and the gallery-draw reading, same fits."""
    for label, file, variant in METHODS:
        drawn = []

        def each(s, split, metric, drawn=drawn):
            drawn.append(gallery_draw_scores(ds, split, metric, 10, s))

        single, _ = score(ds, method_config(file, variant, 40, args), args.splits, each=each)
        b = np.asarray(drawn)
        print(
            json.dumps(
                dict(
                    table="gallery",
                    data="cuhk01",
                    method=label,
                    single_shot_rank1=round(float(single[:, 0].mean()), 2),
                    single_shot_mAP=round(float(single[:, 1].mean()), 2),
                    gallery_draw_rank1=round(float(b[:, 0].mean()), 2),
                    gallery_draw_rank1_std=round(float(b[:, 0].std()), 2),
                    gallery_draw_mAP=round(float(b[:, 1].mean()), 2),
                )
            ),
            flush=True,
        )


def one_per_camera(ds, train):
    """The first image of each (person, camera) of the training images."""
    key = ds.labels[train] * (int(ds.cams.max()) + 1) + ds.cams[train]
    return np.sort(train[np.unique(key, return_index=True)[1]])


def first_people(count):
    def part(ds, train):
        people = np.unique(ds.labels[train])[:count]
        return train[np.isin(ds.labels[train], people)]

    return part


def sweep_row(ds, n, label, variant, dim, args, *, part=None, tag="", **over):
    """One JSON row of WARCA ``variant`` with fields ``over`` (fixed lambda unless a grid)."""
    method = defaults.overridden(method_config("warca", variant, dim, args), **over)
    last = []
    a, sec = score(ds, method, args.splits, part=part, last=last)
    logged = {
        k: round(float(np.mean([r[k] for r in last])), 4)
        for k in ("hinge", "penalty", "margin_frac")
        if last and k in last[0]
    }
    choice = sorted({float(r["lam"]) for r in last if "lam" in r})
    row = dict(
        table=tag,
        data=n,
        method=label,
        **{k: (list(v) if isinstance(v, tuple) else v) for k, v in over.items()},
        rank1=round(float(a[:, 0].mean()), 2),
        mAP=round(float(a[:, 1].mean()), 2),
        train_images=None,
        seconds=round(sec, 1),
        **logged,
        **({"lam_chosen": choice} if choice else {}),
    )
    if part is not None:
        row["train_images"] = int(
            np.mean([len(part(ds, sp.train_idx)) for sp in ds.splits[: args.splits]])
        )
    print(json.dumps(row), flush=True)
    return row


def people_table(ds, n, args):
    """The ``people`` table: the four default configs trained on the first P people of each
    split's training set (P = 30, 60, 120, 240 and all; VIPeR from 60, where its D' = 100
    fits in the training images), tested on the same test people."""
    dim = real_data.paper_dim(n)
    for count in (30, 60, 120, 240, 0) if dim <= 60 else (60, 120, 240, 0):
        part = first_people(count) if count else None
        for label, file, variant in METHODS:
            method = method_config(file, variant, dim, args)
            a, sec = score(ds, method, args.splits, part=part)
            people = count or int(
                np.mean(
                    [len(np.unique(ds.labels[sp.train_idx])) for sp in ds.splits[: args.splits]]
                )
            )
            print(
                json.dumps(
                    dict(
                        table="people",
                        data=n,
                        method=label,
                        train_people=people,
                        **real_data.summary(a),
                        seconds=round(sec, 1),
                    )
                ),
                flush=True,
            )


def extra_tables(names, args, tables):
    """The lam, positives, subsample and select tables (module docstring)."""
    for n in names:
        if n == "orl" and tables & {"lam", "select"} == set():
            continue
        ds = load(n, args)
        dim = real_data.paper_dim(n)
        chi2 = functools.partial(sweep_row, ds, n, "warca:chi2", "chi2", dim, args)
        linear = functools.partial(sweep_row, ds, n, "warca:linear", "linear", dim, args)
        if "lam" in tables:
            for lam in (1e-3, 1e-4, 1e-5, 1e-6):
                chi2(tag="lam", lam=lam, lam_grid=())
            for lam in (1e-4, 1e-5, 1e-6):
                linear(tag="lam", lam=lam, lam_grid=())
        if "positives" in tables and n == "cuhk01":
            for lam in (1e-3, 1e-5):
                for pos in ("all", "cross_camera"):
                    chi2(tag="positives", lam=lam, lam_grid=(), positives=pos)
        if "subsample" in tables and n == "cuhk01":
            parts = (("one_per_camera", one_per_camera), ("158_people", first_people(158)))
            for name, part in parts:
                for lam in (1e-3, 1e-4, 1e-5):
                    chi2(part=part, tag=f"subsample:{name}", lam=lam, lam_grid=())
        if "people" in tables and n != "orl":
            people_table(ds, n, args)
        if "gallery" in tables and n == "cuhk01":
            gallery_table(load(n, args, "single_shot"), args)
        if "select" in tables:
            chi2(tag="select", lam_grid=(1e-6, 1e-5, 1e-4, 1e-3))


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    args = FLAGS
    names = [n for n in _DATASETS.value if n]
    for n in names:
        if n not in ("viper", "cuhk01", "orl"):
            raise app.UsageError(f"unknown dataset {n!r}; expected viper, cuhk01 or orl")
        if n != "orl" and not os.path.isdir(getattr(args, n)):
            raise app.UsageError(
                f"--datasets names {n} but --{n}={getattr(args, n)!r} is not a folder"
            )
    print(
        json.dumps(
            dict(
                machine=platform.machine(),
                cpus=os.cpu_count(),
                device=str(jax.devices()[0]),
                splits=args.splits,
            )
        ),
        flush=True,
    )
    tables = set(_TABLES.value)
    if tables - set(TABLES):
        unknown = sorted(tables - set(TABLES))
        raise app.UsageError(f"unknown tables {unknown}; expected {sorted(TABLES)}")
    extra_tables(names, args, tables)
    if "ordering" not in tables:
        return
    table = {}
    for n in names:
        ds = load(n, args)
        for label, file, variant in METHODS:
            method = method_config(file, variant, real_data.paper_dim(n), args)
            a, sec = score(ds, method, args.splits)
            row = dict(
                data=n,
                method=label,
                **real_data.summary(a),
                lam=float(method.lam) if "lam" in method else None,
                lam_grid=list(method.lam_grid) if "lam_grid" in method else None,
                seconds=round(sec, 1),
            )
            print(json.dumps(row), flush=True)
            table[n, label] = row
    print("\n| data | " + " | ".join(m for m, _, _ in METHODS) + " | ordering |")
    print("| --- |" + " --- |" * (len(METHODS) + 1))
    for n in names:
        rows = [table[n, m] for m, _, _ in METHODS]
        cells = [f"{r['rank1']:.2f} ± {r['rank1_std']:.2f} / {r['mAP']:.2f}" for r in rows]
        holds = [
            f"{a} {'>=' if table[n, a]['rank1'] >= table[n, b]['rank1'] else '<'} {b}"
            for a, b in ORDERINGS
        ]
        print(f"| {n} | " + " | ".join(cells) + " | " + "; ".join(holds) + " |")


if __name__ == "__main__":
    app.run(main)
