"""WARCA: training by minibatch Adam, linear (primal) and kernel forms.

``fit(features, labels, cfg)`` learns W: [D', D] (``cfg.kernel == "none"``)
or A: [D', N] in the space of a named kernel, and returns a ``Metric``.
One jitted function, ``make_train_step``, performs a whole iteration:

1. draw a minibatch of same-label pairs (i, j) uniformly from S;
2. embed the anchors, positives and candidates (all training points, or a
   random pool of ``candidate_pool`` of them);
3. draw a violator k per pair and estimate rank_ij (``sampling``);
4. the closed-form (or autodiff) gradient of the weighted hinge (eq. 12 / 18);
   in the kernel form with ``preconditioned`` the eq. 23-24 direction, a
   scatter into three columns of A per triplet;
5. ``tx`` = penalty + Adam (``optim.make_optimizer``), lambda and eta in its state.

In the kernel form the embeddings K A^T of all N training points are computed
once per iteration ([N, N] x [N, D'], the one dense product the method needs)
and shared by the violator search, the hinge gradient and the penalty.

Why WARCA needs three things the paper does not spell out (measured against the
authors' C++ release; numbers in benchmarks/RESULTS.md, "WARCA's accuracy"):

* **The scale of the input against the margin** (``cfg.normalize``). The margin
  gamma = 1 and the AON penalty's W W^T = I fix an absolute length, so the same data
  multiplied by 100 is a different problem: at one scale every negative violates the
  margin, at another none does, and the step size that suits one does not suit the
  other (without it, linear rank-1 on the built-in data was 75.3 for the features
  x1e-4, 77.5 as they are and 89.5 x1e-2; benchmarks/bench_warca_robustness.py).
  ``normalize="msd"`` divides the features (or the kernel matrix) by the square root
  of their mean squared distance between training points (of the mean squared
  feature-space distance for a kernel), so that it is 1: any positive multiple
  of the input then trains the same model, and the ``Metric`` carries the factor in
  its ``input_scale``, so ``transform`` takes the features as the user gives them.
  Features too small or too large for float32 (e.g. x1e-30: squared distances of 1e-60
  underflow, the linear or chi2 kernel matrix is 0; x1e30 overflows) are first multiplied
  by an exact power of two computed in float64 (``methods._checks.training_data``), which
  the ``Metric`` applies again as its ``feature_scale``: the same model at any finite
  scale, float64 features beyond float32's range included. With ``normalize="none"``
  such features are refused.
* **A decaying step** (``cfg.schedule``, ``optim.make_optimizer``): with Adam's
  constant step the last iterate oscillates by an amount that grows with eta.
* **A centred kernel matrix** (kernel form). An RBF-type kernel matrix has one
  eigenvalue of about N x mean(K) along the constant vector. The plain gradient
  A K E K (eq. 20) is dominated by it, so Adam, which moves every coordinate of A by
  about eta, moves all N columns together and the embeddings K A^T jump by about
  N mean(K) eta per step: the plain gradient went to chance (rank-1 0.3) at eta = 1e-2
  with 2,400 training images. Training on H K H (H = I - 11^T / N) instead is an exact
  reparameterisation, A -> A H, that changes no distance between embeddings and
  removes that eigenvalue; the returned ``Metric`` holds A H, which embeds new points
  with the uncentred kernel up to a shift common to all points.

The C++ release's update, read from its source, is the preconditioned one of eq. 23-25
(its hinge direction is A K E and its penalty's 2 (A K A^T - I) A), not the plain
gradient; this module's ``preconditioned=True`` is the same direction.
"""

from __future__ import annotations

import functools
import time
import types
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging

from warca_jax import kernels, losses, optim, sampling, training
from warca_jax import sharding as sharding_lib
from warca_jax.methods import _checks
from warca_jax.metric import Metric

