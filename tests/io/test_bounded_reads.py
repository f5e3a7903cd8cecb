"""Files whose headers declare more than they hold, or more than the machine can hold, are
refused before anything is allocated, in one line naming the file (warca_jax.io.bounded_reads):
a small .npz declaring a huge array, a zip bomb, a model with a huge or deeply nested
meta, and deeply nested or oversized JSON in a workdir. Arrays read within the limits are
exactly what numpy.load gives."""

from __future__ import annotations

import io
import json
import logging
import os
import tracemalloc
import zipfile

import numpy as np
import pytest

from warca_jax.datasets import cuhk03, npz_file
from warca_jax.io import bounded_reads, run_files, workdir_lock
from warca_jax.metric import DamagedModelError, Metric
from warca_jax.protocol import jobs
from warca_jax.runs import pipeline

ENV = bounded_reads.MAX_ARRAY_BYTES_ENV
HUGE = (300000, 300000)


def _npy_header(shape, descr="<f8") -> bytes:
    buf = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue()


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _archive(path, members: dict, compression=zipfile.ZIP_STORED):
    """A .npz of raw members: name -> the bytes of its .npy."""
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, raw in members.items():
            zf.writestr(name + ".npy", raw)
    return str(path)


def _dataset_members():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(6), 4)
    return {
        "features": _npy(rng.normal(size=(24, 5)).astype(np.float32)),
        "labels": _npy(labels),
        "cams": _npy(np.tile([0, 1], 12)),
    }


def _one_line(err) -> str:
    msg = str(err.value)
    assert "\n" not in msg, msg
    return msg


def test_a_small_dataset_file_declaring_a_huge_array_is_refused_naming_it(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)  # the default budget: half the physical memory
    members = {**_dataset_members(), "features": _npy_header(HUGE) + bytes(64)}
    path = _archive(tmp_path / "small.npz", members)
    assert os.path.getsize(path) < 5000
    with pytest.raises(ValueError) as err:
        npz_file.load_npz(path)
    msg = _one_line(err)
    assert f"{path}: array 'features' declares a float64 array of shape {HUGE}" in msg
    assert "720000000000 bytes" in msg


def test_the_budget_names_the_limit_and_the_variable_that_raises_it(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "1e9")
    members = {**_dataset_members(), "features": _npy_header(HUGE) + bytes(64)}
    path = _archive(tmp_path / "small.npz", members)
    with pytest.raises(bounded_reads.ArrayTooLargeError) as err:
        npz_file.load_npz(path)
    msg = _one_line(err)
    assert path in msg and "'features'" in msg and str(HUGE) in msg
    assert "more than the 1000000000 bytes" in msg and f"set {ENV}" in msg
    assert "refused before allocating it" in msg


def test_a_stored_member_must_hold_what_its_header_declares(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "1e12")  # within the budget: the member's size refuses it
    members = {**_dataset_members(), "features": _npy_header((1000, 1000)) + bytes(64)}
    path = _archive(tmp_path / "short.npz", members)
    with pytest.raises(ValueError) as err:
        npz_file.load_npz(path)
    msg = _one_line(err)
    assert f"{path}: array 'features' declares a float64 array of shape (1000, 1000)" in msg
    assert "but holds 64 bytes of data" in msg


def test_a_negative_dimension_is_refused_naming_the_array(tmp_path):
    members = {**_dataset_members(), "labels": _npy_header((-24,), "<i8")}
    path = _archive(tmp_path / "negative.npz", members)
    with pytest.raises(ValueError) as err:
        npz_file.load_npz(path)
    assert f"{path}: array 'labels' declares a negative dimension" in _one_line(err)


def _bomb(path, size: int, compression) -> str:
    """A .npz whose 'features' member inflates to ``size`` bytes of zeros."""
    rows = size // (8 * 1000)
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, raw in _dataset_members().items():
            if name != "features":
                zf.writestr(name + ".npy", raw)
        with zf.open("features.npy", "w", force_zip64=True) as f:
            f.write(_npy_header((rows, 1000)))
            zero = bytes(1 << 20)
            left = rows * 1000 * 8
            while left:
                f.write(zero[: min(left, len(zero))])
                left -= min(left, len(zero))
    return str(path)


