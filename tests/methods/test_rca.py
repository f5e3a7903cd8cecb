"""RCA: it learns, it equals a dense NumPy RCA on the same chunklets, seeds, bad input."""

import functools

import learner_checks
import numpy as np
import pytest
from conftest import small_problem
from repo_configs import method_section

from warca_jax.methods import constraints, rca

_method = functools.partial(method_section, "rca")

_small_problem = functools.partial(small_problem, num_ids=30)


def _dense_rca(x, y, *, n_chunks, chunk_size, reg, dim, seed):
    """RCA written out: chunklets one by one, M = C'^{-1} or, with dim < D, the
    whitened subspace of the smallest eigenvalues of S'^{-1} C' (metric-learn's form)."""
    chunks = constraints.chunklets(y, n_chunks, chunk_size, np.random.default_rng(seed))
    x = x.astype(np.float64)
    d = x.shape[1]
    within, members = np.zeros((d, d)), []
    for j in range(n_chunks):
        pts = x[chunks == j]
        assert pts.shape[0] == chunk_size and len(set(y[chunks == j])) == 1
        for p in pts:
            within += np.outer(p - pts.mean(0), p - pts.mean(0))
        members.append(pts)
    within /= n_chunks * chunk_size
    c = within + reg * np.trace(within) / d * np.eye(d)
    if dim == d:
        return np.linalg.inv(c)
    total = np.cov(np.concatenate(members), rowvar=False)
    s = total + reg * np.trace(total) / d * np.eye(d)
    vals, vecs = np.linalg.eig(np.linalg.solve(s, c))
    a = np.real(vecs[:, np.argsort(np.real(vals))[:dim]])
    return a @ np.linalg.inv(a.T @ c @ a) @ a.T


def test_rca_beats_euclidean(reid):
    metric, hist = rca.fit(reid.x_train, reid.y_train, _method())
    # Measured: rank-1 39.0, mAP 45.4 against Euclidean 23.5 / 21.9.
    reid.assert_beats_euclidean(metric, rank1=10, mAP=15)
    assert hist == [] and metric.kind == "linear" and metric.projection.shape == (64, 64)


@pytest.mark.parametrize("dim, reg", [(12, 1e-6), (12, 1e-1), (5, 1e-3)])
def test_equals_dense_numpy_rca(dim, reg):
    x, y = _small_problem()
    cfg = _method(n_chunks=25, chunk_size=3, dim=dim, reg=reg)
    metric, _ = rca.fit(x, y, cfg, seed=4)
    want = _dense_rca(x, y, n_chunks=25, chunk_size=3, reg=reg, dim=dim, seed=4)
    got = metric.mahalanobis_matrix()
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())
    assert metric.projection.shape == (dim, 12)


def test_whitens_the_chunklets():
    x, y = _small_problem()
    metric, _ = rca.fit(x, y, _method(n_chunks=50, reg=1e-6), seed=1)
    chunks = constraints.chunklets(y, 50, 2, np.random.default_rng(1))
    within, _ = rca.chunklet_covariances(metric.transform(x), chunks)
    np.testing.assert_allclose(within, np.eye(12), atol=1e-3)


def test_singular_within_covariance_is_regularised():
    x, y = _small_problem()
    x = np.concatenate([x, np.zeros((len(y), 3), np.float32)], axis=1)  # constant features
    metric, _ = rca.fit(x, y, _method(n_chunks=5))  # 5 pairs: C of rank <= 5 < 15
    assert metric.is_finite()
    m = metric.mahalanobis_matrix()
    assert np.all(np.linalg.eigvalsh((m + m.T) / 2) > 0)


def test_same_seed_same_result():
    # seed 4 draws other chunklets
    learner_checks.assert_same_seed_same_result(
        rca.fit, *_small_problem(), _method(n_chunks=30), apart=np.allclose
    )


@pytest.mark.parametrize(
    "mutate, overrides, match",
    [
        (lambda x, y: (np.where(x > 2, np.nan, x), y), {}, "NaN or inf"),
        (lambda x, y: (x, y[:-1]), {}, "labels has .* entries but the features have"),
        (lambda x, y: (x, y), {}, r"n_chunks = 100 chunklets .* at most 60"),
        (lambda x, y: (x, y), {"n_chunks": 30, "chunk_size": 5}, "at most 0"),
        (lambda x, y: (x, y), {"n_chunks": 0}, r"method.n_chunks must be >= 1"),
        (lambda x, y: (x, y), {"n_chunks": 30, "chunk_size": 1}, "chunk_size must be >= 2"),
        (lambda x, y: (x, y), {"n_chunks": 30, "dim": 13}, r"output dim must be in \[0, 12\]"),
        (lambda x, y: (x, y), {"n_chunks": 30, "reg": 0.0}, "method.reg must be positive"),
    ],
)
def test_bad_input_is_refused(mutate, overrides, match):
    learner_checks.assert_refused(rca.fit, *mutate(*_small_problem()), _method(**overrides), match)
