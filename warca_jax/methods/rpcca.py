"""rPCCA: pairwise constrained component analysis with an L2 regulariser, linear and kernel.

Mignon & Jurie, "PCCA: a new approach for distance learning from sparse pairwise
constraints", CVPR 2012; the L2 regulariser of Xiong et al., ECCV 2014.

Loss (Mignon & Jurie; with the L2 term of Xiong et al.), over positive pairs (y = +1, all
same-label pairs) and negative pairs (y = -1, ``negatives_per_positive`` per positive,
drawn once from the seed):

  mean_pairs l_beta(y_ij (||L (x_i - x_j)||^2 - 1)) + (lam / P) ||L||_F^2,
  l_beta(z) = log(1 + exp(beta z)) / beta,

that is Xiong et al.'s sum_pairs l_beta + lam ||L||_F^2 divided by the number of pairs P,
so that ``lam`` is their lambda (0.01 in their code) whatever the number of pairs.

Kernel form: L = A Phi(X)^T, ||A (k_i - k_j)||^2 and the penalty (lam / P) tr(A K A^T).
Its gradient 2 A (sum_p c_p (k_i - k_j)(k_i - k_j)^T + lam K) is right-multiplied by
K^-1 as Mignon & Jurie do (their preconditioned update): since A (k_i - k_j)(k_i - k_j)^T
K^-1 = u_p (e_i - e_j)^T, the step is a scatter of the pair terms c_p u_p into columns
i and j of A, plus 2 (lam / P) A, with no [N, N] product.

The features are rescaled so that the mean squared pair distance is 1 (and the kernel
by its mean kernel-space pair distance), which makes the threshold 1 and the learning
rate independent of the data's units; the scale is folded back into the returned metric.
Training is (minibatch or full-batch) gradient descent (``rpcca_steps``; the linear form
with fewer images than twice its features runs on its embedding, ``rpcca_steps.dual_step``:
the same path at one [N, N] product a step), ``log_every`` steps per jitted ``lax.scan``,
its step in units of the pairs' curvature (``linalg.pair_curvature``), from a random map
(``init='random'``, the default) or from the whitened PCA of the (kernel) features
(``init='pca'``, as Xiong et al.'s later code starts), either scaled to a mean squared
pair distance of 1.

Defaults, and why (measurements, with their commands: docs/methods.md#rpcca):
``lam`` is Xiong et al.'s, on the sum of the pair losses; ``:chi2`` takes the chi2-RBF
kernel of the paper's three chi2 methods; training runs to convergence (``tol``), since a
fixed 1,000 steps stopped far from it; the random start is kept (the paper's numbers are
from it; ``init='pca'`` is an option); and rPCCA-L stays primal, the kernel form with a
linear kernel (the paper's code) being ahead on CUHK01 and behind on VIPeR.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from warca_jax.maths import kernels, linalg
from warca_jax.methods import Method, checks, learner_loop, rpcca_steps
from warca_jax.metric import Metric

INITS = ("pca", "random")
LR_UNITS = ("curvature", "features")


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for an rPCCA config that cannot run on this training data."""
    kernel = checks.check_kernel_and_dim(cfg, data)
    checks.check_numbers(
        cfg, ("beta", "learning_rate", "negatives_per_positive"), low=0, low_open=True
    )
    checks.check_number(cfg, "lam", low=0)
    checks.check_number(cfg, "kernel_gamma", low=0, note="; 0: from the data")
    checks.check_numbers(cfg, ("num_iters", "log_every"), low=1, integer=True)
    checks.check_bool(cfg, "span")
    checks.check_number(cfg, "batch_size", low=0, integer=True, note="; 0: full batch")
    if "tol" in cfg:  # configs written before the fields ran all num_iters steps
        checks.check_number(cfg, "tol", low=0, note="; 0: no early stop")
        checks.check_number(cfg, "tol_window", low=1, integer=True)
    if "init" in cfg:  # configs written before the field start at random
        checks.check_choice(cfg, "init", INITS)
    if "lr_units" in cfg:  # configs written before the field take the step as it is
        checks.check_choice(cfg, "lr_units", LR_UNITS)
    if kernel != "none":
        kernels.check_kernel_input(data.x, kernel)


# rPCCA rescales the features itself: its result does not depend on their scale.
validate = checks.validator("rPCCA", check_config)


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


def whitened_pca_map(feats: np.ndarray, dim: int) -> np.ndarray:
    """[dim, F]: the top ``dim`` principal directions of the rows of ``feats`` (``linalg.pca``),
    each divided by the square root of its variance (whitening PCA, Xiong et al.'s start for
    rPCCA); directions without variance, and those beyond the data's rank, are zero rows."""
    f = np.asarray(feats, np.float64)
    mean, comps = linalg.pca(f, variance=1.0, max_dim=dim)
    comps = comps.astype(np.float64)
    var = np.sum(((f - mean) @ comps.T) ** 2, axis=0) / max(f.shape[0] - 1, 1)
    keep = var > var[0] * 1e-10
    comps = comps / np.sqrt(np.where(keep, var, 1.0))[:, None]
    comps[~keep] = 0.0
    if comps.shape[0] < dim:
        comps = np.concatenate([comps, np.zeros((dim - comps.shape[0], f.shape[1]))])
    return comps.astype(np.float32)


