"""Tests for warca_jax.evaluation.rerank against a plain NumPy k-reciprocal re-ranking."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from warca_jax.evaluation import evaluate_distances
from warca_jax.evaluation.rerank import evaluate_reranked, k_reciprocal, k_reciprocal_features


def reference(q_g, q_q, g_g, k1=20, k2=6, lam=0.3):
    """Zhong et al. (CVPR 2017), straight from the paper: dense matrices, Python sets and
    per-row loops, in float64."""
    nq = len(q_g)
    m = np.block([[q_q, q_g], [q_g.T, g_g]]).astype(np.float64)
    n = len(m)
    # original distance: squared, row i is column i of the stacked matrix, / its max
    d = (m**2).T / (m**2).max(axis=0)[:, None]
    ranks = np.argsort(d, axis=1, kind="stable")

    def recip(i, k):
        return {int(j) for j in ranks[i, : k + 1] if i in ranks[j, : k + 1]}

    v = np.zeros((n, n))
    for i in range(n):
        r = recip(i, k1)
        star = set(r)
        for c in r:
            rc = recip(c, int(round(k1 / 2)))
            if len(rc & r) > 2 / 3 * len(rc):
                star |= rc
        idx = sorted(star)
        w = np.exp(-d[i, idx])
        v[i, idx] = w / w.sum()
    if k2 != 1:
        v = np.stack([v[ranks[i, :k2]].mean(axis=0) for i in range(n)])
    jac = np.zeros((nq, n))
    for i in range(nq):
        for j in range(n):
            jac[i, j] = 1 - np.minimum(v[i], v[j]).sum() / np.maximum(v[i], v[j]).sum()
    final = (1 - lam) * jac + lam * d[:nq]
    return final[:, nq:]


def problem(seed, nq=23, ng=61, d=5, ids=9):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(ids, d))
    ql, gl = rng.integers(0, ids, nq), rng.integers(0, ids, ng)
    xq = centres[ql] + 0.7 * rng.normal(size=(nq, d))
    xg = centres[gl] + 0.7 * rng.normal(size=(ng, d))
    ids_ = (ql, gl, rng.integers(0, 3, nq), rng.integers(0, 3, ng))
    return xq, xg, ids_


def matrices(xq, xg):
    return cdist(xq, xg), cdist(xq, xq), cdist(xg, xg)


@pytest.mark.parametrize(
    "seed, k1, k2, lam, block",
    [(0, 20, 6, 0.3, 1024), (1, 20, 6, 0.3, 7), (2, 5, 3, 0.5, 16), (3, 8, 1, 0.0, 9)]
    + [(4, 3, 2, 1.0, 5), (5, 30, 10, 0.3, 13)],
)
def test_matches_the_reference(seed, k1, k2, lam, block):
    xq, xg, _ = problem(seed)
    qg, qq, gg = matrices(xq, xg)
    want = reference(qg, qq, gg, k1, k2, lam)
    got = k_reciprocal(qg, qq, gg, k1=k1, k2=k2, lambda_=lam, block=block)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_asymmetric_matrices_match_the_reference():
    """Row i is column i of the stacked matrix, as in the authors' code. (A zero diagonal:
    each point is in its own reciprocal set, so that every row of V sums to 1.)"""
    rng = np.random.default_rng(6)
    qg, qq, gg = rng.random((9, 30)), rng.random((9, 9)), rng.random((30, 30))
    np.fill_diagonal(qq, 0)
    np.fill_diagonal(gg, 0)
    want = reference(qg, qq, gg, 6, 3, 0.3)
    got = k_reciprocal(qg, qq, gg, k1=6, k2=3, block=4)
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.slow
def test_features_match_the_matrices():
    xq, xg, _ = problem(7)
    xq, xg = xq.astype(np.float32), xg.astype(np.float32)
    want = reference(*matrices(xq.astype(np.float64), xg.astype(np.float64)))
    got = k_reciprocal_features(xq, xg, block=10)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(k_reciprocal_features(xq * 1e20, xg * 1e20), got, atol=1e-6)


@pytest.mark.slow
def test_evaluate_reranked_is_evaluate_distances_of_the_reranking():
    xq, xg, ids = problem(8, nq=30, ng=90)
    xq, xg = xq.astype(np.float32), xg.astype(np.float32)
    res = evaluate_reranked(xq, xg, *ids)
    want = evaluate_distances(k_reciprocal_features(xq, xg), *ids)
    for key in ("rank1", "mAP", "mINP", "num_valid"):
        assert res[key] == want[key]
    ss = evaluate_reranked(xq, xg, *ids, single_shot=True, repeats=3)
    assert ss["repeats"] == 3 and 0 <= ss["rank1"] <= 100


@pytest.mark.parametrize(
    "kwargs, match",
    [(dict(k1=0), "k1"), (dict(k2=0), "k2"), (dict(k2=10**6), "k2"), (dict(lambda_=2.0), "lambda_")]
    + [(dict(block=0), "block")],
)
def test_bad_parameters_are_clear_errors(kwargs, match):
    qg, qq, gg = matrices(*problem(9)[:2])
    with pytest.raises(ValueError, match=match):
        k_reciprocal(qg, qq, gg, **kwargs)


def test_shape_mismatch_is_a_clear_error():
    qg, qq, gg = matrices(*problem(9)[:2])
    with pytest.raises(ValueError, match="q_q must be"):
        k_reciprocal(qg, qq[:-1], gg)
