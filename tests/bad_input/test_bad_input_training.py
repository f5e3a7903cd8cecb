"""No silent failure in training: bad input is a clear error before any work, a run that
degenerates is an error and never a model, and a model file is trusted only when whole.

Small problems and few steps throughout (the whole file runs in well under a minute).
"""

import importlib

import numpy as np
import pytest
from conftest import assert_refused_before_any_work, forbid
from repo_configs import config_module
from repo_configs import method_section as _method

from warca_jax import methods
from warca_jax.data.synthetic import make_synthetic
from warca_jax.maths import kernels
from warca_jax.methods import learner_loop, model_checks, warca
from warca_jax.methods.warca import lam_select
from warca_jax.metric import DamagedModelError, Metric

_SCALE_MSG = "cannot train on features of this scale"


def _warca(**overrides):
    base = dict(dim=6, num_iters=60, batch_size=64, log_every=20)
    return _method("warca", "linear", **{**base, **overrides})


def _problem(hist=False):
    """30 identities x 4 images, 16-d: identities 0-19 train, 20-29 test (gallery image 0)."""
    x, y, _ = make_synthetic(
        num_ids=30, images_per_id=4, dim=16, signal_dim=4, num_nuisance=2, histogram=hist, seed=0
    )
    train = y < 20
    test_x, test_y = x[~train], y[~train]
    first = np.r_[True, test_y[1:] != test_y[:-1]]
    return x[train], y[train], (test_x[~first], test_y[~first]), (test_x[first], test_y[first])


_PROBLEM = _problem()
_HIST_PROBLEM = _problem(hist=True)


def _rank1(metric, probes, gallery, scale=1.0, dtype=np.float32):
    """Rank-1 (%) of the metric's embeddings, ranked in float64 (no evaluation code)."""
    (xq, yq), (xg, yg) = probes, gallery
    eq = metric.transform((xq.astype(np.float64) * scale).astype(dtype)).astype(np.float64)
    eg = metric.transform((xg.astype(np.float64) * scale).astype(dtype)).astype(np.float64)
    d = ((eq[:, None, :] - eg[None, :, :]) ** 2).sum(-1)
    return 100.0 * np.mean(yg[np.argmin(d, axis=1)] == yq)


def _scaled(x, scale, dtype=np.float32):
    return (x.astype(np.float64) * scale).astype(dtype)


# ----------------------------------------------------------------------------- scale
@pytest.mark.slow
@pytest.mark.parametrize(
    "kernel, scale, dtype",
    [
        ("none", 1e-60, np.float64),  # below float32's range: was cast to zeros
        ("none", 1e60, np.float64),  # above it: was cast to inf
        ("linear", 1e-30, np.float32),  # K = X X^T underflowed to 0
        ("chi2", 1e30, np.float32),  # chi2 kernel overflowed
    ],
)
def test_warca_learns_the_same_metric_at_any_scale(kernel, scale, dtype):
    x, y, probes, gallery = _HIST_PROBLEM if kernel == "chi2" else _PROBLEM
    cfg = _warca(kernel=kernel)
    base, _ = warca.fit(x, y, cfg)
    metric, _ = warca.fit(_scaled(x, scale, dtype), y, cfg)
    want = _rank1(base, probes, gallery)
    assert want > 40
    assert _rank1(metric, probes, gallery, scale, dtype) == pytest.approx(want, abs=1.0)
    assert metric.feature_scale != 1.0 and np.isfinite(metric.projection).all()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["kissme", "xqda", "lfda"])
def test_scale_free_learners_give_the_same_ranking_at_1e_minus_30(name):
    x, y, probes, gallery = _PROBLEM
    cfg = _method(name, dim=4) if name == "lfda" else _method(name)
    fit = methods.get(name).fit
    want = _rank1(fit(x, y, cfg)[0], probes, gallery)
    metric, _ = fit(_scaled(x, 1e-30), y, cfg)
    assert _rank1(metric, probes, gallery, 1e-30) == pytest.approx(want, abs=1.0)


@pytest.mark.parametrize("name, scale", [("lmnn", 1e-30), ("frml", 1e30)])
def test_learners_with_a_fixed_margin_refuse_extreme_scales(name, scale):
    x, y, _, _ = _PROBLEM
    with pytest.raises(ValueError, match=f"{_SCALE_MSG}: their root mean squared norm is"):
        methods.get(name).validate(_scaled(x, scale), y, _method(name))


