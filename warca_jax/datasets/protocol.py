"""The single-shot identity splits of the WARCA paper (section 4.1), shared by the loaders.

Each split draws `num_test_ids` test identities at random (`np.random.default_rng([seed,
s])` for split s, as `data.random_splits` does); the others are training identities, all
their images in `train_idx`. Only identities that can give a probe *and* a true match in
the gallery are eligible for test; the others (one image, or one camera) always train.
For each test identity, either

- "rest" mode (no masks): one random image is the probe and all its other images form
  the gallery. Eligible identities have images in two or more cameras, so the probe always
  keeps a match after the evaluation drops gallery images with the probe's identity and
  camera. Loaders of datasets without camera ids give every image its own camera id, which
  makes this "one random probe, the rest as gallery" exactly; or
- camera-rule mode (`probe_mask` and `gallery_mask`): the probes are drawn from the
  images in `probe_mask` (camera A) and the gallery from those in `gallery_mask`
  (camera B), `probes_per_id` and `gallery_per_id` of each (None: all of them). Images of
  a test identity that are drawn for neither are left out of the split.

Every split is checked with `data.validate_split`, and every probe must have a gallery
image of its identity from another camera.
"""

from __future__ import annotations

import numpy as np

from warca_jax import data


def _count(value, what: str, *, allow_none: bool) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        none = " or None" if allow_none else ""
        raise ValueError(f"{what} must be a positive int{none}; got {value!r}")
    return int(value)


def _pick(rng, idx: np.ndarray, k: int | None) -> np.ndarray:
    """k random entries of idx (all of them when k is None or k >= len(idx))."""
    if k is None or k >= len(idx):
        return idx
    return rng.choice(idx, k, replace=False)


def probe_gallery_splits(
    labels,
    cams,
    *,
    num_test_ids,
    num_splits=10,
    seed=0,
    num_train_ids=None,
    probe_mask=None,
    gallery_mask=None,
    probes_per_id=1,
    gallery_per_id=None,
    test_id_sets=None,
    name="dataset",
) -> tuple[data.Split, ...]:
    """Draws identity splits with one (or a few) probes per test identity (module docstring).

    Args:
      labels: [N] identity labels.
      cams: [N] camera ids.
      num_test_ids: test identities per split (P of the paper).
      num_splits: the number of splits; ignored when `test_id_sets` is given.
      seed: the same seed gives the same splits.
      num_train_ids: training identities per split (None: all that are not test).
      probe_mask: [N] bool, images that may be probes (camera A); with `gallery_mask`.
      gallery_mask: [N] bool, images that may be in the gallery (camera B).
      probes_per_id: probes per test identity: 1 in "rest" mode; an int or None (all)
        with masks.
      gallery_per_id: gallery images per test identity with masks (None: all).
      test_id_sets: optional fixed test identities, one sequence of labels per split
        (CUHK03's 20 published test sets); the probes are still drawn from `seed`.
      name: names the dataset in error messages.

    Returns:
      The splits, with sorted int64 indices.

    Raises:
      ValueError: for bad options, too few eligible identities, or a fixed test identity
        that is not in the data or cannot give a probe and a match.
    """
    labels = np.asarray(labels, dtype=np.int64)
    cams = np.asarray(cams, dtype=np.int64)
    if labels.ndim != 1 or labels.shape != cams.shape:
        raise ValueError(
            f"{name}: labels and cams must be 1-D of one length; got "
            f"{labels.shape} and {cams.shape}"
        )
    masked = probe_mask is not None or gallery_mask is not None
    if masked:
        if probe_mask is None or gallery_mask is None:
            raise ValueError(f"{name}: give both probe_mask and gallery_mask, or neither")
        probe_mask = np.asarray(probe_mask, dtype=bool)
        gallery_mask = np.asarray(gallery_mask, dtype=bool)
        if probe_mask.shape != labels.shape or gallery_mask.shape != labels.shape:
            raise ValueError(f"{name}: probe_mask and gallery_mask must have shape {labels.shape}")
        probes_per_id = _count(probes_per_id, "probes_per_id", allow_none=True)
        gallery_per_id = _count(gallery_per_id, "gallery_per_id", allow_none=True)
    elif probes_per_id != 1 or gallery_per_id is not None:
        raise ValueError(
            f"{name}: without masks the protocol is one probe per identity and the rest as "
            f"gallery; got probes_per_id={probes_per_id!r}, gallery_per_id={gallery_per_id!r}"
        )
    order = np.argsort(labels, kind="stable")
    ids, starts = np.unique(labels[order], return_index=True)
    groups = np.split(order, starts[1:])
    if masked:
        eligible = np.array([probe_mask[g].any() and gallery_mask[g].any() for g in groups])
        rule = "images in both the probe and the gallery camera"
    else:
        eligible = np.array([len(np.unique(cams[g])) >= 2 for g in groups])
        rule = "two or more images (in two or more cameras)"
    eligible_pos = np.flatnonzero(eligible)

    if test_id_sets is not None:
        test_sets = []
        for s, test_ids in enumerate(test_id_sets):
            test_ids = np.unique(np.asarray(test_ids, dtype=np.int64))
            pos = np.searchsorted(ids, test_ids)
            bad = (pos >= len(ids)) | (ids[np.minimum(pos, len(ids) - 1)] != test_ids)
            if bad.any():
                raise ValueError(
                    f"{name}: test set {s} names identity {test_ids[bad][0]}, which has no images"
                )
            if not eligible[pos].all():
                raise ValueError(
                    f"{name}: test set {s} names identity "
                    f"{test_ids[~eligible[pos]][0]}, which lacks {rule}"
                )
            test_sets.append(pos)
        num_splits = len(test_sets)
        if num_splits == 0:
            raise ValueError(f"{name}: test_id_sets is empty")
    else:
        num_splits = _count(num_splits, "num_splits", allow_none=False)
        n_test = _count(num_test_ids, "num_test_ids", allow_none=False)
        if n_test > len(eligible_pos):
            raise ValueError(
                f"{name}: num_test_ids = {n_test} but only {len(eligible_pos)} of the "
                f"{len(ids)} identities have {rule}"
            )
    n_train = _count(num_train_ids, "num_train_ids", allow_none=True)

    splits = []
    for s in range(int(num_splits)):
        rng = np.random.default_rng([seed, s])
        if test_id_sets is not None:
            test = test_sets[s]
        else:
            test = np.sort(rng.choice(eligible_pos, n_test, replace=False))
        rest = np.setdiff1d(np.arange(len(ids)), test)
        if n_train is not None:
            if n_train > len(rest):
                raise ValueError(
                    f"{name}: num_train_ids = {n_train} but only {len(rest)} "
                    f"identities are left after {len(test)} test identities"
                )
            rest = np.sort(rng.choice(rest, n_train, replace=False))
        query, gallery = [], []
        for g in test:
            idx = groups[g]
            if masked:
                query.append(_pick(rng, idx[probe_mask[idx]], probes_per_id))
                gallery.append(_pick(rng, idx[gallery_mask[idx]], gallery_per_id))
            else:
                probe = rng.integers(len(idx))
                query.append(idx[probe : probe + 1])
                gallery.append(np.delete(idx, probe))
        train = [groups[g] for g in rest] or [np.zeros(0, np.int64)]
        split = data.Split(
            *(np.sort(np.concatenate(x)).astype(np.int64) for x in (train, query, gallery))
        )
        data.validate_split(split, labels, n=len(labels), where=f"{name} split {s}")
        data.check_matches(split, labels, cams, where=f"{name} split {s}", every=True)
        splits.append(split)
    return tuple(splits)
