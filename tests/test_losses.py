"""Closed-form gradients of warca_jax.losses against jax.grad, in float64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from warca_jax import losses


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _triplets(seed, *, b=12, d=7, dp=4, n=None):
    """Random W and triplet differences with every hinge away from its kink."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(dp, d if n is None else n))
    u = rng.normal(size=(b, w.shape[1]))
    v = rng.normal(size=(b, w.shape[1]))
    hinge, _, _ = losses.triplet_hinge(u @ w.T, v @ w.T, margin=1.0)
    # Keep |gamma + d_ij - d_ik| > 0.05 so finite differences do not cross a kink.
    pre = 1.0 + np.linalg.norm(u @ w.T, axis=1) - np.linalg.norm(v @ w.T, axis=1)
    keep = np.abs(pre) > 0.05
    weights = rng.uniform(0.5, 3.0, size=b) * keep
    return jnp.asarray(w), jnp.asarray(u), jnp.asarray(v), jnp.asarray(weights), hinge


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_primal_hinge_grad_matches_autodiff(seed, jit):
    w, u, v, weights, hinge = _triplets(seed)
    assert 0 < int(jnp.sum(hinge > 0)) < len(hinge) or seed != 0  # both regimes exercised
    grad_fn = losses.warca_hinge_grad
    auto_fn = jax.grad(losses.warca_hinge_loss)
    if jit:
        grad_fn = jax.jit(grad_fn, static_argnames="margin")
        auto_fn = jax.jit(auto_fn, static_argnames="margin")
    closed = grad_fn(w, u, v, weights, margin=1.0)
    auto = auto_fn(w, u, v, weights, margin=1.0)
    assert closed.dtype == jnp.float64
    np.testing.assert_allclose(closed, auto, rtol=1e-10, atol=1e-12)
    assert float(jnp.abs(closed).max()) > 0


def test_primal_hinge_numerical_gradient():
    w, u, v, weights, _ = _triplets(3)
    check_grads(
        lambda w: losses.warca_hinge_loss(w, u, v, weights, margin=1.0),
        (w,),
        order=1,
        modes=["rev"],
        eps=1e-6,
    )


def test_hinge_grad_is_w_times_g_sum():
    """The assembled gradient equals sum_b c_b W G_ijk with G of eq. 21 formed densely."""
    w, u, v, weights, _ = _triplets(4)
    pu, pv = u @ w.T, v @ w.T
    hinge, dij, dik = losses.triplet_hinge(pu, pv, margin=1.0)
    expected = sum(
        weights[b]
        * (hinge[b] > 0)
        / len(u)
        * w
        @ losses.outer_product_g(u[b], v[b], dij[b], dik[b])
        for b in range(len(u))
    )
    np.testing.assert_allclose(
        losses.warca_hinge_grad(w, u, v, weights, margin=1.0), expected, rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("kind", ["aon", "frobenius", "none"])
def test_penalty_grads(kind):
    w = jnp.asarray(np.random.default_rng(5).normal(size=(3, 6)))
    np.testing.assert_allclose(
        losses.penalty_grad(w, kind=kind),
        jax.grad(lambda w: losses.penalty(w, kind=kind))(w),
        rtol=1e-12,
    )
    check_grads(lambda w: losses.penalty(w, kind=kind), (w,), order=2)


def test_aon_penalty_zero_at_orthonormal_rows():
    q, _ = np.linalg.qr(np.random.default_rng(6).normal(size=(8, 3)))
    assert float(losses.aon_penalty(jnp.asarray(q.T))) < 1e-20
    assert float(losses.aon_penalty(jnp.asarray(2 * q.T))) == pytest.approx(0.5 * 3 * 9)


def _kernel_problem(seed, *, n=9, dp=3, b=6):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5))
    gram = jnp.asarray(np.exp(-0.2 * ((x[:, None] - x[None]) ** 2).sum(-1)))
    a = jnp.asarray(rng.normal(size=(dp, n)))
    i = rng.integers(0, n, b)
    j = (i + 1 + rng.integers(0, n - 2, b)) % n
    k = (j + 1 + rng.integers(0, n - 2, b)) % n
    k = np.where(k == i, (k + 1) % n, k)
    k = np.where(k == j, (k + 1) % n, k)
    weights = jnp.asarray(rng.uniform(0.5, 2.0, b))
    return gram, a, i, j, k, weights


