"""experiments/study_figures.py: the study's figures, its ranked lists and its refusals."""

import json
import os
import subprocess
import sys
from pathlib import Path

import fixture_trees
import matplotlib.image as mpimg
import numpy as np
import pytest
from conftest import assert_refused_before_any_work, forbid
from PIL import Image
from repo_configs import config_module

from warca_jax import datasets, evaluation
from warca_jax.data import dataset_arrays
from warca_jax.plots import cmc, study_plots
from warca_jax.protocol import plan
from warca_jax.runs import pipeline
from warca_jax.studies import figures as study_figures
from warca_jax.studies import ranking

get_config = config_module("study_figures").get_config

ROOT = Path(__file__).resolve().parents[2]
ORL = str(fixture_trees.ORL)
needs_orl = pytest.mark.skipif(not os.path.isdir(ORL), reason=f"real ORL faces not at {ORL}")
GREEN = np.array([44, 160, 44])  # matplotlib's tab:green and tab:red, the frames' colours
RED = np.array([214, 39, 40])


def png_size(path) -> tuple[int, int]:
    """(width, height) of a valid, non-empty PNG with something drawn in it."""
    path = Path(path)
    assert path.stat().st_size > 0 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    image = mpimg.imread(path)
    assert image.ndim == 3 and float(image.std()) > 0, f"{path} is blank"
    return image.shape[1], image.shape[0]


def _has_colour(path, rgb) -> bool:
    pixels = np.asarray(Image.open(path).convert("RGB")).astype(int)
    return bool(np.any(np.all(np.abs(pixels - rgb) <= 3, axis=-1)))


def _small(**fields):
    c = get_config("small")
    c.unlock()
    for key, value in fields.items():
        section, _, name = key.rpartition(".")
        setattr(c[section] if section else c, name, value)
    c.lock()
    return c


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """The `:small` variant run once through the real entry point."""
    workdir = tmp_path_factory.mktemp("figures")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.study_figures",
            "--config=configs/study_figures.py:small",
            f"--workdir={workdir}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return workdir, json.loads((workdir / "results.json").read_text())


@pytest.mark.slow
def test_small_run_writes_every_file(small_run):
    workdir, results = small_run
    config = get_config("small")
    labels = list(config.methods)
    sgd = [m for m in labels if m.split(":")[0] in study_figures.SGD_METHODS]
    q, k = config.ranked.num_queries, config.ranked.top_k
    for name, size in (  # inches at 100 dpi, as study_plots and plots draw them
        ("rank_k.png", (800, 420)),
        ("ranked_list.png", (round(100 * (k + 1.4)), round(100 * (1.55 * q + 0.5)))),
        ("validation_cost.png", (round(420 * len(sgd)), 340)),
    ):
        assert png_size(workdir / name) == size, name
    assert list(results["methods"]) == labels
    table = (workdir / "rank_k.md").read_text()
    for label, row in results["methods"].items():
        cmc = np.asarray(row["cmc"])
        assert cmc.shape == (config.max_rank,)
        assert np.all((cmc >= 0) & (cmc <= 100)) and np.all(np.diff(cmc) >= 0)
        assert row["rank1"] == pytest.approx(cmc[0]) and row["rank5"] == pytest.approx(cmc[4])
        assert 0 < row["mAP"] <= 100
        assert f"| `{label}` | {row['rank1']:.2f} |" in table
        fit = json.loads((workdir / "fits" / f"{label.replace(':', '-')}_split0.json").read_text())
        assert fit["cmc"] == row["cmc"]
    # The learned metrics beat plain Euclidean distance on this data.
    assert results["methods"]["triplet_sgd:small"]["rank1"] > results["methods"]["nn"]["rank1"]


@pytest.mark.slow
def test_small_run_ranked_list_is_consistent(small_run):
    _, results = small_run
    config = get_config("small")
    ranked = results["ranked_list"]
    assert ranked["method"] == config.ranked.method and ranked["images"] is False
    assert len(ranked["queries"]) == config.ranked.num_queries
    for q in ranked["queries"]:
        assert len(q["gallery"]) == len(q["labels"]) == config.ranked.top_k
        assert q["match"] == [lab == q["label"] for lab in q["labels"]]
        assert np.all(np.diff(q["distances"]) >= 0)


