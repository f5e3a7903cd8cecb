"""Times k-reciprocal re-ranking (``warca_jax.evaluation.rerank``) against torchreid's.

Run from the repository root, with a copy of torchreid's ``torchreid/utils/rerank.py``
(pure NumPy; never inside this repository) in a folder of its own::

    python benchmarks/bench_rerank.py --torchreid_rerank_path /work/exp/torchreid_rerank \
        [--nq 3368 --ng 15913]

Synthetic float32 features (identity centre plus noise, ``--ids`` identities, 6 cameras),
Euclidean distances. Both re-rank the same q_g, q_q and g_g matrices (k1 = 20, k2 = 6,
lambda = 0.3); ``k_reciprocal_features`` (distances computed block by block) is timed too.
Prints the times, the ratio, the largest difference of the re-ranked matrices and of the
metrics (``evaluate_distances``) of both.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import time

import numpy as np

from warca_jax.distances import pairwise_distances
from warca_jax.evaluation import evaluate_distances
from warca_jax.evaluation.rerank import k_reciprocal, k_reciprocal_features


def load_torchreid(path: str):
    spec = importlib.util.spec_from_file_location(
        "torchreid_rerank", os.path.join(path, "rerank.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.re_ranking


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchreid_rerank_path", required=True)
    parser.add_argument("--nq", type=int, default=3368)
    parser.add_argument("--ng", type=int, default=15913)
    parser.add_argument("--ids", type=int, default=750)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--noise", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    re_ranking = load_torchreid(args.torchreid_rerank_path)

    rng = np.random.default_rng(args.seed)
    centres = rng.standard_normal((args.ids, args.dim), dtype=np.float32)
    ql, gl = rng.integers(0, args.ids, args.nq), rng.integers(0, args.ids, args.ng)
    qc, gc = rng.integers(0, 6, args.nq), rng.integers(0, 6, args.ng)
    noise = np.float32(args.noise / np.sqrt(2))
    xq = centres[ql] + noise * rng.standard_normal((args.nq, args.dim), dtype=np.float32)
    xg = centres[gl] + noise * rng.standard_normal((args.ng, args.dim), dtype=np.float32)
    qg, qq, gg = (np.asarray(pairwise_distances(a, b)) for a, b in ((xq, xg), (xq, xq), (xg, xg)))
    ids = (ql, gl, qc, gc)
    print(f"nq = {args.nq}, ng = {args.ng}, dim = {args.dim}, ids = {args.ids}, "
          f"cores = {os.cpu_count()}")  # fmt: skip

    t = time.perf_counter()
    ours = k_reciprocal(qg, qq, gg)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    ours_f = k_reciprocal_features(xq, xg)
    t_feat = time.perf_counter() - t
    rss_ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    t = time.perf_counter()
    theirs = re_ranking(qg, qq, gg, k1=20, k2=6, lambda_value=0.3)
    t_theirs = time.perf_counter() - t
    rss_all = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    plain = evaluate_distances(qg, *ids)
    m_ours, m_theirs = evaluate_distances(ours, *ids), evaluate_distances(theirs, *ids)
    m_feat = evaluate_distances(ours_f, *ids)
    print()
    print("| implementation | seconds | speed-up | rank-1 | mAP |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| no re-ranking | | | {plain['rank1']:.2f} | {plain['mAP']:.2f} |")
    rows = [("torchreid `re_ranking`", t_theirs, m_theirs), ("`k_reciprocal`", t_ours, m_ours)]
    rows.append(("`k_reciprocal_features`", t_feat, m_feat))
    for name, sec, m in rows:
        print(f"| {name} | {sec:.2f} | {t_theirs / sec:.1f}x | {m['rank1']:.2f} | {m['mAP']:.2f} |")
    print()
    print(f"max |k_reciprocal - re_ranking| = {np.abs(ours - theirs).max():.2e}")
    print(f"max |k_reciprocal_features - re_ranking| = {np.abs(ours_f - theirs).max():.2e}")
    for key in ("rank1", "rank5", "mAP", "mINP"):
        print(f"|d {key}| = {abs(m_ours[key] - m_theirs[key]):.2e} (matrices), "
              f"{abs(m_feat[key] - m_theirs[key]):.2e} (features)")  # fmt: skip
    print(f"peak RSS: {rss_ours:.2f} GiB after ours, {rss_all:.2f} GiB after torchreid's")


if __name__ == "__main__":
    main()
