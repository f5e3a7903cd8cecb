"""warca_jax.protocol refuses bad input and repairs a damaged workdir, never silently.

Every damaged file a resume relies on (a NaN, a file cut short, another split's, method's or
config's copy, a truncated stored dataset, a truncated config.json) is redone, with a log
line naming it, and the results equal those of the undamaged run; a method that cannot
run on a dataset is 'n/a' in the tables with its reason while the rest of the grid runs; a
run that fails mid-training is 'failed' with its reason, not a number; every malformed
config field (a wrong type, an unknown name, a NaN, an empty list, the old comma-separated
string) is a ValueError naming the field, the value and an example.
"""

import json
import logging
import os
import shutil
import subprocess
import sys

import pytest
from processes import ROOT, cpu_env
from protocol_runs import run_results as _run_results
from protocol_runs import tiny as _tiny

from warca_jax import methods, protocol
from warca_jax.protocol import cross_validation

MEASURES = ("rank1", "rank5", "mAP", "AUC")


def _numbers(results):
    """The measured means and CMC curves of a protocol's results (not the timings)."""
    return {
        (name, label): (
            e.get("status"),
            {k: e[k]["mean"] for k in MEASURES} if e.get("status") == "done" else None,
            e.get("cmc"),
        )
        for name, res in results.items()
        for label, e in res.items()
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The tiny protocol (WARCA-L cross-validated over 2 step sizes, kNN; 2 splits), undamaged."""
    workdir = str(tmp_path_factory.mktemp("reference"))
    results = protocol.run_protocol(_tiny(), workdir)
    return workdir, results


@pytest.fixture
def copy(reference, tmp_path):
    """A copy of the reference workdir to damage."""
    target = str(tmp_path / "w")
    shutil.copytree(reference[0], target)
    return target


def _runs(workdir, label, split):
    return os.path.join(
        workdir, "runs", "synthetic", label, f"split_{split}", f"split_{split}.json"
    )


def _cv(workdir, eta, name="result.json"):
    return os.path.join(
        workdir, "cv", "synthetic", "warca-linear", "split_0", f"lam_0.01_eta_{eta:g}", name
    )


def _load(path):
    with open(path) as f:
        return json.load(f)


def _dump(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, allow_nan=True)


def _truncate(path, keep=0.5):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: int(len(data) * keep)])


def _rerun_and_compare(copy, reference, caplog, damaged, **kw):
    """Runs the protocol on the damaged copy; its results must equal the reference's."""
    with caplog.at_level(logging.WARNING):
        results = protocol.run_protocol(_tiny(), copy, **kw)
    assert damaged in caplog.text, caplog.text
    assert _numbers(results) == _numbers(reference[1])
    assert _run_results(copy) == _run_results(reference[0])
    return results


def _nan(path):
    obj = _load(path)
    obj["rank1"] = float("nan")
    _dump(path, obj)


def _other_split(path):
    shutil.copyfile(path.replace("split_1", "split_0"), path)


def _other_method(path):
    _dump(
        path,
        {**_load(path.replace("warca-linear", "nn").replace("split_1", "split_0")), "split": 1},
    )


def _other_config(path):  # another run's numbers, as if copied from another workdir
    _dump(path, {**_load(path), "rank1": 99.0, "config_sha256": "0" * 64})


def _no_record(path):  # the file as pipeline.run_split writes it, without its job
    obj = _load(path)
    for key in ("dataset", "method", "config_sha256", "data_sha256"):
        obj.pop(key, None)
    obj["rank1"] = 1.0
    _dump(path, obj)


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage", [_nan, _truncate, _other_split, _other_method, _other_config, _no_record]
)
def test_a_damaged_run_result_is_redone(damage, copy, reference, caplog):
    path = _runs(copy, "warca-linear", 1)
    damage(path)
    _rerun_and_compare(copy, reference, caplog, path)


