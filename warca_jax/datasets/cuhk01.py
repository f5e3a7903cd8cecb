"""CUHK01 (Li et al., ACCV 2012): 971 identities x 4 images from two camera views.

Layout: `root/campus/` with images named `NNNNMMM.png`: 4-digit identity, 3-digit index
001-004, e.g. `0001001.png`; indices 001-002 come from camera A (cam 0), 003-004 from
camera B (cam 1).

Protocol (paper section 4.1, P = 486): 10 random splits of 486 test identities, the other
485 train. Camera rule: for each test identity one random camera-A image is the probe and
one random camera-B image the gallery (single shot); `multi_shot=True` uses both
camera-A images as probes and both camera-B images as gallery. Identities lacking one of
the cameras always train.
"""

from __future__ import annotations

import os

import numpy as np

from warca_jax import splits as splits_lib
from warca_jax.datasets import base

NAME = "cuhk01"
PATTERN = r"(\d{4})(\d{3})\.png"
EXAMPLE = "0001001.png (identity 0001, image 001; images 001-002 camera A, 003-004 camera B)"


def load_cuhk01(
    root, *, num_test_ids=486, num_splits=10, seed=0, multi_shot=False
) -> base.ImageSet:
    """Reads CUHK01 from `root` (module docstring).

    Args:
      root: folder holding campus/.
      num_test_ids: test identities per split (486 in the paper).
      num_splits: the number of random splits.
      seed: the same seed gives the same splits.
      multi_shot: both images of each camera instead of one random image.

    Returns:
      An `ImageSet`: labels are the identity numbers, cams 0 (A) and 1 (B).
    """
    base.check_split_options(num_splits=num_splits, seed=seed)
    root = base.require_layout(root, dataset="CUHK01", dirs=("campus",))
    found = base.list_images(
        os.path.join(root, "campus"), PATTERN, dataset="CUHK01", example=EXAMPLE
    )
    labels, cams = [], []
    for path, match in found:
        index = int(match.group(2))
        if not 1 <= index <= 4:
            raise ValueError(
                f"CUHK01: {path} has image index {index}; expected 001-004 in names like {EXAMPLE}"
            )
        labels.append(int(match.group(1)))
        cams.append(0 if index <= 2 else 1)
    cams = np.asarray(cams, dtype=np.int64)
    shots = None if multi_shot else 1
    splits = splits_lib.probe_gallery_splits(
        labels,
        cams,
        num_test_ids=num_test_ids,
        num_splits=num_splits,
        seed=seed,
        probe_mask=cams == 0,
        gallery_mask=cams == 1,
        probes_per_id=shots,
        gallery_per_id=shots,
        name=NAME,
    )
    return base.image_set([p for p, _ in found], labels, cams, splits, NAME)
