"""Labels given to the scikit-learn estimators: checked once, in the shared base, for all.

NaN, None and labels mixing types are refused in one line before any training; strings of
one type are identities as integers are.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from warca_jax import methods  # noqa: E402
from warca_jax import sklearn as wsk  # noqa: E402
from warca_jax.data.synthetic import make_synthetic  # noqa: E402

X, Y, _ = make_synthetic(num_ids=8, images_per_id=4, num_cams=2, dim=16, seed=0)
N = len(Y)


def _with(value, at=(1, 5)):
    y = Y.astype(object)
    for i in at:
        y[i] = value
    return y


BAD = {  # labels, a fragment of the message
    "nan": (np.where(np.isin(np.arange(N), (1, 5)), np.nan, Y.astype(float)),
            r"y holds 2 NaN or inf labels \(first y\[1\] = nan\)"),
    "nan-in-objects": (_with(float("nan")), r"y\[1\] is nan of type float"),
    "inf": (np.where(np.arange(N) == 3, np.inf, Y.astype(float)), "NaN or inf labels"),
    "none": (_with(None), r"y\[1\] is None \(a missing label\)"),
    "strings-and-ints": (_with("a"), r"mixes label types int \(first at y\[0\]\), str \(first "
                                     r"at y\[1\]\)"),
    "list-of-both": ([*map(int, Y[:-1]), "z"], r"mixes label types int .*, str"),
    "bytes-and-str": (np.array([b"a", "b"] * (N // 2), dtype=object), "bytes .*str"),
    "continuous": (Y + 0.5, r"not whole numbers \(first y\[0\] = 0.5\)"),
    "complex": (Y + 0j, "dtype complex128"),
    "a-container": (_with((1, 2), at=(2,)), r"y\[2\] is \(1, 2\) of type tuple"),
    "column": (Y[:, None], r"y must be 1-D \[N\], got shape \(32, 1\)"),
    "short": (Y[:-1], "y has 31 labels but X has 32 samples"),
}  # fmt: skip


@pytest.mark.parametrize("method", sorted(methods.registry()))
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_labels_are_refused_by_every_estimator(method, case):
    y, match = BAD[case]
    est = wsk.estimator(method)
    with pytest.raises(ValueError, match=match) as err:
        est.fit(X, y)
    assert "\n" not in str(err.value)
    assert not hasattr(est, "metric_")  # refused before any training


@pytest.mark.slow
def test_string_labels_are_identities_as_integers_are():
    names = np.array([f"person_{v:02d}" for v in Y])
    by_name = wsk.KISSME().fit(X, names)
    by_int = wsk.KISSME().fit(X, Y)
    np.testing.assert_array_equal(by_name.transform(X), by_int.transform(X))
    assert by_name.score(X, names) == by_int.score(X, Y) == wsk.rank1_score(by_int, X, list(Y))
    whole = wsk.KISSME().fit(X, Y.astype(float))  # floats of whole values are integers
    np.testing.assert_array_equal(whole.transform(X), by_int.transform(X))
    objects = wsk.KISSME().fit(X, names.astype(object))  # e.g. a pandas column of strings
    np.testing.assert_array_equal(objects.transform(X), by_int.transform(X))


def test_score_checks_its_labels_as_fit_does():
    est = wsk.Mahalanobis().fit(X, Y)
    with pytest.raises(ValueError, match="NaN or inf labels"):
        est.score(X, BAD["nan"][0])
    with pytest.raises(ValueError, match="mixes label types"):
        wsk.rank1_score(est, X, BAD["strings-and-ints"][0])
