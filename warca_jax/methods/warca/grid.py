"""Fits of one WARCA config at several (lambda, eta) points, sharing all but those two.

A cross-validation grid differs only in lambda and eta, the ``Hyperparams`` argument of
the compiled chunk: the validated data, the pair table, the kernel matrix or scaled
features, the principal-axes start and the compiled program are made once
(``problem.prepare_fit``) and every point trains from them. ``GridFit.advance(step,
points)`` trains the given points to ``step``, chunk by chunk as ``fit`` does, so that a
point advanced to ``num_iters`` is the model ``fit`` gives at its lambda and eta, bit for
bit in the one-point-at-a-time mode; a point can be stopped at any multiple of
``log_every`` and resumed (successive halving: the protocol's cross-validation and
``lam_select``).

The points train one after another. Running them as one ``jax.vmap``ped program was
tried and dropped: it was no faster on a CPU or on an H100, and on the GPU its different
float sums moved the cross-validation's choice (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import jax

from warca_jax.methods import model_checks
from warca_jax.methods.warca import config, problem
from warca_jax.metric import Metric


class GridFit:
    """The points ``lams_etas`` of config ``cfg`` on one training set (see the module).

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
        self.prep = problem.prepare_fit(data, cfg, seed=seed, cams=cams)
        self.num_iters, self.log_every = int(cfg.num_iters), int(cfg.log_every)
        n = len(self.cfgs)
        self.states = [self.prep.init_state(c) for c in self.cfgs]
        self.hypers = [self.prep.hyper(c) for c in self.cfgs]
        self.steps = dict.fromkeys(range(n), 0)
        self.failed: dict[int, str] = {}
        self._reference = {p: problem.reference_loss(c) for p, c in enumerate(self.cfgs)}
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
                hint=problem.divergence_hint(self.cfgs[p]),
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
                hint=problem.divergence_hint(self.cfgs[p]),
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
