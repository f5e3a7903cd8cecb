"""Market-1501 (Zheng et al., ICCV 2015) in its published layout, with its fixed split.

Layout: `root/bounding_box_train/`, `root/bounding_box_test/`, `root/query/`, images named
`PPPP_cCsS_FFFFFF_BB.jpg`: 4-digit identity, camera C (1-6), sequence S, frame, box index,
e.g. `0002_c1s1_000451_03.jpg`. Non-image files (Thumbs.db) are ignored.

Protocol (the standard one): one split; train = bounding_box_train (751 identities),
query = query/ (3,368 images), gallery = bounding_box_test (19,732 images). Identity `-1`
(junk boxes, names starting with `-1_`) keeps label -1, which the evaluation removes from
every ranking; identity `0000` (distractors) keeps label 0, an ordinary negative that no
query has. Labels are the published identity numbers and cams the camera numbers (1-6), so
the evaluation drops same-identity same-camera gallery images as the protocol requires.
"""

from __future__ import annotations

import os

import numpy as np

from warca_jax.data import dataset_arrays
from warca_jax.datasets import base

NAME = "market1501"
DIRS = ("bounding_box_train", "bounding_box_test", "query")
PATTERN = r"(-1|\d{4})_c(\d)s(\d+)_(\d+)_(\d+)\.(jpg|jpeg|png)"
EXAMPLE = "0002_c1s1_000451_03.jpg"


def load_market1501(root) -> base.ImageSet:
    """Reads Market-1501 from `root` (module docstring).

    Args:
      root: the folder holding bounding_box_train/, bounding_box_test/ and query/.

    Returns:
      An `ImageSet` of train, gallery and query images (in that order, each sorted by name)
      with the one fixed split.
    """
    root = base.require_layout(root, dataset="Market-1501", dirs=DIRS)
    paths, labels, cams, parts = [], [], [], {}
    for folder in ("bounding_box_train", "bounding_box_test", "query"):
        found = base.list_images(
            os.path.join(root, folder), PATTERN, dataset="Market-1501", example=EXAMPLE
        )
        start = len(paths)
        for path, match in found:
            label = int(match.group(1))
            if folder != "bounding_box_test" and label <= 0:
                raise ValueError(
                    f"Market-1501: {path} has identity {match.group(1)}; junk (-1) and "
                    f"distractor (0000) images belong in bounding_box_test/ only"
                )
            paths.append(path)
            labels.append(label)
            cams.append(int(match.group(2)))
        parts[folder] = np.arange(start, len(paths), dtype=np.int64)
    split = dataset_arrays.Split(
        parts["bounding_box_train"], parts["query"], parts["bounding_box_test"]
    )
    return base.image_set(paths, labels, cams, (split,), NAME)
