"""SDML (Qi et al., ICML 2009) on the built-in synthetic re-id data (or a .npz).

Run:
  python -m experiments.main --config=configs/sdml.py --workdir=/tmp/sdml

Variants (``--config=configs/sdml.py:<arg>``):
  default       metric-learn 0.7.0's SDML_Supervised values (balance_param 0.5,
                sparsity_param 0.01, identity prior, 20 C^2 pairs of each kind) with the
                loss matrix normalized (each kind of pair averaged, scaled to the prior):
                P is then positive definite whatever the number of pairs.
  metric_learn  metric-learn's loss matrix too (the pairs' sum, as in the paper): on
                re-identification data the dissimilar pairs outnumber the similar ones and
                P's diagonal is negative, so that the problem has no minimiser and ``fit``
                refuses it (naming the largest balance_param that works).
  small         the default on shrunk data, for smoke tests.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "metric_learn", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the sdml config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("sdml", arg, small=arg == "small")
