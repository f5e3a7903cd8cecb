"""SVMML's ``solver="released"``: the trainer the LADF authors released, as the WARCA paper ran it.

Not a learner of its own: ``svmml.fit`` calls ``fit`` here when ``cfg.solver`` is
"released" (``configs/svmml.py:released``). The released MATLAB trainer (read, not copied)
does not solve the paper's stated problem (``svmml``'s module docstring) but

    min lam/2 (||A||_F^2 + ||B||_F^2)
        + sum_{i != j} w_ij log(1 + exp(s_ij f(x_i, x_j))),
    f(x, z) = 1/2 x^T A x + 1/2 z^T A z - x^T B z + b,

over all ordered pairs of the training set (s = +1 for a same-identity pair, -1 otherwise:
f is a dissimilarity, as in ``svmml``), each class weighted to total 1 (w = 1/#same or
1/#different), with no c term (c = 0 in the model), no PSD constraint and the
regulariser effectively off. It starts at A = B = I, b = 0 (f = 1/2 ||x - z||^2: the
Euclidean distance on the PCA features) and stops after a fixed number of nonlinear
conjugate-gradient iterations: early stopping is its real regulariser (run to convergence,
it overfits). The features are the PCA's as they are (``whiten=False``), so that, unlike
the default solver, the result depends on the features' scale (as the released code's
does): the start's distances set how far the logistic loss is from saturation.

Here the CG is ``scipy.optimize.minimize(method="CG")`` (Polak-Ribiere, Wolfe line
search) in float64 NumPy, run once for ``num_iters`` iterations (never restarted between
history rows) with a gradient tolerance too small to stop it first. The released code
weighs A by 1e-8 and B by 1e-6; we use one ``lam`` for both (1e-6 in the variant; 1e-8
ranks the same within the splits' spread: docs/methods.md#svmml).
The pair matrices are N x N: memory grows as N^2 (8 N^2 bytes each; N = 632 on VIPeR).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import optimize, special

from warca_jax.methods import learner_loop


def pair_signs_and_weights(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, w), [N, N] each: s +1 for a same-identity pair, -1 otherwise; w 1/#same on the
    same-identity pairs i != j, 1/#different on the others, 0 on the diagonal."""
    labels = np.asarray(labels)
    same = labels[:, None] == labels[None, :]
    np.fill_diagonal(same, False)
    diff = labels[:, None] != labels[None, :]
    w = np.where(same, 1.0 / max(same.sum(), 1), np.where(diff, 1.0 / max(diff.sum(), 1), 0.0))
    return np.where(same, 1.0, -1.0), w


def unpack(theta: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(A [p, p], B [p, p], b) of the flat parameter vector [2 p^2 + 1]."""
    return theta[: p * p].reshape(p, p), theta[p * p : 2 * p * p].reshape(p, p), float(theta[-1])


def euclidean_start(p: int) -> np.ndarray:
    """The released trainer's start: A = B = I, b = 0 (f = 1/2 ||x - z||^2), flat."""
    eye = np.eye(p).ravel()
    return np.concatenate([eye, eye, [0.0]])


def objective(theta, x, s, w, lam) -> tuple[float, np.ndarray]:
    """The released trainer's objective (module docstring) and its gradient, float64.

    Args:
      theta: flat (A, B, b) [2 p^2 + 1]. x: [N, p] PCA features.
      s, w: [N, N] pair signs and weights (``pair_signs_and_weights``).
      lam: the weight of lam/2 (||A||_F^2 + ||B||_F^2).
    """
    p = x.shape[1]
    a, b, bias = unpack(theta, p)
    h = 0.5 * np.sum((x @ a) * x, axis=1)
    e = s * (h[:, None] + h[None, :] - (x @ b) @ x.T + bias)
    value = np.sum(w * np.logaddexp(0.0, e)) + 0.5 * lam * (np.sum(a * a) + np.sum(b * b))
    wd = w * s * special.expit(e)  # d value / d f_ij
    r = wd.sum(axis=0) + wd.sum(axis=1)
    grad_a = lam * a + 0.5 * (x.T * r) @ x
    grad_b = lam * b - x.T @ wd @ x
    return float(value), np.concatenate([grad_a.ravel(), grad_b.ravel(), [wd.sum()]])


class CgRun:
    """One nonlinear-CG run of ``num_iters`` iterations from ``theta0``, kept for its history:
    the objective after every iteration (``losses``) and the parameters every ``every``
    iterations and at its end (``snapshots``, by iteration count)."""

    def __init__(self, fun: Callable, theta0: np.ndarray, num_iters: int, every: int):
        self.losses: list[float] = []
        self.snapshots = {0: theta0}
        self.message = "no iterations asked for"
        if num_iters == 0:
            return

        def record(intermediate_result):
            self.losses.append(float(intermediate_result.fun))
            if len(self.losses) % every == 0:
                self.snapshots[len(self.losses)] = np.array(intermediate_result.x)

        res = optimize.minimize(
            fun,
            theta0,
            jac=True,
            method="CG",
            callback=record,
            options={"maxiter": num_iters, "gtol": 1e-30},
        )
        self.snapshots[len(self.losses)] = np.array(res.x)
        self.message = str(res.message)

    @property
    def iterations(self) -> int:
        return len(self.losses)


def fit(xr: np.ndarray, labels: np.ndarray, cfg, loop: learner_loop.Loop, make_metric: Callable):
    """The released trainer on the PCA features ``xr`` [N, p] (svmml's ``fit`` for
    ``solver="released"``); ``make_metric(A, B, c, b)`` builds the ``SvmmlMetric``.

    Returns:
      (SvmmlMetric, history rows every ``log_every`` iterations: step, loss (mean over the
      chunk's iterations), grad_norm (at the chunk's end), seconds; the last row's
      ``stopped`` says when and why the CG stopped).
    """
    xr = np.asarray(xr, np.float64)
    s, w = pair_signs_and_weights(labels)
    lam, num_iters, every = float(cfg.lam), int(cfg.num_iters), int(cfg.log_every)

    def fun(theta):
        return objective(theta, xr, s, w, lam)

    theta0 = euclidean_start(xr.shape[1])
    start_loss = fun(theta0)[0]
    run = CgRun(fun, theta0, num_iters, every)
    current = {"theta": theta0}

    def advance(done, length):
        end = min(done + length, run.iterations)
        current["theta"] = run.snapshots[end]
        value, grad = fun(current["theta"])
        losses = run.losses[done:end]
        metrics = {"loss": float(np.mean(losses)) if losses else value}
        metrics["grad_norm"] = float(np.linalg.norm(grad))
        if end < done + length:
            why = f"CG stopped after {end} of {num_iters} iterations: {run.message}"
            return learner_loop.Chunk(metrics, end - done, stop=True, stopped=why)
        if end >= num_iters:
            why = f"num_iters spent: {num_iters} nonlinear-CG iterations (the released stop)"
            return learner_loop.Chunk(metrics, length, stop=True, stopped=why)
        return metrics

    def current_metric():
        a, b, bias = unpack(current["theta"], xr.shape[1])
        return make_metric(0.5 * (a + a.T), 0.5 * (b + b.T), np.zeros(xr.shape[1]), bias)

    return loop.fit(
        advance,
        current_metric,
        num_iters=num_iters,
        chunk=every,
        reference_loss=start_loss,
        hint="lower num_iters",
    )