def test_a_zip_bomb_is_refused_by_its_declared_size_without_inflating_it(tmp_path, monkeypatch):
    path = _bomb(tmp_path / "bomb.npz", 16 << 20, zipfile.ZIP_DEFLATED)
    assert os.path.getsize(path) < (16 << 20) // 500
    monkeypatch.setenv(ENV, str(4 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(bounded_reads.ArrayTooLargeError) as err:
            npz_file.load_npz(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # nothing of the declared 16 MiB was allocated
    assert path in _one_line(err) and "'features'" in str(err.value)


def test_a_member_inflating_beyond_what_numpy_writes_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "1e12")  # within the budget: the expansion refuses it
    path = _bomb(tmp_path / "bomb.npz", 4 << 20, zipfile.ZIP_BZIP2)
    with pytest.raises(ValueError) as err:
        npz_file.load_npz(path)
    msg = _one_line(err)
    assert f"{path}: array 'features' inflates from" in msg and "decompression bomb" in msg


@pytest.mark.parametrize("value", ["lots", "-5", "0", "nan"])
def test_a_bad_budget_variable_is_named(tmp_path, monkeypatch, value):
    monkeypatch.setenv(ENV, value)
    path = _archive(tmp_path / "ok.npz", _dataset_members())
    with pytest.raises(ValueError, match=rf"{ENV}='{value}': expected a positive number"):
        npz_file.load_npz(path)


ARRAYS = {
    "float32": np.arange(12, dtype=np.float32).reshape(3, 4),
    "fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
    "big-endian": np.arange(6, dtype=">i4").reshape(2, 3),
    "scalar": np.asarray(7),
    "empty": np.zeros((0, 5), np.float32),
    "text": np.asarray('{"kind": "linear"}'),
    "bool": np.array([True, False]),
    "complex": np.array([1 + 2j]),
    "3-d": np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
}


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["stored", "deflated"])
def test_arrays_within_the_limits_read_as_numpy_load_reads_them(tmp_path, save):
    path = str(tmp_path / "a.npz")
    save(path, **ARRAYS)
    with open(path, "rb") as fh, bounded_reads.load(fh, path) as z:
        assert z.files == list(ARRAYS)
        for name, a in ARRAYS.items():
            got = z[name]
            assert got.dtype == a.dtype and got.shape == a.shape, name
            assert got.flags.f_contiguous == a.flags.f_contiguous or a.ndim < 2, name
            np.testing.assert_array_equal(got, a)


def _model(tmp_path) -> str:
    path = str(tmp_path / "model.npz")
    Metric("linear", 3, projection=np.eye(2, 3, dtype=np.float32), name="warca").save(path)
    return path


def _replace_members(path, **members):
    with np.load(path) as z:
        raw = {k: _npy(z[k]) for k in z.files}
    raw.update(members)
    _archive(path, raw)


def test_a_model_declaring_a_huge_array_is_damaged_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "1e9")
    path = _model(tmp_path)
    _replace_members(path, projection=_npy_header(HUGE) + bytes(64))
    with pytest.raises(DamagedModelError) as err:
        Metric.load(path)
    msg = _one_line(err)
    assert f"{path}: array 'projection' declares" in msg and str(HUGE) in msg


