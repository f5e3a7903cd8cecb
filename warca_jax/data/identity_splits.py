"""Identity splits: the one home of the random draws that cut a dataset into splits.

Every split is a pure function of labels, cameras and a seed, checked by
``validate_split``:

* ``random_splits``: split s draws (``np.random.default_rng([seed, s])``) its test
  identities at random, all images of the others for training; each test identity's images
  in one random camera are queries, those in its other cameras the gallery
  (``query_gallery``). The generic ``.npz``, ``.mat`` and ``.json`` feature files and the
  synthetic data use it.
* ``held_out_ids`` / ``validation_split``: the people a training part holds out for
  validation, one draw for the pipeline, the protocol and the learners' own choices.
* ``probe_gallery_splits``: the WARCA paper's single-shot protocol (section 4.1), used by
  the dataset readers with a published protocol (VIPeR, PRID450S, CUHK01, CAVIAR, 3DPeS,
  iLIDS, OPeRID, ORL, CUHK03 classic). Each split draws ``num_test_ids`` test identities
  among those that can give a probe *and* a true match in the gallery (the others always
  train); for each,
  - "rest" mode (no masks): one random image is the probe and all its other images the
    gallery (eligible identities have images in two or more cameras; loaders without
    camera ids give every image its own);
  - camera-rule mode (``probe_mask``, ``gallery_mask``): probes from camera A's images,
    gallery from camera B's, ``probes_per_id`` and ``gallery_per_id`` of each (None: all);
  - gallery-draw mode (``gallery_draw``, Xiong et al.'s ``num_gal = 1``): one random image
    is the gallery, the others probes, cameras ignored (``same_camera_matches``).
  Every probe must have a gallery image of its identity from another camera (in
  gallery-draw mode, from any camera).
"""

from __future__ import annotations

import numpy as np

from warca_jax.data.dataset_arrays import (
    Dataset,
    Split,
    check_matches,
    integer_ids,
    validate_split,
)


def random_splits(
    labels, cams, *, num_splits, num_train_ids=None, num_test_ids=None, seed=0
) -> tuple[Split, ...]:
    """Draws random identity splits for the single-shot cross-camera protocol.

    Split s permutes the identities with `np.random.default_rng([seed, s])`; the first
    `num_test_ids` are test identities, the next `num_train_ids` train identities. Train
    holds all images of its identities. The images of the test identities are divided
    into query and gallery by `query_gallery` (per identity: a random query camera, the
    other cameras gallery).

    Args:
      labels: [N] identity labels.
      cams: [N] camera ids.
      num_splits: the number of splits S.
      num_train_ids: train identities per split (None or 0: all that are not test).
      num_test_ids: test identities per split (None or 0: half, rounded down; when only
        `num_train_ids` is given, the rest).
      seed: the same seed gives the same splits.

    Returns:
      S validated splits with sorted int64 indices.
    """
    labels = integer_ids(labels, "labels")
    cams = integer_ids(cams, "cams")
    if len(labels) != len(cams):
        raise ValueError(f"labels and cams differ in length: {len(labels)} vs {len(cams)}")
    check_split_options(num_splits=num_splits, seed=seed)
    order = np.argsort(labels, kind="stable")
    ids, starts = np.unique(labels[order], return_index=True)
    groups = np.split(order, starts[1:])
    n_ids = len(ids)
    n_test = int(num_test_ids or 0)
    n_train = int(num_train_ids or 0)
    if n_test < 0 or n_train < 0:
        raise ValueError(f"identity counts must be >= 0; got {num_train_ids}, {num_test_ids}")
    for what, k in (("num_test_ids", n_test), ("num_train_ids", n_train)):
        if k > n_ids:
            raise ValueError(
                f"{what}={k} exceeds the {n_ids} identities in the data; expected at "
                f"most {n_ids} (0: the default share)"
            )
    if not n_test:
        n_test = n_ids - n_train if n_train else n_ids // 2
    if not n_train:
        n_train = n_ids - n_test
    if n_train + n_test > n_ids:
        raise ValueError(
            f"num_train_ids + num_test_ids = {n_train} + {n_test} exceeds the {n_ids} "
            "identities in the data"
        )
    if n_train < 2:
        raise ValueError(
            f"need at least 2 train identities; with {n_test} test identities only "
            f"{n_train} of the {n_ids} are left: lower num_test_ids"
        )
    splits = []
    for s in range(int(num_splits)):
        rng = np.random.default_rng([seed, s])
        perm = rng.permutation(n_ids)
        train = [groups[g] for g in perm[n_test : n_test + n_train]]
        query, gallery = query_gallery([groups[g] for g in np.sort(perm[:n_test])], cams, rng)
        if max(len(t) for t in train) < 2:
            raise ValueError(
                f"random split {s}: no positive pairs in train: none of its {n_train} "
                "identities has two or more images"
            )
        train = np.sort(np.concatenate(train)).astype(np.int64)
        split = Split(train, query, gallery)
        validate_split(split, labels, n=len(labels), where=f"random split {s}")
        splits.append(split)
    return tuple(splits)


