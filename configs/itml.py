"""ITML (Davis et al., ICML 2007) on the built-in synthetic re-id data (or a .npz).

Run:
  python -m experiments.main --config=configs/itml.py --workdir=/tmp/itml

Variants (``--config=configs/itml.py:<arg>``):
  default  metric-learn 0.7.0's ITML_Supervised defaults (gamma 1, tol 1e-3, at most
           1,000 sweeps, 20 C^2 constraints of each kind, identity prior), with the paper's
           bounds: percentiles of squared distances.
  small    a shrunk run for smoke tests (60 identities, 2 splits, fewer constraints).

Every sweep projects A onto each constraint once (O(D^2) each): the cost of a sweep is
O(P D^2) for P constraints, so cap num_constraints on large training sets.
"""

import ml_collections

from warca_jax.runs import defaults

VARIANTS = ("default", "small")


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the itml config for variant ``arg``: the library's defaults on the data."""
    return defaults.experiment_config("itml", arg, small=arg == "small")
