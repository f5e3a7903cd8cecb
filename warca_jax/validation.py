"""Checks every learner runs on its training data before doing any work."""

from __future__ import annotations

import numpy as np


def check_training_data(
    features, labels, *, method: str, min_identities: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Validates training features and labels; returns float32 features and labels.

    Args:
      features: [N, D] training features.
      labels: [N] identity labels.
      method: the learner's name, for the messages.
      min_identities: identities with two or more images the learner needs.

    Raises:
      ValueError: not 2-D, length mismatch, NaN or inf, or too few identities
        with two or more images (no positive pairs to learn from).
    """
    x = np.asarray(features)
    y = np.asarray(labels)
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D [N, D], got shape {x.shape}")
    if y.shape != (x.shape[0],):
        raise ValueError(f"labels must have shape [{x.shape[0]}] to match features, got {y.shape}")
    if not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"features must be numeric, got dtype {x.dtype}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"features contain {int(np.sum(~np.isfinite(x)))} NaN or inf values")
    _, counts = np.unique(y, return_counts=True)
    if np.sum(counts >= 2) < min_identities or len(counts) < 2:
        raise ValueError(
            f"{method} needs at least {min_identities} identities with two or more images; "
            f"found {int(np.sum(counts >= 2))} identities with two or more of {len(counts)}"
        )
    return x.astype(np.float32, copy=False), y  # no copy of float32 (or memory-mapped) data