GRADIENTS = ("closed_form", "autodiff")
KERNEL_APPROX = ("none", "nystroem")
NORMALIZE = ("msd", "none")
SCHEDULES = ("cosine", "constant")
# Above this many bytes for one step's [B, N] candidate distances (no candidate_pool), fit
# logs a warning that the step's memory grows with N and a pool bounds it.
_FULL_CANDIDATES_WARN_BYTES = 2**31
# A mean squared distance below this fraction of the mean squared norm (of the mean kernel
# diagonal) is rounding, not spread: float64 sums of float32 features, float32 kernels.
_MSD_RELATIVE_FLOOR = 2.0**-44
_KERNEL_MSD_RELATIVE_FLOOR = 2.0**-20


def check_config(cfg, *, n: int, d: int) -> None:
    """Raises ValueError for a WARCA config that cannot run on N x D training data."""
    if cfg.kernel != "none" and cfg.kernel not in kernels.KERNELS:
        raise ValueError(
            f"unknown kernel {cfg.kernel!r}; expected 'none' or one of {kernels.KERNELS}"
        )
    limit = n if cfg.kernel != "none" else d
    _checks.check_number(cfg, "dim", integer=True)
    if not 1 <= cfg.dim <= limit:
        what = "training samples" if cfg.kernel != "none" else "input dimensions"
        raise ValueError(f"output dim must be in [1, {limit}] ({what}), got {cfg.dim}")
    for name in ("batch_size", "num_iters", "log_every"):
        _checks.check_number(cfg, name, low=1, integer=True)
    _checks.check_number(cfg, "candidate_pool", low=0, integer=True, note="; 0: all")
    _checks.check_number(cfg, "max_tries", low=0, integer=True, note="; 0: no cap")
    _checks.check_number(cfg, "margin", low=0, low_open=True)
    _checks.check_number(cfg, "learning_rate", low=0, low_open=True)
    _checks.check_number(cfg, "lam", low=0)
    _checks.check_number(cfg, "kernel_gamma", low=0, note="; 0: from the data")
    _checks.check_number(cfg, "num_landmarks", integer=True)
    optim.check_hyperparams(
        learning_rate=cfg.learning_rate, lam=cfg.lam, penalty_mode=cfg.penalty_mode
    )
    if cfg.penalty not in losses.PENALTIES:
        raise ValueError(f"unknown penalty {cfg.penalty!r}; expected one of {losses.PENALTIES}")
    if cfg.gradient not in GRADIENTS:
        raise ValueError(f"unknown gradient {cfg.gradient!r}; expected one of {GRADIENTS}")
    if cfg.sampler not in sampling.SAMPLERS:
        raise ValueError(f"unknown sampler {cfg.sampler!r}; expected one of {sampling.SAMPLERS}")
    if cfg.weighting not in losses.WEIGHTINGS:
        raise ValueError(
            f"unknown weighting {cfg.weighting!r}; expected one of {losses.WEIGHTINGS}"
        )
    if cfg.normalize not in NORMALIZE:
        raise ValueError(f"unknown normalize {cfg.normalize!r}; expected one of {NORMALIZE}")
    if cfg.schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {cfg.schedule!r}; expected one of {SCHEDULES}")
    if cfg.kernel_approx not in KERNEL_APPROX:
        raise ValueError(
            f"unknown kernel_approx {cfg.kernel_approx!r}; expected one of {KERNEL_APPROX}"
        )
    if cfg.kernel_approx == "nystroem":
        if cfg.kernel == "none":
            raise ValueError("kernel_approx='nystroem' approximates a kernel: set kernel too")
        if not 1 <= cfg.num_landmarks:
            raise ValueError(f"num_landmarks must be >= 1, got {cfg.num_landmarks}")
        if cfg.dim > min(cfg.num_landmarks, n):
            raise ValueError(
                f"output dim {cfg.dim} exceeds the Nystroem feature dimension "
                f"min(num_landmarks, N) = {min(cfg.num_landmarks, n)}"
            )
    if not isinstance(cfg.num_devices, int) or cfg.num_devices < 0:
        raise ValueError(f"num_devices must be an int >= 0 (0: all), got {cfg.num_devices!r}")
    if cfg.kernel != "none" and cfg.preconditioned and cfg.gradient == "autodiff":
        raise ValueError(
            "autodiff gives the plain kernel gradient, not the K^-1 preconditioned one: "
            "set preconditioned=False or gradient='closed_form'"
        )


