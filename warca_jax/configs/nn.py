"""Nearest neighbours with no learning (the study's kNN baseline, section 4.1).

Run:
  python -m warca_jax.main --config=warca_jax/configs/nn.py --workdir=/tmp/nn

Variants (``--config=warca_jax/configs/nn.py:<arg>``):
  euclidean  Euclidean distance (the default).
  manhattan  L1 distance.
  cosine     1 - cosine similarity.
  chi2       chi2 distance on the histogram variant of the synthetic data.
  small      a shrunk Euclidean run for smoke tests (60 identities, 2 splits).

Any distance can also be picked on the command line, e.g. --config.method.distance=cosine.
"""

import ml_collections

from warca_jax.configs import common

VARIANTS = ("euclidean", "manhattan", "cosine", "chi2", "small")


def get_config(arg: str = "euclidean") -> ml_collections.ConfigDict:
    """Returns the nearest-neighbour config for variant ``arg``."""
    if arg not in VARIANTS:
        raise ValueError(f"unknown variant {arg!r}; expected one of {VARIANTS}")
    c = common.base_config(histogram=arg == "chi2", small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "nn"
    # euclidean | manhattan | cosine | chi2 (chi2 needs non-negative features).
    c.method.distance = "euclidean" if arg == "small" else arg
    c.lock()
    return c
