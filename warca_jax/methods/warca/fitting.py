"""``fit``: WARCA from features and labels to a ``Metric``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from warca_jax.methods import learner_loop
from warca_jax.methods.warca import config, lam_select
from warca_jax.methods.warca.problem import divergence_hint, prepare_fit, reference_loss
from warca_jax.metric import Metric


def _fit_chosen_lam(features, labels, cfg, seed, cams, log_fn, progress, callback):
    """``fit`` with lambda chosen from ``cfg.lam_grid`` on held-out identities (``lam_select``,
    when ``cfg.lam`` is None): every history row (and every row ``log_fn`` writes) names the
    lambda, the first also how it was chosen (``lam_choice``)."""
    config.pair_cams(cams, np.asarray(labels), cfg)  # bad cams refused before the grid's fits
    lam, note = lam_select.choose(features, labels, cams, cfg, seed=seed)

    def named(row, first: bool):
        return {**row, "lam": lam, **({"lam_choice": note} if first else {})}

    written = 0

    def log_named(row):
        nonlocal written
        log_fn(named(row, written == 0))
        written += 1

    metric, history = fit(
        features, labels, config.at_lam(cfg, lam), seed=seed,
        log_fn=None if log_fn is None else log_named,
        progress=progress, callback=callback, cams=cams,
    )  # fmt: skip
    return metric, [named(row, i == 0) for i, row in enumerate(history)]


def fit(
    features: np.ndarray,
    labels: np.ndarray,
    cfg,
    *,
    seed: int = 0,
    log_fn: Callable[[dict], None] | None = None,
    progress: bool = False,
    callback: Callable[[dict, Metric], None] | None = None,
    cams: np.ndarray | None = None,
) -> tuple[Metric, list[dict]]:
    """Learns a WARCA metric.

    Training runs on a mesh of ``cfg.num_devices`` devices (0: all; see
    ``warca_jax.maths.device_mesh``): one device is a mesh of one, and N devices give the
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
      cams: [N] camera ids of the training samples, or None. With
        ``cfg.positives == "cross_camera"`` the positive pairs are those of one identity
        seen by two cameras; without cams (or with ``positives="all"``) every
        same-identity pair.

    Returns:
      (metric, history) where history is the list of logged dicts.

    Raises:
      ValueError: bad input or config, before any training.
      model_checks.TrainingDivergedError: training diverged (a non-finite or exploding loss)
        or ended in a non-finite or degenerate model.
    """
    data = config.validate(features, labels, cfg)
    if cfg.lam is None:
        return _fit_chosen_lam(features, labels, cfg, seed, cams, log_fn, progress, callback)
    prep = prepare_fit(data, cfg, seed=seed, cams=cams)
    hyper = prep.hyper(cfg)
    state = prep.init_state(cfg, hyper)
    chunk, feats, table, key_train = prep.chunk, prep.feats, prep.table, prep.key_train

    def advance(done, length):
        nonlocal state
        state, metrics = chunk(state, hyper, feats, table, key_train, length)
        return metrics

    return learner_loop.fit_in_chunks(
        advance,
        lambda: prep.metric(state.params),
        method="WARCA",
        features=features,
        callback=callback,
        num_iters=cfg.num_iters,
        chunk=cfg.log_every,
        log_fn=log_fn,
        progress=progress,
        t0=prep.t0,
        reference_loss=reference_loss(cfg),
        hint=divergence_hint(cfg),
    )