def init_params(key: jax.Array, *, dim: int, d: int, gram: jax.Array | None = None) -> jax.Array:
    """Initial W with orthonormal rows, or A scaled so that tr(A K A^T) = D'."""
    if gram is None:
        q, _ = jnp.linalg.qr(jax.random.normal(key, (d, dim), jnp.float32))
        return q.T
    a = jax.random.normal(key, (dim, gram.shape[0]), jnp.float32)
    scale = jnp.sum(a * (gram @ a.T).T) / dim
    return a / jnp.sqrt(jnp.maximum(scale, 1e-30))


def _num_bits(cfg, n: int) -> int:
    """Random words one step uses: 3B for the pairs, 2B for the violators, C for a pool."""
    pool = cfg.candidate_pool if 0 < cfg.candidate_pool < n else 0
    return 5 * cfg.batch_size + pool


def _step_fn(cfg, tx: optax.GradientTransformation, *, kernel_form: bool, mesh=None) -> Callable:
    """The un-jitted ``step(state, feats, table, bits) -> (state, metrics)``.

    ``bits`` are the step's random words (``sampling.step_bits``). ``feats`` may have
    more rows than there are training samples (``table.labels``): padding that makes
    its rows divisible over the devices of ``mesh``, never drawn and never a candidate.

    With a ``mesh`` the computation is laid out over its devices (XLA's SPMD
    partitioner does the communication): ``feats`` and the embeddings of all training
    points are split by rows, so without a candidate pool the [B, N] violator search
    is split by candidate, on the devices that hold them; with a pool the minibatch is
    split by pair. The gradient is a sum over the minibatch, reduced across devices;
    parameters and optimiser state are replicated.
    """
    margin, b = float(cfg.margin), cfg.batch_size
    precond = kernel_form and cfg.preconditioned

    def constrain(a, *spec):
        if mesh is None:
            return a
        return jax.lax.with_sharding_constraint(
            a, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))
        )

    def step(state: optim.TrainState, feats, table: sampling.PairTable, bits):
        w = state.params
        n = table.labels.shape[0]  # training samples; feats may be padded beyond
        rows = feats.shape[0]
        pool = _num_bits(cfg, n) - 5 * b
        i, j = sampling.sample_pairs(bits[: 3 * b].reshape(3, b), table)
        u = sampling.to_uniform(bits[3 * b : 5 * b]).reshape(2, b)
        cand = sampling.to_indices(bits[5 * b :], n) if pool else None
        if kernel_form or not pool:
            emb = constrain(feats @ w.T, sharding_lib.DATA, None)  # [N, D']: K A^T or X W^T
            ea, ep = emb[i], emb[j]
            ec = emb[cand] if pool else emb
        else:
            emb = None
            ea, ep, ec = feats[i] @ w.T, feats[j] @ w.T, feats[cand] @ w.T
        anchor_labels = table.labels[i]
        if pool:
            negative = table.labels[cand][None, :] != anchor_labels[:, None]
        else:
            cand_labels = jnp.pad(table.labels, (0, rows - n), constant_values=-1)
            negative = cand_labels[None, :] != anchor_labels[:, None]
            if rows > n:
                negative = negative & (jnp.arange(rows) < n)[None, :]
        d_ij = losses.safe_norm(ea - ep)
        # the violator search runs where its candidates live: split by candidate over
        # all N, by pair over a pool.
        spec = (sharding_lib.DATA, None) if pool else (None, sharding_lib.DATA)
        d_ik = constrain(sampling.pairwise_dist(ea, ec), *spec)
        negative = constrain(negative, *spec)
        viol = sampling.find_violators(
            u,
            d_ij,
            d_ik,
            negative,
            table.num_negatives[i],
            margin=margin,
            sampler=cfg.sampler,
            max_tries=cfg.max_tries,
        )
        k = cand[viol.index] if pool else viol.index
        weights = jnp.where(viol.found, losses.rank_weight(viol.rank, weighting=cfg.weighting), 0.0)
        weights = jax.lax.stop_gradient(weights)
        pu, pv = ea - ep, ea - ec[viol.index]
        d_ik_sel = losses.safe_norm(pv)
        emb_n = emb if emb is None or rows == n else emb[:n]
        extra = {"embeddings": emb_n} if kernel_form else {}
        if precond:
            grad, hinge = losses.kernel_hinge_precond_grad(
                emb, i, j, k, weights, margin=margin, n=n
            )
        else:
            du, dv = feats[i] - feats[j], feats[i] - feats[k]
            hinge = losses.triplet_hinge(pu, pv, margin=margin)[0]
            if cfg.gradient == "closed_form":
                cu, cv, _ = losses.hinge_coefficients(pu, pv, weights, margin=margin)
                grad = cu.T @ du - cv.T @ dv
            else:
                grad = jax.grad(losses.warca_hinge_loss)(w, du, dv, weights, margin=margin)
        grad = constrain(grad)
        updates, opt_state = tx.update(grad, state.opt_state, w, **extra)
        pen = optim.penalty_value(w, kind=cfg.penalty, embeddings=emb_n if kernel_form else None)
        hinge_loss = jnp.mean(weights * hinge)
        # lambda lives in the optimiser's state (make_optimizer is tunable), not in the program
        hyper = getattr(state.opt_state, "hyperparams", None)
        if hyper is None or "lam" not in hyper:
            raise TypeError(
                "the WARCA step needs the tunable tx of warca.make_optimizer (lambda and eta "
                f"in its state); got an optimiser state of type {type(state.opt_state).__name__}"
            )
        lam_now = hyper["lam"]
        found = viol.found
        metrics = {
            "loss": hinge_loss + lam_now * pen,
            "hinge": hinge_loss,
            "penalty": pen,
            "mean_rank": jnp.mean(viol.rank),
            "violated_frac": jnp.mean(found),
            "active_frac": jnp.mean(found & (hinge > 0)),
            # margin-free progress: how often a negative is nearer than the positive (a
            # training ranking error, 1 - AUC), and the sampled triplets' distance gap
            "closer_frac": jnp.mean(sampling.closer_fraction(d_ij, d_ik, negative)),
            "mean_gap": jnp.sum(jnp.where(found, d_ik_sel - d_ij, 0.0))
            / jnp.maximum(jnp.sum(found), 1),
        }
        new_params = constrain(optax.apply_updates(w, updates))
        new_state = optim.TrainState(new_params, opt_state, state.step + 1)
        return new_state, metrics

    return step


