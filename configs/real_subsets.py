"""The real images shipped in data/, read as the real-data tests read them.

tests/end_to_end/test_real_data.py fits every learner on them against a named baseline, and
benchmarks/bench_real_subsets.py scores any learner on them the same way; both read their
people, splits and feature size from here, so that the two cannot drift apart.

Variants (``configs/real_subsets.py:<arg>``):
  viper  data/viper_subset: 80 VIPeR people, one image per camera, read by the project's
         VIPeR loader; 3 splits of 30 test people (probe cam_a, gallery cam_b), 50 train.
  cuhk01 data/cuhk01_subset: 60 CUHK01 people x 4 images (001-002 camera A, 003-004
         camera B), read by the project's CUHK01 loader with ``protocol='single_shot'``
         (not the loader's default gallery draw, so that the test reads the camera rule);
         3 splits of 30 test people (one camera-A probe and one camera-B gallery image
         each), 30 train.
  orl    data/orl_faces: 40 people x 10 images (images 1-5 camera 0, 6-10 camera 1);
         2 splits of 20 test people, 20 train.

Fields: ``name``, ``path`` and ``options`` are ``warca_jax.datasets.read``'s arguments;
``pca_dims`` is the size of the linear learners' features (each split's training images'
top principal axes of the 2,580-d colour + LBP histograms, which the chi2-kernel learners
use as they are).
"""

import os

import ml_collections

DATA = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "data"))
VARIANTS = ("viper", "orl", "cuhk01")


def get_config(arg: str = "viper") -> ml_collections.ConfigDict:
    """The subset ``arg`` of ``VARIANTS``: where it is, its loader options, the PCA size."""
    if arg not in VARIANTS:
        raise ValueError(f"configs/real_subsets.py has no variant {arg!r}; expected {VARIANTS}")
    if arg == "viper":
        path, options = "viper_subset", {"num_test_ids": 30, "num_splits": 3}
    elif arg == "cuhk01":
        path = "cuhk01_subset"
        options = {"num_test_ids": 30, "num_splits": 3, "protocol": "single_shot"}
    else:
        path, options = "orl_faces", {"num_splits": 2}
    config = ml_collections.ConfigDict(
        {"name": arg, "path": os.path.join(DATA, path), "options": options, "pca_dims": 64}
    )
    config.lock()
    return config
