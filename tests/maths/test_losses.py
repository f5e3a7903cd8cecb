"""The training path's equations (warca_jax.maths.losses) against jax.grad and against the
paper's dense forms (tests/reference_forms.py), in float64."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import reference_forms as ref
from jax.test_util import check_grads

from warca_jax.maths import losses, optim, penalties


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _triplets(seed, *, b=12, d=7, dp=4):
    """Random W and triplet differences with every hinge away from its kink."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(dp, d))
    u = rng.normal(size=(b, d))
    v = rng.normal(size=(b, d))
    hinge, _, _ = losses.triplet_hinge(u @ w.T, v @ w.T, margin=1.0)
    # Keep |gamma + d_ij - d_ik| > 0.05 so finite differences do not cross a kink.
    pre = 1.0 + np.linalg.norm(u @ w.T, axis=1) - np.linalg.norm(v @ w.T, axis=1)
    keep = np.abs(pre) > 0.05
    weights = rng.uniform(0.5, 3.0, size=b) * keep
    return jnp.asarray(w), jnp.asarray(u), jnp.asarray(v), jnp.asarray(weights), hinge


def _as_rows(u, v):
    """Features and triplet indices whose differences are u and v: rows a_b (anchors),
    a_b - u_b (positives) and a_b - v_b (violators), [3B, D]."""
    b = u.shape[0]
    anchors = jnp.asarray(np.random.default_rng(b).normal(size=u.shape))
    feats = jnp.concatenate([anchors, anchors - u, anchors - v])
    return feats, jnp.arange(b), b + jnp.arange(b), 2 * b + jnp.arange(b)


def _hinge_grad(w, u, v, weights, margin=1.0, form="auto"):
    """``losses.hinge_grad`` as the training step calls it, from projected differences."""
    feats, i, j, k = _as_rows(u, v)
    return losses.hinge_grad(u @ w.T, v @ w.T, feats, i, j, k, weights, margin=margin, form=form)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["pairs", "rows"])
@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_primal_hinge_grad_matches_autodiff(seed, jit, form):
    w, u, v, weights, hinge = _triplets(seed)
    assert 0 < int(jnp.sum(hinge > 0)) < len(hinge) or seed != 0  # both regimes exercised
    grad_fn = functools.partial(_hinge_grad, form=form)
    auto_fn = jax.grad(losses.warca_hinge_loss)
    if jit:
        grad_fn = jax.jit(grad_fn, static_argnames="margin")
        auto_fn = jax.jit(auto_fn, static_argnames="margin")
    closed, hinge_out = grad_fn(w, u, v, weights, margin=1.0)
    auto = auto_fn(w, u, v, weights, margin=1.0)
    assert closed.dtype == jnp.float64
    np.testing.assert_allclose(closed, auto, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hinge_out, hinge, rtol=1e-12)
    assert float(jnp.abs(closed).max()) > 0


@pytest.mark.slow
def test_primal_hinge_numerical_gradient():
    w, u, v, weights, _ = _triplets(3)
    check_grads(
        lambda w: losses.warca_hinge_loss(w, u, v, weights, margin=1.0),
        (w,),
        order=1,
        modes=["rev"],
        eps=1e-6,
    )


def test_hinge_loss_is_the_dense_eq_12_term():
    w, u, v, weights, _ = _triplets(5)
    np.testing.assert_allclose(
        losses.warca_hinge_loss(w, u, v, weights, margin=1.0),
        ref.hinge_loss(w, u, v, weights, 1.0),
        rtol=1e-12,
    )


@pytest.mark.slow
def test_hinge_grad_is_w_times_g_sum():
    """The outer-product form equals sum_b c_b W G_ijk with G of eq. 21 formed densely."""
    w, u, v, weights, _ = _triplets(4)
    np.testing.assert_allclose(
        _hinge_grad(w, u, v, weights)[0],
        ref.hinge_grad(w, u, v, weights, 1.0),
        rtol=1e-10,
        atol=1e-12,
    )


def test_objective_is_lambda_penalty_plus_hinge_term():
    """Eq. 12: lambda R(W) + the sampled hinge term, as the step logs it."""
    w, u, v, weights, hinge = _triplets(6)
    pen = penalties.aon_penalty(w)
    loss, hinge_term = losses.objective(hinge, weights, pen, lam=0.3)
    expected_hinge = ref.hinge_loss(w, u, v, weights, 1.0)
    np.testing.assert_allclose(hinge_term, expected_hinge, rtol=1e-12)
    np.testing.assert_allclose(loss, expected_hinge + 0.3 * pen, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["aon", "frobenius", "none"])