@pytest.mark.slow
def test_the_report_stage_leaves_a_damaged_result_out_instead_of_averaging_it(
    copy, reference, caplog
):
    path = _runs(copy, "nn", 0)
    _nan(path)
    with caplog.at_level(logging.WARNING):
        results = protocol.run_protocol(_tiny(), copy, stage="report")
    assert path in caplog.text
    entry = results["synthetic"]["nn"]
    assert entry["num_done"] == 1
    assert entry["rank1"]["mean"] == _load(_runs(copy, "nn", 1))["rank1"]
    with open(os.path.join(copy, "table2.md")) as f:
        assert "(1/2)" in f.read()


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["nan", "truncated", "other grid point"])
def test_a_damaged_cross_validation_result_is_redone(damage, copy, reference, caplog):
    path = _cv(copy, 1e-2)
    if damage == "nan":
        obj = _load(path)
        obj["mAP"] = float("nan")
        _dump(path, obj)
    elif damage == "truncated":
        _truncate(path)
    else:
        shutil.copyfile(_cv(copy, 1e-1), path)
    selected = os.path.join(copy, "cv", "synthetic", "warca-linear", "selected.json")
    before = _load(selected)
    _rerun_and_compare(copy, reference, caplog, path)
    assert _load(selected) == before


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated", "flipped byte"])
def test_a_damaged_stored_dataset_is_rebuilt(damage, copy, reference, caplog):
    path = os.path.join(copy, "data", "synthetic.npz")
    if damage == "truncated":
        _truncate(path, 0.6)
    else:
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0xFF]))
    stamps = {p: os.path.getmtime(os.path.join(copy, p)) for p in _run_results(copy)}
    _rerun_and_compare(copy, reference, caplog, path)
    # the same data again: no run was redone
    assert {p: os.path.getmtime(os.path.join(copy, p)) for p in stamps} == stamps


def test_a_truncated_job_config_is_written_again(copy, reference, caplog):
    path = os.path.join(copy, "runs", "synthetic", "nn", "split_0", "config.json")
    with open(path) as f:
        text = f.read()
    _truncate(path)
    _rerun_and_compare(copy, reference, caplog, path)
    with open(path) as f:
        assert f.read() == text


def test_a_method_that_cannot_run_on_a_dataset_is_not_applicable(tmp_path, monkeypatch):
    """LMNN with k = 5 needs 6 images of an identity; the synthetic data has 4."""
    config = _tiny(
        methods=("nn", "lmnn"),
        **{"cv.methods": ()},
        skip={},
        overrides={"lmnn": {"k": 5}},
    )
    results = protocol.run_protocol(config, str(tmp_path / "w"))
    entry = results["synthetic"]["lmnn"]
    assert entry["status"] == "not_applicable" and "k = 5 target neighbours" in entry["reason"]
    assert results["synthetic"]["nn"]["num_done"] == 2
    with open(tmp_path / "w" / "table2.md") as f:
        table = f.read()
    assert "| synthetic | **26.25 ± 3.75** | n/a [1] |" in table
    assert "1. LMNN on synthetic: not applicable: k = 5 target neighbours" in table
    with open(tmp_path / "w" / "study.csv") as f:
        assert "synthetic,lmnn,0,,,,,,,,not applicable: k = 5" in f.read()
    assert not os.path.exists(tmp_path / "w" / "runs" / "synthetic" / "lmnn")

    # a bug in a learner's check (any exception but a ValueError) is not 'n/a': it stops
    def broken(features, labels, cfg):
        raise TypeError("a bug")

    monkeypatch.setitem(methods.registry(), "lmnn", methods.get("lmnn")._replace(validate=broken))
    with pytest.raises(TypeError, match="a bug"):
        protocol.run_protocol(config, str(tmp_path / "w2"))


def _failing_fit(fit, *, fail_all_warca=False):
    """methods.call_fit (every fit's way in), but WARCA at step size 0.1 (or any) diverges,
    kNN fails on split 1.

    Its tests run WARCA's cross-validation a job per point (through this fit), not as one
    grid job (tests/protocol/test_cv_grid.py has the grid's failures)."""

    def call_fit(learner, features, labels, method_cfg, *, seed=0, **kw):
        if method_cfg.name == "warca" and (fail_all_warca or method_cfg.learning_rate == 0.1):
            raise FloatingPointError("warca diverged by step 30: loss nan; lower learning_rate")
        if method_cfg.name == "nn" and seed == 1:
            raise ValueError("all training rows are identical")
        return fit(learner, features, labels, method_cfg, seed=seed, **kw)

    return call_fit


