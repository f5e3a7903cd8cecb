"""Every learner on real images, against a named baseline: the VIPeR subset and the ORL faces.

The synthetic problem of the other tests is easy and Gaussian; a learner can pass them and
be at chance on real descriptors (SVMML was). Here each learner's default config is fitted on
real images shipped in data/ (data/README.md) and must beat a named baseline measured on the
same splits:

* ``data/viper_subset``: 80 VIPeR people, one image per camera, read by the project's own
  VIPeR loader, 30 test people per split (probe cam_a, gallery cam_b), 50 for training;
* ``data/orl_faces``: 40 people x 10 images, 20 test people per split.

``data/cuhk01_subset`` (60 CUHK01 people x 4 images, images 001-002 camera A, 003-004
camera B) is read by the project's own CUHK01 loader; its images, labels, cameras and
splits (30 test people, one camera-A probe and one camera-B gallery image each, 30 for
training; and the loader's default gallery draw) are checked here, and the paper's ordering
is tested on it (a known defect, ``known_defect``).

(configs/real_subsets.py holds these choices and the PCA size below, for this test and for
benchmarks/bench_real_subsets.py alike.)

Features: the 2,580-d colour + LBP histograms for the chi2-kernel learners (their baseline is
nearest neighbour under the chi2 distance, stronger than Euclidean on histograms); for the
linear learners the same histograms projected on the top 64 principal axes of each split's
training images (a full D x D Mahalanobis matrix on 2,580 dims is 6.7 M parameters for 100
training images), with Euclidean distance on those 64 dims as the baseline.

Baselines follow the paper's ordering (Table 2): every learned metric beats plain distances,
and the chi2 kernel methods WARCA-chi2 and LFDA-chi2 beat KISSME by a wide margin. Scores
are mAP (on a 30-image single-shot gallery, rank-1 moves by 3.3 points per query) averaged
over the splits; rank-1 is checked for the WARCA forms too. ``nn``, ``kernel_nn`` and
``kmeans_nn`` are fixed distances (the baselines themselves), not learners. MMC is left out:
its default (alternating projections of a full matrix, to convergence) took 19 minutes on
the VIPeR subset on 2 cores; it is below the within-class Mahalanobis on ORL (61.2 mAP
against 80.6), where metric-learn 0.7.0's MMC_Supervised gives 59.1 on the same features
(148 s against its 434 s; benchmarks/bench_real_subsets.py, benchmarks/RESULTS.md).
"""

import os

import numpy as np
import pytest
from conftest import known_defect
from PIL import Image
from repo_configs import config_module

from warca_jax import datasets, evaluation
from warca_jax.maths import linalg
from warca_jax.protocol import plan
from warca_jax.runs import defaults, pipeline

# the people, splits and PCA size of each subset (shared with benchmarks/bench_real_subsets.py)
SUBSETS = {name: config_module("real_subsets").get_config(name) for name in ("viper", "orl")}
# The splits scored (indices into the subset's splits; split s is fitted with seed s, as in
# the benchmark): ORL's two, and the last of VIPeR's three, where every check below holds
# as it does on the mean of the three (measured per split, mAP; the closest margins:
# LSML 51.1 against Euclidean's 49.4, RPCCA-chi2 74.3 against chi2's 72.2; the known
# defects stay below: pairwise SGD 45.7, SDML 45.3, SCML 39.6). Splits 0 and 1 of VIPeR
# are left out because they cost two thirds of the fits and change no verdict they would
# keep (on split 0 alone pairwise SGD edges past Euclidean, 35.1 against 34.4, as it
# ties it on the mean, 39.5 against 39.9). ORL keeps both: on either alone a check flips
# (split 0: WARCA-L 80.0 against the within-class Mahalanobis' 81.1; split 1: RPCCA-chi2
# 79.8 against 80.0).
SPLITS = {"viper": (2,), "orl": (0, 1), "cuhk01": (0, 1, 2)}
# read and checked, not yet scored
CUHK01 = config_module("real_subsets").get_config("cuhk01")

# learners on the chi2 histograms (baseline: nearest neighbour under chi2)
CHI2 = ("warca:chi2", "lfda:chi2", "rpcca:chi2")
# learners on the PCA features (baseline: Euclidean)
LINEAR = (
    "warca:linear",
    "rpcca",
    "mlapg",
    "frml",
    "svmml",
    "svmml:released",
    "lfda",
    "kissme",
    "xqda",
    "mahalanobis",
    "itml",
    "lmnn",
    "lsml",
    "sdml",
    "scml",
    "nca",
    "rca",
    "pairwise_sgd",
    "triplet_sgd",
)

