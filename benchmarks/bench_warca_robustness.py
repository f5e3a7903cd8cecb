"""WARCA's robustness: rank-1 against the step size, the input's scale and the form.

Three tables, each printed as JSON lines and a markdown table:

* ``kernel``: kernel WARCA with the defaults of ``configs/warca.py:chi2`` on the shared
  synthetic problem (``synthetic.make_reference_problem``, 256-d histograms;
  ``--kernel_size`` training images, as many test images; gallery = image 0 of each
  test identity, probes = images 1-3), over the step sizes ``--etas``, preconditioned
  and plain, and the same without the cosine schedule and the input normalisation
  (``schedule="constant"``, ``normalize="none"``) to show what each does.
* ``linear``: primal WARCA with the defaults of ``configs/warca.py`` on the built-in
  data (the main job's first ``--splits`` splits), over the step sizes and over
  features multiplied by ``--scales``, with ``normalize="msd"`` (the default) and
  ``"none"``.
* ``forms``: on the real-valued features of the shared problem, primal WARCA against
  kernel WARCA with the linear kernel (the form the C++ release would run), both with
  the defaults of ``configs/warca.py``.

  python benchmarks/bench_warca_robustness.py [--tables=kernel,linear,forms]
      [--etas=1e-3,1e-2,1e-1] [--scales=1e-4,1e-2,1,1e2,1e4] [--kernel_size=2400]
      [--splits=3] [--seed=0]
"""

import argparse
import json
import os
import platform
import time

import jax
import numpy as np

from warca_jax import config_files, datasets, defaults, evaluation, synthetic
from warca_jax.methods import warca

get_config = config_files.load_config_module("configs/warca.py").get_config


def _floats(text):
    return [float(v) for v in text.split(",") if v.strip()]


def _fit_eval(method, xtr, ytr, probes, gallery, seed):
    t0 = time.perf_counter()
    metric, hist = warca.fit(xtr, ytr, method, seed=seed)
    fit_s = time.perf_counter() - t0
    (xq, yq, cq), (xg, yg, cg) = probes, gallery
    res = evaluation.evaluate(metric.transform(xq), metric.transform(xg), yq, yg, cq, cg)
    return {"rank1": res["rank1"], "mAP": res["mAP"], "fit_s": fit_s, "last": hist[-1]}


def _method(variant, **overrides):
    return defaults.overridden(get_config(variant).method, **overrides)