def test_warca_without_normalisation_refuses_extreme_scales():
    x, y, _, _ = _PROBLEM
    with pytest.raises(ValueError, match=f"{_SCALE_MSG}.*normalize='msd'"):
        warca.fit(_scaled(x, 1e-30), y, _warca(normalize="none"))


# ----------------------------------------------------------------------------- degenerate data
def test_all_zero_features_under_the_chi2_kernel_are_refused_not_a_3e15_model():
    _, y, _, _ = _HIST_PROBLEM
    x = np.zeros((len(y), 16), np.float32)
    with pytest.raises(ValueError, match=r"same feature vector \(all zeros\)"):
        warca.fit(x, y, _warca(kernel="chi2", normalize="none"))


def test_a_zero_chi2_kernel_matrix_is_refused_without_normalisation():
    x = np.zeros((8, 3), np.float32)
    with pytest.raises(ValueError, match="kernel matrix is all zeros"):
        warca.normalized_gram(kernels.gram_matrix(x, kernel="chi2")[0], normalize="none")


def test_features_equal_up_to_float32_rounding_are_refused():
    x, y, _, _ = _PROBLEM
    row = np.float32(1.0) + np.arange(16, dtype=np.float32)
    same = np.tile(row, (len(y), 1))
    same[::2, 0] = np.nextafter(row[0], np.float32(2))  # one ulp apart
    with pytest.raises(ValueError, match="same vector, up to float32 rounding"):
        warca.fit(same, y, _warca())


# ----------------------------------------------------------------------------- labels, features
@pytest.mark.parametrize(
    "labels, match",
    [
        (
            lambda y: np.where(np.arange(len(y)) < 3, np.nan, y.astype(float)),
            "3 values are not whole numbers",
        ),
        (lambda y: y + 0.5, "not whole numbers"),
        (lambda y: np.array([f"id{v}" for v in y]), "hold integers, got dtype <U"),
    ],
)
def test_bad_labels_are_refused_by_warca_fit(labels, match):
    x, y, _, _ = _PROBLEM
    with pytest.raises(ValueError, match=f"labels must .*{match}"):
        warca.fit(x, labels(y), _warca())


@pytest.mark.parametrize(
    "features, match",
    [
        (lambda x: x.astype(np.complex64), "real numbers.*complex64"),
        (lambda x: x[:0], r"empty \(shape \(0, 16\)\)"),
        (lambda x: x[:, :0], r"empty \(shape \(80, 0\)\)"),
    ],
)
def test_bad_features_are_refused_by_every_learner(features, match):
    x, y, _, _ = _PROBLEM
    bad = features(x)
    for name in ("warca", "kissme", "lmnn", "nn"):
        with pytest.raises(ValueError, match=match):
            methods.get(name).fit(bad, y[: len(bad)], _method(name))


@pytest.mark.parametrize(
    "name, field, value",
    [
        ("warca", "lam", float("nan")),
        ("warca", "kernel_gamma", float("nan")),
        ("warca", "margin", float("nan")),
        ("lmnn", "mu", float("nan")),
        ("frml", "lam", float("inf")),
        ("rpcca", "kernel_gamma", float("nan")),
        ("svmml", "lam", float("nan")),
        ("triplet_sgd", "margin", float("nan")),
        ("lfda", "reg", float("nan")),
        ("mlapg", "tol", float("nan")),
        ("pairwise_sgd", "momentum", float("nan")),
        ("kernel_nn", "kernel_gamma", float("nan")),
    ],
)
def test_non_finite_hyperparameters_are_refused_before_any_work(name, field, value):
    x, y, _, _ = _PROBLEM
    cfg = _method(name)
    if "dim" in cfg:
        cfg.dim = 4
    cfg[field] = value
    with pytest.raises(ValueError, match=rf"method\.{field} must be .*; got {value!r}"):
        methods.get(name).validate(x, y, cfg)


# ----------------------------------------------------------------------------- divergence
@pytest.mark.slow
def test_a_huge_learning_rate_is_a_divergence_error_not_a_model():
    x, y, _, _ = _PROBLEM
    with pytest.raises(
        model_checks.TrainingDivergedError, match=r"WARCA diverged by step 20: loss"
    ):
        methods.get("warca").fit(x, y, _warca(learning_rate=1e6))


def test_run_in_chunks_refuses_a_loss_that_blows_up():
    losses = iter([2.0, 30.0, 5e6])
    with pytest.raises(
        model_checks.TrainingDivergedError, match="step 30: loss 5e.06 is more than"
    ):
        learner_loop.run_in_chunks(
            lambda done, n: {"loss": next(losses)}, num_iters=30, chunk=10, method="m"
        )


