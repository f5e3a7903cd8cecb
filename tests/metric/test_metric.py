"""Metric: transform, save/load round trip, refusals."""

import numpy as np
import pytest

from warca_jax.maths import kernels
from warca_jax.metric import DamagedModelError, Metric


def test_linear_and_kernel_transform_and_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(20, 6)).astype(np.float32)
    w = rng.normal(size=(3, 6)).astype(np.float32)
    lin = Metric("linear", 6, projection=w, name="warca")
    np.testing.assert_allclose(lin.transform(x, block_size=7), x @ w.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin.mahalanobis_matrix(), w.T @ w, rtol=1e-6)

    support = rng.uniform(size=(11, 6)).astype(np.float32)
    a = rng.normal(size=(3, 11)).astype(np.float32)
    ker = Metric(
        "kernel", 6, projection=a, support=support, kernel="chi2_rbf", gamma=0.3, name="lfda"
    )
    expected = np.asarray(kernels.kernel_matrix(x, support, kernel="chi2_rbf", gamma=0.3)) @ a.T
    np.testing.assert_allclose(ker.transform(x), expected, rtol=1e-5, atol=1e-6)

    for m in (lin, ker):
        path = tmp_path / f"{m.kind}.npz"
        m.save(path)
        back = Metric.load(path)
        assert (back.kind, back.kernel, back.gamma, back.name) == (
            m.kind,
            m.kernel,
            m.gamma,
            m.name,
        )
        np.testing.assert_array_equal(back.transform(x), m.transform(x))


def test_transform_checks_its_input():
    m = Metric("linear", 4, projection=np.eye(2, 4, dtype=np.float32))
    with pytest.raises(ValueError, match=r"shape \[n, 4\]"):
        m.transform(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="NaN"):
        m.transform(np.full((3, 4), np.nan))
    k = Metric("kernel", 2, projection=np.ones((1, 3)), support=np.ones((3, 2)), kernel="chi2")
    with pytest.raises(ValueError, match="non-negative"):
        k.transform(-np.ones((2, 2)))


def test_non_finite_metric_is_never_saved(tmp_path):
    w = np.array([[np.nan, 1.0]], np.float32)
    m = Metric("linear", 2, projection=w)
    with pytest.raises(FloatingPointError, match="non-finite"):
        m.save(tmp_path / "m.npz")
    assert not list(tmp_path.iterdir())


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no saved metric"):
        Metric.load(tmp_path / "missing.npz")
    np.savez(tmp_path / "other.npz", a=np.ones(2))
    with pytest.raises(DamagedModelError, match="not a saved Metric"):
        Metric.load(tmp_path / "other.npz")
    with pytest.raises(ValueError, match="support vectors"):
        Metric("kernel", 2, projection=np.ones((1, 3)))


@pytest.mark.slow
def test_kernel_distance_is_the_feature_space_distance():
    rng = np.random.default_rng(3)
    x = rng.uniform(size=(6, 5)).astype(np.float32)
    y = rng.uniform(size=(4, 5)).astype(np.float32)
    m = Metric("kernel_distance", 5, kernel="rbf", gamma=0.5)
    d2 = ((x[:, None] - y[None]) ** 2).sum(-1)
    np.testing.assert_allclose(
        m.pairwise_distances(x, y), np.sqrt(2 - 2 * np.exp(-0.5 * d2)), rtol=1e-4, atol=1e-5
    )
    # The additive chi2 kernel's feature-space distance is the chi2 distance.
    c = Metric("kernel_distance", 5, kernel="chi2")
    chi2 = ((x[:, None] - y[None]) ** 2 / (x[:, None] + y[None])).sum(-1)
    np.testing.assert_allclose(c.pairwise_distances(x, y) ** 2, chi2, rtol=1e-4, atol=1e-5)
    lin = Metric("linear", 5, projection=rng.normal(size=(2, 5)).astype(np.float32))
    e = x @ lin.projection.T, y @ lin.projection.T
    np.testing.assert_allclose(
        lin.pairwise_distances(x, y),
        np.linalg.norm(e[0][:, None] - e[1][None], axis=-1),
        rtol=1e-4,
        atol=1e-5,
    )


def test_subclass_kinds_round_trip(tmp_path, monkeypatch):
    import dataclasses

    from warca_jax import methods

    # a new kind comes with the learner that returns it (its ``Method.kinds``)
    learner = methods.Method(None, None, None, (), kinds=("test_scaled",))
    monkeypatch.setitem(methods.registry(), "s", learner)

    @dataclasses.dataclass(frozen=True)
    class Scaled(Metric):
        KIND = "test_scaled"
        scale: np.ndarray | None = None
        label: str = ""

        def pairwise_distances(self, x, y):
            return np.abs(x[:, :1] * self.scale[0] - y[:, 0] * self.scale[0])

    m = Scaled("test_scaled", 2, scale=np.array([3.0], np.float32), label="x", name="s")
    m.save(tmp_path / "s.npz")
    back = Metric.load(tmp_path / "s.npz")
    assert type(back) is Scaled and back.label == "x"
    np.testing.assert_array_equal(back.scale, m.scale)
    with pytest.raises(ValueError, match="unknown metric kind"):
        Scaled("linear", 2)