@pytest.mark.slow
def test_failed_runs_are_shown_with_their_reason_and_not_redone(tmp_path, monkeypatch):
    workdir = str(tmp_path / "w")
    monkeypatch.setattr(methods, "call_fit", _failing_fit(methods.call_fit))
    monkeypatch.setattr(cross_validation, "trains_grids", lambda label: False)
    with pytest.raises(RuntimeError, match=r"1 runs failed .* synthetic nn split 1: ValueError"):
        protocol.run_protocol(_tiny(), workdir)
    # the diverged grid point is never selected, and selected.json says why
    sel = _load(os.path.join(workdir, "cv", "synthetic", "warca-linear", "selected.json"))
    assert sel["learning_rate"] == 0.01
    assert "FloatingPointError: warca diverged" in sel["grid"][1]["failed"][0]
    assert sel["grid"][1]["mean"] is None
    with open(os.path.join(workdir, "table2.md")) as f:
        table = f.read()
    assert "| synthetic | **" in table and "| failed [1] | - |" in table
    assert "1. kNN Euclidean on synthetic: failed on split 1: ValueError: all training" in table
    failed = os.path.join(workdir, "runs", "synthetic", "nn", "split_1", "failed.json")
    record = _load(failed)
    assert record["status"] == "failed" and record["split"] == 1 and record["method"] == "nn"
    stamp = os.path.getmtime(failed)
    monkeypatch.undo()
    # a failure is an outcome: the restart does not redo it and still says so
    with pytest.raises(RuntimeError, match="remove one to run it again"):
        protocol.run_protocol(_tiny(), workdir)
    assert os.path.getmtime(failed) == stamp
    results = _load(os.path.join(workdir, "results.json"))
    assert results["synthetic"]["nn"]["status"] == "failed"
    assert "rank1" not in results["synthetic"]["nn"]
    os.remove(failed)  # as the message says: the run is done again
    results = protocol.run_protocol(_tiny(), workdir)
    assert results["synthetic"]["nn"]["num_done"] == 2


def test_a_method_whose_every_grid_point_failed_is_failed_not_an_abort(tmp_path, monkeypatch):
    workdir = str(tmp_path / "w")
    monkeypatch.setattr(methods, "call_fit", _failing_fit(methods.call_fit, fail_all_warca=True))
    monkeypatch.setattr(cross_validation, "trains_grids", lambda label: False)
    with pytest.raises(RuntimeError, match="every grid point of warca:linear"):
        protocol.run_protocol(_tiny(), workdir)
    results = _load(os.path.join(workdir, "results.json"))
    assert results["synthetic"]["warca:linear"]["status"] == "failed"
    with open(os.path.join(workdir, "table2.md")) as f:
        assert "| synthetic | failed [1] |" in f.read()


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"paths": None}, r"config\.paths must be a map, got None.*e\.g\. --config\.paths="),
        (
            {"datasets": ("viper",), "paths": {"viper": 5}},
            r"config\.paths\['viper'\] must be a folder.*got 5",
        ),
        ({"paths": {"vipr": "/data/viper"}}, r"config\.paths names 'vipr': unknown dataset"),
        ({"overrides": {"nn": 3}}, r"config\.overrides\['nn'\] must be a map.*got 3.*e\.g\."),
        (
            {"overrides": {"warca:linear": {"num_iters": "many"}}},
            r"config\.overrides\['warca:linear'\]\['num_iters'\] must be an integer.*'many'",
        ),
        (
            {"overrides": {"warca:linear": {"lam": float("nan")}}},
            r"config\.overrides\['warca:linear'\]\['lam'\] must be a finite number.*nan",
        ),
        ({"cv.grids": None}, r"config\.cv\.grids must be a map, got None.*e\.g\."),
        (
            {"cv.grids": {"warca:linear": {"etas": 0.1}}},
            r"config\.cv\.grids\['warca:linear'\]\['etas'\] must be a tuple of finite numbers",
        ),
        ({"cv.lams": (float("nan"),)}, r"config\.cv\.lams must be a tuple of finite numbers"),
        (
            {"dims": {"viper": "100x"}},
            r"config\.dims\['viper'\] must be an integer >= 1, got '100x'.*e\.g\.",
        ),
        ({"dims": {"vipr": 100}}, r"config\.dims names 'vipr': unknown dataset"),
        (
            {"methods": ("nn", "warca:linear", "nn")},
            r"config\.methods names \['nn'\] more than once",
        ),
        ({"methods": None}, r"config\.methods must be a tuple, got None.*e\.g\."),
        ({"datasets": ()}, r"config\.datasets is empty.*e\.g\. --config\.datasets="),
        (
            {"datasets": ("synthetic,viper",)},
            r"config\.datasets holds 'synthetic,viper': one name per element.*e\.g\.",
        ),
        (
            {"skip": {"synthetic": "nn"}},
            r"config\.skip\['synthetic'\] must be a tuple of method labels.*e\.g\.",
        ),
        ({"skip": {"synthetic": ("nope",)}}, r"config\.skip: unknown method label 'nope'"),
        ({"dim_methods": ("warca:lin",)}, r"config\.dim_methods: unknown variant"),
    ],
)
def test_malformed_config_fields_name_the_field_value_and_an_example(changes, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        protocol.run_protocol(_tiny(**changes), str(tmp_path / "w"))
    assert not os.path.exists(tmp_path / "w")


def test_more_cv_splits_than_the_data_has_is_refused_before_any_training(tmp_path):
    with pytest.raises(ValueError, match=r"cv\.num_splits = 3, but dataset 'synthetic' has 2"):
        protocol.run_protocol(_tiny(**{"cv.num_splits": 3}), str(tmp_path / "w"))
    assert not os.path.exists(tmp_path / "w" / "cv")


def test_a_workdir_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "results.txt"
    path.write_text("not a folder")
    with pytest.raises(NotADirectoryError, match="is not a folder"):
        protocol.run_protocol(_tiny(), str(path))
    assert path.read_text() == "not a folder"


@pytest.mark.slow
def test_an_unknown_config_field_on_the_command_line_is_named():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.protocol",
            "--config=configs/protocol.py:small",
            "--config.cv.num_split=2",
            "--workdir=/nonexistent/never",
        ],
        cwd=ROOT,
        env=cpu_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert "unknown config field 'num_split' in config.cv" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def _command_line(tmp_path, *overrides):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.protocol",
            "--config=configs/protocol.py:small",
            f"--workdir={tmp_path / 'w'}",
            *overrides,
        ],
        cwd=ROOT,
        env=cpu_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_tuple_and_map_fields_are_overridden_on_the_command_line(tmp_path):
    proc = _command_line(
        tmp_path,
        "--config.methods=('nn','nn:cosine')",
        "--config.cv.methods=()",
        "--config.overrides={'nn': {'distance': 'manhattan'}}",
        "--config.skip={'synthetic': ('nn:cosine',)}",
        "--config.dims.viper=50",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1])["runs_done"] == 2
    runs = tmp_path / "w" / "runs" / "synthetic"
    assert sorted(os.listdir(runs)) == ["nn"]  # nn:cosine skipped
    used = _load(runs / "nn" / "split_0" / "config.json")["method"]
    assert used["distance"] == "manhattan"


