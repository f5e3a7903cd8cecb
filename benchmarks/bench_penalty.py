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
"""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np
from absl import app, flags

from warca_jax import defaults, evaluation
from warca_jax.methods import warca
from warca_jax.synthetic import make_reference_problem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_NUM_IDS = flags.DEFINE_list("num_ids", "200,600,1200", "the problem's identities")
_IMAGES = flags.DEFINE_list("images_per_id", "2,4", "the first k images of each person")
_LAMS = flags.DEFINE_list("lams", "1e-5,1e-4,1e-3,1e-2", "the penalty weights swept")
_SEED = flags.DEFINE_integer("seed", 1, "training seed (the data is fixed)")


def rank1(metric, x_test, labels, cams) -> float:
    """Test rank-1: gallery = image 0 of each test person, probes = images 1-3."""
    emb = np.asarray(metric.transform(x_test))
    g, q = cams == 0, cams != 0
    res = evaluation.evaluate(emb[q], emb[g], labels[q], labels[g], cams[q], cams[g])
    return float(res["rank1"])


def main(argv) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    lams = [float(v) for v in _LAMS.value]
    base = defaults.load_config_module(os.path.join(ROOT, "configs", "warca.py"))
    print(f"# {platform.node()}, {os.cpu_count()} CPUs", flush=True)
    rows = []
    for num_ids in [int(v) for v in _NUM_IDS.value]:
        prob = make_reference_problem(num_ids, seed=0)
        x, y = prob["hist_train"], prob["train_labels"]
        first = np.arange(len(y)) - np.searchsorted(y, y)  # image index within its person
        for k in [int(v) for v in _IMAGES.value]:
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
                scores[lam] = rank1(metric, *test)
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
