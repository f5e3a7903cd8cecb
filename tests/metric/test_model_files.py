"""Model files that would be wrong quietly: refused at load, one line naming file and field.

Each case saves a sound model with ``Metric.save``, damages one entry of the file as a
broken disk or a hand edit could, and loads it back through ``Metric.load``; then the
same through a workdir (the run redoes the split) and ``from_metric`` (an estimator never
answers as another method).
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from repo_configs import config_module

from warca_jax import methods
from warca_jax.data.synthetic import make_synthetic
from warca_jax.io.bounded_reads import EnvironmentSettingError
from warca_jax.metric import (
    DamagedModelError,
    KMeansMetric,
    Metric,
    NonFiniteEmbeddingError,
    SvmmlMetric,
)
from warca_jax.runs import pipeline

D = 5
_RNG = np.random.default_rng(0)
_W = _RNG.normal(size=(3, D)).astype(np.float32)
_SUPPORT = _RNG.uniform(size=(7, D)).astype(np.float32)
_A = _RNG.normal(size=(3, 7)).astype(np.float32)


def _models() -> dict[str, Metric]:
    return {
        "linear": Metric("linear", D, projection=_W, name="kissme"),
        "kernel": Metric(
            "kernel", D, projection=_A, support=_SUPPORT, kernel="rbf", gamma=0.5, name="warca"
        ),
        "svmml": SvmmlMetric(
            "svmml",
            D,
            mean=np.zeros(D, np.float32),
            components=np.ones((2, D), np.float32),
            a_mat=np.eye(2),
            b_mat=np.eye(2),
            c_vec=np.zeros(2),
            bias=0.5,
            name="svmml",
        ),  # fmt: skip
        "kmeans": KMeansMetric("kmeans", D, num_clusters=2, name="kmeans_nn"),
        "identity": Metric("identity", D, distance="cosine", name="nn_cosine"),
    }


def _saved(tmp_path, which: str):
    path = tmp_path / f"{which}.npz"
    _models()[which].save(path)
    return path


def _damage(path, meta=None, **arrays) -> None:
    """Rewrites the model file at ``path`` with ``meta`` entries and ``arrays`` replaced."""
    with np.load(path, allow_pickle=False) as f:
        entries = {k: f[k] for k in f.files}
    saved = json.loads(str(entries.pop("meta")))
    saved.update(meta or {})
    entries.update(arrays)
    np.savez(path, meta=np.asarray(json.dumps(saved)), **entries)


@pytest.mark.slow
def test_an_unusable_size_limit_is_blamed_on_the_variable_not_the_model(tmp_path, monkeypatch):
    path = _saved(tmp_path, "linear")
    monkeypatch.setenv("WARCA_JAX_MAX_ARRAY_BYTES", "abc")
    with pytest.raises(EnvironmentSettingError, match="WARCA_JAX_MAX_ARRAY_BYTES='abc'") as e:
        Metric.load(path)
    assert not isinstance(e.value, DamagedModelError)
    monkeypatch.delenv("WARCA_JAX_MAX_ARRAY_BYTES")
    assert Metric.load(path).name  # the file itself is healthy


def test_every_kind_round_trips(tmp_path):
    x = _RNG.uniform(size=(6, D)).astype(np.float32)
    for which, m in _models().items():
        back = Metric.load(_saved(tmp_path, which))
        assert type(back) is type(m) and back.name == m.name
        np.testing.assert_array_equal(back.pairwise_distances(x, x), m.pairwise_distances(x, x))


DAMAGES = {  # (model, meta changes, array changes, the field the message names)
    "empty-projection": ("linear", {}, {"projection": np.zeros((0, D), np.float32)}, "projection"),
    "empty-support": (
        "kernel", {}, {"support": np.zeros((0, D), np.float32), "projection": np.zeros((3, 0))},
        "support",
    ),
    "empty-components": (
        "svmml", {}, {"components": np.zeros((0, D), np.float32), "a_mat": np.zeros((0, 0)),
                      "b_mat": np.zeros((0, 0)), "c_vec": np.zeros(0)},
        "components",
    ),
    "projection-of-text": ("linear", {}, {"projection": np.full((3, D), "1")}, "projection"),
    "complex-projection": ("linear", {}, {"projection": _W * 1j}, "projection"),
    "nan-support": ("kernel", {}, {"support": _SUPPORT * np.nan}, "support"),
    "huge-input-scale": ("linear", {"input_scale": 1e300}, {}, "input_scale"),
    "tiny-input-scale": ("kernel", {"input_scale": 1e-300}, {}, "input_scale"),
    "int-beyond-float": ("linear", {"input_scale": 10**400}, {}, "input_scale"),
    "scale-not-a-number": ("linear", {"input_scale": "2"}, {}, "input_scale"),
    "feature-scale-not-power-of-two": ("linear", {"feature_scale": 3.0}, {}, "feature_scale"),
    "negative-gamma": ("kernel", {"gamma": -0.5}, {}, "gamma"),
    "unknown-kernel": ("kernel", {"kernel": "sigmoid"}, {}, "kernel"),
    "unknown-distance": ("linear", {"distance": "hamming"}, {}, "distance"),
    "input-dim-zero": ("identity", {"input_dim": 0}, {}, "input_dim"),
    "input-dim-float": ("identity", {"input_dim": 5.0}, {}, "input_dim"),
    "input-dim-bool": ("identity", {"input_dim": True}, {}, "input_dim"),
    "kind-a-list": ("linear", {"kind": ["linear"]}, {}, "kind"),
    "unknown-method": ("linear", {"name": "pickle_me"}, {}, "name"),
    "unnamed": ("linear", {"name": ""}, {}, "name"),
    "name-not-a-string": ("linear", {"name": 3}, {}, "name"),
    "method-of-another-kind": ("kernel", {"name": "kissme"}, {}, "kind"),
    "identity-as-warca": ("identity", {"name": "warca"}, {}, "kind"),
    "zero-clusters": ("kmeans", {"num_clusters": 0}, {}, "num_clusters"),
    "unknown-init": ("kmeans", {"init": "magic"}, {}, "init"),
    "bias-not-a-number": ("svmml", {"bias": [1]}, {}, "bias"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_a_model_file_that_would_be_wrong_quietly_is_refused(tmp_path, case):
    which, meta, arrays, field = DAMAGES[case]
    path = _saved(tmp_path, which)
    _damage(path, meta, **arrays)
    with pytest.raises(DamagedModelError) as err:
        methods.load_model(path)  # what a workdir's rerun reads a model with
    message = str(err.value)
    assert message.startswith(f"{path} is damaged") and "\n" not in message
    assert f"'{field}'" in message or f"['{field}']" in message, message


def test_a_model_of_no_registered_method_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"field 'name': 'mine' names no registered method"):
        methods.registered_method(Metric("linear", D, projection=_W, name="mine"))
    with pytest.raises(
        ValueError, match=r"field 'kind': method 'xqda' learns 'linear' metrics, not 'kernel'"
    ):
        methods.registered_method(
            Metric("kernel", D, projection=_A, support=_SUPPORT, kernel="rbf", name="xqda")
        )
    with pytest.raises(ValueError, match=r"field 'projection': shape \(0, 5\) has no rows"):
        Metric("linear", D, projection=np.zeros((0, D), np.float32), name="kissme")
    assert not list(tmp_path.iterdir())


def test_a_model_that_overflows_is_blamed_not_the_features(tmp_path):
    """Finite features whose embedding overflows: the message names the model (and its
    file), where the embeddings' own check named the features."""
    x = np.ones((4, D), np.float32)
    big = Metric("linear", D, projection=np.full((2, D), 1e30, np.float32), input_scale=1e9,
                 name="kissme")  # fmt: skip
    with pytest.raises(NonFiniteEmbeddingError, match=r"the kissme model .* maps finite features "
                       r"to 8 NaN or inf values.*model is at fault, not the features"):  # fmt: skip
        big.transform(x)
    path = tmp_path / "big.npz"
    big.save(path)  # finite, and its scale in range: only its use overflows
    with pytest.raises(ValueError, match=rf"loaded from {path}\) maps finite features"):
        Metric.load(path).pairwise_distances(x, x)
    huge = Metric("identity", D, feature_scale=2.0**1000, name="nn_euclidean")
    with pytest.raises(NonFiniteEmbeddingError, match="times the feature_scale 1.07151e"):
        huge.transform(x)
    # features far larger than float32 holds, for a model of features of ordinary size
    with pytest.raises(NonFiniteEmbeddingError, match=r"largest magnitude 1e\+300 times the "
                       r"feature_scale 1 of the kissme model .*not of the size"):  # fmt: skip
        big.transform(np.full((2, D), 1e300))
    svmml = _models()["svmml"]
    far = dataclasses_replace(svmml, components=np.full((2, D), 3e38, np.float32))
    with pytest.raises(NonFiniteEmbeddingError, match="the svmml model"):
        far.pairwise_distances(x, x)