pytestmark = [
    # every test here trains to a threshold on real descriptors: the slow tier
    pytest.mark.slow,
    pytest.mark.real_data,
    pytest.mark.skipif(
        not all(os.path.isdir(c.path) for c in SUBSETS.values()),
        reason="data/viper_subset or data/orl_faces missing",
    ),
]


def _pca(ds, split, dims):
    """The dataset on the top ``dims`` principal axes of the split's training images."""
    mean, comps = linalg.pca(ds.features[split.train_idx], variance=1.0, max_dim=dims)
    return ds._replace(features=((ds.features - mean) @ comps.T).astype(np.float32))


class RealData:
    """Scores of config labels on one real dataset, computed once per (label, features)."""

    def __init__(self, name):
        subset = CUHK01 if name == "cuhk01" else SUBSETS[name]
        self.ds = datasets.read(subset.name, subset.path, **subset.options)
        self.name = name
        self.eval_cfg = defaults.base_config().eval
        self.splits = SPLITS[name]
        self.pca = {s: _pca(self.ds, self.ds.splits[s], subset.pca_dims) for s in self.splits}
        self.cache = {}

    def score(self, label, features="pca"):
        key = (label, features)
        if key not in self.cache:
            method = plan.method_config(label)
            rows = []
            for s in self.splits:
                split = self.ds.splits[s]
                d = self.pca[s] if features == "pca" else self.ds
                x, y = d.features[split.train_idx], d.labels[split.train_idx]
                cams = d.cams[split.train_idx]  # as the pipeline passes them
                metric, _ = pipeline.fit_method(x, y, method, seed=s, cams=cams)
                r = evaluation.evaluate_metric(metric, d, split, self.eval_cfg)
                rows.append((r["rank1"], r["mAP"]))
            self.cache[key] = dict(zip(("rank1", "mAP"), np.mean(rows, 0), strict=True))
        return self.cache[key]


@pytest.fixture(scope="module", params=["viper", "orl"])
def real(request):
    return RealData(request.param)


# Learners that do not beat the named baseline on these images (measured; open defects,
# listed in the issue tracker), each a known_defect: the test fails once one of them does,
# so the entry has to go.
BELOW = {
    ("viper", "sdml"): "SDML's mAP ties Euclidean's on the VIPeR subset (38.5 against 39.9; "
    "metric-learn 0.7.0's SDML fails on the same features: its graphical lasso diverges)",
    ("viper", "scml"): "SCML falls below Euclidean on the VIPeR subset (32.2 against 39.9; "
    "metric-learn 0.7.0's SCML on the same features: 30.3)",
    ("viper", "pairwise_sgd"): "the study's pairwise SGD ties Euclidean (39.5 against 39.9; "
    "a 10 times larger step gives 26.9: its loss (the study's eq. 6) does not rank)",
    ("orl", "mlapg"): "MLAPG is below the within-class Mahalanobis on ORL (80.0 against 80.6)",
    ("orl", "rpcca:chi2"): "rPCCA-chi2 ties the within-class Mahalanobis on ORL (80.3 against "
    "80.6 mAP at its step of 4 / lambda, 80.4 at 2 / lambda; 80.7 at the old fixed step of 10)",
    ("orl", "svmml"): "SVMML is below the within-class Mahalanobis on ORL (74.6 against 80.6)",
    ("orl", "svmml:released"): "SVMML's released trainer is below the within-class "
    "Mahalanobis on ORL (72.4 against 80.6)",
    ("orl", "scml"): "SCML is below the within-class Mahalanobis on ORL (55.0 against 80.6; "
    "metric-learn 0.7.0's SCML on the same features: 61.8)",
    ("orl", "nca"): "NCA is below the within-class Mahalanobis on ORL (78.8 against 80.6; "
    "metric-learn 0.7.0's NCA on the same features: 79.2)",
}

# The named baseline of each dataset. On the VIPeR subset: Euclidean distance. The ORL faces
# are matched almost perfectly by plain distances on this descriptor (Euclidean 94 rank-1,
# chi2 97.5), above every learner, so there the baseline is the within-class Mahalanobis
# distance (the covariance of same-person differences, inverted): a learner must at least
# match the simplest learned metric.
BASELINE = {"viper": "nn", "orl": "mahalanobis"}


# Learners that refuse a dataset before training, with a message naming why: LMNN's k = 3
# target neighbours and RCA's 100 chunklets cannot be had from 50 people with two images
# each; the study's SGD optimisers hold out 20 validation people, all of ORL's 20
# training people.
REFUSED = {
    ("viper", "lmnn"): "target neighbours",
    ("viper", "rca"): "cannot be drawn",
    ("orl", "pairwise_sgd"): "num_val_ids must leave",
    ("orl", "triplet_sgd"): "num_val_ids must leave",
}


