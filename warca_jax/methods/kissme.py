"""KISSME: keep it simple and straightforward metric learning (Koestinger et al., CVPR 2012).

Pair differences are modelled as zero-mean Gaussians, with covariance C_same for
same-identity pairs and C_diff for different-identity pairs; the log-likelihood
ratio test gives (paper eq. 10-12)

    M = inv(C_same) - inv(C_diff),

projected onto the PSD cone (negative eigenvalues clipped, eq. 12's re-projection).
As in the paper the features are first reduced by PCA (``cfg.pca_variance`` = 0.95
of the variance, optionally capped by ``cfg.pca_dim``), and the metric is returned
as a linear ``Metric`` W = psd_factor(M) @ components, the PCA folded in (its
centring cancels in differences).

C_same uses every same-identity pair. C_diff uses every different-identity pair in
closed form (``cfg.num_negative_pairs == 0``, no enumeration, see
``_covariance.pair_covariances``) or, as the paper does, a random sample of that many pairs,
drawn from the seed: i uniform, then j uniform among the images of other identities.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from warca_jax.maths import linalg
from warca_jax.methods import Method, checks, model_checks
from warca_jax.methods._covariance import pair_covariances
from warca_jax.metric import Metric


@functools.partial(jax.jit, static_argnames="num_pairs")
def sampled_negative_covariance(
    key: jax.Array, x: jax.Array, classes: jax.Array, *, num_pairs: int
) -> jax.Array:
    """Mean of (x_i - x_j)(x_i - x_j)^T over ``num_pairs`` random different-identity pairs.

    Args:
      key: PRNG key.
      x: [N, D] features.
      classes: [N] int32 class indices in [0, C).
      num_pairs: pairs to draw.

    Returns:
      [D, D] covariance.
    """
    n = x.shape[0]
    order = jnp.argsort(classes, stable=True)  # images grouped by class
    sorted_classes = classes[order]
    start = jnp.searchsorted(sorted_classes, classes, side="left")
    size = jnp.searchsorted(sorted_classes, classes, side="right") - start
    ki, kj = jax.random.split(key)
    i = jax.random.randint(ki, (num_pairs,), 0, n)
    # r indexes the N - n_c images outside i's class block [start, start + n_c) of `order`.
    r = jnp.floor(jax.random.uniform(kj, (num_pairs,)) * (n - size[i])).astype(jnp.int32)
    r = jnp.minimum(r, n - size[i] - 1)
    j = order[jnp.where(r < start[i], r, r + size[i])]
    diff = x[i] - x[j]
    return jnp.dot(diff.T, diff, precision=jax.lax.Precision.HIGHEST) / num_pairs


def check_config(cfg, data: checks.TrainingData) -> None:
    """Raises ValueError for a KISSME config that cannot run on this data."""
    d = data.x.shape[1]
    checks.check_number(cfg, "pca_variance", low=0, high=1, low_open=True)
    checks.check_number(cfg, "pca_dim", low=0, high=d, integer=True, note="; 0: no cap")
    checks.check_number(cfg, "num_negative_pairs", low=0, integer=True, note="; 0: all pairs")
    checks.check_number(cfg, "reg", low=0, low_open=True, note="; ridge relative to trace / D")


# KISSME does not depend on the features' scale.
validate = checks.validator("KISSME", check_config)


def fit(features, labels, cfg, *, seed=0):
    """Learns a KISSME metric in closed form (arguments and errors: ``warca_jax.methods``).

    ``seed`` draws the sampled negative pairs (unused when all pairs are used).

    Returns:
      (linear Metric with projection [k, D], k the PCA dimension; empty history).
    """
    x, y, scale = validate(features, labels, cfg)
    mean, comps = linalg.pca(x, variance=cfg.pca_variance, max_dim=cfg.pca_dim or None)
    xr = (x - mean) @ comps.T
    c_same, c_diff = pair_covariances(xr, y)
    if cfg.num_negative_pairs > 0:
        _, classes = np.unique(y, return_inverse=True)
        c_diff = np.asarray(
            sampled_negative_covariance(
                jax.random.PRNGKey(seed),
                jnp.asarray(xr),
                jnp.asarray(classes.astype(np.int32)),
                num_pairs=cfg.num_negative_pairs,
            ),
            np.float64,
        )
    inv_same = np.linalg.inv(linalg.regularise(c_same, eps=cfg.reg, what="KISSME C_same"))
    inv_diff = np.linalg.inv(linalg.regularise(c_diff, eps=cfg.reg, what="KISSME C_diff"))
    m = linalg.psd_project(inv_same - inv_diff)
    proj = (linalg.psd_factor(m).astype(np.float64) @ comps).astype(np.float32)
    metric = Metric("linear", x.shape[1], projection=proj, name="kissme", feature_scale=scale)
    model_checks.check_model(metric, method="KISSME", features=features, hint="raise reg")
    return metric, []


VARIANTS = ("default", "sampled", "small")  # sampled: 10,000 negative pairs


def default_config(variant: str = "default") -> ml_collections.ConfigDict:
    """The defaults of ``kissme``: what configs/kissme.py starts from."""
    m = checks.new_config("kissme", variant, VARIANTS)
    m.pca_variance = 0.95  # fraction of variance PCA keeps (the paper's setting).
    m.pca_dim = 0  # cap on the PCA dimension (0: none).
    m.num_negative_pairs = 0  # different-identity pairs sampled for C_diff (0: all).
    m.reg = 1e-6  # ridge reg * trace / D on C_same and C_diff (a warning if it matters).
    if variant == "sampled":
        m.num_negative_pairs = 10_000
    return m


METHODS = {"kissme": Method(fit, validate, default_config, VARIANTS)}
