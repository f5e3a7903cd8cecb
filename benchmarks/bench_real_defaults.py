"""WARCA's defaults on real descriptors: lambda, step size, input scale, and why.

Real data is the judge of a default: this script runs WARCA's default configs
(``configs/warca.py`` linear and ``:chi2``) with one field changed at a time on

* VIPeR read from its images (``--viper``, the published cam_a/ cam_b/ layout; the
  2,580-d colour + LBP descriptor, D' = 100, the loader's 316/316 random splits),
* the same descriptor reduced by PCA to 76 dimensions (fitted on each split's training
  images; D' = 40), the size of many published VIPeR feature sets,
* VIPeR's LOMO descriptor (26,960-d; kernel form only: the primal W would be 100 x 26,960),
* the ORL faces shipped in data/orl_faces (D' = 40),
* the built-in synthetic data (Gaussian for the linear form, its histogram variant for
  the chi2 kernel; D' = 40),

and prints JSON lines and markdown tables of rank-1 / mAP (mean over ``--splits``).

Tables (``--tables``):
  lam       lambda in {1e-4, 1e-3, 1e-2} for both forms on every dataset.
  eta       the step size in {1e-3, 1e-2, 1e-1} at the defaults, on VIPeR.
  scale     the features multiplied by 1e-4, 1 and 1e4 at the defaults, on VIPeR.
  geometry  why lambda matters: at lambda 1e-4 and 1e-2, the learned W's mean squared
            projected distances of same- and different-identity training pairs and the
            share of (i, j, k) triplets inside the margin (d_ik < d_ij + 1).
  gamma     the chi2-RBF bandwidth: the rule 1 / mean chi2 distance against the authors'
            demo value 0.01, on VIPeR at the kernel default.
  cv        what the protocol's validation sees: WARCA-chi2 at lambda 1e-3 and 1e-2 trained
            on the training part of the protocol's validation split (70% of a split's
            training people), scored on the validation people and on the split's test
            people, splits 0 and 1.

  python benchmarks/bench_real_defaults.py --viper=PATH/VIPeR [--tables=lam,eta,scale,geometry]
      [--splits=3] [--cache_dir=/tmp/warca_cache]
"""

import argparse
import json
import os
import platform
import time

import jax
import numpy as np

from warca_jax import config_files, datasets, defaults, evaluation, linalg, pipeline

_warca_config = config_files.load_config_module("configs/warca.py")
ORL_PATH = _warca_config.ORL_PATH
get_config = _warca_config.get_config

LAMS = (1e-4, 1e-3, 1e-2)
ETAS = (1e-3, 1e-2, 1e-1)
SCALES = (1e-4, 1.0, 1e4)


def _pca_split(ds, split, k):
    """The dataset with features projected on the top k principal axes of the split's training
    images (fitted on them alone)."""
    mean, comps = linalg.pca(ds.features[split.train_idx], variance=1.0, max_dim=k)
    return ds._replace(features=((ds.features - mean) @ comps.T).astype(np.float32))


class Bench:
    def __init__(self, args):
        self.args = args
        self.cache = {}
        self.eval_cfg = defaults.base_config().eval

    def data(self, name):
        if name not in self.cache:
            a = self.args
            if name in ("viper", "viper_pca76", "viper_lomo"):
                desc = "lomo" if name == "viper_lomo" else "color_lbp"
                ds = datasets.read("viper", a.viper, descriptor=desc, cache_dir=a.cache_dir)
            elif name == "orl":
                ds = datasets.read("orl", ORL_PATH, descriptor="color_lbp", cache_dir=a.cache_dir)
            else:
                ds = datasets.from_config(defaults.base_config(histogram=name == "synth_hist").data)
            self.cache[name] = ds
        return self.cache[name]

    def run(self, name, form, scale=1.0, **overrides):
        ds = self.data(name)
        method = get_config("chi2" if form == "chi2" else "linear").method
        dim = 100 if name in ("viper", "viper_lomo") else 40
        method = defaults.overridden(method, dim=dim, **overrides)
        scores, t0 = [], time.perf_counter()
        for s, split in enumerate(ds.splits[: self.args.splits]):
            d = _pca_split(ds, split, 76) if name == "viper_pca76" else ds
            if scale != 1.0:
                d = d._replace(features=(d.features.astype(np.float64) * scale).astype(np.float32))
            x, y = d.features[split.train_idx], d.labels[split.train_idx]
            metric, _ = pipeline.fit_method(x, y, method, seed=s)
            r = evaluation.evaluate_metric(metric, d, split, self.eval_cfg)
            scores.append((r["rank1"], r["mAP"]))
        r1, mAP = np.mean(scores, 0)
        return dict(
            data=name,
            form=form,
            scale=scale,
            lam=float(method.lam),
            eta=float(method.learning_rate),
            rank1=round(float(r1), 2),
            mAP=round(float(mAP), 2),
            seconds=round(time.perf_counter() - t0, 1),
        )


