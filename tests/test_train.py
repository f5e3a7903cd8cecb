"""train_and_evaluate and the absl entry point, on shrunk configs in temp dirs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import fixture_trees
import numpy as np
import pytest

from configs.warca import get_config
from warca_jax import data, methods, train
from warca_jax.metric import Metric

ROOT = Path(__file__).resolve().parents[1]


def _small(**data_overrides):
    c = get_config("small")
    c.unlock()
    c.method.num_iters = 60
    c.method.log_every = 20
    c.data.update(data_overrides)
    return c


def test_entry_point_writes_every_output(tmp_path):
    workdir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "warca_jax.main",
            "--config=configs/warca.py:small",
            f"--workdir={workdir}",
            "--config.method.lam=0.001",
            "--config.method.num_iters=40",
            "--config.method.log_every=20",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["mean"]["rank1"] > 0
    assert json.loads((workdir / "config.json").read_text())["method"]["lam"] == 0.001
    lines = [json.loads(ln) for ln in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [(r["split"], r["step"]) for r in lines] == [(0, 20), (0, 40), (1, 20), (1, 40)]
    assert {"loss", "mean_rank", "penalty", "seconds"} <= set(lines[0])
    results = json.loads((workdir / "results.json").read_text())
    assert results["num_splits"] == 2 and len(results["splits"]) == 2
    for key in (
        "rank1",
        "rank5",
        "rank10",
        "rank20",
        "mAP",
        "mINP",
        "AUC",
        "train_seconds",
        "eval_seconds",
        "num_skipped",
    ):
        assert key in results["mean"] and key in results["std"] and key in results["splits"][0]
    assert (workdir / "cmc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metric = Metric.load(workdir / "model_split0.npz")
    assert metric.kind == "linear" and metric.output_dim == 16


def test_unknown_config_field_fails_loudly(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "warca_jax.main",
            "--config=configs/warca.py:small",
            f"--workdir={tmp_path}",
            "--config.method.lerning_rate=0.1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0 and "lerning_rate" in proc.stderr


def test_restart_reuses_finished_splits(tmp_path, monkeypatch):
    config = _small()
    first = train.train_and_evaluate(config, str(tmp_path))
    os.remove(tmp_path / "split_1.json")  # as if interrupted during split 1
    calls = []
    real = methods.get("warca")

    def counting_fit(*args, **kwargs):
        calls.append(1)
        return real.fit(*args, **kwargs)

    monkeypatch.setitem(methods.registry(), "warca", real._replace(fit=counting_fit))
    second = train.train_and_evaluate(config, str(tmp_path))
    assert len(calls) == 1  # only split 1 was trained again
    assert second["splits"][0] == first["splits"][0]
    assert second["splits"][1]["rank1"] == pytest.approx(first["splits"][1]["rank1"])
    lines = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert sum(r["split"] == 1 for r in lines) == 3  # no duplicated lines for the redone split


def test_other_config_on_same_workdir_is_refused(tmp_path):
    train.train_and_evaluate(_small(), str(tmp_path))
    other = _small()
    other.method.lam = 0.5
    with pytest.raises(ValueError, match="different config"):
        train.train_and_evaluate(other, str(tmp_path))


def test_user_npz_with_fixed_splits(tmp_path):
    x, y, cams = data.make_synthetic(
        num_ids=40, images_per_id=4, dim=16, signal_dim=4, num_nuisance=2, seed=1
    )
    train_idx = np.nonzero(y < 20)[0]
    query_idx = np.nonzero((y >= 20) & (cams == 0))[0]
    gallery_idx = np.nonzero((y >= 20) & (cams == 1))[0]
    path = tmp_path / "feats.npz"
    np.savez(
        path,
        features=x,
        labels=y,
        cams=cams,
        train_idx=train_idx,
        query_idx=query_idx,
        gallery_idx=gallery_idx,
    )
    config = _small(name="npz", path=str(path))
    config.method.dim = 8
    results = train.train_and_evaluate(config, str(tmp_path / "run"))
    assert results["dataset"] == "feats" and results["num_splits"] == 1
    assert results["splits"][0]["num_queries"] == len(query_idx)


def test_bad_data_is_refused_before_any_training(tmp_path):
    config = _small()
    config.method.kernel = "chi2"  # the real-valued synthetic data has negative entries
    with pytest.raises(ValueError, match="non-negative"):
        train.train_and_evaluate(config, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
    missing = _small(name="npz", path=str(tmp_path / "nope.npz"))
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        train.train_and_evaluate(missing, str(tmp_path / "run2"))


ORL = fixture_trees.ORL


@pytest.mark.skipif(not ORL.is_dir(), reason=f"the ORL faces are not at {ORL}")
def test_orl_config_runs_end_to_end_on_real_images(tmp_path):
    """configs/warca.py:orl: features from the real images, kernel WARCA, one split."""
    c = get_config("orl")
    assert c.data.name == "orl" and Path(c.data.path) == ORL.resolve()
    c.unlock()
    c.data.num_splits = 1
    c.data.cache_dir = str(tmp_path / "cache")
    c.method.num_iters = 300
    c.progress = False
    results = train.train_and_evaluate(c, str(tmp_path / "run"))
    assert results["dataset"] == "orl" and results["num_splits"] == 1
    # 20 test people, 5 queries and 5 gallery images each: faces are easy for the descriptor.
    assert results["mean"]["rank1"] >= 80 and results["baseline_euclidean"]["mean"]["rank1"] >= 80
    assert len(list((tmp_path / "cache").glob("color_lbp_*.npy"))) == 1


def test_registered_dataset_options_are_checked(tmp_path):
    bad_json = _small(name="orl", path=str(ORL), loader_options="{variant: x}")
    with pytest.raises(ValueError, match="JSON object"):
        data.load_dataset(bad_json.data)
    no_path = _small(name="viper", path="")
    with pytest.raises(ValueError, match="needs data.path"):
        data.load_dataset(no_path.data)
    fixed = _small(name="market1501", path=str(tmp_path), num_test_ids=10)
    with pytest.raises(ValueError, match="fixed protocol"):
        data.load_dataset(fixed.data)
    unknown = _small(name="nope", path=str(tmp_path))
    with pytest.raises(ValueError, match="valid names"):
        data.load_dataset(unknown.data)
    missing = _small(name="viper", path=str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="absent"):
        data.load_dataset(missing.data)
