"""WARCA's equations (paper section 3): distances, hinge, objective, penalties, gradients.

Each equation the training step evaluates is one function here, named after what it
computes, its docstring citing the paper. ``warca_jax.methods.warca.step`` calls them, and
so does the violator search: the step measures d_ij with ``distance`` and d_ik with
``candidate_distances``, and ``sampling.find_violators`` flags k where
``margin_violation`` (gamma + xi_ijk, what ``triplet_hinge`` clips at 0) is positive, so
on the same distances a triplet is a violator exactly where its hinge is positive. Nothing
else re-derives them. The equations that are not a function here are cited below where the
code implements them, and in that function's docstring. The dense forms they are checked
against (G_ijk of eq. 21 formed as a matrix, E_ijk of eq. 24, the penalty through
A K A^T with K itself, the eq. 25 step) live in tests/reference_forms.py;
tests/maths/test_losses.py compares these functions with them and with ``jax.grad``.

Section 3, eq. 5 to 25 (eq. 2-4 define the data, S and T_y; the penalties of eq. 10 and 18
and their gradients, ``*penalty*`` below, are in ``warca_jax.maths.penalties``):

====================================  ==============================================================
paper                                 code
====================================  ==============================================================
eq. 3 (S), eq. 4 (T_y)                ``sampling.sample_pairs`` draws (i, j) uniformly from S; |T_y|
                                      is ``PairTable.num_negatives`` (``sampling.make_pair_table``)
eq. 5 (F_W = ||W (x_i - x_j)||)       ``distance`` of projected differences; from every anchor to
                                      every candidate at once, ``candidate_distances``
eq. 6 (err = L(rank_ij))              ``rank_weight`` of a pair's rank; the step weights each pair
                                      by it at eq. 14's margin rank (``methods.warca.step._search``)
eq. 7 (rank_ij, no margin)            not optimised (a count); logged as a fraction of the negative
                                      candidates, ``sampling.closer_fraction`` (strictly nearer:
                                      ties not counted)
eq. 8 (L(r))                          ``rank_weight``
eq. 9 (min mean_S L(rank_ij))         not evaluated: the 0-1 problem, bounded by eq. 12
eq. 10 (AON ||W W^T - I||^2)          ``aon_penalty`` (half of it: the lambda / 2 of eq. 11-12); its
                                      gradient ``aon_penalty_grad``
eq. 11 (eq. 9 + lambda/2 eq. 10)      not evaluated: the penalised 0-1 problem; eq. 12 bounds its
                                      rank term by the hinge
eq. 12 (L(W), the WARP loss)          ``objective``; its hinge term ``sampled_hinge`` (the 1 / rank:
                                      k drawn uniformly among the violators,
                                      ``sampling.find_violators``); as a function of W (for
                                      autodiff) ``warca_hinge_loss``
eq. 13 (xi_ijk = d_ij - d_ik)         ``margin_violation`` (gamma + xi_ijk); the hinge
                                      ``triplet_hinge``
eq. 14 (rank^gamma_ij)                ``sampling.find_violators``: its violators are the negatives
                                      with ``margin_violation`` > 0; their count (``exact``) or
                                      WSABIE's estimate (``wsabie``)
eq. 15 (W = A X^T)                    the kernel form's parameter A: [D', N]
                                      (``methods.warca.step.kernel_step``); the learned ``Metric``
                                      (``methods.warca.problem._metric``)
eq. 16 (F_A = ||A X^T (x_i - x_j)||)  a new point's embedding A k(X, x) (``kernels.kernel_matrix``,
                                      ``Metric.transform``)
eq. 17 (||A (kappa_i - kappa_j)||)    ``distance``, ``candidate_distances`` on rows of K A^T
                                      (``methods.warca.step.kernel_step``); K:
                                      ``kernels.gram_matrix``, centred and scaled by
                                      ``methods.warca.inputs.normalized_gram``
eq. 18 (L(A))                         ``objective`` with ``kernel_penalty`` (``kernel_aon_penalty``)
eq. 19 (xi_ijk under F_A)             ``margin_violation``, ``triplet_hinge`` on differences of rows
                                      of K A^T
eq. 20, first term                    ``kernel_aon_penalty_grad`` (primal: ``aon_penalty_grad``)
eq. 20 hinge term, eq. 21 (G_ijk)     ``hinge_grad`` (G never formed: outer products of the pairs or
                                      one product of row coefficients; primal and kernel)
eq. 22 (d_ij, d_ik)                   ``distance`` (in the violator search ``candidate_distances``)
eq. 23, first term                    ``kernel_aon_penalty_precond_grad``
eq. 23 hinge term, eq. 24 (E_ijk)     ``kernel_hinge_precond_grad`` (the nine entries of E_ijk)
eq. 20 / 23, the sum                  ``optim.add_penalty_grad`` (hinge part + lambda R')
eq. 25 (the update)                   not applied as written: Adam on the eq. 23 direction (or on
                                      the gradient), ``optim.make_optimizer``; the plain step is
                                      ``preconditioned_sgd_step`` in tests/reference_forms.py
====================================  ==============================================================

Two forms of eq. 5 (17): ``distance`` takes projected differences, [B, D'] -> [B] (d_ij of
the pairs; d_ij and d_ik of the sampled triplets in the hinge and its gradient);
``candidate_distances`` takes the embeddings of B anchors and C candidates, [B, C] from
||a||^2 + ||c||^2 - 2 a.c (one matrix product, no [B, C, D'] differences), for the
violator search. They are the same distance up to float32 rounding, not bit for bit: a
negative within rounding of the margin could be drawn by the search and get a zero hinge
in the gradient, where it contributes nothing (rare: the share of pairs with a violator
and the share with a positive hinge differed on 1 of the 200 logged chunks of the main
job).

The penalties (eq. 10, 18 and the first terms of eq. 20, 23) are in ``warca_jax.maths.penalties``
and importable from here under the names of the table. Every function is a pure function
of arrays; options are keyword-only. Ranks, sampled
violators and rank weights are inputs: ``warca_jax.maths.sampling`` computes them, and they
are constants to the gradient.

Notation (paper Table 1): a sampled triplet is (i, j, k) with y_i = y_j and
y_k != y_i; ``u = x_i - x_j``, ``v = x_i - x_k`` (kernel form: ``kappa_i - kappa_j``,
``kappa_i - kappa_k``); ``pu = W u``, ``pv = W v`` (kernel form: ``A u``, rows of the
embeddings K A^T); ``d_ij = ||pu||``, ``d_ik = ||pv||``; the hinge is
``[gamma + d_ij - d_ik]_+`` and each triplet carries the weight ``L(rank^gamma_ij)``
(eq. 8 of eq. 14's rank).
The kernel form passes the embeddings K A^T: [N, D'] of the training points where the
paper writes K, so that A K A^T costs D'^2 N, not D' N^2.

Note on eq. 20: the paper writes the hinge part of the kernel gradient as
``2 L(rank) A 1[.] G_ijk``. With F_A = ||A (kappa_i - kappa_j)|| (a norm, not
its square) the derivative of F_A is ``A (k_i - k_j)(k_i - k_j)^T / d_ij``,
so the factor is 1, not 2; the functions here use the exact derivative and the
tests check it against ``jax.grad``.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

WEIGHTINGS = ("harmonic", "uniform")


def rank_weight(rank: jax.Array, *, weighting: str = "harmonic") -> jax.Array:
    """L(r) = sum_{s <= r} alpha_s (eq. 8); of a pair's rank, its ranking error (eq. 6).

    The training step takes it of eq. 14's margin rank, the weight of the pair's triplet.

    Args:
      rank: [...] non-negative (possibly fractional) ranks.
      weighting: ``harmonic`` (alpha_s = 1/s, so L(r) = H_r, computed as
        digamma(r + 1) + Euler's gamma, which interpolates fractional ranks) or
        ``uniform`` (alpha_s = 1, so L(r) = r).

    Returns:
      [...] weights, L(0) = 0.
    """
    rank = jnp.maximum(jnp.asarray(rank, jnp.result_type(float)), 0.0)
    if weighting == "harmonic":
        return jax.scipy.special.digamma(rank + 1.0) + jnp.euler_gamma
    if weighting == "uniform":
        return rank
    raise ValueError(f"unknown rank weighting {weighting!r}; expected one of {WEIGHTINGS}")


def distance(diff: jax.Array, axis: int = -1) -> jax.Array:
    """d = ||W (x_i - x_j)|| (eq. 5), ||A (kappa_i - kappa_j)|| (eq. 17, 22) of projected
    differences ``diff``; its gradient at 0 is 0 instead of NaN."""
    sq = jnp.sum(diff * diff, axis=axis)
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def candidate_distances(anchors: jax.Array, candidates: jax.Array) -> jax.Array:
    """d_ik = ||p_i - p_k|| (eq. 5; eq. 17, 22 in the kernel form) from every anchor to
    every candidate, from their embeddings: [B, D'] x [C, D'] -> [B, C].

    Computed as ||p_i||^2 + ||p_k||^2 - 2 p_i . p_k (one [B, D'] x [D', C] product, no
    [B, C, D'] differences), clipped at 0 before the square root, so NaN-free; equal to
    ``distance(p_i - p_k)`` up to float32 rounding. The violator search's distances.
    """
    sq = (
        jnp.sum(anchors * anchors, 1)[:, None]
        + jnp.sum(candidates * candidates, 1)[None, :]
        - 2.0 * anchors @ candidates.T
    )
    return jnp.sqrt(jnp.maximum(sq, 0.0))


def margin_violation(d_ij: jax.Array, d_ik: jax.Array, *, margin: float) -> jax.Array:
    """gamma + xi_ijk, xi_ijk = d_ij - d_ik (eq. 13; eq. 19 under F_A).

    Positive exactly for a violator, a k counted by rank^gamma_ij (eq. 14), and the
    hinge is its positive part (``triplet_hinge``); ``sampling.find_violators`` tests it.
    Broadcasts (d_ij [B, 1] against d_ik [B, C] in the search).
    """
    return margin + d_ij - d_ik


def _safe_inv(d: jax.Array) -> jax.Array:
    return jnp.where(d > 0, 1.0 / jnp.where(d > 0, d, 1.0), 0.0)


# ----------------------------------------------------------------------------
# Penalties on W: [D', D] (primal form).


def triplet_hinge(
    pu: jax.Array, pv: jax.Array, *, margin: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The hinge [gamma + xi_ijk]_+ of eq. 12, xi_ijk = d_ij - d_ik (eq. 13, 19):
    the positive part of ``margin_violation``, d_ij and d_ik by ``distance``.

    Args:
      pu: [B, D'] projected positive differences W (x_i - x_j).
      pv: [B, D'] projected negative differences W (x_i - x_k).
      margin: gamma.

    Returns:
      (hinge [B], d_ij [B], d_ik [B]).
    """
    dij = distance(pu)
    dik = distance(pv)
    return jnp.maximum(margin_violation(dij, dik, margin=margin), 0.0), dij, dik


def sampled_hinge(hinge: jax.Array, weights: jax.Array) -> jax.Array:
    """The sampled WARP term of eq. 12 / 18: mean_b L(rank_b) [gamma + xi_b]_+.

    With (i, j) drawn uniformly from S and k uniformly among the rank^gamma_ij violators
    of (i, j) (eq. 14; ``sampling``), L(rank) [.]_+ is an unbiased estimate of the pair's
    inner sum L(rank) sum_k [.]_+ / rank (section 3.3), the mean of the 1 / |S| sum.
    """
    return jnp.mean(weights * hinge)


def objective(
    hinge: jax.Array, weights: jax.Array, penalty_value: jax.Array, *, lam: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The loss of eq. 12 (kernel form eq. 18) on a minibatch of sampled triplets.

    lambda R + mean_b L(rank_b) [gamma + xi_b]_+, with R = 1/2 ||W W^T - I||^2
    (``penalty_value``; eq. 12 writes lambda / 2 ||.||^2). Eq. 12 is the hinge (WARP)
    bound of eq. 11, the penalised 0-1 problem, which nothing evaluates.

    Returns:
      (the objective, its hinge term).
    """
    hinge_loss = sampled_hinge(hinge, weights)
    return hinge_loss + lam * penalty_value, hinge_loss


def warca_hinge_loss(
    w: jax.Array, u: jax.Array, v: jax.Array, weights: jax.Array, *, margin: float
) -> jax.Array:
    """The sampled hinge term of eq. 12 as a function of W (eq. 18 with kernel columns).

    The training step's ``gradient="autodiff"`` differentiates it with ``jax.grad``.

    Args:
      w: [D', D] linear map (kernel form: A, [D', N]).
      u: [B, D] positive differences x_i - x_j (kappa_i - kappa_j).
      v: [B, D] negative differences x_i - x_k (k a sampled violator).
      weights: [B] rank weights L(rank_ij); 0 for pairs without a violator.
      margin: gamma.

    Returns:
      Scalar loss.
    """
    hinge, _, _ = triplet_hinge(u @ w.T, v @ w.T, margin=margin)
    return sampled_hinge(hinge, weights)


# ----------------------------------------------------------------------------
# Closed-form gradients of the hinge term.


def _hinge_coefficients(
    pu: jax.Array, pv: jax.Array, weights: jax.Array, *, margin: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(cu, cv, hinge): cu = c pu / d_ij, cv = c pv / d_ik, c = L(rank) 1[hinge > 0] / B."""
    hinge, dij, dik = triplet_hinge(pu, pv, margin=margin)
    c = weights * (hinge > 0) / pu.shape[0]
    cu = pu * (c * _safe_inv(dij))[:, None]
    cv = pv * (c * _safe_inv(dik))[:, None]
    return cu, cv, hinge


def hinge_grad(
    pu: jax.Array,
    pv: jax.Array,
    feats: jax.Array,
    i: jax.Array,
    j: jax.Array,
    k: jax.Array,
    weights: jax.Array,
    *,
    margin: float,
    form: str = "auto",
) -> tuple[jax.Array, jax.Array]:
    """Gradient of ``sampled_hinge`` in W (or A): mean_b L_b 1[.] W G_ijk (eq. 20-22).

    For one active triplet d||W u||/dW = W u u^T / ||W u||, so the gradient is W G_ijk
    with G_ijk = u u^T / d_ij - v v^T / d_ik (eq. 21; d of eq. 22), u = x_i - x_j and
    v = x_i - x_k, never formed as a [D, D] matrix. Two arrangements of the same sum:

    * ``"pairs"``: (W u) u^T / d_ij - (W v) v^T / d_ik as two [D', B] x [B, D] products
      of the minibatch's differences;
    * ``"rows"``: the coefficients scattered onto the rows they multiply (c_u - c_v into
      row i, -c_u into j, c_v into k: P [rows, D']), then one P^T X product.

    ``"auto"`` takes the cheaper one: "rows" when the features have fewer rows than the
    two products have pairs (rows < 2B; a training set smaller than the minibatch's
    differences, as on VIPeR), else "pairs". The same function serves the kernel form with
    ``feats`` the kernel matrix and pu, pv rows of K A^T.

    Args:
      pu, pv: [B, D'] projected differences W u, W v.
      feats: [rows, D] the training features X (kernel form: K) the indices point into.
      i, j, k: [B] anchors, positives and violators (rows of ``feats``).
      weights: [B] rank weights (0 where a pair has no violator).
      margin: gamma.
      form: "auto", "pairs" or "rows".

    Returns:
      ([D', D] gradient, [B] hinge values).
    """
    chex.assert_equal_shape([pu, pv])
    chex.assert_shape(weights, (pu.shape[0],))
    chex.assert_shape([i, j, k], (pu.shape[0],))
    if form not in ("auto", "pairs", "rows"):
        raise ValueError(f"form must be 'auto', 'pairs' or 'rows', got {form!r}")
    cu, cv, hinge = _hinge_coefficients(pu, pv, weights, margin=margin)
    if form == "rows" or (form == "auto" and feats.shape[0] < 2 * pu.shape[0]):
        coef = jnp.zeros((feats.shape[0], pu.shape[1]), cu.dtype)
        coef = coef.at[i].add(cu - cv).at[j].add(-cu).at[k].add(cv)
        return coef.T @ feats, hinge
    return cu.T @ (feats[i] - feats[j]) - cv.T @ (feats[i] - feats[k]), hinge


def kernel_hinge_precond_grad(
    emb: jax.Array,
    i: jax.Array,
    j: jax.Array,
    k: jax.Array,
    weights: jax.Array,
    *,
    margin: float,
    n: int,
) -> tuple[jax.Array, jax.Array]:
    """Preconditioned hinge gradient mean_b L_b 1[.] A K E_ijk (eq. 23-24).

    A K E_ijk touches only columns i, j and k (E_ijk has nine non-zeros, eq. 24): with
    p_l = A kappa_l (row l of ``emb``),
    A K E_ijk = (p_i - p_j)(e_i - e_j)^T / d_ij - (p_i - p_k)(e_i - e_k)^T / d_ik.
    The gradient is therefore a scatter-add of 3 columns per triplet into a [D', N]
    zero matrix, O(B D') work.

    Args:
      emb: [N, D'] embeddings K A^T of the training points (rows beyond n: padding).
      i, j, k: [B] int indices of the triplets.
      weights: [B] rank weights.
      margin: gamma.
      n: number of training points N.

    Returns:
      ([D', N] preconditioned gradient, [B] hinge values).
    """
    chex.assert_equal_shape([i, j, k, weights])
    pu = emb[i] - emb[j]
    pv = emb[i] - emb[k]
    cu, cv, hinge = _hinge_coefficients(pu, pv, weights, margin=margin)
    idx = jnp.concatenate([i, j, k])
    vals = jnp.concatenate([cu - cv, -cu, cv])
    grad_t = jnp.zeros((n, emb.shape[1]), emb.dtype).at[idx].add(vals)
    return grad_t.T, hinge
