"""The CUHK03 study's figures: rank-k curves, ranked lists and SGD validation costs.

Run:
  python -m experiments.study_figures --config=configs/study_figures.py \\
      --workdir=/tmp/figures

Variants (``--config=configs/study_figures.py:<arg>``):
  synthetic  the built-in synthetic re-id data (200 identities x 4 images, 64-d): the
             study's baselines (Euclidean, Manhattan and cosine kNN, k-means with two
             clusters, Mahalanobis, KISSME) and its two SGD optimisers (the default).
  orl        the real ORL faces in data/orl_faces (``ORL_PATH``,
             2,580-d colour + LBP descriptor), so the ranked lists show face images; the
             SGD optimisers learn a 64-d map from a random orthonormal start and hold 5 of
             the 20 training people out for validation.
  small      a shrunk run for tests (60 identities, kNN and both SGD optimisers, 20 epochs).

Each entry of ``methods`` is a config label ``file`` or ``file:variant`` of configs/; only
that config's ``method`` section is used, with ``overrides`` applied, on this
config's data. Override any field on the command line, e.g.
  --config.methods="('nn','kissme','triplet_sgd')" --config.ranked.method=kissme \\
  --config.max_rank=30
"""

import os

import ml_collections

from warca_jax.methods import checks
from warca_jax.runs import defaults

# The ORL faces shipped in the repository (data/orl_faces; see data/README.md).
ORL_PATH = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "data", "orl_faces"))

VARIANTS = ("synthetic", "orl", "small")

_STUDY_METHODS = (
    "nn",
    "nn:manhattan",
    "nn:cosine",
    "kmeans_nn:two",
    "mahalanobis",
    "kissme",
    "pairwise_sgd",
    "triplet_sgd",
)


def get_config(arg: str = "synthetic") -> ml_collections.ConfigDict:
    """Returns the study-figures config for variant ``arg``."""
    checks.check_variant("the study's figures", arg, VARIANTS)
    base = defaults.base_config(small=arg == "small")
    c = ml_collections.ConfigDict()
    c.seed = 0  # seed of the fits (split s is fitted with seed + s); same seed, same result.
    c.data = base.data  # the data section of warca_jax/runs/defaults.py (documented there).
    c.data.num_splits = 1  # splits the dataset is cut into (random-split datasets).

    c.eval = ml_collections.ConfigDict()
    # CUHK03 single-shot as torchreid draws it: per query, one random gallery image per
    # identity after its own identity-and-camera entries are removed; averaged over repeats.
    c.eval.single_shot = False
    c.eval.repeats = 10  # single-shot repetitions.

    # Config labels ('file' or 'file:variant' of configs/), a tuple in legend order, e.g.
    # --config.methods="('nn','kissme')".
    c.methods = _STUDY_METHODS
    # label -> {method field: value}, applied to that label's method section, e.g.
    # --config.overrides="{'pairwise_sgd': {'num_val_ids': 5}}". A field the section lacks
    # is refused.
    c.overrides = ml_collections.ConfigDict()
    c.num_splits = 1  # the first splits of the dataset used; rank-k values are averaged.
    c.max_rank = 20  # last rank k of the rank-k curves (at most the smallest gallery).

    c.ranked = ml_collections.ConfigDict()
    c.ranked.method = "triplet_sgd"  # the label (one of `methods`) whose ranked lists are drawn.
    c.ranked.num_queries = 5  # queries drawn, among split 0's queries with a true match.
    c.ranked.top_k = 10  # gallery entries shown per query, closest first.
    c.ranked.seed = 0  # seed of the query draw.

    c.progress = False  # progress bars of the learners and of descriptor extraction.

    if arg == "orl":
        c.data.name = "orl"
        c.data.path = ORL_PATH
        c.data.descriptor = "color_lbp"
        at = _STUDY_METHODS.index("nn:cosine") + 1
        c.methods = (*_STUDY_METHODS[:at], "nn:chi2", *_STUDY_METHODS[at:])
        sgd = {"dim": 64, "init": "orthonormal", "num_val_ids": 5}
        c.overrides = {"pairwise_sgd": dict(sgd), "triplet_sgd": dict(sgd)}
    elif arg == "small":
        c.methods = ("nn", "pairwise_sgd:small", "triplet_sgd:small")
        c.ranked.method = "triplet_sgd:small"
        c.ranked.num_queries = 3
        c.max_rank = 10
    c.lock()
    return c
