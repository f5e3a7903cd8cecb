"""metric-learn's learners (NCA, MMC, ITML, SDML, LSML, RCA, SCML) from the command line and in
the protocol runner; each learner's own tests are in tests/test_<name>.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import known_defect
from repo_configs import ROOT, config_module

from warca_jax import methods, protocol

get_config = config_module("protocol").get_config

LEARNERS = ("nca", "mmc", "itml", "sdml", "lsml", "rca", "scml")


def test_every_learner_is_registered_with_a_config():
    for name in LEARNERS:
        methods.get(name)
        assert os.path.isfile(os.path.join(ROOT, "configs", f"{name}.py")), name


@pytest.mark.slow
def test_every_learner_runs_from_the_command_line(tmp_path):
    """``python -m experiments.main --config=configs/<name>.py:small`` for all of
    them at once (one process each, started together so that their start-up overlaps)."""
    procs = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "experiments.main",
                f"--config=configs/{name}.py:small",
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
    euclidean, scores = None, {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name}: {err[-3000:]}"
        results = json.loads((tmp_path / name / "results.json").read_text())
        assert results["method"] == name
        assert results["num_splits"] == 1
        mean = results["mean"]
        assert all(np.isfinite(mean[k]) for k in ("rank1", "mAP", "AUC")), name
        base = results["baseline_euclidean"]["mean"]
        euclidean = base if euclidean is None else euclidean
        assert base == euclidean  # every run is on the same split of the same data
        assert json.loads(out.strip().splitlines()[-1])["mean"]["mAP"] == round(mean["mAP"], 2)
        assert (tmp_path / name / "model_split0.npz").is_file()
        scores[name] = mean
    # Each learner, even in its shrunk ``small`` run, ranks the held-out identities better
    # than the Euclidean distance on the same split (the run's own baseline).
    worse = {
        name: {k: (round(s[k], 2), round(euclidean[k], 2)) for k in ("rank1", "mAP")}
        for name, s in scores.items()
        if not (s["rank1"] > euclidean["rank1"] and s["mAP"] > euclidean["mAP"])
    }
    assert not worse, f"(learner, Euclidean) no better than Euclidean: {worse}"


@pytest.fixture(scope="module")
def protocol_run(tmp_path_factory):
    """The protocol runner on the small histogram synthetic data (40 identities, one split):
    every learner's ``small`` variant and the Euclidean nearest-neighbour baseline
    (``nn:euclidean``) on the same split; (results rows, table2.md text)."""
    workdir = tmp_path_factory.mktemp("protocol")
    c = get_config("small")
    c.unlock()
    c.methods = (*(f"{name}:small" for name in LEARNERS), "nn:euclidean")
    c.cv.methods = ()
    c.data.synthetic.num_ids = 40
    c.data.num_splits = 1
    c.lock()
    results = protocol.run_protocol(c, str(workdir))
    return results["synthetic"], (workdir / "table2.md").read_text()


@pytest.mark.slow
def test_every_learner_runs_in_the_protocol_runner(protocol_run):
    rows, table = protocol_run
    for label in (*(f"{name}:small" for name in LEARNERS), "nn:euclidean"):
        entry = rows[label]
        assert entry["status"] == "done" and entry["num_done"] == 1, (label, entry)
        assert all(np.isfinite(entry[k]["mean"]) for k in ("rank1", "mAP", "AUC")), label
        assert f"| {label} |" in table or f" {label} " in table


# On the L1-normalised histograms the protocol's synthetic data is, two learners do not beat
# the Euclidean distance; each known defect turns into a failure once the learner does.
_NOT_BETTER = {
    # ||grad f|| at M = I is already below tol = 1e-3 (distances between histograms are
    # ~1e-2), so LSML stops after one step with M = I to float32 precision: Euclidean.
    "lsml": "LSML stops at step 1 ('converged': gradient norm < tol) with M ~ I",
    "sdml": "SDML's rank-1 only ties Euclidean's on this split (its mAP is higher)",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=known_defect(_NOT_BETTER[name])) if name in _NOT_BETTER else name
        for name in LEARNERS
    ],
)
def test_learner_beats_euclidean_in_the_protocol_runner(protocol_run, name):
    rows, _ = protocol_run
    entry, euclidean = rows[f"{name}:small"], rows["nn:euclidean"]
    for k in ("rank1", "mAP"):
        assert entry[k]["mean"] > euclidean[k]["mean"], (k, entry[k], euclidean[k])