def make_train_step(
    cfg, tx: optax.GradientTransformation, *, kernel_form: bool, mesh=None
) -> Callable:
    """Builds the jitted ``step(state, feats, table, key) -> (state, metrics)``.

    ``feats`` is X: [N, D] in the primal form and K: [N, N] in the kernel form;
    ``table`` is the ``sampling.PairTable`` of the training labels. The step's
    randomness is ``sampling.step_bits(key, state.step, ...)``, so a run is
    reproducible from the seed and independent of how steps are grouped. ``mesh``:
    see ``_step_fn`` (None: no layout constraints, one device).
    """
    step = _step_fn(cfg, tx, kernel_form=kernel_form, mesh=mesh)

    def one(state, feats, table, key):
        bits = sampling.step_bits(key, state.step, _num_bits(cfg, table.labels.shape[0]))
        return step(state, feats, table, bits)

    return jax.jit(one, donate_argnums=0)


def make_train_chunk(
    cfg, tx: optax.GradientTransformation, *, kernel_form: bool, mesh=None
) -> Callable:
    """Like ``make_train_step`` but runs ``length`` steps in one call (``lax.scan``).

    ``chunk(state, feats, table, key, length) -> (state, metrics)`` with the
    metrics averaged over the chunk; the same steps, bit for bit in their
    randomness, as calling the single step ``length`` times, with one dispatch
    from Python and one batched draw of random words instead of ``length``.
    """
    step = _step_fn(cfg, tx, kernel_form=kernel_form, mesh=mesh)

    def chunk(state, feats, table, key, length):
        size = _num_bits(cfg, table.labels.shape[0])
        steps = state.step + jnp.arange(length, dtype=state.step.dtype)
        bits = jax.vmap(lambda t: sampling.step_bits(key, t, size))(steps)

        def body(st, bits_t):
            return step(st, feats, table, bits_t)

        state, metrics = jax.lax.scan(body, state, bits)
        return state, jax.tree.map(jnp.mean, metrics)

    return jax.jit(chunk, static_argnums=4, donate_argnums=0)


