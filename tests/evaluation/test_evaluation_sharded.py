"""Tests for the streaming, sharded ranking of warca_jax.evaluation.evaluate."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from evaluation_reference import assert_matches_reference, random_protocol, reference
from jax.sharding import Mesh
from processes import cpu_env, run_python

from warca_jax import evaluation
from warca_jax.evaluation import evaluate, pairwise_distances


def identity_problem(rng, nq=40, ng=150, d=6, ids=12, integer=False):
    """Features with an identity signal.

    Integer features make dot products exact, so every distance is the same float32 number
    in any tile shape (many exact ties): the stable-sort reference on ``pairwise_distances``
    is then exact.
    """
    ql, gl, qc, gc = random_protocol(rng, nq=nq, ng=ng, ids=ids)
    centres = rng.integers(0, 3, (ids + 3, d)) if integer else rng.standard_normal((ids + 3, d))
    noise = rng.integers(0, 2, (nq + ng, d)) if integer else 0.7 * rng.standard_normal((nq + ng, d))
    feats = (np.abs(centres[np.concatenate([ql, gl])]) + np.abs(noise)).astype(np.float32)
    return feats[:nq], feats[nq:], ql, gl, qc, gc


def same_results(a, b):
    assert a.keys() == b.keys()
    for key in a:
        if key == "cmc":
            np.testing.assert_array_equal(a[key], b[key])
        else:
            assert a[key] == b[key], key


def sweeping_blocks(ql, gl, b):
    """Query blocks with a same-identity entry (queries without one come first)."""
    without = int(np.sum(~np.isin(ql, gl[gl != -1])))
    return -(-len(ql) // b) - without // b


def count_sweeps(monkeypatch):
    """Patches the sweep factory to count the sweeps run; returns the counter."""
    calls = {"n": 0}
    make = evaluation.sweep._sweep_fn

    def counting(*args):
        sweep = make(*args)

        def run(*a):
            calls["n"] += 1
            return sweep(*a)

        return run

    monkeypatch.setattr(evaluation.sweep, "_sweep_fn", counting)
    return calls


# ----------------------------------------------------------------------------- ties
@pytest.mark.slow
@pytest.mark.parametrize("first", ["negative", "match"])
def test_tie_across_chunks_breaks_by_gallery_index(first):
    # One query, a negative and its true match at the same distance, one per chunk: the one
    # earlier in the gallery ranks first.
    xq = np.zeros((1, 2), np.float32)
    xg = np.array([[1, 0], [1, 0], [3, 0]], np.float32)
    gl = np.array([2, 1, 3]) if first == "negative" else np.array([1, 2, 3])
    res = evaluate(xq, xg, [1], gl, [1], [2, 2, 2], gallery_chunk=1, max_rank=3)
    np.testing.assert_array_equal(res["cmc"], [0, 100, 100] if first == "negative" else 100)
    assert res["mAP"] == (50.0 if first == "negative" else 100.0)


# ----------------------------------------------------------------------------- exactness
@pytest.mark.slow
def test_thresholds_off_by_one_ulp_are_swept_again(monkeypatch):
    rng = np.random.default_rng(6)
    xq, xg, ql, gl, qc, gc = identity_problem(rng, nq=30, ng=300)
    kw = dict(gallery_chunk=64, block_size=8)  # 4 query blocks
    calls = count_sweeps(monkeypatch)
    want = evaluate(xq, xg, ql, gl, qc, gc, **kw)
    plain = calls["n"]
    assert plain == 2 * sweeping_blocks(ql, gl, 8)  # thresholds, sweep: no second sweep

    thresholds = evaluation.sweep._GallerySweep.thresholds

    def one_ulp_up(self, *args):
        return jnp.nextafter(thresholds(self, *args), jnp.inf)

    monkeypatch.setattr(evaluation.sweep._GallerySweep, "thresholds", one_ulp_up)
    calls["n"] = 0
    got = evaluate(xq, xg, ql, gl, qc, gc, **kw)
    assert calls["n"] == 3 * plain // 2  # every block swept again with its own distances
    same_results(got, want)


@pytest.mark.slow
def test_nondeterministic_sweep_raises(monkeypatch):
    make = evaluation.sweep._sweep_fn

    calls = {"n": 0}

    def drifting(*args):
        sweep = make(*args)

        def run(*a):
            counts, vals = sweep(*a)
            calls["n"] += 1
            for _ in range(calls["n"]):  # one ulp more at every call
                vals = jnp.nextafter(vals, jnp.inf)
            return counts, vals

        return run

    monkeypatch.setattr(evaluation.sweep, "_sweep_fn", drifting)
    xq, xg, ql, gl, qc, gc = identity_problem(np.random.default_rng(7))
    with pytest.raises(RuntimeError, match="different distances"):
        evaluate(xq, xg, ql, gl, qc, gc)


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["cosine", "chi2"])
def test_float_features_need_no_second_sweep(metric, monkeypatch):
    # The thresholds come from the sweep program itself, so they agree bit for bit.
    rng = np.random.default_rng(8)
    xq, xg, ql, gl, qc, gc = identity_problem(rng, nq=50, ng=700, d=16)
    calls = count_sweeps(monkeypatch)
    evaluate(xq, xg, ql, gl, qc, gc, distance=metric, gallery_chunk=128, block_size=16)
    assert calls["n"] == 2 * sweeping_blocks(ql, gl, evaluation.row_block(16, 128, 16, metric))


# ----------------------------------------------------------------------------- shapes
@pytest.mark.slow
@pytest.mark.parametrize("metric", ["euclidean", "cosine", "manhattan"])
def test_exact_ties_and_any_chunk_or_block_size_match_stable_sort(metric):
    rng = np.random.default_rng(9)
    xq, xg, ql, gl, qc, gc = identity_problem(rng, nq=37, ng=203, integer=True)
    xg[150:] = xg[:53]  # duplicated gallery rows: exact ties with other labels and cameras
    ref = reference(np.asarray(pairwise_distances(xq, xg, distance=metric)), ql, gl, qc, gc)
    assert ref["num_skipped"] > 0 and ref["num_valid"] > 0
    first = None
    # One column per chunk, chunks that divide nothing, and more than the whole gallery.
    for chunk, block in [(1, 37), (64, 5), (10_000, 16)]:
        res = evaluate(
            xq, xg, ql, gl, qc, gc, distance=metric, gallery_chunk=chunk, block_size=block
        )
        assert_matches_reference(res, ref)
        first = first or res
        same_results(res, first)


def test_all_gallery_junk_raises():
    with pytest.raises(ValueError, match="no query has a true match"):
        evaluate(np.ones((2, 3)), np.ones((4, 3)), [1, 2], [-1] * 4, [1, 1], [2] * 4)


# ----------------------------------------------------------------------------- devices
EIGHT_DEVICES = """
import json
import jax
import numpy as np
from warca_jax import evaluation
from warca_jax.maths import device_mesh