def _refused(real, label, features):
    """None when the label trains on the dataset; the refusal's message when it refuses."""
    expected = REFUSED.get((real.name, label))
    try:
        real.score(label, features)
    except ValueError as e:
        if expected is None:
            raise
        assert expected in str(e), str(e)
        return str(e)
    assert expected is None, f"{label} now trains on {real.name}: remove it from REFUSED"
    return None


def _check(request, real, label, features, got, base, base_label):
    reason = BELOW.get((real.name, label))
    if reason:
        request.applymarker(known_defect(reason))
    assert got["mAP"] > base["mAP"], (real.name, label, got, base_label, base)


@pytest.mark.slow
@pytest.mark.parametrize("label", LINEAR)
def test_linear_learner_beats_the_named_baseline_on_real_images(request, real, label):
    reason = _refused(real, label, "pca")
    if reason:
        pytest.skip(f"{label} refuses {real.name} before training: {reason}")
    base_label = BASELINE[real.name]
    if label == base_label:
        pytest.skip(f"{label} is the baseline on {real.name}")
    _check(request, real, label, "pca", real.score(label), real.score(base_label), base_label)


@pytest.mark.slow
@pytest.mark.parametrize("label", CHI2)
def test_chi2_learner_beats_the_named_baseline_on_real_images(request, real, label):
    # VIPeR: nearest neighbour under the chi2 distance on the same histograms. ORL: the
    # within-class Mahalanobis, as for the linear learners.
    if real.name == "viper":
        base_label, base = "nn:chi2", real.score("nn:chi2", "hist")
    else:
        base_label, base = BASELINE[real.name], real.score(BASELINE[real.name])
    _check(request, real, label, "hist", real.score(label, "hist"), base, base_label)


@pytest.mark.parametrize("label", ["warca:chi2", "lfda:chi2"])
def test_chi2_kernel_methods_beat_kissme_on_viper(real, label):
    """The paper's ordering on VIPeR (37.5 and 36.8 rank-1 against KISSME's 20.9).

    It also guards the bandwidth rule (gamma = 1 / mean chi2 distance): WARCA-chi2 with a
    gamma 100 times larger scored 19.7 mAP here, against KISSME's 50.5 (78.96 with the rule).
    """
    if real.name != "viper":
        pytest.skip("the ordering is VIPeR's")
    got, kissme = real.score(label, "hist"), real.score("kissme")
    assert got["mAP"] > kissme["mAP"] + 5, (label, got, kissme)


def test_warca_defaults_learn_on_viper(real):
    """The defaults WARCA ships must learn on real person images, in the paper's order.

    On the full VIPeR (316 training people) the lambda = 1e-2 default of an earlier release
    lost 7 rank-1 points (benchmarks/RESULTS.md, "Defaults on real descriptors"); on this
    50-person subset lambda = 1e-2 is the better one (67.8 mAP against 61.7): the best
    lambda falls as the training set grows, which is what the protocol's cross-validation
    is for. This test checks what holds at both sizes."""
    if real.name != "viper":
        pytest.skip("ORL is matched almost perfectly by plain distances")
    for label, features, base in (("warca:linear", "pca", "nn"), ("warca:chi2", "hist", "nn:chi2")):
        got, ref = real.score(label, features), real.score(base, features)
        assert got["rank1"] >= ref["rank1"] and got["mAP"] > ref["mAP"], (label, got, ref)
    # The paper's ordering: WARCA-L at least KISSME's (20.86 and 20.89 rank-1 in Table 2).
    # The lambda = 1e-2 default fell below it on VIPeR (18.35 against 22.15).
    linear, kissme = real.score("warca:linear"), real.score("kissme")
    assert linear["mAP"] >= kissme["mAP"], (linear, kissme)


