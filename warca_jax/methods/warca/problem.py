"""The training problem of a WARCA fit: everything but lambda and eta, made once.

``prepare_fit`` turns validated data into a ``Prepared``: the features (or the centred,
scaled kernel matrix) on the device mesh, the positive-pair table, the initial parameters
and the compiled chunk. ``fit`` trains one point from it; ``grid.GridFit`` trains several
(lambda, eta) points from one, as the protocol's cross-validation and the lambda rule do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from warca_jax.maths import device_mesh, kernels, linalg, sampling
from warca_jax.methods import checks
from warca_jax.methods.warca import config, prepare, step
from warca_jax.methods.warca.nystroem import nystroem_features
from warca_jax.metric import Metric

# Above this many bytes for one step's [B, N] candidate distances (no candidate_pool), fit
# logs a warning that the step's memory grows with N and a pool bounds it.
_FULL_CANDIDATES_WARN_BYTES = 2**31


class _Problem(NamedTuple):
    """What the training program runs on, and what the metric needs to embed new points."""

    feats: np.ndarray | jax.Array  # X (primal, Nystroem phi), or the centred, scaled K
    params: jax.Array  # the initial W or A
    scale: float  # features (primal, Nystroem) or kernel matrix (kernel form) times this
    gamma: float  # the kernel's bandwidth (1 without a kernel)
    landmarks: np.ndarray | None  # Nystroem: the landmarks and the map M
    nys_proj: np.ndarray | None
    span: linalg.Span | None = None  # the primal form on the span: W = span.lift(params)


def _problem(x, cfg, *, kernel_form: bool, nystroem: bool, seed: int, gamma, key) -> _Problem:
    """The training features or kernel matrix, its scale and the initial parameters."""
    if kernel_form:
        gram, gamma = kernels.gram_matrix(x, kernel=cfg.kernel, gamma=gamma)
        if not bool(jnp.all(jnp.isfinite(gram))):
            raise FloatingPointError("the training kernel matrix has non-finite entries")
        gram, scale = prepare.normalized_gram(gram, normalize=cfg.normalize)
        params = prepare.init_params(key, dim=cfg.dim, d=x.shape[1], gram=gram, init=cfg.init)
        return _Problem(gram, params, scale, gamma, None, None)
    if nystroem:
        phi, landmarks, nys_proj, gamma = nystroem_features(x, cfg, seed=seed, gamma=gamma)
        scale = prepare.feature_scale(phi, normalize=cfg.normalize)
        params = prepare.init_params(key, dim=cfg.dim, d=phi.shape[1], x=phi, init=cfg.init)
        return _Problem(phi, params, scale, gamma, landmarks, nys_proj)
    span = linalg.training_span(x, min_dim=cfg.dim) if cfg.span else None
    if span is not None:  # every difference of training points lies in it (config.span)
        x = span.coords(x)
    scale = prepare.feature_scale(x, normalize=cfg.normalize)
    params = prepare.init_params(key, dim=cfg.dim, d=x.shape[1], x=x, init=cfg.init)
    return _Problem(x, params, scale, 1.0, None, None, span)


def _metric(params, cfg, x, problem: _Problem, data, *, kernel_form: bool) -> Metric:
    """The ``Metric`` of learned parameters; it applies the input's scale at transform.

    Kernel form: W = A X^T (eq. 15), A the projection and X the support vectors, so that
    the metric embeds a point as A k(X, x) and measures F_A of eq. 16 between embeddings.

    The kernel's centring is folded into A: A on H K H is A H on K, up to a shift common
    to all embeddings. Nystroem: W on phi = k(., L) M is A = W M^T on k(., L).
    """
    params = np.asarray(params)
    if kernel_form:
        params = params - params.mean(axis=1, keepdims=True)
    if problem.landmarks is not None:
        projection, support, kernel, kind = (
            params @ problem.nys_proj.T,
            problem.landmarks,
            cfg.kernel,
            "kernel",
        )
    elif kernel_form:
        projection, support, kernel, kind = params, x, cfg.kernel, "kernel"
    else:
        projection = params if problem.span is None else problem.span.lift(params)
        projection, support, kernel, kind = projection, None, "none", "linear"
    return Metric(
        kind=kind,
        input_dim=x.shape[1],
        projection=projection,
        support=support,
        kernel=kernel,
        gamma=problem.gamma,
        input_scale=problem.scale,
        name="warca",
        feature_scale=data.scale,
    )


def _forms(cfg) -> tuple[bool, bool]:
    """(Nystroem features, the exact kernel form) of a config."""
    nystroem = cfg.kernel != "none" and cfg.kernel_approx == "nystroem"
    return nystroem, cfg.kernel != "none" and not nystroem


def _pair_table(labels, cams, cfg, mesh) -> sampling.PairTable:
    """The positive pairs S (cross-camera ones with ``cams``, ``config.pair_cams``) on the mesh."""
    table = sampling.make_pair_table(labels, config.pair_cams(cams, labels, cfg))
    return jax.device_put(table, device_mesh.replicated(mesh))


def _warn_full_candidates(cfg, n: int) -> None:
    if not cfg.candidate_pool and 4 * cfg.batch_size * n > _FULL_CANDIDATES_WARN_BYTES:
        logging.warning(
            "WARCA on %d samples without a candidate pool: every step builds [%d, %d] "
            "candidate distances; set candidate_pool (e.g. 4096) to bound its memory",
            n,
            cfg.batch_size,
            n,
        )


def reference_loss(cfg) -> float | None:
    """The loss's size at the start, for the divergence check: on normalised inputs about
    the margin (the hinge) plus lambda times the penalty at the initial W (at most about
    D'); unknown otherwise."""
    return cfg.margin + cfg.lam * cfg.dim if cfg.normalize == "msd" else None


def divergence_hint(cfg) -> str:
    return f"lower learning_rate (now {cfg.learning_rate:g})"


class Prepared(NamedTuple):
    """Everything a fit needs but lambda and eta: the data on the mesh, the pair table, the
    initial parameters and the compiled chunk. Fits of one config that differ only in
    lambda and eta (a cross-validation grid) share one (``warca.grid``)."""

    cfg: object  # the config it was prepared from (its lambda and eta are not used)
    data: checks.TrainingData
    problem: _Problem
    feats: jax.Array
    params: jax.Array
    table: sampling.PairTable
    key_train: jax.Array
    structural: tuple  # the config less lambda and eta: the compiled chunk's cache key
    chunk: Callable
    mesh: object
    kernel_form: bool
    t0: float

    def hyper(self, cfg) -> step.Hyperparams:
        """lambda and eta of ``cfg`` on the mesh, as the compiled chunk takes them."""
        return jax.device_put(step.hyperparams(cfg), device_mesh.replicated(self.mesh))

    def init_state(self, cfg):
        """Step 0 at ``cfg``'s hyperparameters: a copy of the initial parameters (the chunk
        donates its state), a fresh optimiser state, on the mesh."""
        params = jnp.array(self.params, copy=True)
        state = step.init_state(cfg, step.hyperparams(cfg), params)
        return jax.device_put(state, device_mesh.replicated(self.mesh))

    def metric(self, params) -> Metric:
        """The ``Metric`` of parameters learned on this problem."""
        return _metric(
            params, self.cfg, self.data.x, self.problem, self.data,
            kernel_form=self.kernel_form,
        )  # fmt: skip


def prepare_fit(data, cfg, *, seed: int, cams) -> Prepared:
    """The shared part of ``fit`` on validated ``data`` (``config.validate``)."""
    x = data.x
    mesh = device_mesh.make_mesh(cfg.num_devices)
    nystroem, kernel_form = _forms(cfg)
    table = _pair_table(data.y, cams, cfg, mesh)
    key_init, key_train = jax.random.split(jax.random.PRNGKey(seed))
    t0 = time.perf_counter()
    problem = _problem(
        x,
        cfg,
        kernel_form=kernel_form,
        nystroem=nystroem,
        seed=seed,
        # the bandwidth of features of ordinary size, for the rescaled ones
        gamma=kernels.gamma_for_scaled(cfg.kernel, cfg.kernel_gamma, data.scale),
        key=key_init,
    )
    _warn_full_candidates(cfg, x.shape[0])
    # the kernel matrix is scaled already (on the device); features block by block
    feats, params = prepare.place(
        mesh, problem.feats, problem.params, scale=1.0 if kernel_form else problem.scale
    )
    structural = tuple(sorted((k, v) for k, v in cfg.items() if k not in config.TUNABLE))
    chunk = step.compiled_chunk(structural, kernel_form, mesh)
    # every input of the compiled chunk on the mesh from the start, as its outputs will be,
    # so that the second call does not compile again for new input shardings
    key_train = jax.device_put(key_train, device_mesh.replicated(mesh))
    return Prepared(
        cfg, data, problem, feats, params, table, key_train, structural, chunk, mesh,
        kernel_form, t0,
    )  # fmt: skip
