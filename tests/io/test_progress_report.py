"""Progress without a terminal: a heartbeat line in the log at least every
``progress_report.HEARTBEAT_SECONDS`` of long work (training, features, the protocol's jobs)."""

import logging

import fixture_trees
import numpy as np
import pytest

from warca_jax.features import extract
from warca_jax.io import progress_report
from warca_jax.methods import learner_loop


@pytest.fixture
def every_update(monkeypatch, caplog):
    monkeypatch.setattr(progress_report, "HEARTBEAT_SECONDS", 1e-9)  # a line at each update
    caplog.set_level(logging.INFO)
    return caplog


def _lines(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]


def test_training_without_a_bar_says_its_step_loss_and_time_left(every_update):
    def advance(done, length):
        return {"loss": np.float32(1.0 / (done + length))}

    learner_loop.run_in_chunks(advance, num_iters=30, chunk=10, method="WARCA", progress=False)
    lines = [m for m in _lines(every_update) if m.startswith("WARCA training")]
    assert lines[0].startswith("WARCA training: 10 of 30 steps (loss 0.1), about ")
    assert lines[1].startswith("WARCA training: 20 of 30 steps (loss 0.05), about ")
    assert len(lines) == 2  # nothing at the end: the run's own lines say it is done


def test_short_work_says_nothing(caplog):
    caplog.set_level(logging.INFO)
    beat = progress_report.bar(100, "work", show=False, unit="jobs")
    for _ in range(99):
        beat.update(1)
    assert not _lines(caplog)  # under HEARTBEAT_SECONDS in all


def test_a_heartbeat_line_counts_from_work_already_done(every_update):
    beat = progress_report.bar(10, "cross-validation", show=False, unit="jobs", initial=4)
    beat.set_postfix_str("viper warca-chi2 split 0")
    beat.update(2)
    (line,) = _lines(every_update)
    assert line.startswith("cross-validation: 6 of 10 jobs (viper warca-chi2 split 0), about ")
    assert line.endswith(" s left")


def test_feature_extraction_without_a_bar_counts_its_images(every_update, tmp_path):
    paths = fixture_trees.random_images(tmp_path, 3, 128, 48)
    extract(paths, descriptor="color_lbp", batch_size=1, progress=False)
    lines = [m for m in _lines(every_update) if "features:" in m]
    assert lines and lines[0].startswith("color_lbp features: 1 of 3 images")
