"""CAVIAR4REID (Cheng et al., BMVC 2011): 72 identities from two cameras in a shopping mall.

Layout: one folder `root/` of images named `NNNNMMM.jpg`: 4-digit identity, 3-digit index,
e.g. `0001001.jpg`; indices 001-010 come from camera 0 and 011-020 from camera 1 (the
published archive's `CAVIARa/` folder is such a root).

Protocol (paper section 4.1, P = 36): 10 random splits; as in the literature, test
identities are drawn among those seen by both cameras (50 of 72); the others always train.
For each test identity one random image (of either camera) is the probe and all its other
images are the gallery. Cams are the real cameras, so the evaluation ignores the probe's
same-camera images and every match is across cameras.
"""

from __future__ import annotations

from warca_jax.datasets import base

NAME = "caviar"
PATTERN = r"(\d{4})(\d{3})\.jpg"
EXAMPLE = "0001001.jpg (identity 0001, image 001; images 001-010 camera 0, 011-020 camera 1)"


def load_caviar(root, *, num_test_ids=36, num_splits=10, seed=0) -> base.ImageSet:
    """Reads CAVIAR4REID from `root`, the folder of its .jpg images (module docstring);
    the split options are those of `base.protocol_image_set`. Labels are the identity
    numbers, cams 0 and 1."""
    options = base.split_options(num_test_ids=num_test_ids, num_splits=num_splits, seed=seed)
    root = base.require_layout(root, dataset="CAVIAR4REID")
    found = base.list_images(root, PATTERN, dataset="CAVIAR4REID", example=EXAMPLE)
    labels, cams = base.cameras_by_index(
        found, dataset="CAVIAR4REID", per_camera=10, example=EXAMPLE
    )
    return base.protocol_image_set([p for p, _ in found], labels, cams, NAME, **options)
