"""Fixtures shared by the tests: the default synthetic data, a scorer, a descriptor counter;
``small_problem``, the learners' small training problem (``learner_checks``: the checks
their tests share); and ``known_defect``, the one way to mark a test that fails today for a
known reason."""

import os
import shutil
import tempfile

import jax
import pytest

from warca_jax import datasets, evaluation
from warca_jax.data.synthetic import make_synthetic
from warca_jax.features import extraction
from warca_jax.metric import Metric
from warca_jax.runs import cli, defaults

# The tests check the maths against float64 references and same seed, same result: on a
# GPU that needs float32 products without TF32 and deterministic sums, as the entry points
# have them (cli.reproducible_numerics; before JAX's first computation).
cli.reproducible_numerics()

# One persistent compilation cache for the test session, in a private temporary folder
# removed at its end: the entry points that tests start as processes (the main job, the
# protocol's workers, the notebooks' kernels), the tests that rebuild a program and the
# pytest-xdist workers compile the same programs again and again, a second or more each on
# 2 CPU cores; from the cache a program is read instead. The same executables, so the same
# numbers. The process that makes the folder (pytest itself, or its xdist controller)
# removes it; the workers it starts and the processes a test starts inherit it through the
# environment.
_OWN_CACHE = "WARCA_JAX_TESTS_JIT_CACHE" not in os.environ
if _OWN_CACHE:
    os.environ["WARCA_JAX_TESTS_JIT_CACHE"] = tempfile.mkdtemp(prefix="warca_jax_tests_jit_")
_COMPILE_CACHE = os.environ["WARCA_JAX_TESTS_JIT_CACHE"]
os.environ["JAX_COMPILATION_CACHE_DIR"] = _COMPILE_CACHE
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.2"
jax.config.update("jax_compilation_cache_dir", _COMPILE_CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)


def pytest_unconfigure(config):
    if _OWN_CACHE:
        shutil.rmtree(_COMPILE_CACHE, ignore_errors=True)


# the shared checks' asserts report their operands as a test's own do
pytest.register_assert_rewrite("learner_checks")


def known_defect(reason: str) -> pytest.MarkDecorator:
    """A strict expected failure: the test fails today for the known defect ``reason``, and a
    pass is a failure (XPASS(strict)), so that the mark goes once the defect is fixed.

    A decorator (``@known_defect("...")``), a parameter's mark
    (``pytest.param(x, marks=known_defect("..."))``), or, where the defect is known only
    inside the test, ``request.applymarker(known_defect("..."))`` before the assertion.
    """
    return pytest.mark.xfail(strict=True, reason=reason)


class ReidProblem:
    """A dataset, one of its splits, and ``score(metric)`` -> evaluation dict on it."""

    def __init__(self, *, histogram: bool):
        cfg = defaults.base_config(histogram=histogram)
        self.dataset = datasets.from_config(cfg.data)
        self.split = self.dataset.splits[0]
        self.eval_cfg = cfg.eval
        t = self.split.train_idx
        self.x_train = self.dataset.features[t]
        self.y_train = self.dataset.labels[t]
        self.euclidean = self.score(Metric("identity", self.x_train.shape[1], name="euclidean"))

    def score(self, metric: Metric) -> dict:
        return evaluation.evaluate_metric(metric, self.dataset, self.split, self.eval_cfg)

    def assert_beats_euclidean(self, metric: Metric, *, rank1: float, mAP: float) -> dict:
        """``score(metric)``, once its rank-1 and mAP are checked to be at least ``rank1``
        and ``mAP`` points above the Euclidean distance's."""
        res = self.score(metric)
        assert res["rank1"] >= self.euclidean["rank1"] + rank1
        assert res["mAP"] >= self.euclidean["mAP"] + mAP
        return res


# Fixtures that run a whole pipeline, protocol or study once per module (seconds to minutes):
# every test that uses one is slow, whatever its own body costs, so that the quick tier
# (pytest -m "not slow") never pays for them.
RUN_FIXTURES = frozenset(
    {"aon_run", "tt_run", "reference", "full_grid", "protocol_run", "tiny_run", "finished",
     "small_run", "eight_devices", "real"}
)  # fmt: skip


def pytest_collection_modifyitems(config, items):
    """Marks slow each test that uses one of ``RUN_FIXTURES``."""
    for item in items:
        if RUN_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def reid():
    """The default config's synthetic data (200 identities x 4, 64-d), first split.

    Euclidean rank-1 is about 24 on it; a learned metric reaches 75-80.
    """
    return ReidProblem(histogram=False)


@pytest.fixture(scope="session")
def reid_hist():
    """The histogram variant (non-negative, L1-normalised rows) for chi2 methods."""
    return ReidProblem(histogram=True)


def forbid(monkeypatch, owner, name: str, why: str) -> None:
    """``owner.name`` fails the test, saying ``why``, if it is called: work that must not
    start (loading the data, fitting a method)."""

    def called(*args, **kwargs):
        raise AssertionError(why)

    monkeypatch.setattr(owner, name, called)


def assert_refused_before_any_work(run, config, workdir, match: str) -> None:
    """``run(config, str(workdir))`` (a run's entry, e.g. ``pipeline.train_and_evaluate``)
    raises a ValueError matching ``match`` and makes no ``workdir``."""
    with pytest.raises(ValueError, match=match):
        run(config, str(workdir))
    assert not workdir.exists()


def small_problem(*, num_ids=20, dim=12, signal_dim=4, num_nuisance=2, **options):
    """(features [n, dim], labels [n]) of a small synthetic problem that the learners' tests
    fit in seconds; a test file that needs other sizes passes them (``options``: the rest of
    ``make_synthetic``'s, e.g. ``images_per_id``, ``histogram``, ``seed``)."""
    x, y, _ = make_synthetic(
        num_ids=num_ids, dim=dim, signal_dim=signal_dim, num_nuisance=num_nuisance, **options
    )
    return x, y


@pytest.fixture
def counted(monkeypatch):
    """The colour + LBP descriptor's calls so far (the size of each batch it described)."""
    calls = []
    real = extraction.DESCRIPTORS["color_lbp"]

    def counting(batch):
        calls.append(len(batch))
        return real.fn(batch)

    monkeypatch.setitem(extraction.DESCRIPTORS, "color_lbp", real._replace(fn=counting))
    return calls