@pytest.mark.skipif(not os.path.isdir(CUHK01.path), reason="data/cuhk01_subset missing")
def test_cuhk01_subset_reads_with_the_camera_rule():
    """data/cuhk01_subset through the project's CUHK01 loader, with the options that
    configs/real_subsets.py:cuhk01 gives: 60 people x 4 images of 60 x 160 pixels, images
    001-002 camera A (0) and 003-004 camera B (1); each split tests 30 people on one
    camera-A probe and one camera-B gallery image each and trains on all 4 images of the
    other 30."""
    images = datasets.load(CUHK01.name, CUHK01.path, **CUHK01.options)
    names = [os.path.basename(p) for p in images.paths]
    assert names == [f"{i:04d}{k:03d}.png" for i in range(1, 61) for k in range(1, 5)]
    for path in images.paths:
        with Image.open(path) as im:
            assert (im.mode, im.size) == ("RGB", (60, 160)), (path, im.mode, im.size)
    np.testing.assert_array_equal(images.labels, np.repeat(np.arange(1, 61), 4))
    np.testing.assert_array_equal(images.cams, np.tile([0, 0, 1, 1], 60))

    ds = datasets.read(CUHK01.name, CUHK01.path, **CUHK01.options)
    assert ds.features.shape == (240, 2580) and ds.features.dtype == np.float32
    assert np.all(np.isfinite(ds.features)) and ds.features.std(0).max() > 0
    np.testing.assert_array_equal(ds.labels, images.labels)
    np.testing.assert_array_equal(ds.cams, images.cams)
    assert len(ds.splits) == CUHK01.options["num_splits"] == 3
    tests = []
    for split in ds.splits:
        probe, gallery = ds.labels[split.query_idx], ds.labels[split.gallery_idx]
        train = ds.labels[split.train_idx]
        assert np.all(ds.cams[split.query_idx] == 0) and np.all(ds.cams[split.gallery_idx] == 1)
        # one probe and one gallery image per test person (single shot)
        assert len(set(probe)) == len(probe) == 30 and sorted(gallery) == sorted(probe)
        # training: all four images of each of the other 30 people
        assert set(train).isdisjoint(probe) and len(train) == 120
        np.testing.assert_array_equal(np.unique(train, return_counts=True)[1], np.full(30, 4))
        tests.append(frozenset(probe))
    assert len(set(tests)) == 3, "the three splits test the same people"


@pytest.mark.skipif(not os.path.isdir(CUHK01.path), reason="data/cuhk01_subset missing")
def test_cuhk01_subset_reads_with_the_gallery_draw_by_default():
    """The loader's default protocol on data/cuhk01_subset: per test person one gallery
    image and its three other images probes, one of them the gallery image's same-camera
    twin, which the evaluation counts as a match (``same_camera_matches``); the same test
    people, so the same training images, as the camera rule."""
    options = {k: v for k, v in CUHK01.options.items() if k != "protocol"}
    drawn = datasets.load(CUHK01.name, CUHK01.path, **options)
    rule = datasets.load(CUHK01.name, CUHK01.path, **CUHK01.options)
    assert drawn.same_camera_matches and not rule.same_camera_matches
    for split, other in zip(drawn.splits, rule.splits, strict=True):
        np.testing.assert_array_equal(split.train_idx, other.train_idx)
        gallery, probe = drawn.labels[split.gallery_idx], drawn.labels[split.query_idx]
        assert len(set(gallery)) == len(gallery) == 30
        np.testing.assert_array_equal(np.unique(probe, return_counts=True)[1], np.full(30, 3))
        twins = [
            (drawn.cams[split.query_idx][probe == drawn.labels[g]] == drawn.cams[g]).sum()
            for g in split.gallery_idx
        ]
        assert twins == [1] * 30


@pytest.mark.skipif(not os.path.isdir(CUHK01.path), reason="data/cuhk01_subset missing")
@known_defect(
    "open defect (issue 'WARCA first beyond VIPeR'): on the CUHK01 subset (30 training "
    "people x 4 images) WARCA-chi2 gives 37.78 rank-1 / 55.52 mAP against LFDA-chi2's 48.89 / "
    "62.62 and WARCA-L 35.56 / 49.11 against KISSME's 37.78 / 52.85 (the random start of "
    "earlier defaults: 31.11 / 51.59 and 35.56 / 49.02); under the loader's default gallery "
    "draw 49.63 / 63.22 against 54.07 / 66.81 (benchmarks/bench_real_subsets.py "
    "--dataset=cuhk01 or cuhk01_draw). LFDA-chi2 leads WARCA-chi2 on every subset of data/ "
    "(20 to 50 training people); on CUHK01's and VIPeR's whole test sets the two are within "
    "1.4 rank-1 from 30 to 240 training people and WARCA leads by 2 to 2.6 only with all of "
    "them (bench_real_ordering.py --tables=people): the training set's size, not two images "
    "per camera",
)
def test_warca_misses_the_papers_ordering_with_two_images_per_camera():
    """The paper's ordering on the CUHK01 subset, two images per camera, which WARCA misses
    today (the known defect above): WARCA-chi2 at least LFDA-chi2 and WARCA-L at least KISSME
    (mAP; the defaults, with the training cameras)."""
    real = RealData("cuhk01")
    chi2, lfda = real.score("warca:chi2", "hist"), real.score("lfda:chi2", "hist")
    assert chi2["mAP"] >= lfda["mAP"], (chi2, lfda)
    # scored only once the first holds: the same verdict, without two fits of three splits
    # while the first fails
    linear, kissme = real.score("warca:linear"), real.score("kissme")
    assert linear["mAP"] >= kissme["mAP"], (linear, kissme)