_TUNABLE = ("lam", "learning_rate")  # in the optimiser state, not in the compiled program


def make_optimizer(cfg, *, kernel_form: bool) -> optax.GradientTransformationExtraArgs:
    """The tunable ``tx`` of a WARCA config: lambda and eta live in its state."""
    return optim.make_optimizer(
        learning_rate=cfg.learning_rate,
        lam=cfg.lam,
        penalty=cfg.penalty,
        penalty_mode=cfg.penalty_mode,
        preconditioned=kernel_form and cfg.preconditioned,
        decay_steps=cfg.num_iters if cfg.schedule == "cosine" else 0,
        tunable=True,
    )


@functools.lru_cache(maxsize=32)
def _compiled_chunk(frozen_cfg: tuple, kernel_form: bool, mesh):
    """The jitted chunk for a config, built once per distinct config without lambda and eta.

    Fits with the same method config (the splits of a protocol, and every point of a
    lambda x eta grid search) share one compiled program.
    """
    cfg = types.SimpleNamespace(**dict(frozen_cfg), lam=0.0, learning_rate=1.0)
    return make_train_chunk(
        cfg, make_optimizer(cfg, kernel_form=kernel_form), kernel_form=kernel_form, mesh=mesh
    )


def validate_inputs(features, labels, cfg) -> _checks.TrainingData:
    """Checks training data and config before any work.

    With ``normalize="msd"`` WARCA does not depend on the features' scale: features too
    small or too large for float32 are multiplied by a power of two (``_checks``), which
    the returned metric's ``feature_scale`` applies again; with ``normalize="none"`` they
    are refused.

    Returns:
      ``_checks.TrainingData``: float32 features (times ``scale``), int64 labels, scale.

    Raises:
      ValueError: NaN/inf, shape mismatches, labels that are not integers, too few
        identities, a config that cannot run on this data, or negative features for a
        chi2 kernel.
    """
    if cfg.normalize not in NORMALIZE:
        raise ValueError(f"unknown normalize {cfg.normalize!r}; expected one of {NORMALIZE}")
    data = _checks.training_data(
        features,
        labels,
        method="WARCA",
        scale_free=cfg.normalize == "msd",
        scale_note=(
            " (with normalize='none' the margin is in the features' units; "
            "normalize='msd' trains on any scale)"
        ),
    )
    check_config(cfg, n=data.x.shape[0], d=data.x.shape[1])
    if cfg.kernel != "none":
        kernels.check_kernel_input(data.x, cfg.kernel)
    return data