def query_gallery(groups, cams, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Divides the images of test identities into query and gallery (`random_splits`).

    Each identity seen by several cameras gets a random query camera: its images there are
    queries, its images in the other cameras gallery. One seen by a single camera puts one
    random image in query and the rest in gallery; with a single image it is a gallery
    distractor. Draws from `rng` identity by identity, in the order given.

    Args:
      groups: per identity, the int indices of its images.
      cams: camera ids of the whole dataset (indexed by `groups`).
      rng: the generator drawn from.

    Returns:
      (query, gallery): sorted int64 indices.
    """
    query, gallery = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for idx in groups:
        present = np.unique(cams[idx])
        if len(present) > 1:
            in_query = cams[idx] == rng.choice(present)
        else:
            in_query = np.zeros(len(idx), bool)
            if len(idx) > 1:
                in_query[rng.integers(len(idx))] = True
        query.append(idx[in_query])
        gallery.append(idx[~in_query])
    return tuple(np.sort(np.concatenate(x)).astype(np.int64) for x in (query, gallery))


HELD_OUT_SALT = 0x5EED  # the held-out draw's stream, apart from the test splits' draws


def held_out_ids(labels, fraction: float, *, seed: int) -> tuple[np.ndarray, int]:
    """(the held-out identities, sorted; K): ``round(fraction * K)`` of the K identities with
    two or more images, drawn by ``np.random.default_rng([seed, 0x5EED])``. The one draw of
    held-out people (``validation_split``, ``methods.held_out.split``): the same labels,
    fraction and seed hold out the same people."""
    ids, counts = np.unique(np.asarray(labels), return_counts=True)
    eligible = ids[counts >= 2]
    num_val = int(round(float(fraction) * len(eligible)))
    rng = np.random.default_rng([int(seed), HELD_OUT_SALT])
    return np.sort(rng.choice(eligible, size=num_val, replace=False)), len(eligible)


def validation_split(
    dataset: Dataset, s: int, *, fraction: float, seed: int, field: str = "val_fraction"
) -> Split:
    """Split ``s``'s training part with the identities ``held_out_ids`` draws from
    ``seed + s`` (the training seed of split ``s``) held out, their images divided into query
    and gallery (`query_gallery`); the rest stay for training. The one draw of a validation
    split: the main job's (``data.val_fraction``, ``seed``), the protocol's cross-validation
    (``cv.val_fraction``, ``data.seed``); a learner's own held-out choice
    (``methods.held_out``) draws the same people at the same seed and fraction.

    Args:
      dataset: a checked `Dataset`.
      s: the split whose training part is divided.
      fraction: share of its identities held out, in (0, 1).
      seed: an int; same seed, same split (and the same people as ``held_out_ids``).
      field: the name of the fraction in error messages (e.g. "data.val_fraction").

    Returns:
      A `Split` of indices into the dataset: `train_idx` the identities left for
      training, `query_idx` and `gallery_idx` the validation query and gallery.

    Raises:
      ValueError: `fraction` outside (0, 1), fewer than 2 identities held out or left
        for training, or a part without what it needs (a query, a positive pair); the
        message starts with the dataset's name and the split.
    """
    try:
        return _held_out_split(
            dataset.labels, dataset.cams, dataset.splits[s].train_idx,
            fraction=fraction, seed=seed + s, field=field,
        )  # fmt: skip
    except ValueError as e:
        raise ValueError(f"{dataset.name} split {s}: {e}") from None


def _held_out_split(labels, cams, train_idx, *, fraction: float, seed: int, field: str) -> Split:
    labels = integer_ids(labels, "labels")
    cams = integer_ids(cams, "cams")
    train_idx = integer_ids(train_idx, "train_idx")
    fraction = float(fraction)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"{field} must be in (0, 1) to hold identities out; got {fraction}")
    held, num_ids = held_out_ids(labels[train_idx], fraction, seed=seed)
    num_val = len(held)
    left = len(np.unique(labels[train_idx])) - num_val
    if num_val < 2 or left < 2:
        hint = (
            f"with {num_ids} identities, {field} from {2 / num_ids:.3g} to {1 - 2 / num_ids:.3g}"
            if num_ids >= 4
            else "too few identities: 4 or more are needed"
        )
        raise ValueError(
            f"{field}={fraction} holds out {num_val} of the {num_ids} training identities, "
            f"leaving {left}; validation and training need at least 2 each ({hint})"
        )
    is_val = np.isin(labels[train_idx], held)
    groups = [train_idx[labels[train_idx] == i] for i in held]
    rng = np.random.default_rng([int(seed), HELD_OUT_SALT, 1])  # the query cameras
    query, gallery = query_gallery(groups, cams, rng)
    split = Split(np.sort(train_idx[~is_val]), query, gallery)
    validate_split(split, labels, n=len(labels), where=f"{field}={fraction}: validation split")
    return split


def check_split_options(*, num_splits, seed) -> None:
    """The one check of a draw's ``num_splits`` (a positive int) and ``seed`` (a
    non-negative int), before any work: both draws here and every loader's options."""
    _count(num_splits, "num_splits", allow_none=False)
    _check_seed(seed)


