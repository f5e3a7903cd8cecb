"""Two-camera single-shot datasets: VIPeR and PRID450s, one image per identity per camera.

- VIPeR (Gray et al., PETS 2007; P = 316): `root/cam_a/` and `root/cam_b/`, images named
  `III_AA.bmp` (identity, viewpoint angle), e.g. `000_45.bmp`; 632 identities.
- PRID450s (Roth et al., 2014; P = 225): `root/cam_a/` and `root/cam_b/`, images named
  `img_NNNN.png`, e.g. `img_0001.png`; the foreground masks `man_*.png` beside them are
  ignored. 450 identities.

Protocol (paper section 4.1): 10 random splits with P test identities, the rest train.
Camera rule: the camera-A image of each test identity is its probe and its camera-B image
the gallery (cam 0 = cam_a, cam 1 = cam_b). Identities seen by one camera only always
train; if a camera holds several images of an identity, one is drawn at random.
"""

from __future__ import annotations

import os

import numpy as np

from warca_jax import splits as splits_lib
from warca_jax.datasets import base

CAMERA_DIRS = ("cam_a", "cam_b")


def _load_two_camera(
    root, *, dataset, name, pattern, example, skip, num_test_ids, num_splits, seed
) -> base.ImageSet:
    base.check_split_options(num_splits=num_splits, seed=seed)
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
    cams = np.asarray(cams, dtype=np.int64)
    splits = splits_lib.probe_gallery_splits(
        labels,
        cams,
        num_test_ids=num_test_ids,
        num_splits=num_splits,
        seed=seed,
        probe_mask=cams == 0,
        gallery_mask=cams == 1,
        gallery_per_id=1,
        name=name,
    )
    return base.image_set(paths, labels, cams, splits, name)


def load_viper(root, *, num_test_ids=316, num_splits=10, seed=0) -> base.ImageSet:
    """Reads VIPeR from `root` holding cam_a/ and cam_b/ (module docstring).

    Args:
      root: the dataset folder.
      num_test_ids: test identities per split (316 in the paper).
      num_splits: the number of random splits.
      seed: the same seed gives the same splits.

    Returns:
      An `ImageSet`: labels are the identity numbers, cams 0 (cam_a) and 1 (cam_b).
    """
    return _load_two_camera(
        root,
        dataset="VIPeR",
        name="viper",
        pattern=r"(\d+)_(\d+)\.bmp",
        example="000_45.bmp (identity 000, angle 45)",
        skip=None,
        num_test_ids=num_test_ids,
        num_splits=num_splits,
        seed=seed,
    )


def load_prid450s(root, *, num_test_ids=225, num_splits=10, seed=0) -> base.ImageSet:
    """Reads PRID450s from `root` holding cam_a/ and cam_b/ (module docstring).

    Args:
      root: the dataset folder.
      num_test_ids: test identities per split (225 in the paper).
      num_splits: the number of random splits.
      seed: the same seed gives the same splits.

    Returns:
      An `ImageSet`: labels are the identity numbers, cams 0 (cam_a) and 1 (cam_b).
    """
    return _load_two_camera(
        root,
        dataset="PRID450s",
        name="prid450s",
        pattern=r"img_(\d+)\.png",
        example="img_0001.png (masks man_*.png are ignored)",
        skip=r"man_.*",
        num_test_ids=num_test_ids,
        num_splits=num_splits,
        seed=seed,
    )