def nystroem_features(
    x: np.ndarray, cfg, *, seed: int, block_size: int = 8192, gamma: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The Nystroem map of ``cfg.kernel`` on ``cfg.num_landmarks`` random training points.

    With landmarks L (drawn without replacement from ``seed``), K_LL = U diag(s) U^T and
    M = U_r diag(s_r)^-1/2 over the eigenvalues above 1e-6 s_max, the features
    phi(x) = k(x, L) M satisfy phi(a) . phi(b) = k(a, L) K_LL^+ k(L, b), the Nystroem
    approximation of k(a, b) (exact when a or b is a landmark). Memory: N x r features
    and one [block_size, m] kernel block at a time, never N x N.

    Args:
      gamma: the bandwidth (default ``cfg.kernel_gamma``; 0: from the landmarks).

    Returns:
      (phi [N, r] float32, landmarks [m, D], M [m, r] float32, gamma).

    Raises:
      ValueError: the landmark kernel matrix has fewer than ``cfg.dim`` usable
        eigenvalues (too few distinct landmarks for the output dimension).
    """
    n = x.shape[0]
    m = min(cfg.num_landmarks, n)
    rng = np.random.default_rng(seed)
    landmarks = x[np.sort(rng.choice(n, size=m, replace=False))]
    lj = jnp.asarray(landmarks)
    # the bandwidth from the landmarks' distances when kernel_gamma is 0, as for the full
    # kernel matrix from the training set's
    gamma = cfg.kernel_gamma if gamma is None else gamma
    k_ll, gamma = kernels.gram_matrix(landmarks, kernel=cfg.kernel, gamma=gamma)
    k_ll = np.asarray(k_ll, np.float64)
    s, u = np.linalg.eigh(0.5 * (k_ll + k_ll.T))
    keep = s > 1e-6 * max(float(s[-1]), 1e-30)
    if int(keep.sum()) < cfg.dim:
        raise ValueError(
            f"the {m} x {m} landmark kernel matrix has {int(keep.sum())} usable eigenvalues, "
            f"fewer than the output dim {cfg.dim}: use more landmarks or a lower dim"
        )
    proj = (u[:, keep] / np.sqrt(s[keep])).astype(np.float32)
    pj = jnp.asarray(proj)
    phi = np.empty((n, proj.shape[1]), np.float32)
    for b0 in range(0, n, block_size):
        kb = kernels.kernel_matrix(
            jnp.asarray(x[b0 : b0 + block_size]), lj, kernel=cfg.kernel, gamma=gamma
        )
        phi[b0 : b0 + block_size] = np.asarray(kb @ pj)
    return phi, landmarks, proj, float(gamma)


def _moments(x, *, block_size: int = 65536) -> tuple[float, float]:
    """(mean squared distance, mean squared norm) of the rows of x; see ``mean_sq_dist``."""
    n = x.shape[0]
    s1 = np.zeros(x.shape[1], np.float64)
    s2 = 0.0
    for b0 in range(0, n, block_size):
        xb = np.asarray(x[b0 : b0 + block_size], np.float64)
        s1 += xb.sum(0)
        s2 += float(np.sum(xb * xb))
    m = s1 / n
    return max(2.0 * (s2 / n - float(m @ m)), 0.0), s2 / n


def mean_sq_dist(x, *, block_size: int = 65536) -> float:
    """Mean squared Euclidean distance between two training points, 2 (E||x||^2 - ||E x||^2).

    Over all ordered pairs (i, j), i = j included; in float64, ``block_size`` rows at a
    time, so a memory-mapped ``x`` is read once and never copied whole.
    """
    return _moments(x, block_size=block_size)[0]


def normalized_gram(gram: jax.Array, *, normalize: str) -> tuple[jax.Array, float]:
    """The centred training kernel matrix H K H, scaled; and the scale.

    Centring (H = I - 11^T / N) is the exact reparameterisation A -> A H: distances
    between embeddings do not change, and the constant direction, whose eigenvalue of
    about N mean(K) made Adam on the plain gradient diverge, is removed. With
    ``normalize="msd"`` the matrix is also divided by the mean squared feature-space
    distance between training points, 2 (mean diag K - mean K), so that it is 1.

    Raises:
      ValueError: every training point has the same feature-space image (zero distance,
        or one within float32's rounding of the kernel values).
    """
    row = jnp.mean(gram, axis=0)
    mean_diag = float(jnp.mean(jnp.diagonal(gram)))
    msd = 2.0 * (mean_diag - float(jnp.mean(row)))
    # checked whatever ``normalize``: a matrix that puts every point at one place (e.g. the
    # chi2 or linear kernel of all-zero features, K = 0) has nothing to learn from, and
    # without the check the initial A would be divided by ~0
    if not msd > _KERNEL_MSD_RELATIVE_FLOOR * abs(mean_diag):
        what = (
            "is all zeros (e.g. all-zero features under the chi2 or linear kernel)"
            if not np.any(np.asarray(gram))
            else f"puts every training point at the same place (mean squared feature-space "
            f"distance {msd:.3g}, 0 up to float32 rounding of kernel values of size "
            f"{abs(mean_diag):.3g})"
        )
        raise ValueError(
            f"the training kernel matrix {what}: nothing to learn from; check the features "
            "and kernel_gamma"
        )
    scale = 1.0 / msd if normalize == "msd" else 1.0
    centred = (gram - row[None, :] - row[:, None] + jnp.mean(row)) * scale
    return centred, scale


def _feature_scale(x, *, normalize: str) -> float:
    """The factor that gives training features a mean squared distance of 1 (``msd``), or 1."""
    if normalize != "msd":
        return 1.0
    msd, energy = _moments(x)
    if not np.isfinite(msd) or not msd > _MSD_RELATIVE_FLOOR * energy:
        raise ValueError(
            f"the training features have mean squared distance {msd:.3g} between points "
            f"(mean squared norm {energy:.3g}): every training sample is the same vector, up "
            "to float32 rounding; nothing to learn from"
        )
    return float(1.0 / np.sqrt(msd))


def _place(mesh, feats, params, scale: float = 1.0):
    """Puts the features (split by rows, padded to the mesh, times ``scale``) and params
    on the mesh.

    Each device's rows are read from ``feats`` (a NumPy array, a memory map or the kernel
    matrix) by ``jax.make_array_from_callback``, so no second host copy of the whole
    features is made and, over several hosts, each host fills its own devices from its
    copy; the scale is applied block by block, in float64 before the cast to float32.
    """
    n = feats.shape[0]
    # On several devices, whole blocks of the violator selection on each, so that the
    # [B, N] search stays split by candidate (unaligned blocks make XLA gather the rows).
    block = sampling.SELECT_WIDTH if mesh.devices.size > 1 else 1
    rows = sharding_lib.pad_to_multiple(n, mesh, block=block)
    shape = (rows, *feats.shape[1:])

    def scaled(a):
        a = np.asarray(a)
        return a if scale == 1.0 else (a.astype(np.float64) * scale).astype(np.float32)

    def block(index):
        start, stop, _ = index[0].indices(rows)
        take = max(0, min(stop, n) - start)
        if take == stop - start:  # no padding rows: the slice itself
            return scaled(feats[start:stop])[(slice(None), *index[1:])]
        out = np.zeros((stop - start, *feats.shape[1:]), np.float32)
        out[:take] = scaled(feats[start : start + take])
        return out[(slice(None), *index[1:])]

    feats = jax.make_array_from_callback(shape, sharding_lib.rows(mesh), block)
    return feats, jax.device_put(params, sharding_lib.replicated(mesh))


def fit(
    features: np.ndarray,
    labels: np.ndarray,
    cfg,
    *,
    seed: int = 0,
    log_fn: Callable[[dict], None] | None = None,
    progress: bool = False,
    callback: Callable[[dict, Metric], None] | None = None,
) -> tuple[Metric, list[dict]]:
    """Learns a WARCA metric.

    Training runs on a mesh of ``cfg.num_devices`` devices (0: all; see
    ``warca_jax.sharding``): one device is a mesh of one, and N devices give the
    one-device result up to float rounding (same seed, same draws). With
    ``cfg.kernel_approx == "nystroem"`` the kernel form is replaced by linear WARCA on
    the Nystroem features of ``cfg.num_landmarks`` landmarks (``nystroem_features``),
    returned as a kernel metric whose support vectors are the landmarks.

    Args:
      features: [N, D] training features (a NumPy array, or a memory-mapped ``.npy``).
      labels: [N] identity labels.
      cfg: the ``method`` section of a config (see configs/warca.py).
      seed: PRNG seed; same seed, same result.
      log_fn: called with a dict of metrics every ``cfg.log_every`` steps.
      progress: show a progress bar.
      callback: called as ``callback(row, metric)`` after every logged chunk with the
        metric learned so far (to evaluate it during training); its time is not
        counted in the rows' ``seconds``.

    Returns:
      (metric, history) where history is the list of logged dicts.

    Raises:
      ValueError: bad input or config, before any training.
      training.TrainingDivergedError: training diverged (a non-finite or exploding loss)
        or ended in a non-finite or degenerate model.
    """
    data = validate_inputs(features, labels, cfg)
    x, y = data.x, data.y
    # the bandwidth of features of ordinary size, for the rescaled ones
    kernel_gamma = kernels.gamma_for_scaled(cfg.kernel, cfg.kernel_gamma, data.scale)
    mesh = sharding_lib.make_mesh(cfg.num_devices)
    nystroem = cfg.kernel != "none" and cfg.kernel_approx == "nystroem"
    kernel_form = cfg.kernel != "none" and not nystroem
    table = sampling.make_pair_table(y)
    table = jax.device_put(table, sharding_lib.replicated(mesh))
    key_init, key_train = jax.random.split(jax.random.PRNGKey(seed))
    gamma = 1.0
    scale = 1.0  # features (primal, Nystroem) or kernel matrix (kernel form) times this
    t0 = time.perf_counter()
    if kernel_form:
        feats, gamma = kernels.gram_matrix(x, kernel=cfg.kernel, gamma=kernel_gamma)
        if not bool(jnp.all(jnp.isfinite(feats))):
            raise FloatingPointError("the training kernel matrix has non-finite entries")
        feats, scale = normalized_gram(feats, normalize=cfg.normalize)
        params = init_params(key_init, dim=cfg.dim, d=x.shape[1], gram=feats)
    elif nystroem:
        feats, landmarks, nys_proj, gamma = nystroem_features(x, cfg, seed=seed, gamma=kernel_gamma)
        scale = _feature_scale(feats, normalize=cfg.normalize)
        params = init_params(key_init, dim=cfg.dim, d=feats.shape[1])
    else:
        feats = x
        scale = _feature_scale(x, normalize=cfg.normalize)
        params = init_params(key_init, dim=cfg.dim, d=x.shape[1])
    if not cfg.candidate_pool and 4 * cfg.batch_size * x.shape[0] > _FULL_CANDIDATES_WARN_BYTES:
        logging.warning(
            "WARCA on %d samples without a candidate pool: every step builds [%d, %d] "
            "candidate distances; set candidate_pool (e.g. 4096) to bound its memory",
            x.shape[0],
            cfg.batch_size,
            x.shape[0],
        )
    # the kernel matrix is scaled already (on the device); features block by block
    feats, params = _place(mesh, feats, params, scale=1.0 if kernel_form else scale)
    structural = tuple(sorted((k, v) for k, v in cfg.items() if k not in _TUNABLE))
    chunk = _compiled_chunk(structural, kernel_form, mesh)
    tx = make_optimizer(cfg, kernel_form=kernel_form)
    state = optim.TrainState(params, tx.init(params), jnp.zeros((), jnp.int32))
    # every input of the compiled chunk on the mesh from the start, as its outputs will be,
    # so that the second call does not compile again for new input shardings
    state, key_train = jax.device_put((state, key_train), sharding_lib.replicated(mesh))

    def advance(done, length):
        nonlocal state
        state, metrics = chunk(state, feats, table, key_train, length)
        return metrics

    def make_metric(params) -> Metric:
        # the metric applies the input's scale at transform; the kernel's centring is folded
        # into A: A on H K H is A H on K, up to a shift common to all embeddings
        params = np.asarray(params)
        if kernel_form:
            params = params - params.mean(axis=1, keepdims=True)
        if nystroem:  # W on phi = k(., L) M is A = W M^T on k(., L)
            return Metric(
                kind="kernel",
                input_dim=x.shape[1],
                projection=params @ nys_proj.T,
                support=landmarks,
                kernel=cfg.kernel,
                gamma=gamma,
                input_scale=scale,
                name="warca",
                feature_scale=data.scale,
            )
        return Metric(
            kind="kernel" if kernel_form else "linear",
            input_dim=x.shape[1],
            projection=params,
            support=x if kernel_form else None,
            kernel=cfg.kernel if kernel_form else "none",
            gamma=gamma,
            input_scale=scale,
            name="warca",
            feature_scale=data.scale,
        )

    hint = f"lower learning_rate (now {cfg.learning_rate:g})"
    history = training.run_in_chunks(
        advance,
        num_iters=cfg.num_iters,
        chunk=cfg.log_every,
        method="WARCA",
        log_fn=log_fn,
        progress=progress,
        t0=t0,
        on_chunk=None if callback is None else lambda row: callback(row, make_metric(state.params)),
        # on normalised inputs the loss starts at about the margin (the hinge) plus lambda
        # times the penalty at the initial W (at most about D')
        reference_loss=cfg.margin + cfg.lam * cfg.dim if cfg.normalize == "msd" else None,
        hint=hint,
    )
    metric = make_metric(state.params)
    return training.check_model(metric, method="WARCA", features=features, hint=hint), history
