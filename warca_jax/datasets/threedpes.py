"""3DPeS (Baltieri et al., 2011): 1,011 images of 192 people from 8 outdoor cameras.

Layout: `root/RGB/` with images named `<identity>_<view>_<anything>.bmp`, identity and view
(the video sequence the snapshot comes from) being numbers, e.g. `001_1_FRAME_83_RGB.bmp`.
This is the naming that open-reid-style converters parse (`name.split('_')[:2]`); we could
not confirm the full names of the published archive, so any suffix after the view number
is accepted, as is any image extension.

Protocol (paper section 4.1, P = 95): 10 random splits; for each test identity one random
image is the probe and all its other images the gallery. By default every image gets its
own camera id (its index): the view numbers are sequences, not cameras, so probe and
gallery may legitimately share a camera and no true match may be dropped.
`view_as_camera=True` uses the view numbers as cams instead, so same-view matches are
ignored by the evaluation. Identities with one image (or one view) always train.
"""

from __future__ import annotations

import os

import numpy as np

from warca_jax.datasets import base

NAME = "3dpes"
PATTERN = r"(\d+)_(\d+)(_[^/]*)?\.(bmp|png|jpg|jpeg)"  # <identity>_<view>[_<anything>].<ext>
EXAMPLE = "001_1_FRAME_83_RGB.bmp (<identity>_<view>_<anything>.bmp)"


def load_threedpes(
    root, *, num_test_ids=95, num_splits=10, seed=0, view_as_camera=False
) -> base.ImageSet:
    """Reads 3DPeS from `root` holding RGB/ (module docstring); labels are the identity
    numbers, and the split options `base.protocol_image_set`'s.

    `view_as_camera` makes the view numbers the camera ids (default: one id per image).
    """
    options = base.split_options(num_test_ids=num_test_ids, num_splits=num_splits, seed=seed)
    root = base.require_layout(root, dataset="3DPeS", dirs=("RGB",))
    found = base.list_images(os.path.join(root, "RGB"), PATTERN, dataset="3DPeS", example=EXAMPLE)
    labels = [int(m.group(1)) for _, m in found]
    views = [int(m.group(2)) for _, m in found]
    cams = np.asarray(views) if view_as_camera else np.arange(len(found))
    return base.protocol_image_set([p for p, _ in found], labels, cams, NAME, **options)
