"""The built-in synthetic re-identification data, the project's default dataset.

Identities x images x cameras, with the identity signal in a low-dimensional subspace,
a few strong per-image nuisance directions that dominate Euclidean distance, camera
offsets and isotropic noise; a non-negative L1-normalised histogram variant feeds the chi2
kernels. Plain Euclidean distance does poorly on it and a learned metric well, which is
what the tests of every learner rely on (`make_synthetic`).

`make_reference_problem` is a second, fixed generator: the synthetic re-id problem that
benchmarks/bench_vs_reference.py gives both to warca_jax and to the authors' C++ WARCA
release (the same draws, bit for bit, as the project's shared benchmark script).
"""

from __future__ import annotations

import numpy as np

# Scales of the synthetic generator that are not parameters: identity coordinates in the
# signal subspace are N(0, _SIGNAL_SCALE^2); each camera's offset has norm ~_CAMERA_SCALE.
# With the defaults of `make_synthetic` they make Euclidean 1-NN weak and an LDA
# projection learned from the training part strong (tests/data/test_synthetic.py checks both).
_SIGNAL_SCALE = 3.0
_CAMERA_SCALE = 2.0
_NUM_STRIPES = 4


def make_synthetic(
    *,
    num_ids=200,
    images_per_id=4,
    num_cams=2,
    dim=64,
    signal_dim=8,
    num_nuisance=4,
    nuisance_scale=5.0,
    noise=1.0,
    histogram=False,
    seed=0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generates synthetic re-identification features where a learned metric beats Euclidean.

    A latent vector z in R^dim per image is the sum of
      - the identity's mean: `signal_dim` coordinates ~ N(0, 3^2) along a random
        orthonormal basis (the signal subspace);
      - its camera's offset: a random vector of norm about 2;
      - `num_nuisance` strong per-image nuisance coordinates ~ N(0, nuisance_scale^2)
        along orthonormal directions orthogonal to the signal subspace (pose, light,
        background: they dominate Euclidean distance but carry no identity);
      - isotropic noise ~ N(0, noise^2) per coordinate.
    With the defaults, Euclidean 1-NN on a half/half split ranks poorly while a projection
    onto the signal subspace learned from the training half ranks well (the bounds:
    tests/data/test_synthetic.py).

    Args:
      num_ids: number of identities; labels are 0..num_ids-1.
      images_per_id: images per identity; image m of an identity is seen by camera
        m % num_cams.
      num_cams: number of cameras; cams are 0..num_cams-1.
      dim: feature dimension D.
      signal_dim: dimension of the subspace that carries identity.
      num_nuisance: number of per-image nuisance directions (signal_dim + num_nuisance
        <= dim).
      nuisance_scale: standard deviation of the nuisance coordinates.
      noise: standard deviation of the isotropic noise per coordinate.
      histogram: if True, map z to a non-negative histogram for chi2 kernels: the D
        coordinates are cut into 4 stripes (1 if D < 4), each a softmax of z over its bins
        at a fixed temperature (the expected spread of z), scaled to sum to 1/4, so each
        row sums to 1.
      seed: the same seed gives the same data.

    Returns:
      features [N, D] float32 with N = num_ids * images_per_id, labels [N] int64,
      cams [N] int64.
    """
    if num_ids < 2 or images_per_id < 1 or num_cams < 1:
        raise ValueError(
            "need num_ids >= 2, images_per_id >= 1, num_cams >= 1; got "
            f"{num_ids}, {images_per_id}, {num_cams}"
        )
    if signal_dim < 1 or num_nuisance < 0 or signal_dim + num_nuisance > dim:
        raise ValueError(
            "need signal_dim >= 1, num_nuisance >= 0 and signal_dim + num_nuisance <= dim; "
            f"got {signal_dim} + {num_nuisance} vs dim {dim}"
        )
    if nuisance_scale < 0 or noise < 0:
        raise ValueError(f"scales must be >= 0; got nuisance_scale {nuisance_scale}, noise {noise}")
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, signal_dim + num_nuisance)))
    signal, nuisance = basis[:, :signal_dim], basis[:, signal_dim:]
    means = _SIGNAL_SCALE * rng.standard_normal((num_ids, signal_dim)) @ signal.T
    offsets = _CAMERA_SCALE / np.sqrt(dim) * rng.standard_normal((num_cams, dim))
    labels = np.repeat(np.arange(num_ids, dtype=np.int64), images_per_id)
    cams = np.tile(np.arange(images_per_id, dtype=np.int64) % num_cams, num_ids)
    n = len(labels)
    z = (
        means[labels]
        + offsets[cams]
        + nuisance_scale * rng.standard_normal((n, num_nuisance)) @ nuisance.T
        + noise * rng.standard_normal((n, dim))
    )
    if histogram:
        variance = (
            _SIGNAL_SCALE**2 * signal_dim + nuisance_scale**2 * num_nuisance + _CAMERA_SCALE**2
        ) / dim + noise**2
        z = z / np.sqrt(variance)
        stripes = np.array_split(np.arange(dim), _NUM_STRIPES if dim >= _NUM_STRIPES else 1)
        for bins in stripes:
            e = np.exp(z[:, bins] - z[:, bins].max(axis=1, keepdims=True))
            z[:, bins] = e / (len(stripes) * e.sum(axis=1, keepdims=True))
    return z.astype(np.float32), labels, cams


def make_reference_problem(num_ids: int = 600, *, seed: int = 0) -> dict:
    """The synthetic re-id problem of the benchmark against the authors' C++ WARCA release.

    ``num_ids`` identities x 4 images, 256 dims. ``gauss`` features: each identity's centre
    is a N(0, I_32) vector in a random 32-d subspace (orthonormal basis from the QR of a
    Gaussian matrix), and each image adds N(0, 0.6^2) isotropic noise per coordinate and a
    strong nuisance of N(0, 3^2) coordinates along 16 random orthonormal directions (drawn
    independently of the signal subspace).
    ``hist`` features: exp(gauss / 4), each row divided by its sum (non-negative, rows sum
    to 1), for chi2 kernels. The first ``num_ids // 2`` identities are the training set and
    the rest the test set. It reproduces, draw for draw and bit for bit, the shared
    benchmark problem written out for the C++ command-line tools (``synth_reid.py``), so
    both implementations see the same data.

    Args:
      num_ids: number of identities (>= 2); labels 0..num_ids // 2 - 1 train, the rest test.
      seed: seed of ``np.random.default_rng``; the same seed gives the same arrays.

    Returns:
      dict of ``gauss_train`` [4 * (num_ids // 2), 256] and ``gauss_test``
      [4 * (num_ids - num_ids // 2), 256] float64, ``hist_train`` and ``hist_test`` (same
      shapes, float64), ``train_labels`` (int64, 0.., four consecutive images per
      identity), ``test_labels`` (int64, from 0) and ``test_cams`` (int64, the image index
      0..3 of each test image: 0 is the gallery, 1-3 the probes).
    """
    if num_ids < 2:
        raise ValueError(f"need num_ids >= 2 (a training and a test identity), got {num_ids}")
    rng = np.random.default_rng(seed)
    n_id, n_img, dim, d_sig = num_ids, 4, 256, 32
    # the order of the draws below is the shared script's; changing it changes the data
    p = np.linalg.qr(rng.standard_normal((dim, d_sig)))[0]
    centers = rng.standard_normal((n_id, d_sig)) @ p.T
    q = np.linalg.qr(rng.standard_normal((dim, 16)))[0]
    x = np.repeat(centers, n_img, axis=0)
    x += 0.6 * rng.standard_normal((n_id * n_img, dim))
    x += 3.0 * rng.standard_normal((n_id * n_img, 16)) @ q.T
    y = np.repeat(np.arange(n_id), n_img)
    cam = np.tile(np.arange(n_img), n_id)
    xn = np.exp(x / 4.0)
    xn /= xn.sum(1, keepdims=True)
    half = n_id // 2
    tr, te = y < half, y >= half
    return {
        "gauss_train": x[tr],
        "gauss_test": x[te],
        "hist_train": xn[tr],
        "hist_test": xn[te],
        "train_labels": y[tr].astype(np.int64),
        "test_labels": (y[te] - half).astype(np.int64),
        "test_cams": cam[te].astype(np.int64),
    }
