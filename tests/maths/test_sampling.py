"""Tests of warca_jax.maths.sampling: pair draws, exact and WSABIE violator search."""

import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from warca_jax.maths import losses, sampling


def _u(seed, b):
    return sampling.to_uniform(jax.random.bits(jax.random.PRNGKey(seed), (2, b), jnp.uint32))


@pytest.mark.slow
def test_pairs_are_uniform_over_same_label_pairs():
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 3])  # 2 + 6 + 20 ordered pairs; 3 has none
    table = sampling.make_pair_table(labels)
    bits = jax.random.bits(jax.random.PRNGKey(0), (3, 28_000), jnp.uint32)
    i, j = jax.jit(sampling.sample_pairs)(bits, table)
    i, j = np.asarray(i), np.asarray(j)
    assert np.all(labels[i] == labels[j]) and np.all(i != j)
    counts = collections.Counter(zip(i.tolist(), j.tolist(), strict=True))
    assert len(counts) == 28
    freq = np.array(list(counts.values()))
    assert freq.min() > 850 and freq.max() < 1150  # 1000 expected, std ~31


@pytest.mark.slow
def test_cross_camera_pairs_are_uniform_over_pairs_of_two_cameras():
    # label 0: cams 0, 0, 1 -> 4 ordered cross pairs; label 1: cams 1, 0, 1, 2 -> 10;
    # label 2: one camera only -> none; shuffled so that blocks are not contiguous in the input
    labels = np.array([1, 0, 2, 1, 0, 1, 2, 0, 1])
    cams = np.array([1, 0, 5, 0, 0, 1, 5, 1, 2])
    table = sampling.make_pair_table(labels, cams)
    bits = jax.random.bits(jax.random.PRNGKey(1), (3, 14_000), jnp.uint32)
    i, j = (np.asarray(a) for a in jax.jit(sampling.sample_pairs)(bits, table))
    assert np.all(labels[i] == labels[j]) and np.all(cams[i] != cams[j])
    expected = {
        (a, b) for a in range(9) for b in range(9) if labels[a] == labels[b] and cams[a] != cams[b]
    }
    counts = collections.Counter(zip(i.tolist(), j.tolist(), strict=True))
    assert set(counts) == expected and len(expected) == 14
    freq = np.array(list(counts.values()))
    assert freq.min() > 850 and freq.max() < 1150  # 1000 expected, std ~31