def test_run_in_chunks_measures_the_first_row_against_the_reference():
    with pytest.raises(RuntimeError, match=r"m diverged by step 10.*lower learning_rate \(now 9\)"):
        learner_loop.run_in_chunks(
            lambda done, n: {"loss": 1e9},
            num_iters=10,
            chunk=10,
            method="m",
            reference_loss=1.0,
            hint="lower learning_rate (now 9)",
        )


@pytest.mark.parametrize(
    "projection, match",
    [
        (np.zeros((2, 16), np.float32), "projection is all zeros"),
        (
            np.full((2, 16), np.nan, np.float32),
            r"non-finite model \(NaN or inf in \['projection'\]",
        ),
        (np.full((2, 16), 3e38, np.float32), "not finite"),  # embeddings overflow
        (np.eye(2, 16, 10, dtype=np.float32), "maps 64 different training samples to one"),
    ],
)
def test_check_model_refuses_an_unusable_model(projection, match):
    x, _, _, _ = _PROBLEM
    x = x.copy()
    x[:, 10:] = 0  # the last 6 dimensions carry nothing
    metric = Metric("linear", x.shape[1], projection=projection, name="fake")
    with pytest.raises(model_checks.TrainingDivergedError, match=match):
        model_checks.check_model(metric, method="fake", features=x)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(methods.registry()))
def test_every_learner_checks_the_model_it_returns(name, monkeypatch):
    """Each learner's fit ends in check_model, with the training features, on the very model
    it returns (the registry hands out the learners' own fit, unwrapped)."""
    seen = []
    check = model_checks.check_model

    def spy(metric, *, method, features=None, hint="lower learning_rate"):
        seen.append((metric, features))
        return check(metric, method=method, features=features, hint=hint)

    monkeypatch.setattr(model_checks, "check_model", spy)
    method = methods.get(name)
    variant = "small" if "small" in method.variants else method.variants[0]
    cfg = method.default_config(variant)
    if name in ("pairwise_sgd", "triplet_sgd"):
        cfg.num_val_ids = 4
    x, y, _, _ = _HIST_PROBLEM if name == "kernel_nn" else _PROBLEM  # chi2: histograms
    metric, _ = methods.call_fit(method, x, y, cfg, seed=0)
    # LMNN fits twice by default: first without held-out identities, to choose its number
    # of steps (that model is checked too, on the features it saw), then on all of them.
    fits = 2 if name == "lmnn" and cfg.stop_val_fraction > 0 else 1
    if name == "warca" and cfg.lam is None:  # the held-out lambdas' models at each rung
        rungs = lam_select.rungs(cfg.num_iters, cfg.log_every, len(cfg.lam_grid))
        fits = len(cfg.lam_grid) + sum(keep for _, keep in rungs[:-1]) + 1
    assert len(seen) == fits, f"{name}: check_model ran {len(seen)} times"
    assert seen[-1][0] is metric
    assert seen[-1][1] is not None and np.shape(seen[-1][1]) == x.shape
    assert all(s[1] is not None and np.shape(s[1])[1] == x.shape[1] for s in seen)


# ----------------------------------------------------------------------------- model files
def _saved(tmp_path):
    m = Metric("linear", 3, projection=np.eye(2, 3, dtype=np.float32), name="warca")
    path = tmp_path / "m.npz"
    m.save(path)
    return path


