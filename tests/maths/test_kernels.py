"""Kernels of warca_jax.maths.kernels against direct NumPy formulas."""

import numpy as np
import pytest

from warca_jax.maths import kernels


def _hist(rng, n, d, zero_frac=0.3):
    x = rng.uniform(size=(n, d)) * (rng.uniform(size=(n, d)) > zero_frac)
    return (x / x.sum(1, keepdims=True)).astype(np.float32)


def _reference(x, y, kernel, gamma):
    x, y = x.astype(np.float64), y.astype(np.float64)
    diff = x[:, None] - y[None]
    s = x[:, None] + y[None]
    with np.errstate(invalid="ignore", divide="ignore"):
        chi2 = np.where(s > 0, diff**2 / s, 0.0).sum(-1)
        add = np.where(s > 0, 2 * x[:, None] * y[None] / s, 0.0).sum(-1)
    return {
        "linear": x @ y.T,
        "rbf": np.exp(-gamma * (diff**2).sum(-1)),
        "chi2": add,
        "chi2_rbf": np.exp(-gamma * chi2),
        "laplacian": np.exp(-gamma * np.abs(diff).sum(-1)),
    }[kernel]


@pytest.mark.parametrize("kernel", kernels.KERNELS)
def test_kernels_match_reference(kernel):
    rng = np.random.default_rng(0)
    x, y = _hist(rng, 13, 9), _hist(rng, 7, 9)
    x[0] = 0.0  # an all-zero row: every chi2 term is 0/0 against another zero
    y[0] = 0.0
    got = np.asarray(kernels.kernel_matrix(x, y, kernel=kernel, gamma=0.7))
    np.testing.assert_allclose(got, _reference(x, y, kernel, 0.7), rtol=2e-5, atol=2e-6)
    assert np.all(np.isfinite(got))


def test_chi2_kernels_are_positive_semidefinite_on_histograms():
    x = _hist(np.random.default_rng(1), 40, 16)
    for kernel in ("chi2", "chi2_rbf"):
        k = np.asarray(kernels.kernel_matrix(x, x, kernel=kernel, gamma=1.0), np.float64)
        np.testing.assert_allclose(k, k.T, atol=1e-6)
        assert np.linalg.eigvalsh(k).min() > -1e-4


def test_chi2_kernel_rejects_negative_features():
    x = np.random.default_rng(2).normal(size=(5, 3))
    for kernel in ("chi2", "chi2_rbf"):
        with pytest.raises(ValueError, match="non-negative"):
            kernels.kernel_matrix(x, x, kernel=kernel)
    with pytest.raises(ValueError, match="unknown kernel"):
        kernels.kernel_matrix(x, x, kernel="poly")


def test_default_gamma_normalises_the_mean_distance():
    x = np.random.default_rng(3).normal(size=(50, 4)).astype(np.float32)
    g = kernels.default_gamma(x, "rbf")
    d = ((x[:, None] - x[None]) ** 2).sum(-1)
    assert g == pytest.approx(50 * 49 / d.sum(), rel=1e-4)
    assert kernels.default_gamma(x, "linear") == 1.0
    with pytest.raises(ValueError, match="identical"):
        kernels.default_gamma(np.ones((5, 3)), "rbf")


def test_rbf_holds_near_pairs_of_points_far_from_the_origin():
    """Points around 100 with pairs 0.01 apart: the squared distances ||x||^2 + ||y||^2 -
    2 x.y would cancel to 0 in float32 (their kernel rows equal, the matrix's rank lost);
    shifted by the support's mean first, the kernel is the float64 one's."""
    rng = np.random.default_rng(4)
    x = 100.0 + rng.normal(size=(20, 2))
    x[1::2] = x[::2] + 0.01 * rng.normal(size=(10, 2))
    x = x.astype(np.float32)
    ref = _reference(x, x, "rbf", 50.0)
    gram, _ = kernels.gram_matrix(x, kernel="rbf", gamma=50.0)
    np.testing.assert_allclose(np.asarray(gram), ref, atol=2e-4)
    np.testing.assert_allclose(
        np.asarray(kernels.kernel_matrix(x[:3], x, kernel="rbf", gamma=50.0)), ref[:3], atol=2e-4
    )
    assert np.linalg.matrix_rank(np.asarray(gram, np.float64), tol=1e-6) == 20
    shifted, support = kernels.centred(x[:3], x)
    np.testing.assert_allclose(support.mean(0), 0.0, atol=1e-4)
    np.testing.assert_allclose(shifted - support[:3], 0.0)