@pytest.mark.slow
def test_small_run_has_one_validation_point_per_check(small_run):
    _, results = small_run
    config = get_config("small")
    sgd = {"pairwise_sgd:small", "triplet_sgd:small"}
    assert set(results["validation_cost"]) == sgd
    for label in sgd:
        method = plan.method_config(label)
        curve = results["validation_cost"][label]
        checks = list(range(method.val_every, method.num_epochs + 1, method.val_every))
        assert curve["epoch"] == checks and len(curve["val_cost"]) == len(checks)
        assert all(np.isfinite(curve["val_cost"]))
        assert "nn" not in results["validation_cost"]
    assert config.ranked.method in sgd


@pytest.mark.slow
def test_restart_reuses_fits_and_other_config_is_refused(small_run, monkeypatch, tmp_path):
    workdir, first = small_run

    def no_fit(*args, **kwargs):
        raise AssertionError("a finished fit was redone")

    monkeypatch.setattr(pipeline, "fit_method", no_fit)
    again = study_figures.run(get_config("small"), str(workdir))
    assert again["methods"] == first["methods"] and again["ranked_list"] == first["ranked_list"]
    with pytest.raises(ValueError, match="different config"):
        study_figures.run(_small(max_rank=5), str(workdir))


def _protocol_problem(seed=0, *, nq=12, ng=40, ids=6):
    rng = np.random.default_rng(seed)
    ql, qc = rng.integers(0, ids, nq), rng.integers(0, 2, nq)
    gl, gc = rng.integers(-1, ids, ng), rng.integers(0, 2, ng)
    dist = rng.integers(0, 8, size=(nq, ng)).astype(np.float32)  # many ties
    return dist, ql, gl, qc, gc


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranked_lists_follow_the_evaluation_protocol(seed):
    dist, ql, gl, qc, gc = _protocol_problem(seed)
    valid = ranking.valid_queries(ql, qc, gl, gc)
    kept = ranking._kept(ql, qc, gl, gc)
    k = int(kept.sum(axis=1).min())
    index, dists, matches = ranking.ranked_lists(dist, ql, gl, qc, gc, top_k=k)
    np.testing.assert_array_equal(matches, gl[index] == ql[:, None])
    np.testing.assert_array_equal(dists, np.take_along_axis(dist, index, axis=1))
    assert not np.any(gl[index] == -1)
    assert not np.any((gl[index] == ql[:, None]) & (gc[index] == qc[:, None]))
    for r in range(len(ql)):
        order = np.lexsort((index[r], dists[r]))  # by distance, ties by gallery position
        np.testing.assert_array_equal(order, np.arange(k))
    # The first true match of each list gives the evaluation's CMC up to rank k.
    first = np.where(matches.any(axis=1), matches.argmax(axis=1) + 1, k + 1)[valid]
    cmc = [100.0 * np.mean(first <= r) for r in range(1, k + 1)]
    reference = evaluation.evaluate_distances(dist, ql, gl, qc, gc)["cmc"][:k]
    np.testing.assert_allclose(cmc, reference, atol=1e-4)


def test_ranked_lists_refuse_a_too_long_list():
    dist, ql, gl, qc, gc = _protocol_problem(3)
    longest = int(ranking._kept(ql, qc, gl, gc).sum(axis=1).min())
    with pytest.raises(ValueError, match=f"top_k={longest + 1}.*after junk removal"):
        ranking.ranked_lists(dist, ql, gl, qc, gc, top_k=longest + 1)


def test_pick_queries_is_seeded_and_picks_valid_queries():
    config = get_config("small")
    ds = datasets.from_config(config.data)
    split = ds.splits[0]
    a = ranking.pick_queries(split, ds, 5, 3)
    np.testing.assert_array_equal(a, ranking.pick_queries(split, ds, 5, 3))
    assert len(set(a.tolist())) == 5
    assert not np.array_equal(a, ranking.pick_queries(split, ds, 5, 4))
    q, g = split.query_idx[a], split.gallery_idx
    assert ranking.valid_queries(ds.labels[q], ds.cams[q], ds.labels[g], ds.cams[g]).all()


def test_ranked_list_drawing_without_images(tmp_path):
    labels = np.array([[3, 7, 3], [5, 5, 9]])
    matches = labels == np.array([3, 5])[:, None]
    path = cmc.plot_ranked_lists(
        [3, 5], labels, matches, np.arange(6.0).reshape(2, 3), tmp_path / "tiles.png"
    )
    assert _has_colour(path, GREEN) and _has_colour(path, RED)
    none = cmc.plot_ranked_lists(
        [1, 2], labels, np.zeros((2, 3), bool), np.ones((2, 3)), tmp_path / "none.png"
    )
    assert _has_colour(none, RED) and not _has_colour(none, GREEN)
    with pytest.raises(ValueError, match="matches must be"):
        cmc.plot_ranked_lists([3, 5], labels, matches[:, :2], np.ones((2, 3)), tmp_path / "x")
    with pytest.raises(ValueError, match="together"):
        cmc.plot_ranked_lists(
            [3, 5], labels, matches, np.ones((2, 3)), tmp_path / "x", query_images=["a", "b"]
        )


