"""rPCCA's loss and its gradient steps (linear, kernel, and the linear form on its embedding).

The loss (``rpcca``'s docstring) over the pairs (i, j, y), its closed-form gradients, and
the jitted chunk of steps that ``rpcca.fit`` runs: plain gradient descent on the map L
(linear form), on A preconditioned by K^-1 (kernel form, Mignon & Jurie), or on the
embedding E = F L^T of the linear form (``dual_step``), which follows the linear form's
path at the cost of one [N, N] product a step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from warca_jax.methods import learner_loop


def generalized_logistic(z: jax.Array, *, beta: float) -> jax.Array:
    """l_beta(z) = log(1 + exp(beta z)) / beta, a smooth hinge (Mignon & Jurie)."""
    return jax.nn.softplus(beta * z) / beta


def _pair_terms(emb, i, j, y, *, beta):
    """Per-pair loss terms and dloss/d(d^2) coefficients c_p = y sigma(beta y (d^2 - 1)) / P."""
    u = emb[i] - emb[j]
    z = y * (jnp.sum(u * u, axis=1) - 1.0)
    coef = y * jax.nn.sigmoid(beta * z) / i.shape[0]
    return u, jnp.mean(generalized_logistic(z, beta=beta)), coef


def _scatter_pairs(uc, i, j, n):
    """S: [N, dim] with S = sum_p uc_p (e_i - e_j) rows: the pair terms per sample."""
    return jnp.zeros((n, uc.shape[1]), uc.dtype).at[i].add(uc).at[j].add(-uc)


def linear_loss_and_grad(proj, x, i, j, y, *, beta: float, lam: float):
    """Loss and its closed-form gradient 2 sum_p c_p L u_p u_p^T + 2 lam L, as S^T X."""
    u, data_loss, coef = _pair_terms(x @ proj.T, i, j, y, beta=beta)
    s = _scatter_pairs(u * coef[:, None], i, j, x.shape[0])
    return data_loss + lam * jnp.sum(proj * proj), 2.0 * s.T @ x + 2.0 * lam * proj


def kernel_loss_and_grad(a, k, i, j, y, *, beta: float, lam: float, preconditioned: bool = True):
    """Loss and gradient of the kernel form; with ``preconditioned`` the gradient times K^-1.

    Plain: 2 S^T K + 2 lam A K with S the scatter of c_p u_p (u_p = A (k_i - k_j)).
    Preconditioned (Mignon & Jurie): 2 S^T + 2 lam A, no [N, N] product at all.
    """
    emb = k @ a.T
    u, data_loss, coef = _pair_terms(emb, i, j, y, beta=beta)
    s = _scatter_pairs(u * coef[:, None], i, j, k.shape[0])
    loss = data_loss + lam * jnp.sum(a * emb.T)
    if preconditioned:
        return loss, 2.0 * s.T + 2.0 * lam * a
    return loss, 2.0 * (s.T @ k) + 2.0 * lam * emb.T


def dual_step(state, gram, i, j, y, *, beta: float, lam: float, lr: float):
    """The linear form's gradient step on its embedding: (loss, next state).

    The state (E, B, q) stands for the map L_t = r^t L_0 - 2 lr B^T F (r = 1 - 2 lr lam, F
    the features): E = F L_t^T, q = ||L_t||_F^2, B the decayed sum of the pair terms S.
    ``linear_loss_and_grad``'s step L - lr (2 S^T F + 2 lam L) is then E <- r E - 2 lr K S
    with K = F F^T: one [N, N] x [N, D'] product a step instead of two of [N, F] x D'.
    """
    emb, acc, sq = state
    u, data_loss, coef = _pair_terms(emb, i, j, y, beta=beta)
    s = _scatter_pairs(u * coef[:, None], i, j, gram.shape[0])
    ks = gram @ s
    r = outside_decay(lr, lam, 1)  # the penalty's shrink of one step
    new_sq = r * r * sq - 4.0 * lr * r * jnp.sum(s * emb) + 4.0 * lr * lr * jnp.sum(s * ks)
    return data_loss + lam * sq, (r * emb - 2.0 * lr * ks, r * acc + s, new_sq)


def make_chunk(form: str, beta: float, lam: float, lr: float, batch: int):
    """Jitted ``chunk(params, feats, i, j, y, key, step0, length, outside_sq) -> (params,
    metrics)`` for ``form`` "kernel", "linear" (params the map, feats the features) or
    "dual" (params ``dual_step``'s state, feats the features' Gram matrix).

    ``outside_sq`` is ||L_0's part outside the span||^2 when the linear form trains in the span
    of its training features (0 otherwise): that part only decays, by (1 - 2 lr lam) a step,
    and the loss counts its penalty as the full form's does. Built once per setting through
    ``learner_loop.compiled``.
    """
    loss_and_grad = kernel_loss_and_grad if form == "kernel" else linear_loss_and_grad

    def step(params, t, feats, i, j, y, key, outside_sq):
        if batch:
            pick = jax.random.randint(jax.random.fold_in(key, t), (batch,), 0, i.shape[0])
            i, j, y = i[pick], j[pick], y[pick]
        if form == "dual":
            loss, params = dual_step(params, feats, i, j, y, beta=beta, lam=lam, lr=lr)
        else:
            loss, grad = loss_and_grad(params, feats, i, j, y, beta=beta, lam=lam)
            params = params - lr * grad
        loss = loss + lam * outside_sq * outside_decay(lr, lam, t) ** 2
        return params, {"loss": loss}

    def chunk(params, feats, i, j, y, key, step0, length, outside_sq):
        ts = step0 + jnp.arange(length)
        return learner_loop.scan_steps(
            lambda p, t: step(p, t, feats, i, j, y, key, outside_sq), params, ts
        )

    return jax.jit(chunk, static_argnums=7)


def outside_decay(lr: float, lam: float, steps):
    """The factor on L's part outside the span after ``steps`` gradient steps: the data
    loss does not see that part, so each step only shrinks it by the penalty's 2 lr lam."""
    return (1.0 - 2.0 * lr * lam) ** steps


def to_dual(feats, params):
    """(K = F F^T, ``dual_step``'s state for the map ``params`` of the features F)."""
    emb = feats @ params.T
    return feats @ feats.T, (emb, jnp.zeros_like(emb), jnp.sum(params * params))


def from_dual(state, start, feats, lr: float, lam: float, steps: int):
    """The map r^t L_0 - 2 lr B^T F that ``dual_step``'s state stands for after t steps."""
    return outside_decay(lr, lam, steps) * start - 2.0 * lr * (state[1].T @ feats)
