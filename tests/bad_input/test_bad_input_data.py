"""Bad input to the data layer, the command line and workdirs: refused clearly, or repaired.

Each case is what a user could do (a damaged file, a wrong option, a killed run) and
asserts the exception type and a fragment of its message, or the correct result.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import zipfile

import fixture_trees
import numpy as np
import pytest
from conftest import assert_refused_before_any_work, forbid
from processes import cpu_env
from repo_configs import ROOT, config_module

from experiments import main as _main  # noqa: F401 - defines the --config flag cli reads
from warca_jax import datasets, features
from warca_jax.data.synthetic import make_synthetic
from warca_jax.datasets import npz_file
from warca_jax.io import run_files, writes
from warca_jax.metric import Metric
from warca_jax.runs import cli, pipeline
from warca_jax.runs.defaults import overridden

nn_config = config_module("nn")
warca_config = config_module("warca")

REPO = ROOT


@pytest.fixture(scope="module")
def arrays():
    return make_synthetic(num_ids=40, images_per_id=4, num_cams=2, dim=16, seed=0)


@pytest.fixture
def good_npz(tmp_path, arrays):
    f, lab, c = arrays
    path = tmp_path / "good.npz"
    np.savez(path, features=f, labels=lab, cams=c)
    return str(path)


def _save(tmp_path, name="bad.npz", **arrays):
    path = tmp_path / name
    np.savez(path, **arrays)
    return str(path)


# ----------------------------------------------------------------------------- files


def test_empty_dataset_file(tmp_path):
    path = tmp_path / "empty.npz"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty \(0 bytes\).*numpy.savez"):
        npz_file.load_npz(path)


def test_truncated_dataset_file(tmp_path, good_npz):
    with open(good_npz, "rb") as f:
        blob = f.read()
    path = tmp_path / "cut.npz"
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ValueError, match="damaged or truncated"):
        npz_file.load_npz(path)


def test_text_file_as_dataset(tmp_path):
    path = tmp_path / "notes.npz"
    path.write_text("features, labels, cams\n1, 2, 3\n")
    with pytest.raises(ValueError, match=r"not a numpy file.*expected a \.npz archive"):
        npz_file.load_npz(path)


def test_one_bare_array_as_dataset(tmp_path):
    path = tmp_path / "bare.npz"
    with open(path, "wb") as f:
        np.save(f, np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"one unnamed array of shape \(4, 3\)"):
        npz_file.load_npz(path)


def test_ragged_split_array(tmp_path, arrays):
    f, lab, c = arrays
    ragged = np.array([np.arange(3), np.arange(5)], dtype=object)
    with pytest.raises(ValueError, match=r"'train_idx' holds Python objects.*ragged"):
        npz_file.load_npz(
            _save(tmp_path, features=f, labels=lab, cams=c, train_idx=ragged,
                  query_idx=np.arange(2), gallery_idx=np.arange(2)),
        )  # fmt: skip


def test_missing_key(tmp_path, arrays):
    f, _, c = arrays
    with pytest.raises(KeyError, match=r"missing key 'labels'.*required"):
        npz_file.load_npz(_save(tmp_path, features=f, cams=c))


def test_folder_given_as_npz(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a folder; data.name=npz reads one .npz"):
        npz_file.load_npz(tmp_path)


def test_missing_dataset_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset file not found"):
        npz_file.load_npz(tmp_path / "nowhere.npz")


@pytest.mark.parametrize(
    "change, error, fragment",
    [
        (lambda f, lab, c: (np.where(np.arange(f.size).reshape(f.shape) == 5, np.nan, f), lab, c),
         ValueError, "features must be finite"),
        (lambda f, lab, c: (f.astype(np.float64) * 1e300, lab, c),
         ValueError, r"must fit in float32 .*divide the features by a common scale"),
        (lambda f, lab, c: (f.astype(np.complex64), lab, c), ValueError, "real numbers"),
        (lambda f, lab, c: (f.astype(str), lab, c), ValueError, "real numbers"),
        (lambda f, lab, c: (f[:, 0], lab, c), ValueError, r"2-D \[N, D\]"),
        (lambda f, lab, c: (f[:0], lab[:0], c[:0]), ValueError, r"features are empty \(shape"),
        (lambda f, lab, c: (f, lab.astype(str), c), ValueError, "must hold integers"),
        (lambda f, lab, c: (f, lab + 0.5, c), ValueError, "not whole numbers"),
        (lambda f, lab, c: (f, np.where(np.arange(len(lab)) == 3, np.nan, lab), c),
         ValueError, "not whole numbers"),
        (lambda f, lab, c: (f, lab[:-1], c), ValueError, "same length"),
        (lambda f, lab, c: (f, np.arange(len(lab)), c), ValueError, "positive pairs"),
    ],
    ids=["nan", "beyond-float32", "complex", "strings", "1-D", "empty", "string-labels",
         "half-labels", "nan-label", "short-labels", "singletons"],
)  # fmt: skip
def test_bad_arrays(tmp_path, arrays, change, error, fragment):
    f, lab, c = change(*arrays)
    with pytest.raises(error, match=fragment):
        npz_file.load_npz(_save(tmp_path, features=f, labels=lab, cams=c))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.float16, np.float64, bool])
def test_feature_dtypes_are_read_as_float32(tmp_path, arrays, dtype):
    f, lab, c = arrays
    raw = (f > 0) if dtype is bool else (f * 10).astype(dtype)
    ds = npz_file.load_npz(_save(tmp_path, features=raw, labels=lab, cams=c), num_splits=1)
    assert ds.features.dtype == np.float32
    np.testing.assert_array_equal(ds.features, raw.astype(np.float32))


def _fixed(arrays, tmp_path, **split):
    f, lab, c = arrays
    return npz_file.load_npz(_save(tmp_path, features=f, labels=lab, cams=c, **split))


def _idx(lab, ids):
    return np.flatnonzero(np.isin(lab, ids))


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda lab: (_idx(lab, range(20)), _idx(lab, range(20, 40))[::2],
                      np.r_[_idx(lab, range(20, 40))[1::2], 0]), "overlap"),
        (lambda lab: (_idx(lab, range(20)), _idx(lab, range(20, 40)),
                      np.r_[_idx(lab, range(20, 40)), 999]), "out of range"),
        (lambda lab: (_idx(lab, range(20)), np.r_[_idx(lab, range(20, 40))[:3], 80],
                      np.r_[_idx(lab, range(20, 40))[3:]]), "duplicated index"),
        (lambda lab: (_idx(lab, range(20)), _idx(lab, range(20, 40))[:0],
                      _idx(lab, range(20, 40))), "query_idx is empty"),
        (lambda lab: (_idx(lab, range(20)), _idx(lab, range(20, 40))[:4] - 1000,
                      _idx(lab, range(20, 40))[4:]), "negative index"),
    ],
    ids=["train-in-test", "out-of-range", "duplicate", "empty-query", "negative"],
)  # fmt: skip
def test_bad_fixed_splits(tmp_path, arrays, make, fragment):
    tr, q, g = make(arrays[1])
    with pytest.raises(ValueError, match=fragment):
        _fixed(arrays, tmp_path, train_idx=tr, query_idx=q, gallery_idx=g)


def test_some_split_keys_only(tmp_path, arrays):
    with pytest.raises(KeyError, match=r"all three keys; missing \['gallery_idx'\]"):
        _fixed(arrays, tmp_path, train_idx=np.arange(4), query_idx=np.arange(4, 8))


def test_splits_disagree_on_their_number(tmp_path, arrays):
    lab = arrays[1]
    tr, te = _idx(lab, range(20)), _idx(lab, range(20, 40))
    with pytest.raises(ValueError, match=r"disagree on the number of splits S: \[2, 1, 1\]"):
        _fixed(arrays, tmp_path, train_idx=np.stack([tr, tr]), query_idx=te[None, ::2],
               gallery_idx=te[None, 1::2])  # fmt: skip


def test_feature_file_takes_the_test_identity_count():
    """data.num_test_ids reaches the feature-file reader (it was silently dropped)."""
    cfg = _data_cfg(name="features", num_test_ids=10, num_splits=1)
    f, lab, c = make_synthetic(num_ids=40, images_per_id=4, num_cams=2, dim=16, seed=0)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cfg.path = os.path.join(tmp, "f.npz")
        np.savez(cfg.path, features=f, labels=lab, cams=c)
        ds = datasets.from_config(cfg)
    (split,) = ds.splits
    assert len(np.unique(ds.labels[split.query_idx])) == 10


def test_no_query_with_a_cross_camera_match(tmp_path, arrays):
    f, lab, _ = arrays
    with pytest.raises(ValueError, match="no query has a match to find"):
        npz_file.load_npz(_save(tmp_path, features=f, labels=lab, cams=np.zeros_like(lab)))


# ---------------------------------------------------------------------------- config


def _data_cfg(**overrides):
    return overridden(nn_config.get_config("small").data, **overrides)


def test_path_with_synthetic_data_is_refused(good_npz):
    with pytest.raises(ValueError, match="data.name='synthetic' reads no file"):
        datasets.from_config(_data_cfg(path=good_npz))


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (dict(num_test_ids=100), "num_test_ids=100 exceeds the 60 identities"),
        (dict(num_train_ids=61), "num_train_ids=61 exceeds the 60 identities"),
        (dict(num_test_ids=59), "only 1 of the 60 are left: lower num_test_ids"),
        (dict(num_test_ids=-3), "identity counts must be >= 0"),
        (dict(num_splits=0), "num_splits must be a positive int; got 0"),
        (dict(name="markets1501", path="x"), "unknown dataset name 'markets1501'; valid names"),
        (dict(name="viper", path="x", loader_options={"variants": 1}), "takes no option"),
    ],
    ids=["test-ids", "train-ids", "one-train-id", "negative", "no-splits", "typo", "options"],
)
def test_bad_data_config(overrides, fragment):
    with pytest.raises(ValueError, match=fragment):
        datasets.from_config(_data_cfg(**overrides))


@pytest.mark.slow
def test_unknown_config_field_on_the_command_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "experiments.main", "--config=configs/nn.py:small",
         f"--workdir={tmp_path}", "--config.method.distanse=cosine"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "error: --config.method.distanse=cosine: unknown config field 'distanse' in "
        "config.method (did you mean 'distance'?); its fields are distance, name"
    ]
    assert "distance, " in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("--config.method.lam.x=1", "config.method.lam is a value (None), not a section"),
        ("--config.optim.lr=1", "unknown config field 'optim' in config; its fields are"),
        ("--config.data.synthetic.num_id=3", "unknown config field 'num_id' in config.data"),
        ("--config.method.lamda=1", "'lamda' in config.method (did you mean 'lam'?); its"),
    ],
)
def test_unknown_config_field_is_explained(override, fragment, capsys):
    argv = ["main", "--config=configs/warca.py:small", "--workdir=/tmp/x", override]
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        assert fragment in cli._unknown_field(argv)
    finally:
        os.chdir(cwd)


# --------------------------------------------------------------------------- workdirs


def _nn_config(path, **method):
    c = nn_config.get_config("small")
    c.unlock()
    c.data.name, c.data.path, c.data.num_splits = "npz", path, 2
    c.method.update(method)
    return c


def _warca_config(path):
    c = warca_config.get_config("small")
    c.unlock()
    c.data.name, c.data.path, c.data.num_splits = "npz", path, 2
    c.method.num_iters, c.method.log_every = 20, 10
    c.eval.baseline = False
    return c


def test_workdir_that_is_a_file(tmp_path, good_npz):
    target = tmp_path / "results"
    target.write_text("")
    with pytest.raises(NotADirectoryError, match="exists and is not a folder"):
        pipeline.train_and_evaluate(_nn_config(good_npz), str(target))


def test_workdir_under_a_file(tmp_path, good_npz):
    (tmp_path / "f").write_text("")
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        pipeline.train_and_evaluate(_nn_config(good_npz), str(tmp_path / "f" / "run"))


@pytest.mark.slow
def test_workdir_of_another_config(tmp_path, good_npz):
    pipeline.train_and_evaluate(_nn_config(good_npz), str(tmp_path / "w"))
    with pytest.raises(ValueError, match="holds a run with a different config"):
        pipeline.train_and_evaluate(_nn_config(good_npz, distance="cosine"), str(tmp_path / "w"))


@pytest.mark.slow
def test_workdir_on_changed_data(tmp_path, good_npz, arrays):
    pipeline.train_and_evaluate(_nn_config(good_npz), str(tmp_path / "w"))
    f, lab, c = arrays
    np.savez(good_npz, features=f * 2 + 1, labels=lab, cams=c)
    with pytest.raises(ValueError, match=r"good.npz changed since that run"):
        pipeline.train_and_evaluate(_nn_config(good_npz), str(tmp_path / "w"))


def test_workdir_on_the_same_data_touched(tmp_path, good_npz):
    first = pipeline.train_and_evaluate(_nn_config(good_npz), str(tmp_path / "w"))
    os.utime(good_npz, ns=(1, 1))  # same bytes, new mtime: still the same data
    assert pipeline.train_and_evaluate(_nn_config(good_npz), str(tmp_path / "w")) == first


def test_damaged_config_file(tmp_path, good_npz):
    wd = tmp_path / "w"
    pipeline.train_and_evaluate(_nn_config(good_npz), str(wd))
    text = (wd / "config.json").read_text()
    (wd / "config.json").write_text(text[: len(text) // 2])
    damaged = r"config.json: the config file .* damaged"
    with pytest.raises(run_files.DamagedFileError, match=damaged):
        pipeline.train_and_evaluate(_nn_config(good_npz), str(wd))


@pytest.fixture(scope="module")
def finished(tmp_path_factory, arrays):
    """A finished two-split WARCA workdir and its results, to damage and resume."""
    root = tmp_path_factory.mktemp("finished")
    f, lab, c = arrays
    np.savez(root / "data.npz", features=f, labels=lab, cams=c)
    results = pipeline.train_and_evaluate(_warca_config(str(root / "data.npz")), str(root / "w"))
    return root, results


def _copy(finished, tmp_path):
    import shutil

    root, results = finished
    shutil.copy(root / "data.npz", tmp_path / "data.npz")
    shutil.copytree(root / "w", tmp_path / "w")
    cfg = json.loads((tmp_path / "w" / "config.json").read_text())
    cfg["data"]["path"] = str(tmp_path / "data.npz")
    (tmp_path / "w" / "config.json").write_text(json.dumps(cfg, indent=1, sort_keys=True))
    (tmp_path / "w" / "data.json").unlink()
    return tmp_path / "w", _warca_config(str(tmp_path / "data.npz")), results


def _nan_model(wd):
    path = wd / "model_split1.npz"
    with np.load(path) as z:
        arrays = dict(z)
    arrays["projection"] = arrays["projection"] * np.nan
    np.savez(path, **arrays)


def _deep_meta_model(wd):
    """model_split1.npz whose JSON meta nests 5000 levels (a RecursionError to json)."""
    path = wd / "model_split1.npz"
    with np.load(path) as z:
        arrays = dict(z)
    arrays["meta"] = np.asarray("[" * 5000 + "]" * 5000)
    np.savez(path, **arrays)


def _huge_model(wd):
    """model_split1.npz whose projection declares 300000 x 300000 floats in 64 bytes."""
    path = wd / "model_split1.npz"
    with np.load(path) as z:
        arrays = dict(z)
    with zipfile.ZipFile(path, "w") as zf:
        for name, a in arrays.items():
            buf = io.BytesIO()
            if name == "projection":
                header = {"descr": "<f4", "fortran_order": False, "shape": (300000, 300000)}
                np.lib.format.write_array_header_1_0(buf, header)
                buf.write(bytes(64))
            else:
                np.save(buf, a)
            zf.writestr(name + ".npy", buf.getvalue())


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda wd: (wd / "split_1.json").write_text(
            (wd / "split_1.json").read_text().replace('"rank1": ', '"rank1": NaN, "x": ')),
         "'rank1' is not finite"),
        (lambda wd: (wd / "split_1.json").write_text((wd / "split_0.json").read_text()),
         "results of split 0, not of split 1"),
        (lambda wd: (wd / "split_1.json").write_text((wd / "split_1.json").read_text()[:200]),
         "split_1.json: the file is damaged"),
        (lambda wd: (wd / "split_1.json").write_text('{"split": 1}'), "'rank1' is missing"),
        (lambda wd: (wd / "model_split1.npz").write_bytes(
            (wd / "model_split1.npz").read_bytes()[:500]), "model_split1.npz cannot be reused"),
        (_nan_model, "model_split1.npz cannot be reused"),
        (lambda wd: (wd / "model_split1.npz").unlink(), "model_split1.npz is missing"),
        (_deep_meta_model, "'meta' entry is nested 5000 levels deep"),
        (_huge_model, "array 'projection' declares a float32 array of shape (300000, 300000)"),
    ],
    ids=["nan", "other-split", "truncated", "incomplete", "cut-model", "nan-model", "no-model",
         "deep-meta-model", "huge-model"],
)  # fmt: skip
def test_damaged_split_files_are_redone(tmp_path, finished, damage, reason, caplog):
    wd, config, results = _copy(finished, tmp_path)
    damage(wd)
    with caplog.at_level(logging.WARNING):
        again = pipeline.train_and_evaluate(config, str(wd))
    assert reason in caplog.text
    for key in ("rank1", "mAP", "mINP", "AUC"):
        assert again["mean"][key] == results["mean"][key]
    assert again["cmc"] == results["cmc"]
    assert json.loads((wd / "split_1.json").read_text())["split"] == 1


@pytest.mark.slow
def test_cut_metrics_line_is_dropped_on_resume(tmp_path, finished, caplog):
    wd, config, results = _copy(finished, tmp_path)
    (wd / "split_1.json").unlink()
    with open(wd / "metrics.jsonl", "a") as f:
        f.write('{"split": 1, "ste')
    with caplog.at_level(logging.WARNING):
        again = pipeline.train_and_evaluate(config, str(wd))
    assert "metrics.jsonl line" in caplog.text and "damaged; dropping it" in caplog.text
    assert again["mean"]["rank1"] == results["mean"]["rank1"]
    rows = [json.loads(line) for line in (wd / "metrics.jsonl").read_text().splitlines()]
    assert sorted({r["split"] for r in rows}) == [0, 1]


@pytest.mark.slow
def test_workdir_leaves_no_temporary_files(finished):
    root, _ = finished
    names = set(os.listdir(root / "w"))
    assert names >= {
        "cmc.png", "config.json", "data.json", "metrics.jsonl", "model_split0.npz",
        "model_split1.npz", "results.json", "split_0.json", "split_1.json",
    }  # fmt: skip
    # only the run's files and figures: no temporary (".<stem>.<pid>.tmp...") file left
    assert not [n for n in names if n.startswith(".") or ".tmp" in n], names
    assert all(n.endswith((".json", ".jsonl", ".npz", ".png")) for n in names), names


def test_non_utf8_paths(tmp_path, arrays):
    name = os.fsdecode(b"caf\xe9")
    f, lab, c = arrays
    path = tmp_path / f"{name}.npz"
    np.savez(path, features=f, labels=lab, cams=c)
    res = pipeline.train_and_evaluate(_nn_config(str(path)), str(tmp_path / f"{name}-run"))
    again = pipeline.train_and_evaluate(_nn_config(str(path)), str(tmp_path / f"{name}-run"))
    assert res["cmc"] == again["cmc"] and 0 < res["mean"]["rank1"] <= 100


# ------------------------------------------------------------------------ the helpers


def test_write_json_refuses_nan(tmp_path):
    with pytest.raises(ValueError, match=r"non-finite number \(nan\) at splits\[1\].rank1"):
        run_files.write_json(str(tmp_path / "r.json"), {"splits": [{}, {"rank1": float("nan")}]})
    assert not os.listdir(tmp_path)


def test_interrupted_write_keeps_the_old_file(tmp_path):
    path = str(tmp_path / "r.json")
    run_files.write_json(path, {"a": 1})
    with pytest.raises(KeyboardInterrupt), writes.atomic_path(path) as tmp:
        with open(tmp, "w") as f:
            f.write('{"a": ')
        raise KeyboardInterrupt
    assert run_files.read_json(path) == {"a": 1} and os.listdir(tmp_path) == ["r.json"]


# ---------------------------------------------------------------------- feature cache


@pytest.fixture
def image_paths(tmp_path):
    return fixture_trees.random_images(tmp_path, 3, 32, 16)


def _cut(path, n):
    with open(path, "rb") as f:
        head = f.read(n)
    with open(path, "wb") as f:
        f.write(head)


def _extract(paths, cache):
    return features.extract(paths, height=32, width=16, batch_size=4, cache_dir=cache)


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda p: np.save(p, np.full(np.load(p).shape, np.nan, np.float32)), "checksum"),
        (lambda p: _cut(p, 100), "is damaged"),
        (lambda p: np.save(p, np.zeros((2, 2), np.float32)), "expected float32"),
    ],
    ids=["nan", "truncated", "wrong-shape"],
)
def test_damaged_feature_cache_is_recomputed(tmp_path, image_paths, damage, reason, caplog):
    cache = tmp_path / "cache"
    first = _extract(image_paths, cache)
    (stored,) = [f for f in os.listdir(cache) if f.endswith(".npy")]
    damage(str(cache / stored))
    with caplog.at_level(logging.WARNING):
        again = _extract(image_paths, cache)
    assert reason in caplog.text
    np.testing.assert_array_equal(again, first)
    np.testing.assert_array_equal(np.load(cache / stored), first)


@pytest.mark.slow
def test_read_only_feature_cache(tmp_path, image_paths, caplog, monkeypatch):
    def refuse(*args, **kwargs):  # what a read-only folder answers (root is never refused)
        raise PermissionError(13, "Permission denied", str(tmp_path / "cache"))

    monkeypatch.setattr(writes, "atomic_path", refuse)
    with caplog.at_level(logging.WARNING):
        out = _extract(image_paths, tmp_path / "cache")
    assert "not written" in caplog.text and "Permission denied" in caplog.text
    assert out.shape[0] == 3 and np.isfinite(out).all()


def test_metric_of_a_damaged_workdir_file_is_refused(tmp_path):
    path = tmp_path / "m.npz"
    path.write_bytes(b"PK\x03\x04 cut")
    with pytest.raises((ValueError, OSError)):
        Metric.load(path)


@pytest.mark.parametrize("batch_size", [0, -2, 2.5, True])
def test_a_batch_size_below_one_is_refused_before_any_work(
    tmp_path, image_paths, batch_size, monkeypatch
):
    forbid(
        monkeypatch, features.image_files, "load_images", "images loaded despite a bad batch size"
    )
    with pytest.raises(
        ValueError, match=r"data\.batch_size must be an integer >= 1 \(images .*\); got"
    ):
        features.extract(image_paths, height=32, width=16, batch_size=batch_size)
    with pytest.raises(
        ValueError, match=r"data\.batch_size must be an integer >= 1 \(images .*\); got"
    ):
        features.extract_arrays(np.zeros((2, 32, 16, 3), np.uint8), batch_size=batch_size)


@pytest.mark.parametrize("batch_size", [0, -1])
def test_a_bad_data_batch_size_is_refused_by_the_driver_before_any_work(
    tmp_path, good_npz, batch_size, monkeypatch
):
    forbid(monkeypatch, datasets, "from_config", "data loaded despite a bad data.batch_size")
    c = _nn_config(good_npz)
    c.data.batch_size = batch_size
    message = r"^config\.data\.batch_size must be an integer >= 1"
    assert_refused_before_any_work(pipeline.train_and_evaluate, c, tmp_path / "w", message)


# ------------------------------------------------------------------ one-line errors


def test_an_empty_workdir_is_refused_before_any_work(good_npz, monkeypatch):
    with pytest.raises(ValueError, match="workdir is empty"):
        run_files.prepare("")

    forbid(monkeypatch, datasets, "from_config", "data loaded for an empty workdir")
    with pytest.raises(ValueError, match="workdir is empty"):
        pipeline.train_and_evaluate(_nn_config(good_npz), "")


def _main_process(*args):
    return subprocess.run(
        [sys.executable, "-m", "experiments.main", *args],
        cwd=REPO, env=cpu_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
def test_an_empty_workdir_flag_is_one_clear_line(tmp_path):
    proc = _main_process("--config=configs/nn.py:small", "--workdir=")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "--workdir is empty: give the folder" in proc.stderr, proc.stderr[-2000:]


def _raise_from_the_library(argv):
    from warca_jax import methods

    methods.get("warcaa")


def _raise_from_numpy(argv):
    np.linalg.inv(np.ones((2, 3)))  # a bug of ours: a ValueError raised inside numpy


def test_a_library_value_error_is_one_line_and_a_third_party_one_keeps_its_traceback(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.one_line_errors(_raise_from_the_library)(["main"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err == "error: unknown method 'warcaa'; expected one of " + err.split("one of ")[1]
    assert err.count("\n") == 1
    with pytest.raises(np.linalg.LinAlgError):
        cli.one_line_errors(_raise_from_numpy)(["main"])


@pytest.mark.parametrize(
    "message, argv, named",
    [
        (
            "unknown kernel 'rbff'",
            ["--config.warca.kernel=rbff", "--config.seed=1"],
            "config.warca.kernel: unknown kernel 'rbff'",
        ),
        ("unknown kernel 'rbff'", ["--config.seed=1"], "unknown kernel 'rbff'"),
        (
            "kernel and seed disagree",
            ["--config.warca.kernel=rbf", "--config.seed=1"],
            "kernel and seed disagree",
        ),
        ("max_rank must be >= 1", ["--config.max_rank=0"], "max_rank must be >= 1"),
        ("config.a: bad", ["--config.a=0"], "config.a: bad"),
        (
            "/w holds another run: method.distance 'a' -> 'b'",
            ["--config.method.distance=b"],
            "/w holds another run: method.distance 'a' -> 'b'",
        ),
    ],
    ids=["one", "none", "several", "already-named", "config-prefix", "named-inside"],
)
def test_a_message_that_names_no_field_is_led_by_its_override(message, argv, named):
    assert cli.name_override(message, ["main", "--config=configs/x.py", *argv]) == named


@pytest.mark.slow
def test_the_traceback_flag_shows_the_traceback(tmp_path):
    proc = _main_process(
        "--config=configs/warca.py:small", f"--workdir={tmp_path}", "--config.method.kernel=rbff",
        "--traceback",
    )  # fmt: skip
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr
    assert "ValueError: config.method.kernel: unknown kernel 'rbff'" in proc.stderr
    assert "\nerror:" not in proc.stderr


# ---------------------------------------------------------- a workdir of another config


def test_a_workdir_of_another_config_names_the_fields_that_differ(tmp_path, good_npz):
    pipeline.train_and_evaluate(_nn_config(good_npz), str(tmp_path / "w"))
    other = _nn_config(good_npz, distance="cosine")
    other.seed = 3
    with pytest.raises(
        ValueError,
        match=r"holds a run with a different config .*: method\.distance 'euclidean' -> "
        r"'cosine', seed 0 -> 3; use a new workdir",
    ):
        pipeline.train_and_evaluate(other, str(tmp_path / "w"))


def test_presentation_fields_do_not_make_another_config(tmp_path, good_npz):
    first = pipeline.train_and_evaluate(_nn_config(good_npz), str(tmp_path / "w"))
    again = _nn_config(good_npz)
    again.progress = not again.progress
    again.eval.plot_max_rank = 7
    assert pipeline.train_and_evaluate(again, str(tmp_path / "w")) == first


def test_the_feature_cache_folder_does_not_make_another_config(tmp_path):
    old = {"data": {"cache_dir": "/tmp/wcache", "batch_size": 8}, "progress": True}
    moved = {"data": {"cache_dir": "", "batch_size": 8}, "progress": True}
    run_files.check_run_files(str(tmp_path), json.dumps(old), {})
    run_files.check_run_files(str(tmp_path), json.dumps(moved), {})  # accepted: same run
    assert run_files.config_differences(old, moved) == []
    other = {"data": {"cache_dir": "", "batch_size": 9}, "progress": True}
    with pytest.raises(ValueError, match=r"data\.batch_size 8 -> 9") as info:
        run_files.check_run_files(str(tmp_path), json.dumps(other), {})
    assert "cache_dir" not in str(info.value)


def test_a_field_added_since_a_run_resumes_it_at_the_earlier_value(tmp_path):
    """A workdir recorded before data.skip_small_images existed is the run with it False
    (what those runs did), and another run with it True."""
    earlier = {"data": {"name": "viper", "batch_size": 8}, "progress": True}
    now = {"data": {"name": "viper", "batch_size": 8, "skip_small_images": False}}
    assert run_files.config_differences(earlier, now) == []
    run_files.check_run_files(str(tmp_path), json.dumps(earlier), {})
    run_files.check_run_files(str(tmp_path), json.dumps(now), {})  # accepted: the same run
    skipping = {"data": {"name": "viper", "batch_size": 8, "skip_small_images": True}}
    with pytest.raises(ValueError, match=r"data\.skip_small_images False -> True"):
        run_files.check_run_files(str(tmp_path), json.dumps(skipping), {})


def test_many_differences_are_named_a_few_at_a_time(tmp_path):
    old = {"a": 1, "b": {"c": [1, 2], "d": "x"}, "e": 1.5, "f": True, "g": None, "progress": 1}
    new = {"a": 2, "b": {"c": [1, 3], "d": "y"}, "e": 2.5, "f": False, "h": 0, "progress": 2}
    run_files.check_run_files(str(tmp_path), json.dumps(old), {})
    with pytest.raises(ValueError) as info:
        run_files.check_run_files(str(tmp_path), json.dumps(new), {})
    msg = str(info.value)
    assert "a 1 -> 2, b.c [1, 2] -> [1, 3], b.d 'x' -> 'y' and 4 more (e, f, g, h)" in msg
    assert "progress" not in msg
    assert run_files.config_differences(old, new, ignore=("a", "b", "e", "f", "progress")) == [
        "g None -> (absent)",
        "h (absent) -> 0",
    ]


@pytest.mark.slow
def test_an_npz_with_other_key_names_is_one_line_on_the_command_line(tmp_path):
    path = tmp_path / "mine.npz"
    np.savez(path, feats=np.ones((10, 3), np.float32), ids=np.arange(10))
    out = subprocess.run(
        [sys.executable, "-m", "experiments.main", "--config=configs/warca.py",
         f"--workdir={tmp_path}/w", "--config.data.name=npz", f"--config.data.path={path}"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"error: {path}: missing key 'features'; keys present: ['feats', 'ids']; required: "
        "['features', 'labels']; optional: 'cams' (one camera per image without it); "
        "optional (all three or none): ['train_idx', 'query_idx', 'gallery_idx']"
    ]
