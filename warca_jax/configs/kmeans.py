"""k-means + nearest neighbours (the study's second baseline, section 4.2).

The gallery is clustered with k-means; each query is compared only with the gallery
entries of its nearest cluster (the others rank after them, by their cluster centre's
distance to the query). Nothing is learned from the training set.

Run:
  python -m warca_jax.main --config=warca_jax/configs/kmeans.py --workdir=/tmp/kmeans

Variants (``--config=warca_jax/configs/kmeans.py:<arg>``):
  default  10 clusters.
  two      2 clusters (the study's reported setting).
  small    a shrunk run for smoke tests (60 identities, 2 splits, 4 clusters).
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("default", "two", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the k-means search config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "kmeans_nn"
    c.method.num_clusters = 10  # k; at most the gallery size.
    c.method.iterations = 20  # Lloyd iterations.
    c.method.init = "kmeans++"  # 'kmeans++' or 'random' (k distinct gallery points), from the seed.
    if arg == "two":
        c.method.num_clusters = 2
    elif arg == "small":
        c.method.num_clusters = 4
        c.method.iterations = 5
    c.lock()
    return c