def geometry(bench, name, lam):
    """Projected pair distances and the share of margin-violating triplets, split 0."""
    ds = bench.data(name)
    split = ds.splits[0]
    method = defaults.overridden(get_config("linear").method, dim=100, lam=lam)
    x, y = ds.features[split.train_idx], ds.labels[split.train_idx]
    metric, _ = pipeline.fit_method(x, y, method, seed=0)
    z = np.asarray(metric.transform(x), np.float64)
    sq = np.sum(z * z, 1)
    d = sq[:, None] + sq[None, :] - 2 * z @ z.T
    same = (y[:, None] == y[None, :]) & ~np.eye(len(y), dtype=bool)
    diff = y[:, None] != y[None, :]
    pairs = zip(*np.nonzero(same), strict=True)
    inside = [np.mean(d[i, diff[i]] < d[i, j] + 1.0) for i, j in pairs]
    r = evaluation.evaluate_metric(metric, ds, split, bench.eval_cfg)
    return dict(
        data=name,
        lam=lam,
        same_msd=round(float(d[same].mean()), 3),
        diff_msd=round(float(d[diff].mean()), 3),
        inside_margin=round(float(np.mean(inside)), 3),
        rank1=round(r["rank1"], 2),
    )


def _cell(rows, **match):
    for r in rows:
        if all(r[k] == v for k, v in match.items()):
            return f"{r['rank1']:.2f} / {r['mAP']:.2f}"
    return "-"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--viper", required=True, help="VIPeR folder holding cam_a/ and cam_b/")
    p.add_argument("--tables", default="lam,eta,scale,geometry,gamma,cv")
    p.add_argument("--splits", type=int, default=3)
    p.add_argument("--cache_dir", default="", help="descriptor cache ('' : none)")
    args = p.parse_args()
    if not os.path.isdir(os.path.join(args.viper, "cam_a")):
        p.error(f"--viper={args.viper!r} has no cam_a/ folder; expected VIPeR's published layout")
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
    bench, tables = Bench(args), args.tables.split(",")
    done = []  # every row so far: the eta and scale tables take their default cell from here

    def emit(row):
        print(json.dumps(row), flush=True)
        done.append(row)
        return row

    def default_lam(form):
        return float(get_config("chi2" if form == "chi2" else "linear").method.lam)

    if "lam" in tables:
        plan = [
            ("viper", "linear"),
            ("viper", "chi2"),
            ("viper_pca76", "linear"),
            ("viper_lomo", "chi2"),
            ("orl", "chi2"),
            ("synth", "linear"),
            ("synth_hist", "chi2"),
        ]
        rows = [emit(bench.run(n, f, lam=lam)) for n, f in plan for lam in LAMS]
        print("\n| data | form | " + " | ".join(f"lambda={v:g}" for v in LAMS) + " |")
        print("| --- | --- |" + " --- |" * len(LAMS))
        for n, f in plan:
            cells = [_cell(rows, data=n, form=f, lam=v) for v in LAMS]
            print(f"| {n} | {f} | " + " | ".join(cells) + " |")

    def sweep(field, key, values, default, header):
        """The defaults on VIPeR with ``field`` (a ``Bench.run`` keyword, ``key`` in its
        rows) set to each of ``values``; the default value's runs are reused when done."""
        for f in ("linear", "chi2"):
            for v in values:
                if v == default and any(
                    r["data"] == "viper"
                    and r["form"] == f
                    and r["lam"] == default_lam(f)
                    and r["eta"] == 1e-2
                    and r["scale"] == 1.0
                    for r in done
                ):
                    continue
                emit(bench.run("viper", f, **({} if v == default else {field: v})))
        rows = [
            r
            for r in done
            if r["data"] == "viper"
            and r["lam"] == default_lam(r["form"])
            and (r["eta"] == 1e-2 or key == "eta")
            and (r["scale"] == 1.0 or key == "scale")
        ]
        print("\n| VIPeR, defaults | " + " | ".join(header.format(v) for v in values) + " |")
        print("| --- |" + " --- |" * len(values))
        for f in ("linear", "chi2"):
            print(f"| {f} | " + " | ".join(_cell(rows, form=f, **{key: v}) for v in values) + " |")

    if "eta" in tables:
        sweep("learning_rate", "eta", ETAS, 1e-2, "eta={:g}")
    if "scale" in tables:
        sweep("scale", "scale", SCALES, 1.0, "features x {:g}")
    if "geometry" in tables:
        rows = [emit(geometry(bench, "viper", lam)) for lam in (1e-4, 1e-2)]
        head = "same-id msd | different-id msd | inside the margin | rank-1"
        print(f"\n| VIPeR, linear, split 0 | {head} |")
        print("| --- | --- | --- | --- | --- |")
        for r in rows:
            print(
                f"| lambda={r['lam']:g} | {r['same_msd']} | {r['diff_msd']} | "
                f"{r['inside_margin']} | {r['rank1']} |"
            )
    extra_tables(bench, tables, emit)