def test_input_scale_is_applied_at_transform_and_survives_save(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(3, 5)).astype(np.float32)
    x = rng.normal(size=(7, 5)).astype(np.float32)
    m = Metric("linear", 5, projection=w, input_scale=0.25, name="warca")
    np.testing.assert_allclose(m.transform(x), 0.25 * x @ w.T, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.mahalanobis_matrix(), 0.0625 * w.T @ w, rtol=1e-6)
    m.save(tmp_path / "m.npz")
    back = Metric.load(tmp_path / "m.npz")
    assert back.input_scale == 0.25
    np.testing.assert_allclose(back.transform(x), m.transform(x))
    for bad in (0.0, -1.0, float("nan"), float("inf"), 1e300, 1e-300, 10**400, True, "1"):
        with pytest.raises(ValueError, match="input_scale"):
            Metric("linear", 5, projection=w, input_scale=bad)


@pytest.mark.parametrize(
    "features, dtype",
    [
        (np.array([["a", "b"], ["c", "d"]]), "<U1"),
        (np.array([[1.0, "x"]], dtype=object), "object"),
        (np.array([[1 + 2j, 0j]]), "complex128"),
    ],
    ids=["strings", "objects", "complex"],
)
def test_transform_refuses_features_that_are_not_numbers(features, dtype):
    m = Metric("linear", 2, projection=np.eye(2, dtype=np.float32))
    with pytest.raises(ValueError, match=rf"numeric features .*got an array of dtype {dtype}"):
        m.transform(features)
    with pytest.raises(ValueError, match=rf"dtype {dtype}"):
        Metric("identity", 2).transform(features)


def test_integer_and_boolean_features_are_numbers():
    m = Metric("linear", 2, projection=np.eye(2, dtype=np.float32))
    np.testing.assert_array_equal(m.transform(np.array([[1, 2]], np.int64)), [[1.0, 2.0]])
    np.testing.assert_array_equal(m.transform(np.array([[True, False]])), [[1.0, 0.0]])


def _rewrite_meta(path, **changes):
    import json

    with np.load(path) as f:
        entries = {k: f[k] for k in f.files}
    meta = json.loads(str(entries.pop("meta")))
    meta.update(changes)
    np.savez(path, meta=np.asarray(json.dumps(meta)), **entries)


def test_a_projection_that_does_not_match_input_dim_is_refused(tmp_path):
    w = np.ones((3, 5), np.float32)
    with pytest.raises(ValueError, match=r"projection of shape \(3, 5\).*input_dim 4"):
        Metric("linear", 4, projection=w)
    with pytest.raises(ValueError, match=r"projection must be a 2-D .*shape \(5,\)"):
        Metric("linear", 5, projection=np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"support vectors of shape \(3, 2\).*input_dim 6"):
        Metric("kernel", 6, projection=np.ones((1, 3)), support=np.ones((3, 2)), kernel="rbf")
    path = tmp_path / "m.npz"
    Metric("linear", 5, projection=w, name="kissme").save(path)
    _rewrite_meta(path, input_dim=7)  # the model no longer matches its input dimension
    with pytest.raises(
        DamagedModelError, match=r"m.npz is damaged.*projection of shape \(3, 5\).*input_dim 7"
    ):
        Metric.load(path)


def test_an_svmml_model_whose_arrays_do_not_fit_is_refused():
    from warca_jax.metric import SvmmlMetric

    good = dict(
        mean=np.zeros(4, np.float32),
        components=np.ones((2, 4), np.float32),
        a_mat=np.eye(2),
        b_mat=np.eye(2),
        c_vec=np.zeros(2),
    )
    SvmmlMetric("svmml", 4, **good)
    with pytest.raises(ValueError, match=r"mean of shape \(5,\) .* do not match its input_dim 4"):
        SvmmlMetric("svmml", 4, **{**good, "mean": np.zeros(5, np.float32)})
    with pytest.raises(ValueError, match=r"components \(2, 4\).*do not fit input_dim 5"):
        SvmmlMetric("svmml", 5, **{**good, "mean": np.zeros(5, np.float32)})
    with pytest.raises(ValueError, match=r"A \(3, 3\).*expected \[p, 4\], \[p, p\]"):
        SvmmlMetric("svmml", 4, **{**good, "a_mat": np.eye(3)})
