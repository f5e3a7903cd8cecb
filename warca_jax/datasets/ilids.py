"""i-LIDS MCTS (Zheng et al., BMVC 2009): 476 images of 119 people from an airport.

Layout: one folder `root/` of images named `NNNNMMM.jpg`: 4-digit identity, 3-digit index,
e.g. `0001001.jpg` (the published archive's `i-LIDS_Pedestrian/Persons/` is such a root).

The images carry no camera ids, so every image gets its own camera id (its index): the
evaluation then drops no true match. Protocol (paper section 4.1, P = 60): 10 random
splits; for each test identity one random image is the probe and its other images the
gallery. Identities with one image always train.
"""

from __future__ import annotations

import numpy as np

from warca_jax.datasets import base

NAME = "ilids"
PATTERN = r"(\d{4})(\d{3})\.jpg"
EXAMPLE = "0001001.jpg (identity 0001, image 001)"


def load_ilids(root, *, num_test_ids=60, num_splits=10, seed=0) -> base.ImageSet:
    """Reads i-LIDS MCTS from `root`, the folder of its .jpg images (module docstring),
    with `base.protocol_image_set`'s splits: labels are the identity numbers and every
    image is a camera of its own (its index)."""
    options = base.split_options(num_test_ids=num_test_ids, num_splits=num_splits, seed=seed)
    root = base.require_layout(root, dataset="i-LIDS")
    found = base.list_images(root, PATTERN, dataset="i-LIDS", example=EXAMPLE)
    labels = [int(m.group(1)) for _, m in found]
    cams = np.arange(len(found))  # every image a camera of its own
    return base.protocol_image_set([p for p, _ in found], labels, cams, NAME, **options)
