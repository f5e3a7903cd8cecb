"""Tests for warca_jax.data.synthetic.make_reference_problem (the C++ benchmark's problem)."""

import numpy as np
import pytest

from warca_jax.data.synthetic import make_reference_problem


def test_reference_problem_shapes_labels_and_histograms():
    r = make_reference_problem(7, seed=0)  # 3 training identities, 4 test identities
    for key, n in [("gauss_train", 12), ("gauss_test", 16), ("hist_train", 12), ("hist_test", 16)]:
        assert r[key].shape == (n, 256) and r[key].dtype == np.float64, key
    for key in ("train_labels", "test_labels", "test_cams"):
        assert r[key].dtype == np.int64, key
    np.testing.assert_array_equal(r["train_labels"], np.repeat(np.arange(3), 4))
    np.testing.assert_array_equal(r["test_labels"], np.repeat(np.arange(4), 4))
    np.testing.assert_array_equal(r["test_cams"], np.tile(np.arange(4), 4))
    for part in ("train", "test"):
        h = r[f"hist_{part}"]
        assert (h > 0).all()
        np.testing.assert_allclose(h.sum(axis=1), 1.0, rtol=1e-12)
        # hist is exp(gauss / 4) up to a positive factor per row
        ratio = h / np.exp(r[f"gauss_{part}"] / 4)
        np.testing.assert_allclose(ratio, np.broadcast_to(ratio[:, :1], ratio.shape), rtol=1e-10)


def test_reference_problem_is_deterministic_in_the_seed():
    a, b = make_reference_problem(4, seed=5), make_reference_problem(4, seed=5)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    c = make_reference_problem(4, seed=6)
    assert not np.allclose(a["gauss_train"], c["gauss_train"])


def test_reference_problem_first_row_follows_the_description():
    num_ids, seed = 5, 2
    r = make_reference_problem(num_ids, seed=seed)
    # the draws in order: signal basis, identity centres, nuisance basis, per-image
    # noise, per-image nuisance coordinates; row 0 is image 0 of identity 0
    rng = np.random.default_rng(seed)
    signal_basis, _ = np.linalg.qr(rng.standard_normal((256, 32)))
    centres = rng.standard_normal((num_ids, 32))
    nuisance_basis, _ = np.linalg.qr(rng.standard_normal((256, 16)))
    noise = rng.standard_normal((num_ids * 4, 256))
    nuisance = rng.standard_normal((num_ids * 4, 16))
    row = signal_basis @ centres[0] + 0.6 * noise[0] + nuisance_basis @ (3.0 * nuisance[0])
    np.testing.assert_allclose(r["gauss_train"][0], row, rtol=1e-12, atol=1e-12)
    hist = np.exp(row / 4) / np.exp(row / 4).sum()
    np.testing.assert_allclose(r["hist_train"][0], hist, rtol=1e-12, atol=0)
    # the first test image is image 0 of identity num_ids // 2
    first_test = signal_basis @ centres[2] + 0.6 * noise[8] + nuisance_basis @ (3.0 * nuisance[8])
    np.testing.assert_allclose(r["gauss_test"][0], first_test, rtol=1e-12, atol=1e-12)


def test_reference_problem_refuses_too_few_identities():
    with pytest.raises(ValueError, match="num_ids"):
        make_reference_problem(1)
