"""CUHK01 (Li et al., ACCV 2012): 971 identities x 4 images from two camera views.

Layout: `root/campus/` with images named `NNNNMMM.png`: 4-digit identity, 3-digit index
001-004, e.g. `0001001.png`; indices 001-002 come from camera A (cam 0), 003-004 from
camera B (cam 1).

Protocol (paper section 4.1, P = 486): 10 random splits of 486 test identities, the other
485 train on all their images. Which test images are probes, ``protocol``:

- ``"gallery_draw"`` (the default): per test identity one random image is the gallery and
  its other three images are probes, cameras ignored, so one probe is the gallery image's
  same-camera twin and counts it as its match (the dataset's `same_camera_matches`). This
  is the reading of Xiong et al.'s release (`num_gal = 1`), to whose settings the WARCA
  paper refers; the paper's CUHK01 numbers are those of this reading, not of a camera rule
  (the evidence and the figures: docs/datasets.md#the-loaders).
- ``"single_shot"``: one random camera-A image is the probe and one random camera-B image
  the gallery.
- ``"multi_shot"``: both camera-A images are probes and both camera-B images the gallery
  (Liao et al.'s reading).

Identities lacking one of the cameras always train (under the camera rules).
"""

from __future__ import annotations

import os

from warca_jax.datasets import base

NAME = "cuhk01"
PATTERN = r"(\d{4})(\d{3})\.png"
EXAMPLE = "0001001.png (identity 0001, image 001; images 001-002 camera A, 003-004 camera B)"
PROTOCOLS = ("gallery_draw", "single_shot", "multi_shot")


def load_cuhk01(
    root, *, num_test_ids=486, num_splits=10, seed=0, protocol="gallery_draw"
) -> base.ImageSet:
    """Reads CUHK01 from `root` holding campus/ (module docstring): labels are the identity
    numbers, cams 0 (A) and 1 (B), the split options `base.protocol_image_set`'s, and
    `protocol` one of `PROTOCOLS` (module docstring)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"CUHK01: unknown protocol {protocol!r}; expected one of {PROTOCOLS}")
    options = base.split_options(num_test_ids=num_test_ids, num_splits=num_splits, seed=seed)
    root = base.require_layout(root, dataset="CUHK01", dirs=("campus",))
    found = base.list_images(
        os.path.join(root, "campus"), PATTERN, dataset="CUHK01", example=EXAMPLE
    )
    labels, cams = base.cameras_by_index(found, dataset="CUHK01", per_camera=2, example=EXAMPLE)
    paths = [p for p, _ in found]
    if protocol == "gallery_draw":
        return base.protocol_image_set(paths, labels, cams, NAME, gallery_draw=True, **options)
    shots = None if protocol == "multi_shot" else 1
    return base.protocol_image_set(
        paths, labels, cams, NAME, camera_rule=True, shots=shots, **options
    )
