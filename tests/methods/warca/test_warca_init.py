"""WARCA's initial W: random orthonormal rows, or the training data's principal axes."""

import jax
import numpy as np
import pytest
from conftest import small_problem

from warca_jax.data import synthetic
from warca_jax.methods import warca
from warca_jax.methods.warca import inputs
from warca_jax.runs import defaults


def _centred_gram(n=40, d=12, seed=0):
    x = np.random.default_rng(seed).normal(size=(n, d))
    h = np.eye(n) - 1.0 / n
    return h @ (x @ x.T) @ h


def test_kernel_pca_start_is_the_kernel_principal_axes_with_orthonormal_rows():
    k = _centred_gram()
    a = np.asarray(inputs.init_params(jax.random.PRNGKey(0), dim=5, d=0, gram=k, init="pca"))
    w = np.linalg.eigvalsh(k)[::-1][:5]
    np.testing.assert_allclose(a @ k @ a.T, np.eye(5), atol=1e-4)  # W W^T = I
    # the embedding's variance along row i is the i-th largest eigenvalue of K
    np.testing.assert_allclose(a @ k @ k @ a.T, np.diag(w), rtol=1e-4, atol=1e-3 * w[0])


@pytest.mark.slow
def test_kernel_pca_start_beyond_the_rank_is_finite_with_unit_rows():
    k = _centred_gram(n=30, d=4)  # rank 4
    a = np.asarray(inputs.init_params(jax.random.PRNGKey(1), dim=7, d=0, gram=k, init="pca"))
    wwt = a @ k @ a.T
    assert np.all(np.isfinite(a))
    np.testing.assert_allclose(wwt[:4, :4], np.eye(4), atol=1e-4)
    np.testing.assert_allclose(np.diag(wwt), 1.0, rtol=1e-4)


@pytest.mark.parametrize("n,d,dim", [(200, 10, 4), (8, 20, 5), (5, 20, 8)])
def test_primal_pca_start_is_the_principal_axes(n, d, dim):
    """The D x D covariance (N >= D), the N x N Gram matrix (N < D), and D' beyond the rank
    (N - 1 = 4 axes, the rest random and orthogonal to them)."""
    x = np.random.default_rng(2).normal(size=(n, d)) * np.linspace(3, 1, d)
    w = np.asarray(inputs.init_params(jax.random.PRNGKey(0), dim=dim, d=d, x=x, init="pca"))
    np.testing.assert_allclose(w @ w.T, np.eye(dim), atol=1e-5)
    _, _, vt = np.linalg.svd(x - x.mean(0), full_matrices=False)
    k = min(dim, n - 1)
    # the first k rows are the top k right singular vectors, up to sign
    np.testing.assert_allclose(np.abs(w[:k] @ vt[:k].T), np.eye(k), atol=1e-4)


def test_pca_start_of_a_memory_map_equals_the_in_memory_one(tmp_path):
    x = np.random.default_rng(3).normal(size=(300, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    mm = np.load(tmp_path / "x.npy", mmap_mode="r")
    key = jax.random.PRNGKey(0)
    a = inputs._primal_pca_init(key, x, 3, block_size=64)
    b = inputs._primal_pca_init(key, mm, 3, block_size=64)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_unknown_init_is_refused_naming_the_options():
    cfg = defaults.overridden(defaults.method_config("warca:small"), init="kpca")
    x, y, _ = synthetic.make_synthetic(num_ids=10, images_per_id=4, dim=32, signal_dim=2, seed=0)
    with pytest.raises(ValueError, match=r"unknown init 'kpca'.*'pca', 'random'"):
        warca.fit(x, y, cfg)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["small", "chi2"])
def test_pca_start_learns_and_is_reproducible(variant):
    x, y = small_problem(num_ids=30, dim=16, histogram=variant == "chi2")
    base = defaults.method_config(f"warca:{variant}")
    cfg = defaults.overridden(base, init="pca", num_iters=100, dim=8, log_every=20)
    m1, h1 = warca.fit(x, y, cfg, seed=0)
    m2, _ = warca.fit(x, y, cfg, seed=0)
    np.testing.assert_array_equal(np.asarray(m1.transform(x)), np.asarray(m2.transform(x)))
    assert h1[-1]["loss"] < h1[0]["loss"]


def test_top_eigenpairs_of_a_large_matrix_by_subspace_iteration():
    """Beyond ``exact_up_to`` rows the kernel principal axes come from subspace iteration;
    on a matrix with a clear top 5 they equal eigh's."""
    rng = np.random.default_rng(4)
    u, _ = np.linalg.qr(rng.normal(size=(60, 60)))
    w = np.concatenate([[50.0, 40, 30, 20, 10], rng.uniform(0, 1, 55)])
    g = (u * w) @ u.T
    ew, ev = inputs._top_eigenpairs(jax.random.PRNGKey(0), g, 5, exact_up_to=10)
    np.testing.assert_allclose(ew[:5], w[:5], rtol=1e-6)
    np.testing.assert_allclose(np.abs(ev[:, :5].T @ u[:, :5]), np.eye(5), atol=1e-5)
