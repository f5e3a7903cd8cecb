"""Tests for warca_jax/data/identity_splits.py: the one check of a draw's options."""

import numpy as np
import pytest

from warca_jax.data import identity_splits
from warca_jax.datasets import base

LABELS, CAMS = np.repeat(np.arange(6), 2), np.tile([0, 1], 6)


def _random(num_splits, seed):
    return identity_splits.random_splits(LABELS, CAMS, num_splits=num_splits, seed=seed)


def _probe_gallery(num_splits, seed):
    return identity_splits.probe_gallery_splits(
        LABELS, CAMS, num_test_ids=2, num_splits=num_splits, seed=seed
    )


def _loader(num_splits, seed):
    return base.split_options(num_splits=num_splits, seed=seed, num_test_ids=2)


@pytest.mark.parametrize("draw", [_random, _probe_gallery, _loader])
@pytest.mark.parametrize(
    "num_splits, seed, message",
    [
        (0, 0, "num_splits must be a positive int; got 0"),
        (2.0, 0, "num_splits must be a positive int; got 2.0"),
        (True, 0, "num_splits must be a positive int; got True"),
        (2, -1, "seed must be a non-negative int; got -1"),
        (2, 1.5, "seed must be a non-negative int; got 1.5"),
    ],
)
def test_every_draw_refuses_bad_options_with_one_message(draw, num_splits, seed, message):
    with pytest.raises(ValueError, match=message):
        draw(num_splits, seed)


def test_fixed_test_sets_check_the_seed_that_draws_their_probes():
    with pytest.raises(ValueError, match="seed must be a non-negative int; got -2"):
        identity_splits.probe_gallery_splits(
            LABELS, CAMS, num_test_ids=None, test_id_sets=[[0, 1]], seed=-2
        )


def test_numpy_integers_are_counts_and_seeds():
    a = _random(np.int64(2), np.int64(3))
    b = _random(2, 3)
    assert len(a) == 2
    for s, t in zip(a, b, strict=True):
        np.testing.assert_array_equal(s.train_idx, t.train_idx)
        np.testing.assert_array_equal(s.query_idx, t.query_idx)