def initial_map(x, i, j, cfg, key_init, feature_scale, span=None):
    """(feats, params, scale, gamma, outside): what rPCCA trains from.

    ``feats``: the Gram matrix of ``x`` (kernel form) or ``x`` itself, divided by
    ``scale``, the mean squared distance of the pairs ``(i, j)`` (refused when 0);
    ``params``: the initial map (random from ``key_init``, or PCA whitened with
    ``init="pca"``), scaled to a mean squared pair distance of 1; ``gamma``: the kernel's
    bandwidth (1.0 for the linear form). With ``span`` (a ``linalg.Span`` of ``x``, linear
    form) ``feats`` are the span's coordinates and ``params`` the map's part in them, and
    ``outside`` [dim, D] is its part outside the span (None without ``span``), both scaled
    as the full form's map: the full form's start, split in two.
    """
    gamma = 1.0
    if cfg.kernel != "none":
        kernel_gamma = kernels.gamma_for_scaled(cfg.kernel, cfg.kernel_gamma, feature_scale)
        gram, gamma = kernels.gram_matrix(x, kernel=cfg.kernel, gamma=kernel_gamma)
        diag = jnp.diag(gram)
        scale = float(jnp.mean(diag[i] + diag[j] - 2.0 * gram[i, j]))
        feats = gram / scale
        if cfg.get("init", "random") == "pca":
            params = jnp.asarray(whitened_pca_map(np.asarray(feats), cfg.dim))
        else:
            params = jax.random.normal(key_init, (cfg.dim, x.shape[0]), jnp.float32)
    else:
        scale = float(jnp.mean(jnp.sum((x[i] - x[j]) ** 2, axis=1)))
        feats = jnp.asarray(x) / np.sqrt(scale)
        if cfg.get("init", "random") == "pca":
            params = jnp.asarray(whitened_pca_map(np.asarray(feats), cfg.dim))
        else:
            q, _ = jnp.linalg.qr(jax.random.normal(key_init, (x.shape[1], cfg.dim), jnp.float32))
            params = q.T
    outside = None
    if span is not None:  # the map in the span's coordinates, and its part outside
        basis = jnp.asarray(span.basis)
        inside = params @ basis.T
        outside = params - inside @ basis
        params = inside
        feats = jnp.asarray(span.coords(x)) / np.sqrt(scale)
    if not scale > 0 or not np.isfinite(scale):
        raise ValueError("rPCCA needs pairs at non-zero distance; all pair distances are 0")
    # Start with a mean squared pair distance of 1, the loss's threshold.
    emb = feats @ params.T
    norm = jnp.sqrt(jnp.mean(jnp.sum((emb[i] - emb[j]) ** 2, axis=1)))
    return feats, params / norm, scale, gamma, None if outside is None else outside / norm


def step_size(cfg, feats, i, j, kernel_form: bool) -> float:
    """The gradient step: ``learning_rate`` over the pairs' curvature of ``feats`` (the
    features or kernel matrix that training uses) with ``lr_units='curvature'``, else as
    it is."""
    step = float(cfg.learning_rate)
    if cfg.get("lr_units", "features") == "curvature":
        step /= linalg.pair_curvature(feats, i, j, gram=kernel_form)
    return step


def fit(features, labels, cfg, *, seed=0, log_fn=None, progress=False, callback=None):
    """Learns an rPCCA metric by gradient descent (arguments and errors:
    ``warca_jax.methods``).

    ``seed`` draws the negative pairs, the initial map and the minibatches; a history row
    (step, loss, seconds) every ``log_every`` steps.

    Returns:
      (metric, history): kind "linear" (W: [dim, D]) or "kernel" (A: [dim, N]).
    """
    x, y, feature_scale = validate(features, labels, cfg)
    kernel_form = cfg.kernel != "none"
    key_pairs, key_init, key_batch = jax.random.split(jax.random.PRNGKey(seed), 3)
    i, j, sign = pair_set(y, negatives_per_positive=cfg.negatives_per_positive, key=key_pairs)
    # The linear form with N <= D trains in the span of the centred training features: its
    # loss sees only differences of training points, and plain gradient descent is the
    # same in any orthonormal axes, so the map's part in the span follows the full form's
    # (up to float rounding) at k / D of its cost, and the part outside only decays.
    span = None
    if not kernel_form and cfg.span:
        span = linalg.training_span(np.asarray(x), min_dim=1)
    feats, params, scale, gamma, outside = initial_map(x, i, j, cfg, key_init, feature_scale, span)
    outside_sq = 0.0 if outside is None else float(jnp.sum(outside * outside))
    step = step_size(cfg, feats, i, j, kernel_form)
    batch = cfg.batch_size if 0 < cfg.batch_size < len(i) else 0
    lam = float(cfg.lam) / len(i)  # Xiong et al.'s lam weighs the sum over pairs; we take the mean
    # the linear form on its embedding where an [N, N] product costs less than two [N, F]
    form = "kernel" if kernel_form else "dual" if len(x) < 2 * feats.shape[1] else "linear"
    start, train_feats = params, feats
    if form == "dual":
        train_feats, params = rpcca_steps.to_dual(feats, params)
    chunk = learner_loop.compiled(rpcca_steps.make_chunk, form, float(cfg.beta), lam, step, batch)
    pairs = (jnp.asarray(i), jnp.asarray(j), jnp.asarray(sign, jnp.float32))

    rule = learner_loop.StoppingRule(
        tol=float(cfg.get("tol", 0.0)),
        window=int(cfg.get("tol_window", 1)),
        num_iters=int(cfg.num_iters),
        log_every=int(cfg.log_every),
    )

    steps = 0

    def advance(done, length):
        nonlocal params, steps
        params, metrics = chunk(params, train_feats, *pairs, key_batch, done, length, outside_sq)
        steps = done + length
        return rule.chunk(metrics, done, length)

    def make_metric(params) -> Metric:
        if form == "dual":
            params = rpcca_steps.from_dual(params, start, feats, step, lam, steps)
        proj = np.asarray(params, np.float64)
        if span is not None:  # back to D: the span's part, and the decayed part outside
            decay = rpcca_steps.outside_decay(step, lam, steps)
            proj = proj @ span.basis.astype(np.float64) + np.asarray(outside, np.float64) * decay
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
    loop = learner_loop.Loop("rPCCA", features, log_fn, progress, callback)
    return loop.fit(
        advance,
        lambda: make_metric(params),
        num_iters=cfg.num_iters,
        chunk=cfg.log_every,
        hint=hint,
    )


