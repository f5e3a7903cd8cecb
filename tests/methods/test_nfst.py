"""NFST (methods/nfst.py) against its definition: the null space of the within-class scatter
inside the range of the total scatter, c - 1 dimensions in the small-sample case."""

import numpy as np
import pytest

from warca_jax.methods import nfst
from warca_jax.metric import Metric

NUM_IDS, PER_ID = 10, 3


def _data(d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(NUM_IDS), PER_ID)
    centres = 2.0 * rng.standard_normal((NUM_IDS, d))
    x = centres[y] + rng.standard_normal((NUM_IDS * PER_ID, d))
    return x.astype(np.float32), y


def _scatters(e: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(trace S_w, trace S_b) of the projections ``e`` [N, m], computed directly."""
    e = np.asarray(e, np.float64)
    means = np.stack([e[y == k].mean(axis=0) for k in np.unique(y)])
    within = float(np.sum((e - means[np.searchsorted(np.unique(y), y)]) ** 2))
    counts = np.array([np.sum(y == k) for k in np.unique(y)])
    between = float(np.sum(counts[:, None] * (means - e.mean(axis=0)) ** 2))
    return within, between


@pytest.mark.parametrize(
    "variant,d",
    [("linear", 50), ("rbf", 5), ("rbf", 50), ("chi2", 8)],
)
def test_the_projected_training_data_have_no_within_class_scatter(variant, d):
    x, y = _data(d)
    if variant == "chi2":
        x = np.abs(x)  # histogram-like: the chi2 kernel needs non-negative features
    metric, history = nfst.fit(x, y, nfst.default_config(variant))
    assert history == []
    # the small-sample case: N = 30 images span 29 dimensions, S_w has rank N - c = 20
    assert metric.output_dim == NUM_IDS - 1
    within, between = _scatters(metric.transform(x), y)
    assert between > 1e-3 and within < 1e-6 * between


def test_the_linear_form_has_orthonormal_rows_in_the_span():
    x, y = _data(50)
    metric, _ = nfst.fit(x, y, nfst.default_config("linear"))
    w = np.asarray(metric.projection, np.float64)
    np.testing.assert_allclose(w @ w.T, np.eye(NUM_IDS - 1), atol=1e-5)
    # each direction lies in the span of the centred training features
    xc = x.astype(np.float64) - x.mean(axis=0)
    coef, *_ = np.linalg.lstsq(xc.T, w.T, rcond=None)
    np.testing.assert_allclose(xc.T @ coef, w.T, atol=1e-5)


def test_the_linear_kernel_form_gives_the_linear_forms_distances():
    x, y = _data(50)
    cfg = nfst.default_config("rbf")
    cfg.kernel = "linear"
    kernel_form, _ = nfst.fit(x, y, cfg)
    linear, _ = nfst.fit(x, y, nfst.default_config("linear"))
    assert kernel_form.kind == "kernel" and linear.kind == "linear"
    np.testing.assert_allclose(
        kernel_form.pairwise_distances(x[:6], x),
        linear.pairwise_distances(x[:6], x),
        rtol=1e-3,
        atol=1e-2,  # float32 squared distances of size 10-20 cancel to about 4e-3
    )


def test_the_null_space_map_matches_its_definition_on_a_kernel_matrix():
    """A K A^T-free check: the directions B in the span's coordinates Z are orthonormal and
    Z_w B = 0 (the within-class coordinates vanish along them)."""
    x, y = _data(40)
    gram = x.astype(np.float64) @ x.astype(np.float64).T
    a = nfst.null_space_map(gram, y, span_rtol=1e-10, null_rtol=1e-8)
    e = a @ gram  # [m, N]: the projections of the training points
    within, between = _scatters(e.T, y)
    assert a.shape == (NUM_IDS - 1, len(y)) and within < 1e-9 * between
    vals, vecs = nfst.centred_kernel_eigenpairs(gram, 1e-10)
    assert len(vals) == len(y) - 1  # centring removes one direction
    np.testing.assert_allclose(vecs.T @ np.ones(len(y)), 0.0, atol=1e-8)


def test_the_linear_form_outside_the_small_sample_case_is_refused_before_any_work():
    x, y = _data(10)  # N - c = 20 >= D = 10: S_w has full rank, no null space
    with pytest.raises(ValueError, match=r"small-sample case.*20 >= D = 10.*kernel form"):
        nfst.fit(x, y, nfst.default_config("linear"))


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("kernel", "gauss", "kernel"),
        ("span_rtol", 0.0, "span_rtol"),
        ("null_rtol", 1.0, "null_rtol"),
        ("kernel_gamma", -1.0, "kernel_gamma"),
    ],
)
def test_bad_settings_are_named(field, value, match):
    x, y = _data(5)
    cfg = nfst.default_config("rbf")
    cfg[field] = value
    with pytest.raises(ValueError, match=match):
        nfst.fit(x, y, cfg)


def test_same_data_same_model_and_it_survives_save_and_load(tmp_path):
    x, y = _data(6)
    first, _ = nfst.fit(x, y, nfst.default_config("rbf"))
    second, _ = nfst.fit(x, y, nfst.default_config("rbf"))
    np.testing.assert_array_equal(first.projection, second.projection)
    first.save(tmp_path / "nfst.npz")
    loaded = Metric.load(tmp_path / "nfst.npz")
    np.testing.assert_array_equal(loaded.transform(x), first.transform(x))