def test_penalty_grads(kind):
    w = jnp.asarray(np.random.default_rng(5).normal(size=(3, 6)))
    np.testing.assert_allclose(
        penalties.penalty_grad(w, kind=kind),
        jax.grad(lambda w: penalties.penalty(w, kind=kind))(w),
        rtol=1e-12,
    )
    check_grads(lambda w: penalties.penalty(w, kind=kind), (w,), order=2)


def test_aon_penalty_zero_at_orthonormal_rows():
    q, _ = np.linalg.qr(np.random.default_rng(6).normal(size=(8, 3)))
    assert float(penalties.aon_penalty(jnp.asarray(q.T))) < 1e-20
    assert float(penalties.aon_penalty(jnp.asarray(2 * q.T))) == pytest.approx(0.5 * 3 * 9)


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


def _kernel_hinge_grad(gram, a, i, j, k, weights, form="auto"):
    """The kernel form's plain hinge gradient as the training step computes it."""
    emb = gram @ a.T
    pu, pv = emb[i] - emb[j], emb[i] - emb[k]
    return losses.hinge_grad(pu, pv, gram, i, j, k, weights, margin=1.0, form=form)[0]


def test_hinge_grad_arrangements_agree_and_auto_takes_the_cheaper():
    """The pairs' outer products and the rows' single product are one sum; "auto" takes
    "rows" when the features have fewer rows than the 2B differences, and a repeated
    index (the same row as anchor of two pairs) adds up in the rows form."""
    w, u, v, weights, _ = _triplets(7)
    feats, i, j, k = _as_rows(u, v)
    b = u.shape[0]
    i = i.at[1].set(i[0])  # a shared anchor row
    pu = (feats[i] - feats[j]) @ w.T
    pv = (feats[i] - feats[k]) @ w.T
    grads = {
        form: losses.hinge_grad(pu, pv, feats, i, j, k, weights, margin=1.0, form=form)[0]
        for form in ("pairs", "rows")
    }
    np.testing.assert_allclose(grads["rows"], grads["pairs"], rtol=1e-10, atol=1e-12)
    u2, v2 = feats[i] - feats[j], feats[i] - feats[k]
    np.testing.assert_allclose(grads["pairs"], ref.hinge_grad(w, u2, v2, weights, 1.0), rtol=1e-10)
    assert feats.shape[0] >= 2 * b  # 3B rows: "auto" is the pairs' form here ...
    small = feats[: 2 * b - 1]  # ... and the rows' form with fewer than 2B rows
    sub = (i % (2 * b - 1), j % (2 * b - 1), k % (2 * b - 1))
    pu, pv = (small[sub[0]] - small[sub[1]]) @ w.T, (small[sub[0]] - small[sub[2]]) @ w.T
    want = losses.hinge_grad(pu, pv, small, *sub, weights, margin=1.0, form="rows")
    got = jax.jit(functools.partial(losses.hinge_grad, margin=1.0))(pu, pv, small, *sub, weights)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    with pytest.raises(ValueError, match="form must be"):
        losses.hinge_grad(pu, pv, small, *sub, weights, margin=1.0, form="dense")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_kernel_hinge_grad_matches_autodiff_and_the_dense_form(seed):
    """Eq. 18's hinge term in A: the step's gradient (eq. 20-22) against jax.grad and
    against A G_ijk with G formed from kernel columns."""
    gram, a, i, j, k, weights = _kernel_problem(seed)
    u, v = gram[i] - gram[j], gram[i] - gram[k]
    closed = _kernel_hinge_grad(gram, a, i, j, k, weights)
    np.testing.assert_allclose(
        _kernel_hinge_grad(gram, a, i, j, k, weights, form="pairs"), closed, rtol=1e-10
    )
    auto = jax.grad(ref.hinge_loss)(a, u, v, weights, 1.0)
    np.testing.assert_allclose(closed, auto, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(closed, ref.hinge_grad(a, u, v, weights, 1.0), rtol=1e-10)
    assert float(jnp.abs(closed).max()) > 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_preconditioned_hinge_grad_is_grad_times_k_inverse(seed):
    """Eq. 23-24: the sparse A K E_ijk update equals the plain gradient times K^-1, and
    the dense sum of A K E_ijk."""
    gram, a, i, j, k, weights = _kernel_problem(seed)
    plain = _kernel_hinge_grad(gram, a, i, j, k, weights)
    emb = gram @ a.T
    pre, _ = losses.kernel_hinge_precond_grad(
        emb, jnp.asarray(i), jnp.asarray(j), jnp.asarray(k), weights, margin=1.0, n=gram.shape[0]
    )
    np.testing.assert_allclose(pre @ gram, plain, rtol=1e-8, atol=1e-10)
    dense = ref.kernel_hinge_precond_grad(a, gram, i, j, k, weights, 1.0)
    np.testing.assert_allclose(pre, dense, rtol=1e-10, atol=1e-12)
    # At most three non-zero columns per triplet.
    assert int(jnp.sum(jnp.any(pre != 0, axis=0))) <= 3 * len(i)


@pytest.mark.slow
def test_sparse_e_is_k_inverse_g_k_inverse():
    """Eq. 24 (the reference forms themselves): E_ijk = K^-1 G_ijk K^-1."""
    gram, a, *_ = _kernel_problem(2)
    i, j, k = 1, 4, 7
    dij, dik = 0.7, 1.3
    g = ref.outer_product_g(gram[i] - gram[j], gram[i] - gram[k], dij, dik)
    kinv = jnp.linalg.inv(gram)
    np.testing.assert_allclose(
        kinv @ g @ kinv, ref.sparse_e(i, j, k, dij, dik, gram.shape[0]), atol=1e-6
    )
    # The paper counts nine non-zeros; two of them share the (i, i) entry, so seven are distinct.
    assert int(jnp.sum(ref.sparse_e(i, j, k, dij, dik, 9) != 0)) == 7


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["aon", "frobenius", "none"])
def test_kernel_penalty_and_its_grads(kind):
    """Eq. 18's penalty from the embeddings K A^T, its gradient (eq. 20) against jax.grad
    and the dense form, and the preconditioned one (eq. 23) times K against it."""
    gram, a, *_ = _kernel_problem(3)

    def value(a):
        return penalties.kernel_penalty(a, gram @ a.T, kind=kind)

    emb = gram @ a.T
    plain = penalties.kernel_penalty_grad(a, emb, kind=kind, preconditioned=False)
    pre = penalties.kernel_penalty_grad(a, emb, kind=kind, preconditioned=True)
    np.testing.assert_allclose(plain, jax.grad(value)(a), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(pre @ gram, plain, rtol=1e-8, atol=1e-10)
    if kind == "aon":
        np.testing.assert_allclose(value(a), ref.kernel_aon_penalty(a, gram), rtol=1e-12)
        np.testing.assert_allclose(plain, ref.kernel_aon_penalty_grad(a, gram), rtol=1e-10)


@pytest.mark.slow
def test_penalty_transform_adds_lambda_times_the_penalty_gradient():
    """Eq. 25: the plain SGD step along hinge part + lambda R' (eq. 23) is the dense update."""
    gram, a, i, j, k, weights = _kernel_problem(4)
    lam, eta = 0.3, 0.05
    emb = gram @ a.T
    hinge, _ = losses.kernel_hinge_precond_grad(
        emb, jnp.asarray(i), jnp.asarray(j), jnp.asarray(k), weights, margin=1.0, n=gram.shape[0]
    )
    pen = penalties.kernel_penalty_grad(a, emb, kind="aon", preconditioned=True)
    tx = optax.chain(optim.add_penalty_grad(lam), optax.scale(-eta))
    updates, _ = tx.update(hinge, tx.init(a), a, penalty_grad=pen)
    expected = ref.preconditioned_sgd_step(a, gram, i, j, k, weights, margin=1.0, lam=lam, eta=eta)
    np.testing.assert_allclose(a + updates, expected, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="penalty_grad"):
        tx.update(hinge, tx.init(a), a)


@pytest.mark.slow
def test_zero_distance_pair_gives_finite_gradient():
    w = jnp.asarray(np.random.default_rng(7).normal(size=(3, 5)))
    u = jnp.zeros((2, 5))  # x_i == x_j: d_ij = 0
    v = jnp.asarray(np.random.default_rng(8).normal(size=(2, 5))) * 0.01
    weights = jnp.ones(2)
    closed = _hinge_grad(w, u, v, weights)[0]
    auto = jax.grad(losses.warca_hinge_loss)(w, u, v, weights, margin=1.0)
    assert bool(jnp.all(jnp.isfinite(closed))) and bool(jnp.all(jnp.isfinite(auto)))
    np.testing.assert_allclose(closed, auto, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_distance_has_a_zero_gradient_at_zero():
    assert float(losses.distance(jnp.zeros(3))) == 0.0
    np.testing.assert_array_equal(jax.grad(losses.distance)(jnp.zeros(3)), np.zeros(3))
    np.testing.assert_allclose(losses.distance(jnp.asarray([3.0, 4.0])), 5.0)


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
