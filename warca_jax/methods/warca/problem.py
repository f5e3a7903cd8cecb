"""The training problem of a WARCA config on one training set: everything but lambda and
eta, made once, and the points trained from it.

``prepare_fit`` turns validated data into a ``Prepared``: the features (or the centred,
scaled kernel matrix) on the device mesh, the positive-pair table, the initial parameters
and the compiled chunk. ``fit`` trains one point from it. ``GridFit`` trains several
(lambda, eta) points from one, as the protocol's cross-validation and the lambda rule do:
a grid differs only in lambda and eta, the ``Hyperparams`` argument of the compiled chunk.
``GridFit.advance(step, points)`` trains the given points to ``step``, chunk by chunk as
``fit`` does, so that a point advanced to ``num_iters`` is the model ``fit`` gives at its
lambda and eta, bit for bit in the one-point-at-a-time mode; a point can be stopped at any
multiple of ``log_every`` and resumed (successive halving: the protocol's cross-validation
and ``lam_select``).

The points train one after another. Running them as one ``jax.vmap``ped program was
tried and dropped: it was no faster on a CPU or on an H100, and on the GPU its different
float sums moved the cross-validation's choice (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from warca_jax.maths import device_mesh, kernels, linalg, sampling
from warca_jax.methods import checks, model_checks
from warca_jax.methods.warca import config, inputs, step
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
        gram, scale = inputs.normalized_gram(gram, normalize=cfg.normalize)
        params = inputs.init_params(key, dim=cfg.dim, d=x.shape[1], gram=gram, init=cfg.init)
        return _Problem(gram, params, scale, gamma, None, None)
    if nystroem:
        phi, landmarks, nys_proj, gamma = nystroem_features(x, cfg, seed=seed, gamma=gamma)
        scale = inputs.feature_scale(phi, normalize=cfg.normalize)
        params = inputs.init_params(key, dim=cfg.dim, d=phi.shape[1], x=phi, init=cfg.init)
        return _Problem(phi, params, scale, gamma, landmarks, nys_proj)
    span = linalg.training_span(x, min_dim=cfg.dim) if cfg.span else None
    if span is not None:  # every difference of training points lies in it (config.span)
        x = span.coords(x)
    scale = inputs.feature_scale(x, normalize=cfg.normalize)
    params = inputs.init_params(key, dim=cfg.dim, d=x.shape[1], x=x, init=cfg.init)
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
    lambda and eta (a cross-validation grid) share one (``GridFit``)."""

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

    def init_state(self, cfg, hyper: step.Hyperparams):
        """Step 0 at ``hyper`` (``hyper(cfg)``): a copy of the initial parameters (the chunk
        donates its state), a fresh optimiser state, on the mesh."""
        params = jnp.array(self.params, copy=True)
        state = step.init_state(cfg, hyper, params)
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
    feats, params = inputs.place(
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


class GridFit:
    """The points ``lams_etas`` of config ``cfg`` on one training set, sharing one
    ``Prepared`` (see the module).

    Attributes:
      failed: point index -> why its training failed (a divergence, or an unusable
        model at the end); such a point is never advanced again.
      steps: point index -> the steps it has trained.
      seconds: point index -> its training seconds so far, with an equal share of the
        preparation (the kernel matrix, the start, the first compilation).
    """

    def __init__(
        self,
        features,
        labels,
        cfg,
        lams_etas: Sequence[tuple[float, float]],
        *,
        seed: int = 0,
        cams=None,
    ):
        t0 = time.perf_counter()
        data = config.validate(features, labels, cfg)
        # every point's lambda and eta checked as it is made (``at_lam``), before any work
        self.cfgs = [config.at_lam(cfg, lam, learning_rate=eta) for lam, eta in lams_etas]
        self.features = features
        self.prep = prepare_fit(data, cfg, seed=seed, cams=cams)
        self.num_iters, self.log_every = int(cfg.num_iters), int(cfg.log_every)
        n = len(self.cfgs)
        self.hypers = [self.prep.hyper(c) for c in self.cfgs]
        self.states = [
            self.prep.init_state(c, h) for c, h in zip(self.cfgs, self.hypers, strict=True)
        ]
        self.steps = dict.fromkeys(range(n), 0)
        self.failed: dict[int, str] = {}
        self._reference = {p: reference_loss(c) for p, c in enumerate(self.cfgs)}
        share = (time.perf_counter() - t0) / max(n, 1)
        self.seconds = dict.fromkeys(range(n), share)

    def __len__(self) -> int:
        return len(self.cfgs)

    def live(self, points: Sequence[int] | None = None) -> list[int]:
        """The points (of ``points``, default all) that have not failed."""
        return [p for p in (range(len(self)) if points is None else points) if p not in self.failed]

    def advance(self, until: int, points: Sequence[int] | None = None) -> None:
        """Trains ``points`` (default: every live one) to step ``until``.

        ``until`` is ``num_iters`` or a multiple of ``log_every``, so that every chunk is
        one ``fit`` runs. A point that diverges is recorded in ``failed``; a point that
        reaches ``num_iters`` has its model checked (``check_model``) there.
        """
        if not 0 < until <= self.num_iters or (until != self.num_iters and until % self.log_every):
            raise ValueError(
                f"advance to a multiple of log_every ({self.log_every}) or num_iters "
                f"({self.num_iters}), got {until}"
            )
        todo = [p for p in self.live(points) if self.steps[p] < until]
        while todo:
            done = min(self.steps[p] for p in todo)
            length = min(self.log_every, until - done)
            group = [p for p in todo if self.steps[p] == done]
            t0 = time.perf_counter()
            rows = self._chunk(group, length)
            took = (time.perf_counter() - t0) / len(group)
            for p, metrics in zip(group, rows, strict=True):
                self.seconds[p] += took
                self.steps[p] = done + length
                self._check(p, metrics)
            todo = [p for p in self.live(todo) if self.steps[p] < until]
        for p in self.live(points):
            if self.steps[p] == self.num_iters:
                self.check_model(p)

    def _chunk(self, group: list[int], length: int) -> list[dict]:
        prep = self.prep
        args = (prep.feats, prep.table, prep.key_train, length)
        rows = []
        for p in group:
            self.states[p], metrics = prep.chunk(self.states[p], self.hypers[p], *args)
            rows.append(jax.device_get(metrics))
        return rows

    def _check(self, p: int, metrics: dict) -> None:
        """``run_in_chunks``' divergence check of one point's chunk."""
        row = {k: float(v) for k, v in metrics.items()}
        try:
            model_checks.check_row(
                row,
                method="WARCA",
                step=self.steps[p],
                reference_loss=self._reference[p],
                hint=divergence_hint(self.cfgs[p]),
            )
        except model_checks.TrainingDivergedError as e:
            self._fail(p, e)
            return
        if self.steps[p] <= self.log_every and "loss" in row:  # the first row
            self._reference[p] = max(abs(row["loss"]), abs(self._reference[p] or 0.0), 1.0)

    def check_model(self, p: int) -> None:
        """``model_checks.check_model`` of point ``p``'s model at the step it has reached
        (``advance`` runs it at ``num_iters``); an unusable model fails the point."""
        try:
            model_checks.check_model(
                self.prep.metric(self.states[p].params),
                method="WARCA",
                features=self.features,
                hint=divergence_hint(self.cfgs[p]),
            )
        except model_checks.TrainingDivergedError as e:
            self._fail(p, e)

    def _fail(self, p: int, e: Exception) -> None:
        self.failed[p] = f"{type(e).__name__}: {e}"
        self.states[p] = None  # its memory back

    def metric(self, p: int) -> Metric:
        """Point ``p``'s ``Metric`` at the step it has reached."""
        if p in self.failed:
            raise ValueError(f"grid point {p} failed: {self.failed[p]}")
        return self.prep.metric(self.states[p].params)

    def drop(self, p: int) -> None:
        """Stops point ``p`` for good (its memory back); its step count stays."""
        self.states[p] = None