@pytest.mark.slow
def test_pair_table_without_cameras_draws_as_before():
    # one camera for all is every pair; the draw is bit for bit the camera-free table's
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 3])
    bits = jax.random.bits(jax.random.PRNGKey(2), (3, 500), jnp.uint32)
    plain = sampling.sample_pairs(bits, sampling.make_pair_table(labels))
    per_image = sampling.sample_pairs(bits, sampling.make_pair_table(labels, np.arange(11)))
    for a, b in zip(plain, per_image, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_pair_table_refuses_bad_cams_and_no_cross_camera_pair():
    with pytest.raises(ValueError, match="cams has 3 entries for 4 labels"):
        sampling.make_pair_table(np.array([0, 0, 1, 1]), np.array([0, 1, 0]))
    with pytest.raises(ValueError, match="no cross-camera positive pairs"):
        sampling.make_pair_table(np.array([0, 0, 1, 1]), np.array([0, 0, 1, 1]))


def test_alias_table_reproduces_the_weights():
    w = np.array([0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 12.0, 0.5])
    prob, alias = sampling._alias_table(w)
    implied = prob / len(w)
    for c in range(len(w)):
        implied[alias[c]] += (1 - prob[c]) / len(w)
    np.testing.assert_allclose(implied, w / w.sum(), atol=1e-12)


def test_pair_table_rejects_no_positive_pairs():
    with pytest.raises(ValueError, match="no positive pairs"):
        sampling.make_pair_table(np.arange(5))


def _dist(anchors, cand):
    return jnp.asarray(np.linalg.norm(anchors[:, None] - cand[None], axis=-1), jnp.float32)


@pytest.mark.slow
def test_exact_violators_count_and_draw_a_violator():
    rng = np.random.default_rng(0)
    d_ik = rng.uniform(0, 3, size=(64, 150))
    d_ij = rng.uniform(0, 2, 64)
    negative = rng.uniform(size=(64, 150)) > 0.1
    viol = sampling.find_violators(
        _u(1, 64),
        jnp.asarray(d_ij, jnp.float32),
        jnp.asarray(d_ik, jnp.float32),
        jnp.asarray(negative),
        jnp.asarray(negative.sum(1), jnp.float32),
        margin=1.0,
    )
    expected = negative & (1.0 + d_ij[:, None] - d_ik > 0)
    np.testing.assert_allclose(np.asarray(viol.rank), expected.sum(1), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(viol.found), expected.any(1))
    rows = np.nonzero(expected.any(1))[0]
    assert len(rows) > 40
    assert np.all(expected[rows, np.asarray(viol.index)[rows]])


def _every_seventh(b, c=100):
    """Rows where exactly the candidates at multiples of 7 violate (15 of 100)."""
    d_ik = jnp.tile(jnp.where(jnp.arange(c) % 7 == 0, 0.0, 5.0), (b, 1))
    return jnp.full(b, 0.5), d_ik, jnp.ones((b, c), bool)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", sampling.SAMPLERS)
def test_violator_draw_is_uniform(sampler):
    b = 4096
    d_ij, d_ik, negative = _every_seventh(b)
    viol = jax.jit(sampling.find_violators, static_argnames=("margin", "sampler", "max_tries"))(
        _u(2, b), d_ij, d_ik, negative, jnp.full(b, 100.0), margin=1.0, sampler=sampler
    )
    idx = np.asarray(viol.index)
    assert set(idx.tolist()) <= set(range(0, 100, 7))
    freq = np.bincount(idx, minlength=100)[::7]
    assert len(freq) == 15 and freq.min() > 200 and freq.max() < 350  # 273 expected
    if sampler == "exact":
        np.testing.assert_array_equal(np.asarray(viol.rank), 15)


@pytest.mark.slow
def test_exact_rank_from_a_pool_is_rescaled():
    negative = jnp.asarray(np.array([[True] * 5 + [False] * 5]))
    viol = sampling.find_violators(
        _u(0, 1),
        jnp.ones(1),
        jnp.zeros((1, 10)),
        negative,
        jnp.array([1000.0]),
        margin=1.0,
    )
    assert float(viol.rank[0]) == pytest.approx(1000.0)  # all 5 pool negatives violate


@pytest.mark.slow
def test_wsabie_tries_follow_the_geometric_law():
    # A quarter of the candidates violate: WSABIE's tries t ~ Geometric(1/4), mean 4.
    b, c = 8192, 400
    d_ik = jnp.tile(jnp.where(jnp.arange(c) % 4 == 0, 0.0, 5.0), (b, 1))
    big = 720720.0  # divisible by 1..16, so t = (|T| - 1) / rank exactly for t <= 16
    draw = functools.partial(
        sampling.find_violators,
        _u(3, b),
        jnp.full(b, 0.5),
        d_ik,
        jnp.ones((b, c), bool),
        jnp.full(b, big + 1),
        margin=1.0,
        sampler="wsabie",
    )
    viol = draw()
    assert np.all(np.asarray(viol.found))
    assert np.all(np.asarray(viol.index) % 4 == 0)
    tries = big / np.asarray(viol.rank)
    small = tries <= 16
    assert np.allclose(tries[small], np.round(tries[small]))
    assert abs(np.mean(tries) - 4.0) < 0.2
    assert abs(np.mean(tries == 1) - 0.25) < 0.03
    capped = draw(max_tries=2)
    assert abs(np.mean(np.asarray(capped.found)) - (1 - 0.75**2)) < 0.03
    assert np.all(np.asarray(capped.rank)[~np.asarray(capped.found)] == 0)


@pytest.mark.slow
def test_same_label_candidates_never_violate():
    draw = functools.partial(
        sampling.find_violators,
        _u(4, 8),
        jnp.ones(8),
        jnp.zeros((8, 50)),
        jnp.zeros((8, 50), bool),
        jnp.full(8, 10.0),
        margin=1.0,
    )
    viol = draw(sampler="wsabie")
    assert not np.any(np.asarray(viol.found))
    np.testing.assert_array_equal(np.asarray(viol.rank), 0.0)
    with pytest.raises(ValueError, match="unknown sampler"):
        draw(sampler="warp")


@pytest.mark.slow
@pytest.mark.parametrize("width", [1, 3, 32])
def test_select_nth(width):
    rng = np.random.default_rng(5)
    mask = rng.uniform(size=(40, 77)) > 0.6
    count = mask.sum(1)
    r = (rng.uniform(size=40) * count).astype(np.int32)
    got, count_got = sampling._select_nth(jnp.asarray(mask), jnp.asarray(r), width=width)
    got = np.asarray(got)
    np.testing.assert_array_equal(np.asarray(count_got), count)
    for row in range(40):
        if count[row]:
            assert got[row] == np.nonzero(mask[row])[0][r[row]]


@pytest.mark.slow
def test_step_bits_are_distinct_per_step_and_reproducible():
    key = jax.random.PRNGKey(7)
    a = np.asarray(sampling.step_bits(key, jnp.int32(0), 101))
    b = np.asarray(sampling.step_bits(key, jnp.int32(1), 101))
    assert a.shape == (101,) and a.dtype == np.uint32
    np.testing.assert_array_equal(a, np.asarray(sampling.step_bits(key, jnp.int32(0), 101)))
    assert len(np.intersect1d(a, b)) == 0
    u = np.asarray(sampling.to_uniform(jnp.asarray(np.concatenate([a, b]))))
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.07
    typed = sampling.step_bits(jax.random.key(7), jnp.int32(0), 101)
    np.testing.assert_array_equal(np.asarray(typed), a)


@pytest.mark.slow
def test_violator_search_agrees_with_the_loss():
    """The search flags a negative k exactly where the loss's hinge of (i, j, k) is positive.

    On embeddings, as the WARCA step calls it (d_ij by ``losses.distance``, d_ik by
    ``losses.candidate_distances``): every k the search can draw has a positive
    ``losses.triplet_hinge`` (the hinge of the gradient, on the triplet's differences),
    and every negative with a positive hinge is drawn for some uniform; the count is
    the number of them.
    """
    rng = np.random.default_rng(11)
    b, c, dp, margin = 16, 40, 5, 1.0
    ea = rng.normal(size=(b, dp))
    ea[1, 0] = 20.0  # far from every candidate: no violator
    ep = ea + 0.7 * rng.normal(size=(b, dp))
    ep[0] = ea[0]  # d_ij = 0
    ea, ep = jnp.asarray(ea, jnp.float32), jnp.asarray(ep, jnp.float32)
    ec = jnp.asarray(rng.normal(size=(c, dp)), jnp.float32)
    negative = rng.integers(0, 4, size=(1, c)) != rng.integers(0, 4, size=(b, 1))
    d_ij = losses.distance(ea - ep)
    d_ik = losses.candidate_distances(ea, ec)
    # the loss on every (anchor, candidate) triplet, from the differences
    pu = jnp.repeat(ea - ep, c, axis=0)
    pv = (ea[:, None, :] - ec[None, :, :]).reshape(b * c, dp)
    hinge, dij_loss, dik_loss = losses.triplet_hinge(pu, pv, margin=margin)
    hinge = np.asarray(hinge).reshape(b, c)
    np.testing.assert_array_equal(np.asarray(dij_loss).reshape(b, c)[:, 0], d_ij)
    np.testing.assert_allclose(np.asarray(dik_loss).reshape(b, c), d_ik, rtol=1e-5, atol=1e-5)
    # no triplet within rounding of the margin, so the two distance forms cannot disagree
    pre = np.asarray(losses.margin_violation(dij_loss, dik_loss, margin=margin)).reshape(b, c)
    assert np.abs(pre).min() > 1e-3
    positive = negative & (hinge > 0)
    assert 0 < positive.sum() < negative.sum()  # violators and non-violators
    assert np.any(~negative & (hinge > 0))  # same-label candidates never count
    counts = positive.sum(1)
    assert counts.min() == 0 < counts.max()

    # one row per (pair, r): the r-th violator of the pair, r < its count
    r = np.tile(np.arange(c), b)
    rows = np.repeat(np.arange(b), c)
    draw = np.minimum((r + 0.5) / np.maximum(counts[rows], 1), 0.999)
    u = jnp.asarray(np.stack([draw, np.zeros_like(draw)]), jnp.float32)
    viol = sampling.find_violators(
        u,
        d_ij[rows],
        d_ik[rows],
        jnp.asarray(negative[rows]),
        jnp.asarray(negative[rows].sum(1), jnp.float32),
        margin=margin,
    )
    index, found = np.asarray(viol.index), np.asarray(viol.found)
    np.testing.assert_array_equal(np.asarray(viol.rank), counts[rows])  # rank = violators
    np.testing.assert_array_equal(found, counts[rows] > 0)
    # a flagged triplet has a positive hinge in the loss, on the search's distances and on
    # the triplet's own differences (the gradient's hinge)
    assert np.all(hinge[rows[found], index[found]] > 0)
    flagged = (
        losses.margin_violation(d_ij[rows][found], d_ik[rows[found], index[found]], margin=margin)
        > 0
    )
    assert bool(jnp.all(flagged))
    gradient_hinge, _, _ = losses.triplet_hinge(
        (ea - ep)[rows[found]], ea[rows[found]] - ec[index[found]], margin=margin
    )
    assert bool(jnp.all(gradient_hinge > 0))
    # and vice versa: each pair's drawable violators are its negatives with a positive hinge
    for row in range(b):
        drawn = set(index[(rows == row) & (r < counts[row])].tolist())
        assert drawn == set(np.nonzero(positive[row])[0].tolist())


@pytest.mark.slow
def test_a_triplet_on_the_margin_is_no_violator_and_has_no_hinge():
    """gamma + xi_ijk = 0 exactly: no violator for the search, a zero hinge for the loss."""
    pu = jnp.asarray([[0.5, 0.0]], jnp.float32)  # d_ij = 0.5
    pv = jnp.asarray([[0.0, 1.5]], jnp.float32)  # d_ik = 1.5 = gamma + d_ij
    hinge, d_ij, d_ik = losses.triplet_hinge(pu, pv, margin=1.0)
    assert float(hinge[0]) == 0.0
    viol = sampling.find_violators(
        _u(5, 1), d_ij, d_ik[:, None], jnp.ones((1, 1), bool), jnp.ones(1), margin=1.0
    )
    assert not bool(viol.found[0]) and float(viol.rank[0]) == 0.0
    anchors = jnp.zeros((1, 2), jnp.float32)
    np.testing.assert_array_equal(losses.candidate_distances(anchors, -pv), d_ik[:, None])
