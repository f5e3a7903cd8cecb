"""Per-split normalisation of a dataset's features: ``data.normalize``.

Some descriptors are published with a normalisation that uses the training images: GOG's
release (Matsukawa et al. 2016) subtracts, from each colour space's part of the
descriptor, the mean of that part over the training images, then scales the part of each
image to unit L2 norm, and concatenates the parts. Centring alone moves no distance; it
is the norm taken after it that changes the geometry (without centring the vectors share
a large common part, and their differences are small against a learner's absolute ridge,
such as XQDA's).

Modes (``MODES``):

* ``none``: the features as they are (the default).
* ``center_l2``: each part (``parts``: the descriptor's colour spaces for fused GOG, else
  the whole vector) centred by the mean of the split's training images, then L2-normalised
  per image.

The mean comes from the split's training images only (never its test images), so a
split's model expects that split's normalised features: ``for_split`` makes them, the
same for training, validation and test. The main job and the protocol call it once per
split; its Euclidean baseline is then measured on the same features.
"""

from __future__ import annotations

import numpy as np

from warca_jax.features import extraction

MODES = ("none", "center_l2")


def check_mode(mode) -> str:
    """``mode`` when it is one of ``MODES``; a ValueError naming ``data.normalize``."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(
            f"data.normalize must be one of {MODES} ('none': the features as they are; "
            f"'center_l2': each descriptor part centred by the split's training mean, then "
            f"L2-normalised per image); got {mode!r}"
        )
    return mode


def parts(data_cfg, dim: int) -> tuple[int, ...]:
    """The lengths of the parts normalised one by one: the descriptor's (``data.descriptor``
    at ``data.height`` x ``data.width``) where they add up to ``dim``, else ``(dim,)``."""
    name = data_cfg.get("descriptor", "")
    if name in extraction.DESCRIPTORS:  # at the config's image size, else the descriptor's
        size = {k: int(data_cfg[k]) for k in ("height", "width") if k in data_cfg}
        sizes = extraction.DESCRIPTORS[name].parts(**size)
        if sum(sizes) == dim:
            return tuple(sizes)
    return (dim,)


def center_l2(features: np.ndarray, train_idx: np.ndarray, sizes) -> np.ndarray:
    """``features`` [N, D] with each part (``sizes``, adding up to D) centred by its mean over
    the rows ``train_idx`` and scaled to unit L2 norm per row (a zero part stays zero);
    float32, a new array."""
    x = np.asarray(features)
    if sum(sizes) != x.shape[1] or min(sizes, default=0) < 1:
        raise ValueError(f"parts {tuple(sizes)} must be positive and add up to {x.shape[1]}")
    if len(train_idx) == 0:
        raise ValueError("center_l2 needs at least one training image for the mean")
    mean = np.mean(x[train_idx], axis=0, dtype=np.float64).astype(np.float32)
    out = np.empty(x.shape, np.float32)
    start = 0
    for size in sizes:
        part = x[:, start : start + size].astype(np.float32) - mean[start : start + size]
        norm = np.linalg.norm(part, axis=1, keepdims=True)
        out[:, start : start + size] = part / np.where(norm > 0, norm, 1.0)
        start += size
    return out


def for_split(dataset, s: int, data_cfg):
    """``dataset`` with its features normalised as ``data_cfg.normalize`` says for split
    ``s`` (its training images' statistics); the dataset itself when the mode is none."""
    mode = check_mode(data_cfg.get("normalize", "none"))
    if mode == "none":
        return dataset
    sizes = parts(data_cfg, dataset.features.shape[1])
    train = dataset.splits[s].train_idx
    return dataset._replace(features=center_l2(dataset.features, train, sizes))
