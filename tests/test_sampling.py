"""Tests of warca_jax.sampling: pair draws, exact and WSABIE violator search."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from warca_jax import sampling


def test_pairs_are_uniform_over_same_label_pairs():
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 3])  # 2 + 6 + 20 ordered pairs; 3 has none
    table = sampling.make_pair_table(labels)
    i, j = jax.jit(sampling.sample_pairs, static_argnums=2)(jax.random.PRNGKey(0), table, 28_000)
    i, j = np.asarray(i), np.asarray(j)
    assert np.all(labels[i] == labels[j]) and np.all(i != j)
    counts = collections.Counter(zip(i.tolist(), j.tolist(), strict=True))
    assert len(counts) == 28
    freq = np.array(list(counts.values()))
    assert freq.min() > 850 and freq.max() < 1150  # 1000 expected, std ~31


def test_pair_table_rejects_no_positive_pairs():
    with pytest.raises(ValueError, match="no positive pairs"):
        sampling.make_pair_table(np.arange(5))


def _brute_force_ranks(anchors, d_ij, cand, negative, margin):
    d_ik = np.linalg.norm(anchors[:, None] - cand[None], axis=-1)
    return negative & (margin + d_ij[:, None] - d_ik > 0)


def test_exact_violators_count_and_draw_a_violator():
    rng = np.random.default_rng(0)
    anchors, cand = rng.normal(size=(64, 3)), rng.normal(size=(150, 3))
    d_ij = rng.uniform(0, 2, 64)
    negative = rng.uniform(size=(64, 150)) > 0.1
    viol = sampling.exact_violators(
        jax.random.PRNGKey(1), jnp.asarray(anchors, jnp.float32), jnp.asarray(d_ij, jnp.float32),
        jnp.asarray(cand, jnp.float32), jnp.asarray(negative), jnp.asarray(negative.sum(1), jnp.float32),
        margin=1.0)
    expected = _brute_force_ranks(anchors, d_ij, cand, negative, 1.0)
    np.testing.assert_array_equal(np.asarray(viol.rank), expected.sum(1))
    np.testing.assert_array_equal(np.asarray(viol.found), expected.any(1))
    rows = np.nonzero(expected.any(1))[0]
    assert len(rows) > 40
    assert np.all(expected[rows, np.asarray(viol.index)[rows]])


def test_exact_violator_draw_is_uniform():
    # Row of 100 candidates, violators at every 7th; every one should be drawn equally.
    d_ik = jnp.where(jnp.arange(100) % 7 == 0, 0.0, 5.0)
    cand = jnp.stack([d_ik, jnp.zeros(100)], axis=1)  # distance to a zero anchor = d_ik
    b = 4096
    viol = jax.jit(sampling.exact_violators, static_argnames="margin")(
        jax.random.PRNGKey(2), jnp.zeros((b, 2)), jnp.full(b, 0.5), cand, jnp.ones((b, 100), bool),
        jnp.full(b, 100.0), margin=1.0)
    idx = np.asarray(viol.index)
    assert set(idx.tolist()) <= set(range(0, 100, 7))
    freq = np.bincount(idx, minlength=100)[::7]
    assert len(freq) == 15 and freq.min() > 200 and freq.max() < 350  # 273 expected
    np.testing.assert_array_equal(np.asarray(viol.rank), 15)


def test_exact_rank_from_a_pool_is_rescaled():
    cand = jnp.zeros((10, 2))
    negative = jnp.asarray(np.array([[True] * 5 + [False] * 5]))
    viol = sampling.exact_violators(jax.random.PRNGKey(0), jnp.zeros((1, 2)), jnp.ones(1), cand,
                                    negative, jnp.array([1000.0]), margin=1.0)
    assert float(viol.rank[0]) == pytest.approx(1000.0)  # all 5 pool negatives violate


def test_wsabie_tries_follow_the_geometric_law():
    # A quarter of the candidates violate: tries t ~ Geometric(1/4), mean 4.
    c = 400
    d_ik = jnp.where(jnp.arange(c) % 4 == 0, 0.0, 5.0)
    cand = jnp.stack([d_ik, jnp.zeros(c)], axis=1)
    b = 8192
    big = 720720.0  # divisible by 1..16, so t = (|T| - 1) / rank exactly for t <= 16
    viol = sampling.wsabie_violators(
        jax.random.PRNGKey(3), jnp.zeros((b, 2)), jnp.zeros(b, jnp.int32), jnp.full(b, 0.5), cand,
        jnp.ones(c, jnp.int32), jnp.full(b, big + 1), margin=1.0, max_tries=64)
    found = np.asarray(viol.found)
    assert found.mean() > 0.999
    assert np.all(np.asarray(viol.index)[found] % 4 == 0)
    rank = np.asarray(viol.rank)[found]
    tries = big / rank
    small = tries <= 16
    assert np.allclose(tries[small], np.round(tries[small]))
    assert abs(np.mean(tries) - 4.0) < 0.2
    assert abs(np.mean(tries == 1) - 0.25) < 0.03


def test_wsabie_skips_same_label_draws_and_gives_up():
    c = 50
    cand = jnp.zeros((c, 2))  # all at distance 0 from the anchor: would violate
    labels = jnp.zeros(c, jnp.int32)  # but all share the anchor's label
    viol = sampling.wsabie_violators(
        jax.random.PRNGKey(4), jnp.zeros((8, 2)), jnp.zeros(8, jnp.int32), jnp.ones(8), cand, labels,
        jnp.full(8, 10.0), margin=1.0, max_tries=16)
    assert not np.any(np.asarray(viol.found))
    np.testing.assert_array_equal(np.asarray(viol.rank), 0.0)
    with pytest.raises(ValueError, match="max_tries"):
        sampling.wsabie_violators(jax.random.PRNGKey(4), jnp.zeros((8, 2)), jnp.zeros(8, jnp.int32),
                                  jnp.ones(8), cand, labels, jnp.full(8, 10.0), margin=1.0,
                                  max_tries=0)


@pytest.mark.parametrize("width", [1, 3, 32])
def test_select_nth(width):
    rng = np.random.default_rng(5)
    mask = rng.uniform(size=(40, 77)) > 0.6
    count = mask.sum(1)
    r = (rng.uniform(size=40) * count).astype(np.int32)
    got = np.asarray(sampling._select_nth(jnp.asarray(mask), jnp.asarray(r), width=width))
    for row in range(40):
        if count[row]:
            assert got[row] == np.nonzero(mask[row])[0][r[row]]