@pytest.mark.parametrize("seed", [0, 1])
def test_kernel_hinge_grad_matches_autodiff(seed):
    gram, a, i, j, k, weights = _kernel_problem(seed)
    args = (gram[i], gram[j], gram[k], weights)
    closed = losses.kernel_warca_hinge_grad(a, *args, margin=1.0)
    auto = jax.grad(losses.kernel_warca_hinge_loss)(a, *args, margin=1.0)
    np.testing.assert_allclose(closed, auto, rtol=1e-10, atol=1e-12)
    assert float(jnp.abs(closed).max()) > 0


@pytest.mark.parametrize("seed", [0, 1])
def test_preconditioned_hinge_grad_is_grad_times_k_inverse(seed):
    """Eq. 23: the sparse A K E_ijk update equals the plain gradient times K^-1."""
    gram, a, i, j, k, weights = _kernel_problem(seed)
    plain = losses.kernel_warca_hinge_grad(a, gram[i], gram[j], gram[k], weights, margin=1.0)
    emb = gram @ a.T
    pre, _ = losses.kernel_hinge_precond_grad(
        emb, jnp.asarray(i), jnp.asarray(j), jnp.asarray(k), weights, margin=1.0, n=gram.shape[0]
    )
    np.testing.assert_allclose(pre @ gram, plain, rtol=1e-8, atol=1e-10)
    # At most three non-zero columns per triplet.
    assert int(jnp.sum(jnp.any(pre != 0, axis=0))) <= 3 * len(i)


def test_sparse_e_is_k_inverse_g_k_inverse():
    """Eq. 24: E_ijk = K^-1 G_ijk K^-1 with G built from kernel columns."""
    gram, a, *_ = _kernel_problem(2)
    i, j, k = 1, 4, 7
    dij, dik = 0.7, 1.3
    g = losses.outer_product_g(gram[i] - gram[j], gram[i] - gram[k], dij, dik)
    kinv = jnp.linalg.inv(gram)
    np.testing.assert_allclose(
        kinv @ g @ kinv, losses.sparse_e(i, j, k, dij, dik, gram.shape[0]), atol=1e-6
    )
    # The paper counts nine non-zeros; two of them share the (i, i) entry, so seven are distinct.
    assert int(jnp.sum(losses.sparse_e(i, j, k, dij, dik, 9) != 0)) == 7


def test_kernel_aon_penalty_grads():
    gram, a, *_ = _kernel_problem(3)
    np.testing.assert_allclose(
        losses.kernel_aon_penalty_grad(a, gram),
        jax.grad(losses.kernel_aon_penalty)(a, gram),
        rtol=1e-10,
    )
    pre = losses.kernel_aon_penalty_precond_grad(a, gram @ a.T)
    np.testing.assert_allclose(pre @ gram, losses.kernel_aon_penalty_grad(a, gram), rtol=1e-8)


def test_zero_distance_pair_gives_finite_gradient():
    w = jnp.asarray(np.random.default_rng(7).normal(size=(3, 5)))
    u = jnp.zeros((2, 5))  # x_i == x_j: d_ij = 0
    v = jnp.asarray(np.random.default_rng(8).normal(size=(2, 5))) * 0.01
    weights = jnp.ones(2)
    for g in (
        losses.warca_hinge_grad(w, u, v, weights, margin=1.0),
        jax.grad(losses.warca_hinge_loss)(w, u, v, weights, margin=1.0),
    ):
        assert bool(jnp.all(jnp.isfinite(g)))
    np.testing.assert_allclose(
        losses.warca_hinge_grad(w, u, v, weights, margin=1.0),
        jax.grad(losses.warca_hinge_loss)(w, u, v, weights, margin=1.0),
        rtol=1e-10,
        atol=1e-12,
    )


def test_rank_weight():
    r = jnp.arange(6.0)
    np.testing.assert_allclose(
        losses.rank_weight(r, weighting="harmonic"),
        [0, 1, 1.5, 1.5 + 1 / 3, 1.5 + 1 / 3 + 0.25, 1.5 + 1 / 3 + 0.25 + 0.2],
        rtol=1e-10,
        atol=1e-12,
    )
    np.testing.assert_allclose(losses.rank_weight(r, weighting="uniform"), r)
    with pytest.raises(ValueError, match="unknown rank weighting"):
        losses.rank_weight(r, weighting="log")