@pytest.mark.slow
def test_a_comma_separated_list_on_the_command_line_is_named(tmp_path):
    proc = _command_line(tmp_path, "--config.datasets=synthetic,viper")
    assert proc.returncode != 0
    assert "config.datasets holds 'synthetic,viper': one name per element" in proc.stderr
    assert "--config.datasets=\"('viper','cuhk03')\"" in proc.stderr, proc.stderr[-2000:]
    assert not os.path.exists(tmp_path / "w")


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"cv.lams": (-1.0,)}, r"^config\.cv\.lams: lambdas must be >= 0 and etas > 0"),
        ({"cv.etas": (0.0,)}, r"^config\.cv\.etas: lambdas must be >= 0 and etas > 0"),
        (
            {"cv.grids": {"warca:linear": {"etas": (-1.0,)}}},
            r"^config\.cv\.grids\['warca:linear'\]\['etas'\]: lambdas must be >= 0 and etas",
        ),
    ],
    ids=["lams", "etas", "grid"],
)
def test_a_bad_grid_value_names_its_field(changes, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        protocol.run_protocol(_tiny(**changes), str(tmp_path / "w"))
    assert not os.path.exists(tmp_path / "w")


@pytest.mark.slow
@pytest.mark.parametrize(
    "entry_point, config, override, line",
    [
        (
            "experiments.protocol",
            "configs/protocol.py:small",
            "--config.cv.lams=(-1,)",
            "error: config.cv.lams: lambdas must be >= 0 and etas > 0; got [-1.0]",
        ),
        (
            "experiments.aon_study",
            "configs/aon_study.py:small",
            "--config.study.lams=()",
            "error: study.lams is empty; expected at least one positive number",
        ),
        (
            "experiments.training_time",
            "configs/training_time.py:small",
            "--config.warca.kernel=rbff",
            "error: config.warca.kernel: unknown kernel 'rbff'; expected 'none' or one of",
        ),
        (
            "experiments.study_figures",
            "configs/study_figures.py:small",
            "--config.max_rank=0",
            "error: max_rank must be an int >= 1, got 0",
        ),
    ],
    ids=["protocol", "aon-study", "training-time", "study-figures"],
)
def test_a_bad_config_value_of_an_entry_point_is_one_line(
    tmp_path, entry_point, config, override, line
):
    proc = subprocess.run(
        [sys.executable, "-m", entry_point, f"--config={config}", f"--workdir={tmp_path / 'w'}",
         override],
        cwd=ROOT, env=cpu_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(line), proc.stderr[-3000:]
    assert not os.path.exists(tmp_path / "w")
