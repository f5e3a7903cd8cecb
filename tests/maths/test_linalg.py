"""warca_jax.maths.linalg against direct computations."""

import numpy as np
import pytest

from warca_jax.maths import linalg


def test_pca_keeps_the_requested_variance():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 6)) * np.array([10, 5, 1, 0.1, 0.1, 0.1])
    mean, comp = linalg.pca(x, variance=0.95)
    assert comp.shape[0] == 2
    np.testing.assert_allclose(comp @ comp.T, np.eye(2), atol=1e-5)
    np.testing.assert_allclose(mean, x.mean(0), rtol=1e-5, atol=1e-6)
    assert linalg.pca(x, variance=1.0)[1].shape[0] == 6
    assert linalg.pca(x, variance=0.95, max_dim=1)[1].shape[0] == 1


def test_regularise_warns_only_when_singular():
    s = np.diag([1.0, 1.0, 0.0])
    with pytest.warns(RuntimeWarning, match="singular"):
        r = linalg.regularise(s, what="covariance")
    assert np.linalg.eigvalsh(r).min() > 0
    linalg.regularise(np.eye(3))  # no warning: filterwarnings=error would fail the test


def test_psd_project_and_factor():
    m = np.array([[2.0, 0.0], [0.0, -1.0]])
    np.testing.assert_allclose(linalg.psd_project(m), [[2.0, 0.0], [0.0, 0.0]], atol=1e-12)
    a = np.random.default_rng(1).normal(size=(4, 4))
    spd = a @ a.T
    w = linalg.psd_factor(spd)
    np.testing.assert_allclose(w.T @ w, spd, rtol=1e-4, atol=1e-4)


def test_generalized_eigh_solves_the_pencil():
    rng = np.random.default_rng(2)
    a = rng.normal(size=(5, 5))
    a = a @ a.T
    b = rng.normal(size=(5, 5))
    b = b @ b.T + 5 * np.eye(5)
    w, v = linalg.generalized_eigh(a, b, dim=2)
    np.testing.assert_allclose(a @ v, b @ v * w, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(v.T @ b @ v, np.eye(2), atol=1e-8)
    assert w[0] >= w[1]


@pytest.mark.parametrize("gram", [False, True])
def test_pair_curvature_is_the_largest_eigenvalue_of_the_pairs_second_moment(gram):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 6)) * np.array([3.0, 2.0, 1.0, 1.0, 0.5, 0.1])
    i, j = rng.integers(0, 40, size=(2, 150))
    feats = np.exp(-np.sum((x[:, None] - x[None]) ** 2, -1) / 10.0) if gram else x
    got = linalg.pair_curvature(feats, i, j, gram=gram)
    if gram:  # K times the pairs' Laplacian over P: the moment in the kernel's feature space
        lap = np.zeros((40, 40))
        np.add.at(lap, (i, i), 1.0)
        np.add.at(lap, (j, j), 1.0)
        np.add.at(lap, (i, j), -1.0)
        np.add.at(lap, (j, i), -1.0)
        want = np.max(np.linalg.eigvals(feats @ lap / len(i)).real)
    else:
        d = x[i] - x[j]
        want = np.linalg.eigvalsh(d.T @ d / len(i))[-1]
    np.testing.assert_allclose(got, want, rtol=1e-4)
