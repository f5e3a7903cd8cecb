"""warca_jax.training.run_in_chunks: chunking, logging, refusing non-finite metrics."""

import numpy as np
import pytest

from warca_jax import training


def test_chunks_cover_the_iterations_and_log_every_row():
    calls, logged = [], []

    def advance(done, length):
        calls.append((done, length))
        return {"loss": np.float32(1.0 / (done + length))}

    history = training.run_in_chunks(
        advance, num_iters=25, chunk=10, method="m", log_fn=logged.append
    )
    assert calls == [(0, 10), (10, 10), (20, 5)]
    assert [r["step"] for r in history] == [10, 20, 25]
    assert logged == history
    assert history[-1]["loss"] == pytest.approx(1 / 25)
    assert all(isinstance(r["loss"], float) for r in history)


def test_non_finite_metrics_stop_training():
    def advance(done, length):
        return {"loss": np.nan if done >= 10 else 1.0}

    with pytest.raises(FloatingPointError, match="m diverged by step 20"):
        training.run_in_chunks(advance, num_iters=40, chunk=10, method="m")


def test_on_chunk_time_is_left_out_of_seconds():
    import time

    seen = []

    def on_chunk(row):
        seen.append(row["step"])
        time.sleep(0.1)

    history = training.run_in_chunks(
        lambda done, length: {"loss": 1.0}, num_iters=30, chunk=10, method="m", on_chunk=on_chunk
    )
    assert seen == [10, 20, 30]
    assert history[-1]["seconds"] < 0.1
