"""The checks the learners' tests share: same seed same result, a refusal, a divergence,
the row that says why a fit stopped, and a scikit-learn pipeline's 1-NN accuracy with and
without a learner (conftest.py: the problems they run on)."""

import numpy as np
import pytest

from warca_jax.data.synthetic import make_synthetic


def assert_same_seed_same_result(fit, x, y, cfg, *, apart=None):
    """``fit(x, y, cfg, seed=3)`` twice gives the same projection and the same logged losses;
    with ``apart`` (``np.allclose`` or ``np.array_equal``: how close counts as the same), a
    fit with seed 4 gives a projection it tells apart from seed 3's (other draws). Returns
    seed 3's (metric, history)."""
    a, ha = fit(x, y, cfg, seed=3)
    b, hb = fit(x, y, cfg, seed=3)
    np.testing.assert_array_equal(a.projection, b.projection)
    assert [r["loss"] for r in ha] == [r["loss"] for r in hb]
    if apart is not None:
        c, _ = fit(x, y, cfg, seed=4)
        assert not apart(a.projection, c.projection)
    return a, ha


def assert_refused(fit, x, y, cfg, match: str) -> None:
    """``fit(x, y, cfg)`` raises a ValueError whose message matches ``match``."""
    with pytest.raises(ValueError, match=match):
        fit(x, y, cfg)


def assert_diverges(fit, x, y, cfg, match: str) -> None:
    """``fit(x, y, cfg)`` raises a FloatingPointError (it diverged) matching ``match``: an
    error, never a model."""
    with pytest.raises(FloatingPointError, match=match):
        fit(x, y, cfg)


def fit_to_the_stop(fit, x, y, cfg, **kw) -> list[dict]:
    """The history of ``fit(x, y, cfg, **kw)``, once checked that its last row, and only
    that one, says why the fit stopped, and that the log's last row says the same."""
    rows = []
    _, hist = fit(x, y, cfg, log_fn=rows.append, **kw)
    assert ["stopped" in r for r in hist] == [False] * (len(hist) - 1) + [True]
    assert rows[-1]["stopped"] == hist[-1]["stopped"]
    return hist


def split_problem():
    """40 identities x 6 images, 24-d, the first 2 images of each held out: (train x, train
    y, test x, test y), what the learners' scikit-learn pipelines are scored on."""
    x, y, _ = make_synthetic(
        num_ids=40, images_per_id=6, dim=24, signal_dim=4, num_nuisance=3, seed=0
    )
    test = np.tile([True, True, False, False, False, False], 40)
    return x[~test], y[~test], x[test], y[test]


def knn_accuracies(estimator, x_train, y_train, x_test, y_test) -> tuple[float, float]:
    """The test accuracies of scaling -> ``estimator`` -> 1-NN and of scaling -> 1-NN, each
    fitted on the training images (``estimator`` is fitted in place)."""
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipe = make_pipeline(StandardScaler(), estimator, KNeighborsClassifier(1))
    plain = make_pipeline(StandardScaler(), KNeighborsClassifier(1))
    pipe.fit(x_train, y_train)
    plain.fit(x_train, y_train)
    return pipe.score(x_test, y_test), plain.score(x_test, y_test)