def _check_seed(seed) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative int; got {seed!r}")


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
    gallery_draw=False,
    name="dataset",
) -> tuple[Split, ...]:
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
      gallery_draw: one random gallery image per test identity, the rest probes (no masks).
      name: names the dataset in error messages.

    Returns:
      The splits, with sorted int64 indices.

    Raises:
      ValueError: for bad options, too few eligible identities, or a fixed test identity
        that is not in the data or cannot give a probe and a match.
    """
    labels, cams, masks, probes_per_id, gallery_per_id = _probe_gallery_inputs(
        labels, cams, probe_mask, gallery_mask, probes_per_id, gallery_per_id, name
    )
    if gallery_draw and masks is not None:
        raise ValueError(f"{name}: gallery_draw ignores cameras; give no probe or gallery mask")
    ids, groups, eligible, rule = _identity_groups(labels, cams, masks, bool(gallery_draw))
    eligible_pos = np.flatnonzero(eligible)
    if test_id_sets is not None:
        _check_seed(seed)  # it draws the probes
        test_sets = _fixed_test_sets(test_id_sets, ids, eligible, rule, name)
        num_splits = len(test_sets)
    else:
        check_split_options(num_splits=num_splits, seed=seed)
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
        per_id, where = (probes_per_id, gallery_per_id), f"{name} split {s}"
        split = _draw_split(rng, groups, test, rest, masks, *per_id, gallery_draw)
        validate_split(split, labels, n=len(labels), where=where)
        same = bool(gallery_draw)
        check_matches(split, labels, cams, where=where, every=True, same_camera_matches=same)
        splits.append(split)
    return tuple(splits)


def _probe_gallery_inputs(
    labels, cams, probe_mask, gallery_mask, probes_per_id, gallery_per_id, name
):
    """(labels, cams, masks, probes_per_id, gallery_per_id) of ``probe_gallery_splits``,
    checked: int64 labels and cameras of one length, ``masks`` (probe, gallery) bool arrays
    or None (the "rest" mode, one probe per identity); ValueError naming the bad one."""
    labels = np.asarray(labels, dtype=np.int64)
    cams = np.asarray(cams, dtype=np.int64)
    if labels.ndim != 1 or labels.shape != cams.shape:
        raise ValueError(
            f"{name}: labels and cams must be 1-D of one length; got "
            f"{labels.shape} and {cams.shape}"
        )
    if probe_mask is None and gallery_mask is None:
        if probes_per_id != 1 or gallery_per_id is not None:
            raise ValueError(
                f"{name}: without masks the protocol is one probe per identity and the rest as "
                f"gallery; got probes_per_id={probes_per_id!r}, gallery_per_id={gallery_per_id!r}"
            )
        return labels, cams, None, probes_per_id, gallery_per_id
    if probe_mask is None or gallery_mask is None:
        raise ValueError(f"{name}: give both probe_mask and gallery_mask, or neither")
    probe_mask = np.asarray(probe_mask, dtype=bool)
    gallery_mask = np.asarray(gallery_mask, dtype=bool)
    if probe_mask.shape != labels.shape or gallery_mask.shape != labels.shape:
        raise ValueError(f"{name}: probe_mask and gallery_mask must have shape {labels.shape}")
    probes_per_id = _count(probes_per_id, "probes_per_id", allow_none=True)
    gallery_per_id = _count(gallery_per_id, "gallery_per_id", allow_none=True)
    return labels, cams, (probe_mask, gallery_mask), probes_per_id, gallery_per_id


def _identity_groups(labels, cams, masks, gallery_draw=False):
    """(ids, groups, eligible, rule): the sorted identities, each one's image indices, and
    whether it can give a probe and a true match (``rule`` says how, for the messages)."""
    order = np.argsort(labels, kind="stable")
    ids, starts = np.unique(labels[order], return_index=True)
    groups = np.split(order, starts[1:])
    if masks is not None:
        probe_mask, gallery_mask = masks
        eligible = np.array([probe_mask[g].any() and gallery_mask[g].any() for g in groups])
        rule = "images in both the probe and the gallery camera"
    elif gallery_draw:
        eligible = np.array([len(g) >= 2 for g in groups])
        rule = "two or more images"
    else:
        eligible = np.array([len(np.unique(cams[g])) >= 2 for g in groups])
        rule = "two or more images (in two or more cameras)"
    return ids, groups, eligible, rule


def _fixed_test_sets(test_id_sets, ids, eligible, rule: str, name: str) -> list[np.ndarray]:
    """The positions in ``ids`` of each fixed test set; ValueError for an identity that is
    not in the data or not eligible, or for no set at all."""
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
    if not test_sets:
        raise ValueError(f"{name}: test_id_sets is empty")
    return test_sets


def _draw_split(
    rng, groups, test, rest, masks, probes_per_id, gallery_per_id, gallery_draw=False
) -> Split:
    """The split of test identities ``test`` and training identities ``rest`` (positions
    into ``groups``): each test identity's probes and gallery drawn from ``rng``."""
    query, gallery = [], []
    for g in test:
        idx = groups[g]
        if masks is not None:
            query.append(_pick(rng, idx[masks[0][idx]], probes_per_id))
            gallery.append(_pick(rng, idx[masks[1][idx]], gallery_per_id))
        else:
            one = rng.integers(len(idx))
            single, others = (gallery, query) if gallery_draw else (query, gallery)
            single.append(idx[one : one + 1])
            others.append(np.delete(idx, one))
    train = [groups[g] for g in rest] or [np.zeros(0, np.int64)]
    return Split(*(np.sort(np.concatenate(x)).astype(np.int64) for x in (train, query, gallery)))
