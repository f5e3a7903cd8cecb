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

VIPeR's ``folds="liao"`` takes the test identities of Liao et al.'s released LOMO / XQDA
demo instead of the random draw (``liao_test_ids``): the folds its published VIPeR figures
come from (with ``probe="cam_b"``, the demo's probe camera).
"""

from __future__ import annotations

import os

import numpy as np

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
FOLDS = ("random", "liao")  # VIPeR's test identities: drawn from seed, or the demo's
# MATLAB's Mersenne twister after rng(0): MT19937 seeded 5489, whose 53-bit doubles are
# NumPy's RandomState(5489).random_sample() (0.8147, 0.9058, 0.1270: MATLAB's first rand).
MATLAB_RNG0_SEED = 5489


def matlab_randperms(n: int, count: int) -> list[np.ndarray]:
    """MATLAB's ``rng(0); p = randperm(n)`` repeated ``count`` times, 0-based: each
    permutation is the order of ``sort(rand(1, n))`` from the continuing stream."""
    rng = np.random.RandomState(MATLAB_RNG0_SEED)
    return [np.argsort(rng.random_sample(n), kind="stable") for _ in range(count)]


def liao_test_ids(ids, num_splits: int = 10) -> list[np.ndarray]:
    """The test identities of Liao et al.'s demo's folds: with the n identities in file-name
    order (``ids``, sorted; the demo's rows), fold f draws p = randperm(n)
    (``matlab_randperms``), trains on ids[p[:n/2]] and tests on ids[p[n/2:]]."""
    ids = np.sort(np.asarray(ids))
    half = len(ids) // 2
    return [ids[p[half:]] for p in matlab_randperms(len(ids), num_splits)]


def _load_two_camera(
    root, name: str, *, num_test_ids, num_splits, seed, probe="cam_a", folds="random"
) -> base.ImageSet:
    """Reads dataset ``name`` of ``LAYOUTS`` from `root` holding cam_a/ and cam_b/: labels are
    the identity numbers, cams 0 (cam_a) and 1 (cam_b), and the splits follow the probe rule
    ``probe`` (`base.protocol_image_set`, whose split options these are), their test
    identities drawn from ``seed`` or, ``folds="liao"``, Liao et al.'s demo's."""
    dataset, pattern, example, skip = LAYOUTS[name]
    if probe not in PROBES:
        raise ValueError(f"{dataset}: unknown probe rule {probe!r}; expected one of {PROBES}")
    if folds not in FOLDS:
        raise ValueError(f"{dataset}: unknown folds {folds!r}; expected one of {FOLDS}")
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
    if folds == "liao":  # the identities seen by both cameras: all 632 of VIPeR's
        on = [{lab for lab, c in zip(labels, cams, strict=True) if c == cam} for cam in (0, 1)]
        ids = np.array(sorted(on[0] & on[1]))
        if num_test_ids != len(ids) // 2:
            raise ValueError(
                f"{dataset}: folds='liao' test half of the {len(ids)} identities seen by both "
                f"cameras, num_test_ids = {len(ids) // 2}; got {num_test_ids}"
            )
        options["test_id_sets"] = liao_test_ids(ids, num_splits)
    return base.protocol_image_set(
        paths, labels, cams, name, camera_rule=rule, probe_cam=probe_cam, **options
    )


def load_viper(
    root, *, num_test_ids=316, num_splits=10, seed=0, probe="cam_a", folds="random"
) -> base.ImageSet:
    """Reads VIPeR (P = 316 in the paper) as ``_load_two_camera`` says."""
    return _load_two_camera(
        root, "viper", num_test_ids=num_test_ids, num_splits=num_splits, seed=seed,
        probe=probe, folds=folds,
    )  # fmt: skip


def load_prid450s(root, *, num_test_ids=225, num_splits=10, seed=0, probe="cam_a") -> base.ImageSet:
    """Reads PRID450s (P = 225 in the paper) as ``_load_two_camera`` says."""
    return _load_two_camera(
        root, "prid450s", num_test_ids=num_test_ids, num_splits=num_splits, seed=seed, probe=probe
    )
