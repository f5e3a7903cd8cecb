"""metric-learn's learners (NCA, MMC, ITML, SDML, LSML, RCA, SCML) from the command line and in
the protocol runner; each learner's own tests are in tests/test_<name>.py."""

import json
import os
import subprocess
import sys

import numpy as np

from warca_jax import methods
from warca_jax.configs.protocol import get_config
from warca_jax.experiments import protocol

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEARNERS = ("nca", "mmc", "itml", "sdml", "lsml", "rca", "scml")


def test_every_learner_is_registered_with_a_config():
    for name in LEARNERS:
        methods.get(name)
        assert os.path.isfile(os.path.join(ROOT, "warca_jax", "configs", f"{name}.py")), name


def test_every_learner_runs_from_the_command_line(tmp_path):
    """``python -m warca_jax.main --config=warca_jax/configs/<name>.py:small`` for all of
    them at once (one process each, started together so that their start-up overlaps)."""
    procs = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "warca_jax.main",
                f"--config=warca_jax/configs/{name}.py:small",
                f"--workdir={tmp_path / name}",
                "--config.data.num_splits=1",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in LEARNERS
    }
    euclidean = None
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name}: {err[-3000:]}"
        results = json.loads((tmp_path / name / "results.json").read_text())
        assert results["method"] == name
        assert results["num_splits"] == 1
        mean = results["mean"]
        assert all(np.isfinite(mean[k]) for k in ("rank1", "mAP", "AUC")), name
        base = results["baseline_euclidean"]["mean"]["mAP"]
        euclidean = base if euclidean is None else euclidean
        assert base == euclidean  # every run is on the same split of the same data
        assert json.loads(out.strip().splitlines()[-1])["mean"]["mAP"] == round(mean["mAP"], 2)
        assert (tmp_path / name / "model_split0.npz").is_file()


def test_every_learner_runs_in_the_protocol_runner(tmp_path):
    c = get_config("small")
    c.unlock()
    c.methods = tuple(f"{name}:small" for name in LEARNERS)
    c.cv.methods = ()
    c.data.synthetic.num_ids = 40
    c.data.num_splits = 1
    c.lock()
    results = protocol.run_protocol(c, str(tmp_path))
    rows = results["synthetic"]
    for name in LEARNERS:
        entry = rows[f"{name}:small"]
        assert entry["status"] == "done" and entry["num_done"] == 1, (name, entry)
        assert 0 < entry["rank1"]["mean"] <= 100 and np.isfinite(entry["mAP"]["mean"])
    table = (tmp_path / "table2.md").read_text()
    for name in LEARNERS:
        assert f"| {name}:small |" in table or f" {name}:small " in table