rng = np.random.default_rng(0)
nq, ng, d, ids = 300, 5000, 32, 400
gl = rng.integers(-1, ids, ng)
ql, qc, gc = rng.integers(1, ids, nq), rng.integers(1, 3, nq), rng.integers(1, 3, ng)
centres = np.abs(rng.standard_normal((ids, d)))
xq = (centres[ql] + np.abs(rng.standard_normal((nq, d)))).astype(np.float32)
xg = (centres[gl] + np.abs(rng.standard_normal((ng, d)))).astype(np.float32)
out = {"devices": jax.device_count()}
for metric in ("euclidean", "cosine", "chi2"):
    for n in (1, 8):
        res = evaluation.evaluate(
            xq, xg, ql, gl, qc, gc, distance=metric, mesh=device_mesh.make_mesh(n),
            gallery_chunk=512,
        )
        out[f"{metric}/{n}"] = {k: np.asarray(v).tolist() for k, v in res.items()}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_eight_devices_give_the_single_device_results():
    proc = run_python(["-c", EIGHT_DEVICES], cpu_env(host_devices=8), timeout=300)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == 8
    for metric in ("euclidean", "cosine", "chi2"):
        one, eight = out[f"{metric}/1"], out[f"{metric}/8"]
        assert one == eight, metric  # every metric and the whole CMC, exactly
        assert len(one["cmc"]) > 4000 and one["num_valid"] > 200 and 0 < one["mAP"] < 100


# ----------------------------------------------------------------------------- bad input
def one_device_mesh(axis):
    return Mesh(np.asarray(jax.devices()[:1]), (axis,))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mesh="cpu"), "jax.sharding.Mesh"),
        (dict(mesh=jax.devices()), "jax.sharding.Mesh"),
        (dict(mesh=one_device_mesh("model")), "axis 'data'"),
        (dict(gallery_chunk=0), "gallery_chunk"),
        (dict(gallery_chunk=-4), "gallery_chunk"),
        (dict(gallery_chunk=2.5), "gallery_chunk"),
        (dict(gallery_chunk=True), "gallery_chunk"),
        (dict(gallery_chunk=None), "gallery_chunk"),
    ],
)
def test_bad_mesh_or_gallery_chunk(kwargs, match, monkeypatch):
    monkeypatch.setattr(evaluation.multi_shot, "_GallerySweep", None)  # must fail before any work
    rng = np.random.default_rng(10)
    with pytest.raises(ValueError, match=match):
        evaluate(*identity_problem(rng), **kwargs)
