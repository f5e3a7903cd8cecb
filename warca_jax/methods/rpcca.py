"""rPCCA: pairwise constrained component analysis with an L2 regulariser, linear and kernel.

Mignon & Jurie, "PCCA: a new approach for distance learning from sparse pairwise
constraints", CVPR 2012; the L2 regulariser of Xiong et al., ECCV 2014.

Loss (Mignon & Jurie; with the L2 term of Xiong et al.), over positive pairs (y = +1, all
same-label pairs) and negative pairs (y = -1, ``negatives_per_positive`` per positive,
drawn once from the seed):

  mean_pairs l_beta(y_ij (||L (x_i - x_j)||^2 - 1)) + lam ||L||_F^2,
  l_beta(z) = log(1 + exp(beta z)) / beta.

Kernel form: L = A Phi(X)^T, ||A (k_i - k_j)||^2 and the penalty lam tr(A K A^T).
Its gradient 2 A (sum_p c_p (k_i - k_j)(k_i - k_j)^T + lam K) is right-multiplied by
K^-1 as Mignon & Jurie do (their preconditioned update): since A (k_i - k_j)(k_i - k_j)^T
K^-1 = u_p (e_i - e_j)^T, the step is a scatter of the pair terms c_p u_p into columns
i and j of A, plus 2 lam A, with no [N, N] product.

The features are rescaled so that the mean squared pair distance is 1 (and the kernel
by its mean kernel-space pair distance), which makes the threshold 1 and the learning
rate independent of the data's units; the scale is folded back into the returned metric.
Training is (minibatch or full-batch) gradient descent, ``log_every`` steps per jitted
``lax.scan``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from warca_jax import kernels, training
from warca_jax.methods import Method, _checks
from warca_jax.metric import Metric


def check_config(cfg, data: _checks.TrainingData) -> None:
    """Raises ValueError for an rPCCA config that cannot run on this training data."""
    kernel = _checks.check_kernel_and_dim(cfg, data)
    _checks.check_numbers(
        cfg, ("beta", "learning_rate", "negatives_per_positive"), low=0, low_open=True
    )
    _checks.check_number(cfg, "lam", low=0)
    _checks.check_number(cfg, "kernel_gamma", low=0, note="; 0: from the data")
    _checks.check_numbers(cfg, ("num_iters", "log_every"), low=1, integer=True)
    _checks.check_number(cfg, "batch_size", low=0, integer=True, note="; 0: full batch")
    if kernel != "none":
        kernels.check_kernel_input(data.x, kernel)


# rPCCA rescales the features itself: its result does not depend on their scale.
validate = _checks.validator("rPCCA", check_config)


def pair_set(labels, *, negatives_per_positive: float, key: jax.Array):
    """All positive pairs i < j and ``negatives_per_positive`` times as many negative pairs.

    Negatives are drawn uniformly among the pairs with different labels, from ``key``.

    Args:
      labels: [N] identity labels.
      negatives_per_positive: negatives per positive pair (> 0).
      key: PRNG key.

    Returns:
      (i [P], j [P], y [P]) with y = +1 for positives (first) and -1 for negatives.
    """
    labels = np.asarray(labels)
    n = len(labels)
    pi, pj = np.nonzero(np.triu(labels[:, None] == labels[None, :], k=1))
    want = max(1, int(round(negatives_per_positive * len(pi))))
    ni, nj = [], []
    got, t = 0, 0
    while got < want:  # rejection: a uniform pair has different labels with probability >= ~1/2
        draw = np.asarray(jax.random.randint(jax.random.fold_in(key, t), (2, 2 * want), 0, n))
        keep = labels[draw[0]] != labels[draw[1]]
        ni.append(draw[0][keep])
        nj.append(draw[1][keep])
        got += int(keep.sum())
        t += 1
    ni, nj = np.concatenate(ni)[:want], np.concatenate(nj)[:want]
    i = np.concatenate([pi, ni]).astype(np.int32)
    j = np.concatenate([pj, nj]).astype(np.int32)
    y = np.concatenate([np.ones(len(pi)), -np.ones(want)]).astype(np.float32)
    return i, j, y


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


def make_chunk(kernel_form: bool, beta: float, lam: float, lr: float, batch: int):
    """Jitted ``chunk(params, feats, i, j, y, key, step0, length) -> (params, metrics)``.

    Built once per setting through ``training.compiled``.
    """
    loss_and_grad = kernel_loss_and_grad if kernel_form else linear_loss_and_grad

    def step(params, t, feats, i, j, y, key):
        if batch:
            pick = jax.random.randint(jax.random.fold_in(key, t), (batch,), 0, i.shape[0])
            i, j, y = i[pick], j[pick], y[pick]
        loss, grad = loss_and_grad(params, feats, i, j, y, beta=beta, lam=lam)
        return params - lr * grad, {"loss": loss}

    def chunk(params, feats, i, j, y, key, step0, length):
        ts = step0 + jnp.arange(length)
        return training.scan_steps(lambda p, t: step(p, t, feats, i, j, y, key), params, ts)

    return jax.jit(chunk, static_argnums=7)


def fit(
    features: np.ndarray,
    labels: np.ndarray,
    cfg,
    *,
    seed: int = 0,
    log_fn: Callable[[dict], None] | None = None,
    progress: bool = False,
    callback: Callable[[dict, Metric], dict | None] | None = None,
) -> tuple[Metric, list[dict]]:
    """Learns an rPCCA metric by gradient descent.

    Args:
      features: [N, D] training features.
      labels: [N] identity labels.
      cfg: the ``method`` section of a config (see warca_jax/configs/rpcca.py).
      seed: PRNG seed (negative pairs, initialisation, minibatches); same seed, same result.
      log_fn: called with {"step", "loss", "seconds"} every ``cfg.log_every`` steps.
      progress: show a progress bar.
      callback: called as ``callback(row, metric)`` after every logged chunk with the
        metric learned so far; its time is not counted in the rows' ``seconds``, and a
        dict it returns is merged into the row (``training.run_in_chunks``).

    Returns:
      (metric, history): kind "linear" (W: [dim, D]) or "kernel" (A: [dim, N]).

    Raises:
      ValueError: bad input or config, before any training.
      training.TrainingDivergedError: training diverged, or a non-finite or degenerate
        model.
    """
    # Over 60 lines: the chunk function and the metric maker are closures over one training
    # state (map, optimiser state, kernel or features) that run_in_chunks drives.
    x, y, feature_scale = validate(features, labels, cfg)
    kernel_form = cfg.kernel != "none"
    key_pairs, key_init, key_batch = jax.random.split(jax.random.PRNGKey(seed), 3)
    i, j, sign = pair_set(y, negatives_per_positive=cfg.negatives_per_positive, key=key_pairs)
    gamma = 1.0
    if kernel_form:
        kernel_gamma = kernels.gamma_for_scaled(cfg.kernel, cfg.kernel_gamma, feature_scale)
        gram, gamma = kernels.gram_matrix(x, kernel=cfg.kernel, gamma=kernel_gamma)
        diag = jnp.diag(gram)
        scale = float(jnp.mean(diag[i] + diag[j] - 2.0 * gram[i, j]))
        feats = gram / scale
        params = jax.random.normal(key_init, (cfg.dim, x.shape[0]), jnp.float32)
    else:
        scale = float(jnp.mean(jnp.sum((x[i] - x[j]) ** 2, axis=1)))
        feats = jnp.asarray(x) / np.sqrt(scale)
        q, _ = jnp.linalg.qr(jax.random.normal(key_init, (x.shape[1], cfg.dim), jnp.float32))
        params = q.T
    if not scale > 0 or not np.isfinite(scale):
        raise ValueError("rPCCA needs pairs at non-zero distance; all pair distances are 0")
    # Start with a mean squared pair distance of 1, the loss's threshold.
    emb = feats @ params.T
    params = params / jnp.sqrt(jnp.mean(jnp.sum((emb[i] - emb[j]) ** 2, axis=1)))
    batch = cfg.batch_size if 0 < cfg.batch_size < len(i) else 0
    chunk = training.compiled(
        make_chunk, kernel_form, float(cfg.beta), float(cfg.lam), float(cfg.learning_rate), batch
    )
    pairs = (jnp.asarray(i), jnp.asarray(j), jnp.asarray(sign, jnp.float32))

    def advance(done, length):
        nonlocal params
        params, metrics = chunk(params, feats, *pairs, key_batch, done, length)
        return metrics

    def make_metric(params) -> Metric:
        proj = np.asarray(params, np.float64)
        # Undo the rescaling: W = L / sqrt(scale), or A = A' / scale for K' = K / scale.
        proj = proj / scale if kernel_form else proj / np.sqrt(scale)
        return Metric(
            kind="kernel" if kernel_form else "linear",
            input_dim=x.shape[1],
            projection=proj.astype(np.float32),
            support=x if kernel_form else None,
            kernel=cfg.kernel,
            gamma=float(gamma),
            name="rpcca",
            feature_scale=feature_scale,
        )

    hint = f"lower learning_rate (now {cfg.learning_rate:g})"
    history = training.run_in_chunks(
        advance,
        num_iters=cfg.num_iters,
        chunk=cfg.log_every,
        method="rPCCA",
        log_fn=log_fn,
        progress=progress,
        on_chunk=None if callback is None else lambda row: callback(row, make_metric(params)),
        hint=hint,
    )
    metric = make_metric(params)
    return training.check_model(metric, method="rPCCA", features=features, hint=hint), history


METHODS = {"rpcca": Method(fit=fit, validate=validate, takes_callback=True)}