VARIANTS = ("linear", "chi2", "small", "large")  # chi2: chi2-RBF kernel; large: 4,096-pair batches


def default_config(variant: str = "linear") -> ml_collections.ConfigDict:
    """The defaults of ``rpcca``: what configs/rpcca.py starts from."""
    m = checks.new_config("rpcca", variant, VARIANTS)
    m.kernel = "none"  # 'none' (linear L) or linear | rbf | chi2 | chi2_rbf | laplacian.
    m.kernel_gamma = 0.0  # kernel bandwidth (0: 1 / mean training distance).
    m.dim = 40  # output dimension (WARCA paper: 200 Market-1501, 100 VIPeR, 40 others).
    m.beta = 3.0  # sharpness of the generalised logistic loss l_beta (Mignon & Jurie).
    # L2 penalty lam ||L||_F^2, or lam tr(A K A^T), against the SUM of the pair losses as in
    # Xiong et al. (their lambda = 0.01); fit divides it by the number of pairs.
    m.lam = 1e-2
    # Start: 'random' (Gaussian A, or a random orthonormal L; the paper's Table 2 numbers)
    # or 'pca' (whitened PCA of the (kernel) features, Xiong et al.'s later code).
    m.init = "random"
    # The gradient-descent step, in units of 1 / lambda (``lr_units='curvature'``), lambda
    # the largest eigenvalue of the pairs' second moment in the (kernel) feature space
    # (``linalg.pair_curvature``): the same step for every data's spectrum, linear or kernel, well
    # below where it diverges (docs/methods.md#rpcca). 'features': the step as it is, on
    # features rescaled to unit mean squared pair distance (configs before the field).
    m.lr_units = "curvature"
    m.learning_rate = 4.0
    # Trained to convergence: it stops when the loss's relative change over the last
    # tol_window logged rows (125 steps, a gradient-flow time of 500 / lambda at the default
    # step) is at most tol, or after num_iters steps. The fixed 1,000 steps of earlier
    # defaults stopped far from it (docs/methods.md#rpcca).
    m.num_iters = 30000  # the cap on gradient-descent steps.
    m.tol = 1e-2
    m.tol_window = 5
    m.negatives_per_positive = 10.0  # negative pairs drawn (once, from the seed) per
    #                                  positive pair; every positive pair is used.
    m.batch_size = 0  # pairs per step drawn from the pair set (0: full batch).
    # The linear form with no more training images than features trains in the span of
    # the centred training features (``linalg.Span``): the same gradient steps on k <= N - 1
    # coordinates instead of D, the map's part outside the span carried along as it only
    # decays. False: the full D-dimensional form.
    m.span = True
    m.log_every = 25  # steps between lines of metrics.jsonl (and of the stopping rule).
    if variant == "chi2":
        # The chi2-RBF kernel exp(-gamma chi2(x, y)), gamma = 1 / mean training chi2
        # distance: the one kernel of the paper's three chi2 methods (WARCA, rPCCA, LFDA).
        m.kernel = "chi2_rbf"
    elif variant == "large":
        # Minibatches of pairs; the gradient of L shrinks with D on rescaled features, so
        # 2,048-d features need a larger step (1 and 10 under-train there).
        m.batch_size = 4096
        m.num_iters = 300
        m.lr_units = "features"
        m.learning_rate = 100.0
    elif variant == "small":
        m.dim = 16
        m.num_iters = 200
        m.log_every = 50
    return m


METHODS = {"rpcca": Method(fit, validate, default_config, VARIANTS, kinds=("linear", "kernel"))}