def dataclasses_replace(metric, **changes):
    import dataclasses

    return dataclasses.replace(metric, **changes)


# ----------------------------------------------------------------------------- workdirs
def _kissme_run(tmp_path):
    f, lab, c = make_synthetic(num_ids=30, images_per_id=4, num_cams=2, dim=16, seed=0)
    np.savez(tmp_path / "data.npz", features=f, labels=lab, cams=c)
    config = config_module("kissme").get_config("small")
    config.unlock()
    config.data.name, config.data.path, config.data.num_splits = (
        "npz",
        str(tmp_path / "data.npz"),
        1,
    )
    config.eval.baseline = False
    return config


@pytest.mark.slow
@pytest.mark.parametrize(
    "meta, arrays, field",
    [
        ({}, {"projection": np.zeros((0, 16), np.float32)}, "projection"),
        ({"input_scale": 1e300}, {}, "input_scale"),
        ({"name": "warca", "kind": "kernel_distance"}, {}, "kernel"),
        ({"name": "nobody"}, {}, "name"),
    ],
    ids=["empty-projection", "huge-scale", "another-kind", "unknown-method"],
)
def test_a_damaged_model_in_a_workdir_is_redone(tmp_path, caplog, meta, arrays, field):
    config = _kissme_run(tmp_path)
    wd = tmp_path / "w"
    first = pipeline.train_and_evaluate(config, str(wd))
    model = wd / "model_split0.npz"
    _damage(model, meta, **arrays)
    with caplog.at_level(logging.WARNING):
        again = pipeline.train_and_evaluate(config, str(wd))
    assert "model_split0.npz cannot be reused" in caplog.text and f"'{field}'" in caplog.text
    assert again["mean"]["rank1"] == first["mean"]["rank1"]
    assert Metric.load(model).name == "kissme"  # the split was redone and its model rewritten


