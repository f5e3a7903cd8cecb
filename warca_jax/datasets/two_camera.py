"""Two-camera single-shot datasets: VIPeR and PRID450s, one image per identity per camera.

- VIPeR (Gray et al., PETS 2007; P = 316): `root/cam_a/` and `root/cam_b/`, images named
  `III_AA.bmp` (identity, viewpoint angle), e.g. `000_45.bmp`; 632 identities.
- PRID450s (Roth et al., 2014; P = 225): `root/cam_a/` and `root/cam_b/`, images named
  `img_NNNN.png`, e.g. `img_0001.png`; the foreground masks `man_*.png` beside them are
  ignored. 450 identities.

Protocol (paper section 4.1): 10 random splits with P test identities, the rest train.
``probe="cam_a"`` (the default, the common VIPeR convention): the camera-A image of each
test identity is its probe and its camera-B image the gallery (cam 0 = cam_a, cam 1 =
cam_b). ``probe="cam_b"``: the other direction, probes from cam_b and the gallery from
cam_a. ``probe="random"``: the rule the WARCA paper's section 4.1 states ("one image of
each person was randomly selected as a probe image, and the rest of the images were used
as gallery images"): each test identity's probe camera is drawn at random (seeded per
split) and its other image joins the gallery, which then holds images of both cameras.
The test identities, and so the training part, are the same under the three rules. The
mixed gallery makes the random rule harder, so the paper's numbers are those of a camera
rule (measurements: docs/results.md#the-probe-rule). Identities seen by one camera only
always train; if a camera holds several images of an identity, one is drawn at random.
"""

from __future__ import annotations

import os

from warca_jax.datasets import base

CAMERA_DIRS = ("cam_a", "cam_b")
# name: (the dataset's name in messages, image name pattern, an example, files skipped)
LAYOUTS = {
    "viper": ("VIPeR", r"(\d+)_(\d+)\.bmp", "000_45.bmp (identity 000, angle 45)", None),
    "prid450s": (
        "PRID450s",
        r"img_(\d+)\.png",
        "img_0001.png (masks man_*.png are ignored)",
        r"man_.*",
    ),
}


PROBES = ("cam_a", "cam_b", "random")  # the probe rule of the splits (module docstring)


def _load_two_camera(
    root, name: str, *, num_test_ids, num_splits, seed, probe="cam_a"
) -> base.ImageSet:
    """Reads dataset ``name`` of ``LAYOUTS`` from `root` holding cam_a/ and cam_b/: labels are
    the identity numbers, cams 0 (cam_a) and 1 (cam_b), and the splits follow the probe rule
    ``probe`` (`base.protocol_image_set`, whose split options these are)."""
    dataset, pattern, example, skip = LAYOUTS[name]
    if probe not in PROBES:
        raise ValueError(f"{dataset}: unknown probe rule {probe!r}; expected one of {PROBES}")
    options = base.split_options(num_test_ids=num_test_ids, num_splits=num_splits, seed=seed)
    root = base.require_layout(root, dataset=dataset, dirs=CAMERA_DIRS)
    paths, labels, cams = [], [], []
    for cam, folder in enumerate(CAMERA_DIRS):
        found = base.list_images(
            os.path.join(root, folder), pattern, dataset=dataset, example=example, skip=skip
        )
        for path, match in found:
            paths.append(path)
            labels.append(int(match.group(1)))
            cams.append(cam)
    rule, probe_cam = probe != "random", int(probe == "cam_b")
    return base.protocol_image_set(
        paths, labels, cams, name, camera_rule=rule, probe_cam=probe_cam, **options
    )


def load_viper(root, *, num_test_ids=316, num_splits=10, seed=0, probe="cam_a") -> base.ImageSet:
    """Reads VIPeR (P = 316 in the paper) as ``_load_two_camera`` says."""
    return _load_two_camera(
        root, "viper", num_test_ids=num_test_ids, num_splits=num_splits, seed=seed, probe=probe
    )


def load_prid450s(root, *, num_test_ids=225, num_splits=10, seed=0, probe="cam_a") -> base.ImageSet:
    """Reads PRID450s (P = 225 in the paper) as ``_load_two_camera`` says."""
    return _load_two_camera(
        root, "prid450s", num_test_ids=num_test_ids, num_splits=num_splits, seed=seed, probe=probe
    )
