"""warca_jax.methods.learner_loop.run_in_chunks: chunking, logging, refusing non-finite metrics."""

import numpy as np
import pytest

from warca_jax.methods import learner_loop


def _run(num_iters, advance=lambda done, length: {"loss": 1.0}, **hooks):
    """``run_in_chunks`` of ``advance`` (default: a constant loss 1) in chunks of 10."""
    return learner_loop.run_in_chunks(advance, num_iters=num_iters, chunk=10, method="m", **hooks)


def test_chunks_cover_the_iterations_and_log_every_row():
    calls, logged = [], []

    def advance(done, length):
        calls.append((done, length))
        return {"loss": np.float32(1.0 / (done + length))}

    history = _run(25, advance, log_fn=logged.append)
    assert calls == [(0, 10), (10, 10), (20, 5)]
    assert [r["step"] for r in history] == [10, 20, 25]
    assert logged == history
    assert history[-1]["loss"] == pytest.approx(1 / 25)
    assert all(isinstance(r["loss"], float) for r in history)


def test_non_finite_metrics_stop_training():
    def advance(done, length):
        return {"loss": np.nan if done >= 10 else 1.0}

    with pytest.raises(FloatingPointError, match="m diverged by step 20"):
        _run(40, advance)


def test_on_chunk_time_is_left_out_of_seconds():
    import time

    seen = []

    def on_chunk(row):
        seen.append(row["step"])
        time.sleep(0.1)

    history = _run(30, on_chunk=on_chunk)
    assert seen == [10, 20, 30]
    assert history[-1]["seconds"] < 0.1


def test_on_chunk_dict_is_merged_into_the_row_before_logging():
    import time

    events, logged = [], []

    def on_chunk(row):
        events.append(("hook", row["step"], "val" in row))
        time.sleep(0.1)
        return {"val": np.float32(row["step"] / 10)}

    def log_fn(row):
        events.append(("log", row["step"], "val" in row))
        logged.append(row)

    history = _run(25, log_fn=log_fn, on_chunk=on_chunk)
    # the hook first (on the chunk's own metrics), then log_fn with the merged row
    assert events == [(w, s, w == "log") for s in (10, 20, 25) for w in ("hook", "log")]
    assert logged == history
    assert [r["val"] for r in history] == pytest.approx([1.0, 2.0, 2.5])
    assert all(type(r["val"]) is float for r in history)
    assert all(r["seconds"] < 0.1 for r in history)  # 0.3 s of hooks left out


def test_on_chunk_may_return_nothing_and_may_not_overwrite_or_add_non_finite_values():
    history = _run(20, on_chunk=lambda row: None)
    assert sorted(history[0]) == ["loss", "seconds", "step"]
    with pytest.raises(ValueError, match=r"returned \['loss'\]"):
        _run(20, on_chunk=lambda row: {"loss": 0.0})
    with pytest.raises(FloatingPointError, match="non-finite values at step 10"):
        _run(20, on_chunk=lambda row: {"val": np.nan})


def test_on_chunk_is_not_called_for_a_diverged_chunk():
    seen = []
    with pytest.raises(FloatingPointError, match="m diverged by step 20"):
        _run(
            40,
            lambda done, length: {"loss": np.nan if done >= 10 else 1.0},
            on_chunk=lambda row: seen.append(row["step"]),
        )
    assert seen == [10]
