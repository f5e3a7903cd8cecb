"""Nearest neighbours with no learning (the study's kNN baseline, section 4.1).

Run:
  python -m experiments.main --config=configs/nn.py --workdir=/tmp/nn

Variants (``--config=configs/nn.py:<arg>``):
  euclidean  Euclidean distance (the default).
  manhattan  L1 distance.
  cosine     1 - cosine similarity.
  chi2       chi2 distance on the histogram variant of the synthetic data.
  small      a shrunk Euclidean run for smoke tests (60 identities, 2 splits).

Any distance can also be picked on the command line, e.g. --config.method.distance=cosine.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("euclidean", "manhattan", "cosine", "chi2", "small")


def get_config(arg: str = "euclidean") -> ml_collections.ConfigDict:
    """Returns the nn config for variant ``arg``: the settings a reader asks about spelled
    here, as the library's defaults set them for each variant, every other field the
    library's (warca_jax/methods/baselines.py)."""
    c = defaults.experiment_config(
        "nn", arg, histogram=arg == "chi2", small=arg == "small", lock=False
    )
    m = c.method
    # euclidean | manhattan | cosine | chi2 (chi2 needs non-negative features)
    m.distance = "euclidean" if arg == "small" else arg
    c.lock()
    return c
