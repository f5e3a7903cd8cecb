"""The Nystroem map: kernel WARCA approximated by linear WARCA on r features per point."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from warca_jax.maths import kernels


def nystroem_features(
    x: np.ndarray, cfg, *, seed: int, block_size: int = 8192, gamma: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The Nystroem map of ``cfg.kernel`` on ``cfg.num_landmarks`` random training points.

    With landmarks L (drawn without replacement from ``seed``), K_LL = U diag(s) U^T and
    M = U_r diag(s_r)^-1/2 over the eigenvalues above 1e-6 s_max, the features
    phi(x) = k(x, L) M satisfy phi(a) . phi(b) = k(a, L) K_LL^+ k(L, b), the Nystroem
    approximation of k(a, b) (exact when a or b is a landmark). Memory: N x r features
    and one [block_size, m] kernel block at a time, never N x N.

    Args:
      gamma: the bandwidth (default ``cfg.kernel_gamma``; 0: from the landmarks).

    Returns:
      (phi [N, r] float32, landmarks [m, D], M [m, r] float32, gamma).

    Raises:
      ValueError: the landmark kernel matrix has fewer than ``cfg.dim`` usable
        eigenvalues (too few distinct landmarks for the output dimension).
    """
    n = x.shape[0]
    m = min(cfg.num_landmarks, n)
    rng = np.random.default_rng(seed)
    landmarks = x[np.sort(rng.choice(n, size=m, replace=False))]
    lj = jnp.asarray(landmarks)
    # the bandwidth from the landmarks' distances when kernel_gamma is 0, as for the full
    # kernel matrix from the training set's
    gamma = cfg.kernel_gamma if gamma is None else gamma
    k_ll, gamma = kernels.gram_matrix(landmarks, kernel=cfg.kernel, gamma=gamma)
    k_ll = np.asarray(k_ll, np.float64)
    s, u = np.linalg.eigh(0.5 * (k_ll + k_ll.T))
    keep = s > 1e-6 * max(float(s[-1]), 1e-30)
    if int(keep.sum()) < cfg.dim:
        raise ValueError(
            f"the {m} x {m} landmark kernel matrix has {int(keep.sum())} usable eigenvalues, "
            f"fewer than the output dim {cfg.dim}: use more landmarks or a lower dim"
        )
    proj = (u[:, keep] / np.sqrt(s[keep])).astype(np.float32)
    pj = jnp.asarray(proj)
    phi = np.empty((n, proj.shape[1]), np.float32)
    for b0 in range(0, n, block_size):
        kb = kernels.kernel_matrix(
            jnp.asarray(x[b0 : b0 + block_size]), lj, kernel=cfg.kernel, gamma=gamma
        )
        phi[b0 : b0 + block_size] = np.asarray(kb @ pj)
    return phi, landmarks, proj, float(gamma)
