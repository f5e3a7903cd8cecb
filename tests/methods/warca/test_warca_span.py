"""Linear WARCA in the span of its training features (``method.span``): the same objective
and distances as the full form at the same W, used only where it is exact."""

import jax.numpy as jnp
import numpy as np
import pytest

from warca_jax.data.synthetic import make_synthetic
from warca_jax.methods import warca
from warca_jax.methods.warca import default_config, problem


def _wide(num_ids=30, d=300):
    """Synthetic re-id data embedded in ``d`` > N dimensions (the VIPeR shape: N < D)."""
    x, y, c = make_synthetic(num_ids=num_ids, images_per_id=4, dim=32, seed=0)
    rng = np.random.default_rng(1)
    lift = rng.standard_normal((32, d)).astype(np.float32) / 6
    return x @ lift + 0.05 * rng.standard_normal((len(y), d)).astype(np.float32), y, c


def _cfg(**overrides):
    cfg = default_config("linear")
    cfg.update(
        {"lam": 1e-3, "dim": 8, "num_iters": 20, "log_every": 10, "batch_size": 64, **overrides}
    )
    return cfg


def _prepared(x, y, c, cfg):
    return problem.prepare_fit(warca.validate(x, y, cfg), cfg, seed=0, cams=c)


@pytest.mark.slow
def test_the_span_form_is_the_full_form_at_the_same_w():
    x, y, c = _wide()
    span = _prepared(x, y, c, _cfg(span=True))
    full = _prepared(x, y, c, _cfg(span=False))
    basis = span.problem.span.basis
    assert basis.shape == (len(y) - 1, x.shape[1])  # k = N - 1 coordinates for D = 300
    np.testing.assert_allclose(basis @ basis.T, np.eye(len(basis)), atol=1e-5)
    w = span.params
    full = full._replace(params=jnp.asarray(np.asarray(w) @ basis))  # W = W' B
    cfg = _cfg()
    # the same distances between training points, and between new points projected on it
    zs, zf = span.metric(w).transform(x), full.metric(full.params).transform(x)
    ds = np.linalg.norm(zs[:, None] - zs[None], axis=-1)
    df = np.linalg.norm(zf[:, None] - zf[None], axis=-1)
    np.testing.assert_allclose(ds, df, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(span.metric(w).projection, full.params, rtol=1e-6)
    # one training step from the same W: the same minibatch, violators and objective
    rows = []
    for prep in (span, full):
        hyper = prep.hyper(cfg)
        state = prep.init_state(cfg, hyper)
        _, metrics = prep.chunk(state, hyper, prep.feats, prep.table, prep.key_train, 1)
        rows.append({k: float(v) for k, v in metrics.items()})
    for key in ("loss", "hinge", "penalty"):
        if key in rows[0]:
            assert rows[0][key] == pytest.approx(rows[1][key], rel=1e-4, abs=1e-6), key


def test_the_span_is_used_only_where_it_is_exact_and_smaller():
    x, y, c = _wide()
    assert _prepared(x, y, c, _cfg(span=True)).problem.span is not None
    # more images than features, or a span narrower than D': the full form
    narrow, yn, cn = make_synthetic(num_ids=30, images_per_id=4, dim=32, seed=0)
    assert _prepared(narrow, yn, cn, _cfg(span=True)).problem.span is None
    few = np.isin(y, np.unique(y)[:2])  # 8 images: a span of 7 < D' = 8
    assert _prepared(x[few], y[few], c[few], _cfg(span=True)).problem.span is None


@pytest.mark.slow
def test_the_span_form_learns_as_the_full_form_does():
    x, y, c = _wide(num_ids=60)
    train, test = y < 30, y >= 30
    scores = []
    for span in (True, False):
        cfg = _cfg(span=span, num_iters=300, log_every=100)
        metric, _ = warca.fit(x[train], y[train], cfg, seed=0, cams=c[train])
        z = metric.transform(x[test])
        d = np.linalg.norm(z[:, None] - z[None], axis=-1)
        np.fill_diagonal(d, np.inf)
        scores.append(np.mean(y[test][np.argmin(d, axis=1)] == y[test]))
    assert scores[0] > 0.5 and abs(scores[0] - scores[1]) < 0.1, scores