def _reference_split(size, kind):
    p = synthetic.make_reference_problem(num_ids=2 * size // 4, seed=0)
    xtr = p[f"{kind}_train"].astype(np.float32)
    xte = p[f"{kind}_test"].astype(np.float32)
    y, c = p["test_labels"], p["test_cams"]
    g = c == 0
    probes = (xte[~g], y[~g], c[~g])
    gallery = (xte[g], y[g], c[g])
    return xtr, p["train_labels"], probes, gallery


def table_kernel(args, emit):
    xtr, ytr, probes, gallery = _reference_split(args.kernel_size, "hist")
    rows = []
    for schedule, normalize in (("cosine", "msd"), ("constant", "none")):
        for precond in (True, False):
            for eta in args.etas:
                m = _method(
                    "chi2",
                    learning_rate=eta,
                    preconditioned=precond,
                    schedule=schedule,
                    normalize=normalize,
                )
                r = _fit_eval(m, xtr, ytr, probes, gallery, args.seed)
                row = dict(
                    table="kernel",
                    n_train=len(ytr),
                    schedule=schedule,
                    normalize=normalize,
                    preconditioned=precond,
                    eta=eta,
                    rank1=round(r["rank1"], 2),
                    mAP=round(r["mAP"], 2),
                    fit_s=round(r["fit_s"], 1),
                    closer_frac=round(r["last"]["closer_frac"], 4),
                    mean_rank=round(r["last"]["mean_rank"], 1),
                )
                emit(row)
                rows.append(row)
    print(f"\nkernel WARCA (chi2-RBF), {len(ytr)} training images, rank-1 / mAP\n")
    print("| schedule, normalize | update | " + " | ".join(f"eta={e:g}" for e in args.etas) + " |")
    print("| --- | --- |" + " --- |" * len(args.etas))
    for schedule, normalize in (("cosine", "msd"), ("constant", "none")):
        for precond in (True, False):
            cells = [
                f"{r['rank1']:.1f} / {r['mAP']:.1f}"
                for r in rows
                if (r["schedule"], r["preconditioned"]) == (schedule, precond)
            ]
            kind = "preconditioned" if precond else "plain"
            print(f"| {schedule}, {normalize} | {kind} | " + " | ".join(cells) + " |")


def table_linear(args, emit):
    config = get_config("linear")
    ds = datasets.from_config(config.data)
    splits = ds.splits[: args.splits]

    def run(**overrides):
        scale = overrides.pop("scale", 1.0)
        m = _method("linear", **overrides)
        r1, mAP = [], []
        for s, sp in enumerate(splits):
            x = (ds.features.astype(np.float64) * scale).astype(np.float32)
            q, g = sp.query_idx, sp.gallery_idx
            r = _fit_eval(
                m,
                x[sp.train_idx],
                ds.labels[sp.train_idx],
                (x[q], ds.labels[q], ds.cams[q]),
                (x[g], ds.labels[g], ds.cams[g]),
                config.seed + s,
            )
            r1.append(r["rank1"])
            mAP.append(r["mAP"])
        return float(np.mean(r1)), float(np.mean(mAP))

    print_rows = []
    for eta in args.etas:
        r1, mAP = run(learning_rate=eta)
        row = dict(table="linear", vary="eta", eta=eta, scale=1.0, normalize="msd")
        row.update(rank1=round(r1, 2), mAP=round(mAP, 2), splits=len(splits))
        emit(row)
        print_rows.append((f"eta={eta:g}", "msd", r1, mAP))
    for normalize in ("msd", "none"):
        for scale in args.scales:
            r1, mAP = run(scale=scale, normalize=normalize)
            row = dict(table="linear", vary="scale", eta=1e-2, scale=scale, normalize=normalize)
            row.update(rank1=round(r1, 2), mAP=round(mAP, 2), splits=len(splits))
            emit(row)
            print_rows.append((f"features x{scale:g}", normalize, r1, mAP))
    print(f"\nlinear WARCA, built-in data, mean of {len(splits)} splits\n")
    print("| setting | normalize | rank-1 | mAP |\n| --- | --- | --- | --- |")
    for name, normalize, r1, mAP in print_rows:
        print(f"| {name} | {normalize} | {r1:.2f} | {mAP:.2f} |")


def table_forms(args, emit):
    xtr, ytr, probes, gallery = _reference_split(args.kernel_size, "gauss")
    print(f"\nprimal and linear-kernel WARCA, {len(ytr)} training images (256-d)\n")
    print("| form | eta | rank-1 | mAP | fit s |\n| --- | --- | --- | --- | --- |")
    for variant, name in (("linear", "primal W"), ("kernel", "kernel A, linear kernel")):
        for eta in args.etas:
            r = _fit_eval(_method(variant, learning_rate=eta), xtr, ytr, probes, gallery, 0)
            row = dict(table="forms", form=variant, eta=eta, n_train=len(ytr))
            row.update(rank1=round(r["rank1"], 2), mAP=round(r["mAP"], 2))
            row.update(fit_s=round(r["fit_s"], 1))
            emit(row)
            print(f"| {name} | {eta:g} | {r['rank1']:.2f} | {r['mAP']:.2f} | {r['fit_s']:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--tables", default="kernel,linear,forms")
    ap.add_argument("--etas", type=_floats, default=[1e-3, 1e-2, 1e-1])
    ap.add_argument("--scales", type=_floats, default=[1e-4, 1e-2, 1.0, 1e2, 1e4])
    ap.add_argument("--kernel_size", type=int, default=2400, help="training images")
    ap.add_argument("--splits", type=int, default=3, help="built-in splits (linear)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    tables = {"kernel": table_kernel, "linear": table_linear, "forms": table_forms}
    chosen = [t.strip() for t in args.tables.split(",") if t.strip()]
    unknown = sorted(set(chosen) - set(tables))
    if unknown:
        ap.error(f"unknown tables {unknown}; expected some of {sorted(tables)}")
    machine = {
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
    }
    print(json.dumps(machine))
    for name in chosen:
        tables[name](args, lambda row: print(json.dumps(row), flush=True))


if __name__ == "__main__":
    main()
