"""The checks that a learner's training did not diverge.

``check_row`` refuses a history row of a diverged run (a non-finite value, or a loss grown
``MAX_LOSS_GROWTH`` times past its reference); ``check_model`` refuses a model with NaN
or inf, or one that maps every training sample to the same point (an all-zero
projection). Both raise ``TrainingDivergedError``. ``warca_jax.methods.learner_loop`` calls them on
every chunk and at the end of every fit. Whether a model is one its method learns is the
registry's question (``warca_jax.methods.registered_method``).
"""

from __future__ import annotations

import numpy as np

from warca_jax.metric import Metric, NonFiniteEmbeddingError

# A loss more than this many times its reference (the learner's loss scale at the start,
# or the first logged loss) is a diverged run: no training that is converging gets there.
MAX_LOSS_GROWTH = 1e6
# Rows of the training features embedded by ``check_model`` to look for a degenerate map.
_CHECK_ROWS = 64


class TrainingDivergedError(FloatingPointError, RuntimeError):
    """Training diverged, or ended in a degenerate model; no model is returned.

    Raised for a non-finite or exploding loss (``run_in_chunks`` / ``check_row``) and for a
    learned metric with NaN or inf or that maps every input to one point
    (``check_model``). The message names the learner, the step and the loss where known,
    and what to try. A ``FloatingPointError`` (what the learners raised before) and a
    ``RuntimeError``.
    """


def check_row(
    row: dict,
    *,
    method: str,
    step: int,
    reference_loss: float | None = None,
    hint: str = "lower learning_rate",
) -> None:
    """Raises ``TrainingDivergedError`` for a history row of a diverged run.

    Diverged: a value of the row is NaN or inf, or its ``loss`` is more than
    ``MAX_LOSS_GROWTH`` times ``reference_loss`` in size (the loss at the start; no such
    test when it is None or 0).
    """
    bad = sorted(k for k, v in row.items() if not np.isfinite(v))
    loss = row.get("loss")
    if bad:
        raise TrainingDivergedError(
            f"{method} diverged by step {step}: {', '.join(bad)} not finite (loss {loss}); {hint}"
        )
    if loss is not None and reference_loss and abs(loss) > MAX_LOSS_GROWTH * reference_loss:
        raise TrainingDivergedError(
            f"{method} diverged by step {step}: loss {loss:.4g} is more than "
            f"{MAX_LOSS_GROWTH:g} times its starting size {reference_loss:.4g}; {hint}"
        )


def check_model(
    metric: Metric,
    *,
    method: str,
    features: np.ndarray | None = None,
    hint: str = "lower learning_rate",
) -> Metric:
    """Returns ``metric`` when it is a usable model; ``TrainingDivergedError`` otherwise.

    Refused: NaN or inf in any of its arrays or floats; an all-zero projection; and, given
    the training ``features``, embeddings of (up to 64 of) them that are not finite or
    all the same point (every distance 0: nothing was learned).

    Args:
      metric: a learner's result.
      method: the learner's name, for the message.
      features: the training features as the learner got them (optional).
      hint: what to try, for the message.
    """
    bad = metric.non_finite_fields()
    if bad:
        raise TrainingDivergedError(
            f"{method} produced a non-finite model (NaN or inf in {bad}); {hint}"
        )
    proj = metric.projection
    if proj is not None and proj.size and not np.any(proj):
        raise TrainingDivergedError(
            f"{method} produced a degenerate model: its projection is all zeros (every input "
            f"maps to the same point); {hint}"
        )
    x = None if features is None else np.asarray(features[:_CHECK_ROWS])
    if metric.kind in ("linear", "kernel") and x is not None and x.ndim == 2 and len(x) >= 2:
        try:
            emb = np.asarray(metric.transform(x), np.float64)
        except NonFiniteEmbeddingError as e:
            raise TrainingDivergedError(
                f"{method} produced a model whose embeddings of training samples are not "
                f"finite (overflow: entries too large); {hint}"
            ) from e
        if np.any(np.ptp(x.astype(np.float64), axis=0) > 0) and not np.any(np.ptp(emb, axis=0) > 0):
            raise TrainingDivergedError(
                f"{method} produced a degenerate model: it maps {len(x)} different training "
                f"samples to one point; {hint}"
            )
    return metric