def cv_view(bench, lam, s):
    """WARCA-chi2 trained as the protocol's validation trains it; scored on val and on test."""
    from warca_jax.protocol import datasets as protocol_datasets

    ds = bench.data("viper")
    split = ds.splits[s]
    val = protocol_datasets.validation_split(ds, s, fraction=0.3, seed=0)
    method = defaults.overridden(get_config("chi2").method, dim=100, lam=lam)
    metric, _ = pipeline.fit_method(
        ds.features[val.train_idx], ds.labels[val.train_idx], method, seed=s
    )
    on_val = evaluation.evaluate_metric(metric, ds, val, bench.eval_cfg)
    on_test = evaluation.evaluate_metric(metric, ds, split, bench.eval_cfg)
    return dict(
        split=s,
        lam=lam,
        val_rank1=round(on_val["rank1"], 2),
        val_mAP=round(on_val["mAP"], 2),
        test_rank1=round(on_test["rank1"], 2),
        test_mAP=round(on_test["mAP"], 2),
    )


def extra_tables(bench, tables, emit):
    if "gamma" in tables:
        rows = [emit(bench.run("viper", "chi2", kernel_gamma=g)) for g in (0.0, 0.01)]
        print("\n| VIPeR, chi2 default | gamma = 1 / mean chi2 | gamma = 0.01 |")
        print("| --- | --- | --- |")
        print(
            f"| rank-1 / mAP | {rows[0]['rank1']:.2f} / {rows[0]['mAP']:.2f} | "
            f"{rows[1]['rank1']:.2f} / {rows[1]['mAP']:.2f} |"
        )
    if "cv" in tables:
        rows = [emit(cv_view(bench, lam, s)) for s in (0, 1) for lam in (1e-3, 1e-2)]
        print("\n| split | lambda | validation rank-1 / mAP | test rank-1 / mAP |")
        print("| --- | --- | --- | --- |")
        for r in rows:
            print(
                f"| {r['split']} | {r['lam']:g} | {r['val_rank1']} / {r['val_mAP']} | "
                f"{r['test_rank1']} / {r['test_mAP']} |"
            )


if __name__ == "__main__":
    main()
