"""OpeReid (Liao et al., ACCV 2014, "open-set" re-id): 7,413 images of 200 people, 6 cameras.

The dataset has no widely used published loader, so this is the layout we accept: one
folder `root/` of images named `<identity>_<camera>_<anything>.<ext>`, identity and camera
being numbers, an optional `c` before the camera, e.g. `0001_c3_000120.png` or
`12_2_5.jpg`. Any image extension is accepted.

Protocol (paper section 4.1, P = 119): 10 random splits; test identities are drawn among
those seen by two or more cameras; for each one random image is the probe and all its other
images the gallery. Cams are the real cameras, so the evaluation ignores the probe's
same-camera images and every match is across cameras. Identities seen by one camera
always train.
"""

from __future__ import annotations

from warca_jax.datasets import base

NAME = "opereid"
PATTERN = r"(\d+)_c?(\d+)(_[^/]*)?\.(jpg|jpeg|png|bmp)"
EXAMPLE = "0001_c3_000120.png (<identity>_<camera>_<anything>.<ext>)"


def load_opereid(root, *, num_test_ids=119, num_splits=10, seed=0) -> base.ImageSet:
    """Reads OpeReid from `root`, the folder of its images (module docstring); labels and
    cams are the numbers in the file names, the splits `base.protocol_image_set`'s."""
    options = base.split_options(num_test_ids=num_test_ids, num_splits=num_splits, seed=seed)
    root = base.require_layout(root, dataset="OpeReid")
    found = base.list_images(root, PATTERN, dataset="OpeReid", example=EXAMPLE)
    labels = [int(m.group(1)) for _, m in found]
    cams = [int(m.group(2)) for _, m in found]
    return base.protocol_image_set([p for p, _ in found], labels, cams, NAME, **options)
