"""k-means + kNN against brute-force nearest neighbours: accuracy, distances and time.

The CUHK03 study's second baseline clusters the gallery and searches each query's nearest
cluster only. This measures, on synthetic features shaped like the study's test set (700
identities, 2,048-d, 2 queries per identity from camera 0: 1,400 queries; the 3,500
camera-1 images as gallery): rank-1 and mAP of both searches, the fraction of
query-gallery distances the cluster search computes (`search_cost`), and wall times
(warm: each is run once before timing): clustering the gallery, the cluster search with
its clustering, and brute force.

  python benchmarks/bench_kmeans.py [--clusters=2,10,50] [--dim=2048]
"""

import argparse
import json
import time

import numpy as np

from warca_jax import dataset_arrays, distances, evaluation
from warca_jax.methods.kmeans import KMeansMetric


def _timed(fn):
    fn()  # compile
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", default="2,10,50")
    ap.add_argument("--dim", type=int, default=2048)
    args = ap.parse_args()
    x, y, cams = dataset_arrays.make_synthetic(
        num_ids=700,
        images_per_id=10,
        num_cams=2,
        dim=args.dim,
        signal_dim=64,
        num_nuisance=32,
        seed=0,
    )
    q, g = cams == 0, cams == 1
    # Study shape: 2 queries per identity, the rest of camera 1 as gallery.
    first_two = np.zeros(len(y), bool)
    for ident in np.unique(y):
        first_two[np.flatnonzero(q & (y == ident))[:2]] = True
    q = first_two
    xq, xg = x[q], x[g]

    def score(d):
        r = evaluation.evaluate_distances(d, y[q], y[g], cams[q], cams[g])
        return round(r["rank1"], 2), round(r["mAP"], 2)

    d_brute, brute_s = _timed(
        lambda: np.asarray(distances.pairwise_distances(xq, xg, distance="euclidean"))
    )
    r1, m = score(d_brute)
    print(
        json.dumps(
            {
                "search": "brute",
                "queries": int(q.sum()),
                "gallery": int(g.sum()),
                "dim": args.dim,
                "rank1": r1,
                "mAP": m,
                "distances_frac": 1.0,
                "search_s": round(brute_s, 3),
            }
        ),
        flush=True,
    )
    for k in map(int, args.clusters.split(",")):
        metric = KMeansMetric("kmeans", args.dim, num_clusters=k, name="kmeans_nn")
        _, cluster_s = _timed(lambda metric=metric: metric.clusters(xq, xg))
        d_km, km_s = _timed(lambda metric=metric: metric.pairwise_distances(xq, xg))
        r1, m = score(d_km)
        print(
            json.dumps(
                {
                    "search": f"kmeans k={k}",
                    "rank1": r1,
                    "mAP": m,
                    "distances_frac": round(metric.search_cost(xq, xg), 4),
                    "clustering_s": round(cluster_s, 3),
                    "search_s_with_clustering": round(km_s, 3),
                    "search_s_without_clustering": round(km_s - cluster_s, 3),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
