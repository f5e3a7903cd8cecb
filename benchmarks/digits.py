"""The data and the retrieval measure every ``bench_*_vs_metric_learn.py`` script shares.

Data: ``sklearn.datasets.load_digits`` (1,797 x 64, 10 classes, bundled with
scikit-learn), split once 50/50 stratified (``random_state=0``), standardised with the
training half's mean and standard deviation (constant pixels left at 0), float32.
Retrieval: each test image a query against the other test images.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from warca_jax.evaluation import evaluate


def load():
    """(x_train, x_test, y_train, y_test) of the standardised digits."""
    x, y = load_digits(return_X_y=True)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.5, stratify=y, random_state=0)
    mean, sd = xtr.mean(0), xtr.std(0)
    sd[sd == 0] = 1.0
    return (
        ((xtr - mean) / sd).astype(np.float32),
        ((xte - mean) / sd).astype(np.float32),
        ytr,
        yte,
    )


def retrieval(lmap, x, y):
    """(rank-1, mAP) of x embedded by L = ``lmap``, each image a query against the others."""
    z = x @ np.asarray(lmap, np.float32).T
    cams = np.arange(len(y))  # each query's own entry is junk (same id, same camera)
    res = evaluate(z, z, y, y, cams, cams)
    return res["rank1"], res["mAP"]