def test_a_model_file_with_nan_weights_is_refused(tmp_path):
    path = tmp_path / "nan.npz"
    Metric("linear", 3, projection=np.eye(2, 3, dtype=np.float32), name="warca").save(path)
    with np.load(path) as f:
        arrays = dict(f)
    arrays["projection"] = np.full((2, 3), np.nan, np.float32)
    np.savez(path, **arrays)
    with pytest.raises(
        DamagedModelError, match=r"nan.npz is damaged.*NaN or inf in \['projection'\]"
    ):
        Metric.load(path)


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # truncated
        lambda b: b[:40] + bytes(v ^ 0xFF for v in b[40:200]) + b[200:],  # corrupt archive
        lambda b: b"projection = [[1, 0, 0], [0, 1, 0]]\n",  # a text file
    ],
)
def test_a_damaged_model_file_is_a_damaged_model_error(tmp_path, damage):
    path = _saved(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(DamagedModelError, match="m.npz is damaged .truncated or corrupt. or not a"):
        Metric.load(path)


def test_an_npz_without_the_model_entries_is_a_damaged_model_error(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, weights=np.ones((2, 3)))
    with pytest.raises(DamagedModelError, match="no 'meta' entry"):
        Metric.load(path)
    assert issubclass(DamagedModelError, ValueError)


def test_training_data_check_is_shared_and_rescales_only_extreme_features():
    checks = importlib.import_module("warca_jax.methods.checks")
    x, y, _, _ = _PROBLEM
    ok = checks.training_data(x, y, method="m")
    assert ok.scale == 1.0 and ok.x is x and ok.y.dtype == np.int64
    tiny = checks.training_data(_scaled(x, 1e-30), y, method="m")
    assert np.frexp(tiny.scale)[0] == 0.5 and 0.5 < checks.feature_size(tiny.x) < 2


# --------------------------------------------------------------- config errors, named


def _run_config(**method):
    config = config_module("warca").get_config("small")
    config.unlock()
    config.method.update(method)
    return config


@pytest.mark.parametrize(
    "method, message",
    [
        (dict(kernel="rbff"), r"^config\.method\.kernel: unknown kernel 'rbff'; expected"),
        (dict(penalty="l2"), r"^config\.method\.penalty: unknown penalty 'l2'; expected"),
        (dict(dim=1000), r"^config\.method\.dim: output dim must be in \[1, 64\]"),
        (dict(num_iters=0), r"^config\.method\.num_iters must be >= 1 \(an integer\); got 0"),
    ],
    ids=["kernel", "penalty", "dim", "num_iters"],
)
def test_a_bad_method_value_names_its_field_before_any_work(method, message, tmp_path, monkeypatch):
    from warca_jax.runs import pipeline

    forbid(monkeypatch, methods, "call_fit", "fitted despite a bad config value")
    config = _run_config(**method)
    assert_refused_before_any_work(pipeline.train_and_evaluate, config, tmp_path / "w", message)


def test_bad_training_data_is_named_by_its_split(tmp_path, monkeypatch):
    from warca_jax import datasets
    from warca_jax.runs import pipeline

    real = datasets.from_config

    def with_nan(cfg, **kwargs):
        dataset = real(cfg, **kwargs)
        dataset.features[dataset.splits[0].train_idx[0], 0] = np.nan
        return dataset

    monkeypatch.setattr(datasets, "from_config", with_nan)
    with pytest.raises(ValueError, match=r"^synthetic split 0: features hold 1 NaN or inf"):
        pipeline.train_and_evaluate(_run_config(), str(tmp_path / "w"))


def test_switching_method_name_names_the_fields_the_other_method_needs(tmp_path, monkeypatch):
    from warca_jax import datasets
    from warca_jax.runs import pipeline

    forbid(
        monkeypatch, datasets, "from_config", "data loaded for a method section of another method"
    )
    with pytest.raises(ValueError) as info:
        pipeline.train_and_evaluate(_run_config(name="lfda"), str(tmp_path / "w"))
    msg = str(info.value)
    assert msg.startswith(
        "config.method.name is 'lfda' but the method section is warca's: lfda needs the "
        "fields ['dim', 'embedding', 'kernel', 'kernel_gamma', 'knn', 'name', 'reg', 'reg_scale', "
        "'span'] "
        "(missing: embedding, knn, reg, reg_scale; unknown to lfda: batch_size, candidate_pool, "
    ), msg
    assert msg.endswith("); start from configs/lfda.py"), msg
    with pytest.raises(ValueError, match=r"^config\.method\.name: unknown method 'warcaa'"):
        pipeline.train_and_evaluate(_run_config(name="warcaa"), str(tmp_path / "w"))
    assert not (tmp_path / "w").exists()


def _entry_point(*args):
    import subprocess
    import sys

    from processes import ROOT, cpu_env

    return subprocess.run(
        [sys.executable, "-m", "experiments.main", "--config=configs/warca.py:small", *args],
        cwd=ROOT, env=cpu_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "override, line",
    [
        (
            "--config.method.kernel=rbff",
            "error: config.method.kernel: unknown kernel 'rbff'; expected 'none' or one of",
        ),
        (
            "--config.method.name=lfda",
            "error: config.method.name is 'lfda' but the method section is warca's: lfda "
            "needs the fields",
        ),
    ],
    ids=["kernel", "method-name"],
)
def test_a_bad_config_value_on_the_command_line_is_one_line(tmp_path, override, line):
    proc = _entry_point(f"--workdir={tmp_path / 'w'}", override)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(line), proc.stderr[-3000:]
    assert not (tmp_path / "w").exists()