def _deep(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize(
    "meta, reason",
    [
        (_deep(100000), "nested 100000 levels deep, more than the 32 allowed"),
        ('{"kind": "linear", "x": ' + "7" * 5000 + "}", "a value Python cannot read"),
        ('"' + "x" * (1 << 20) + '"', "longer than 1048576 characters"),
    ],
    ids=["deep", "long-number", "huge"],
)
def test_a_model_with_a_hostile_meta_is_damaged_naming_it(tmp_path, meta, reason):
    path = _model(tmp_path)
    _replace_members(path, meta=_npy(np.asarray(meta)))
    with pytest.raises(DamagedModelError) as err:
        Metric.load(path)
    msg = _one_line(err)
    assert msg.startswith(f"{path} is damaged") and "'meta' entry" in msg and reason in msg


SOUND_META = json.dumps({"kind": "identity", "input_dim": 3, "name": "nn"})


def _finished_split(wd, model_meta: str, **record) -> None:
    """A workdir whose split 0 has sound results (with ``record``) and a model with
    ``model_meta``."""
    os.makedirs(wd, exist_ok=True)
    split = {"split": 0, "cmc": [50.0, 100.0], **{k: 50.0 for k in pipeline.SUMMARY_KEYS}}
    split.update(record)
    run_files.write_json(os.path.join(wd, "split_0.json"), split)
    path = os.path.join(wd, "model_split0.npz")
    Metric("identity", 3, name="nn").save(path)
    _replace_members(path, meta=_npy(np.asarray(model_meta)))


def test_a_finished_split_whose_model_meta_is_deeply_nested_is_redone(tmp_path, caplog):
    wd = str(tmp_path / "w")
    _finished_split(wd, SOUND_META)
    assert pipeline.reuse_split(wd, 0) is not None  # sound: reused
    _finished_split(str(tmp_path / "w2"), _deep(5000))
    with caplog.at_level(logging.WARNING):
        assert pipeline.reuse_split(str(tmp_path / "w2"), 0) is None
    assert "model_split0.npz cannot be reused" in caplog.text and "redoing split 0" in caplog.text
    assert "nested 5000 levels deep" in caplog.text


def test_the_protocol_redoes_a_run_job_whose_model_meta_is_deeply_nested(tmp_path, caplog):
    folder = str(tmp_path / "job")
    job = dict(kind="run", dataset="d", label="m", split=0, folder=folder)
    job.update(config_sha256="c", data_sha256="x", failed=os.path.join(folder, "failed.json"))
    job["result"] = os.path.join(folder, "split_0.json")
    _finished_split(folder, SOUND_META, **jobs.identity(job))
    assert jobs.outcome(job)[0] == "done"
    _finished_split(folder, _deep(5000), **jobs.identity(job))
    with caplog.at_level(logging.WARNING):
        assert jobs.outcome(job) is None  # no outcome: the job runs again
    assert "model_split0.npz cannot be reused" in caplog.text and "nested 5000" in caplog.text


def test_a_deeply_nested_workdir_file_is_damaged_and_redone(tmp_path, caplog):
    path = tmp_path / "split_0.json"
    path.write_text(_deep(100000))
    with pytest.raises(run_files.DamagedFileError) as err:
        run_files.read_json(str(path), what="split file")
    msg = _one_line(err)
    assert msg.startswith(f"{path}: the split file is nested 100000 levels deep")
    with caplog.at_level(logging.WARNING):
        assert run_files.reuse_json(str(path)) is None
    assert f"{path}: the file is nested" in caplog.text and "redoing it" in caplog.text


def test_an_oversized_workdir_file_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    monkeypatch.setattr(bounded_reads, "MAX_FILE_JSON_BYTES", 1000)
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"cmc": list(range(1000))}))
    with pytest.raises(run_files.DamagedFileError) as err:
        run_files.read_json(str(path))
    assert _one_line(err).startswith(f"{path}: the file is larger than 1000 bytes")


def test_a_deeply_nested_metrics_line_is_dropped(tmp_path, caplog):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"split": 0, "step": 1}\n' + _deep(100000) + '\n{"split": 0, "step": 2}\n')
    with caplog.at_level(logging.WARNING):
        rows = run_files.read_jsonl(str(path))
    assert [r["step"] for r in rows] == [1, 2] and "line 2 is damaged" in caplog.text


def test_a_deeply_nested_lock_file_still_names_no_holder():
    assert "has not yet written" in workdir_lock._describe(_deep(3000))


def test_a_deeply_nested_cuhk03_feature_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "feature_data.json"
    path.write_text(_deep(100000))
    with pytest.raises(ValueError) as err:
        cuhk03.read_feature_json(str(path), num_rows=2)
    assert _one_line(err).startswith(f"{path}: the feature file is nested 100000 levels")


def test_json_depth_counts_brackets_outside_strings_only():
    assert bounded_reads.json_depth('{"a": [1, "[[[[", {"b": "\\"[["}]}') == 3
    assert bounded_reads.json_depth("7") == 0
    assert bounded_reads.load_json('{"a": [[1]]}', max_depth=3) == {"a": [[1]]}
    with pytest.raises(bounded_reads.JsonLimitError, match="nested 3 levels deep"):
        bounded_reads.load_json('{"a": [[1]]}', max_depth=2)