@pytest.mark.real_data
@needs_orl
def test_ranked_list_drawing_with_real_orl_images(tmp_path):
    faces = datasets.load("orl", ORL, num_splits=1)
    # The paths line up with a dataset of the same samples (what the command draws from).
    fake = dataset_arrays.Dataset(
        np.zeros((len(faces.labels), 1), np.float32), faces.labels, faces.cams, (), "orl"
    )
    config = get_config("orl")
    paths = ranking.image_paths(config.data, fake)
    assert paths == faces.paths
    assert ranking.image_paths(get_config("small").data, fake) is None
    lab = faces.labels
    queries = [0, 10]  # person 1 image 1, person 2 image 1
    ranked = np.array([[5, 15, 6], [25, 11, 12]])  # a subset of the 400 faces
    path = cmc.plot_ranked_lists(
        lab[queries],
        lab[ranked],
        lab[ranked] == lab[queries][:, None],
        np.array([[0.1, 0.2, 0.3], [0.1, 0.2, 0.4]]),
        tmp_path / "faces.png",
        query_images=[paths[i] for i in queries],
        ranked_images=[[paths[i] for i in row] for row in ranked],
    )
    with Image.open(path) as im:
        assert im.size[0] > 300 and im.size[1] > 250
        # Greyscale faces fill the cells: many grey pixels that are neither white nor black.
        grey = np.asarray(im.convert("RGB")).astype(int)
    flat = (np.ptp(grey, axis=-1) <= 2) & (grey[..., 0] > 30) & (grey[..., 0] < 220)
    assert flat.mean() > 0.2
    assert _has_colour(path, GREEN) and _has_colour(path, RED)


@pytest.mark.slow
def test_validation_cost_plot_checks_its_curves(tmp_path):
    path = study_plots.plot_validation_cost(
        {"a": ([10, 20, 30], [3.0, 2.0, 2.5]), "b": ([10, 20], [-1.0, -4.0])}, tmp_path / "v.png"
    )
    with Image.open(path) as im:
        assert im.size[0] >= 600
    with pytest.raises(ValueError, match="one shape"):
        study_plots.plot_validation_cost({"a": ([10, 20], [1.0])}, tmp_path / "w.png")


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"methods": ("nn", "nope")}, "unknown method label 'nope'"),
        ({"methods": ("nn:nope",)}, "unknown variant in method label 'nn:nope'"),
        ({"methods": ("nn", "study_figures")}, "unknown method label .study_figures."),
        ({"methods": ("nn,kissme",)}, "not a comma-separated string"),
        ({"methods": ("nn", "nn")}, "more than once"),
        ({"methods": ()}, "config.methods is empty"),
        ({"max_rank": 0}, "max_rank must be an int >= 1"),
        ({"ranked.num_queries": 0}, "ranked.num_queries must be an int >= 1"),
        ({"ranked.method": "kissme"}, "ranked.method 'kissme' must be one of"),
        ({"overrides": {"nn": {"distanse": 1}}}, "distanse"),
        ({"overrides": {"kissme": {}}}, "not in methods"),
        ({"overrides": {"nn": {"distance": 3}}}, "must be a string"),
        ({"overrides": {"nn": 3}}, "must be a map field -> value"),
    ],
)
def test_bad_configs_are_refused_before_loading_data(fields, message, monkeypatch, tmp_path):
    forbid(monkeypatch, datasets, "from_config", "data was loaded for a bad config")
    assert_refused_before_any_work(study_figures.run, _small(**fields), tmp_path / "w", message)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"ranked.num_queries": 10_000}, "num_queries=10000 is larger than the 60 queries"),
        ({"ranked.top_k": 500}, "top_k=500 is larger than"),
        ({"max_rank": 500}, "max_rank=500 is larger than the 60 gallery entries"),
        ({"num_splits": 3}, "num_splits=3 but synthetic has 1 split"),
    ],
)
def test_bad_configs_for_the_data_are_refused_before_any_fit(
    fields, message, monkeypatch, tmp_path
):
    forbid(monkeypatch, pipeline, "fit_method", "a method was fitted for a bad config")
    assert_refused_before_any_work(study_figures.run, _small(**fields), tmp_path / "w", message)
