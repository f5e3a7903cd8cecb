"""The scorer every real-data benchmark calls: the datasets, the output dimensions, the
splits' fits and the measures.

* ``read``: a dataset read from its images (the 2,580-d colour + LBP descriptor unless
  told otherwise; ``orl`` defaults to the faces shipped in data/orl_faces);
* ``paper_dim``: the paper's output dimension on a dataset (section 4.2: 100 on VIPeR, 40
  on the others; ``warca_jax.datasets.PAPER_DIMS``);
* ``fit``: one method config fitted on some training images of a dataset, with their
  cameras as the pipeline passes them (or without), timed;
* ``score``: a fitted metric on a split's query and gallery
  (``evaluation.evaluate_metric``, by default with the base config's ``eval`` section):
  rank-1 ... rank-20, mAP;
* ``on_pca``: the dataset on the top principal axes of a split's training images;
* ``summary``: the mean rank-1, its standard deviation and the mean mAP over splits;
* ``splits`` and ``reference_splits``: a real dataset's splits, or the synthetic problem
  shared with the C++ release once per training seed, each with its test scorer
  (``reference_scores`` on the latter: its probes against image 0 of each test person).
"""

from __future__ import annotations

import functools
import time

import numpy as np

from warca_jax import datasets, evaluation
from warca_jax.data.synthetic import make_reference_problem
from warca_jax.io import config_files
from warca_jax.maths import linalg
from warca_jax.runs import defaults, pipeline

ORL_PATH = config_files.load_config_module("configs/warca.py").ORL_PATH


def read(name: str, root: str = "", *, descriptor: str = "color_lbp", cache_dir: str = "",
         **options):  # fmt: skip
    """``name`` read from the images under ``root`` (ORL: data/orl_faces when not given),
    its descriptors cached in ``cache_dir`` ('': no cache)."""
    if name == "orl" and not root:
        root = ORL_PATH
    cache_dir = cache_dir or None  # "" would be the current folder
    return datasets.read(name, root, descriptor=descriptor, cache_dir=cache_dir, **options)


def paper_dim(name: str) -> int:
    """The paper's output dimension on dataset ``name`` (100 on VIPeR, 40 elsewhere)."""
    return datasets.PAPER_DIMS.get(name, datasets.DEFAULT_PAPER_DIM)


@functools.cache
def eval_config():
    """The base config's ``eval`` section: what the benchmarks score with by default."""
    return defaults.base_config().eval


def fit(ds, train, method, *, seed: int, cams: bool = True):
    """(metric, history, seconds) of ``method`` fitted on the images ``train`` of ``ds``,
    with their cameras when ``cams`` (the learners that take them: WARCA's cross-camera
    positives, XQDA's pairs), fit seed ``seed``."""
    start = time.perf_counter()
    metric, history = pipeline.fit_method(
        ds.features[train], ds.labels[train], method, seed=seed,
        cams=ds.cams[train] if cams else None,
    )  # fmt: skip
    return metric, history, time.perf_counter() - start


def score(metric, ds, split, eval_cfg=None, *, seed: int = 0) -> dict:
    """``metric`` on ``split``'s query and gallery of ``ds`` (rank1 ... rank20, mAP)."""
    return evaluation.evaluate_metric(metric, ds, split, eval_cfg or eval_config(), seed=seed)


def on_pca(ds, split, dims: int):
    """``ds`` on the top ``dims`` principal axes of ``split``'s training images (fitted on
    them alone)."""
    mean, comps = linalg.pca(ds.features[split.train_idx], variance=1.0, max_dim=dims)
    return ds._replace(features=((ds.features - mean) @ comps.T).astype(np.float32))


def summary(scores) -> dict:
    """Rank-1 mean and std and mAP mean, rounded to 2 decimals, of [splits, 2] (rank-1, mAP)."""
    a = np.asarray(scores)
    return dict(
        rank1=round(float(a[:, 0].mean()), 2),
        rank1_std=round(float(a[:, 0].std()), 2),
        mAP=round(float(a[:, 1].mean()), 2),
    )


def reference_scores(metric, x_test, labels, cams) -> tuple[float, float]:
    """Test (rank-1, mAP): gallery = image 0 of each test person, probes = images 1-3."""
    emb = np.asarray(metric.transform(x_test))
    g, q = cams == 0, cams != 0
    res = evaluation.evaluate(emb[q], emb[g], labels[q], labels[g], cams[q], cams[g])
    return float(res["rank1"]), float(res["mAP"])


def reference_splits(seeds):
    """The C++ release's problem (2,400 training images) once per training seed, each as
    (seed, x, labels, cams, test scorer): the data is fixed."""
    prob = make_reference_problem(1200, seed=0)
    test = (prob["hist_test"], prob["test_labels"], prob["test_cams"])

    def scores(metric):
        return reference_scores(metric, *test)

    return [(seed, prob["hist_train"], prob["train_labels"], None, scores) for seed in seeds]


def splits(name: str, path: str, which: range, cache_dir: str, descriptor: str = "color_lbp"):
    """Splits ``which`` of a real dataset, each as (split, x, labels, cams, test scorer)."""
    ds = read(name, path, descriptor=descriptor, cache_dir=cache_dir)
    out = []
    for s in which:
        split = ds.splits[s]
        tr = split.train_idx

        def scores(metric, split=split):
            r = score(metric, ds, split)
            return float(r["rank1"]), float(r["mAP"])

        out.append((s, ds.features[tr], ds.labels[tr], ds.cams[tr], scores))
    return out