# ----------------------------------------------------------------------------- estimators
def test_from_metric_refuses_another_methods_model(tmp_path):
    """``WARCA.from_metric`` of a saved KISSME model would answer as WARCA with KISSME's
    distance: refused, naming both; the KISSME estimator (or ``MetricLearner``) takes it."""
    wsk = pytest.importorskip("warca_jax.sklearn")
    x, y, _ = make_synthetic(num_ids=12, images_per_id=4, num_cams=2, dim=16, seed=1)
    wsk.KISSME().fit(x, y).metric_.save(tmp_path / "kissme_model.npz")
    kissme = Metric.load(tmp_path / "kissme_model.npz")
    with pytest.raises(ValueError, match=r"model of method 'kissme' .*not of 'warca'"):
        wsk.WARCA.from_metric(kissme)
    with pytest.raises(ValueError, match=r"model of method 'kissme' .*not of 'lfda'"):
        wsk.MetricLearner.from_metric(kissme, method="lfda")
    est = wsk.KISSME.from_metric(kissme)
    assert type(est).__name__ == "KISSME" and est.metric_ is kissme
    assert wsk.MetricLearner.from_metric(kissme).method == "kissme"
    np.testing.assert_array_equal(est.transform(x[:3]), kissme.transform(x[:3]))
    unnamed = Metric("linear", 16, projection=np.eye(2, 16, dtype=np.float32))
    with pytest.raises(ValueError, match=r"from_metric: field 'name': '' names no registered"):
        wsk.MetricLearner.from_metric(unnamed)
    odd = Metric("identity", 16, name="kissme")  # an identity map is not KISSME's
    with pytest.raises(
        ValueError, match=r"field 'kind': method 'kissme' learns 'linear' .*not 'identity'"
    ):
        wsk.KISSME.from_metric(odd)
