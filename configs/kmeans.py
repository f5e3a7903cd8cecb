"""k-means + nearest neighbours (the study's second baseline, section 4.2).

The gallery is clustered with k-means; each query is compared only with the gallery
entries of its nearest cluster (the others rank after them, by their cluster centre's
distance to the query). Nothing is learned from the training set.

Run:
  python -m experiments.main --config=configs/kmeans.py --workdir=/tmp/kmeans

Variants (``--config=configs/kmeans.py:<arg>``):
  default  10 clusters.
  two      2 clusters (the study's reported setting).
  small    a shrunk run for smoke tests (60 identities, 2 splits, 4 clusters).
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "two", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the kmeans_nn config for variant ``arg``: the settings a reader asks about
    spelled here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/kmeans.py)."""
    c = defaults.experiment_config("kmeans_nn", arg, small=arg == "small", lock=False)
    m = c.method
    m.num_clusters = {"two": 2, "small": 4}.get(arg, 10)  # k; at most the gallery size
    m.iterations = 5 if arg == "small" else 20  # Lloyd iterations
    m.init = "kmeans++"  # 'kmeans++' or 'random' (k distinct gallery points), from the seed
    c.lock()
    return c
