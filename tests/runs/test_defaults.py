"""Tests for warca_jax/runs/defaults.py: the one check of a method label."""

import pytest

from warca_jax.protocol import plan
from warca_jax.runs import defaults


@pytest.mark.parametrize("read", [defaults.method_config, plan.method_config])
@pytest.mark.parametrize(
    "label, message",
    [
        ("", "a method label is '<method>\\[:<variant>\\]'"),
        ("warca:", "method label 'warca:' has an empty variant"),
        ("nope", "unknown method label 'nope': a label is <method>\\[:<variant>\\]"),
        ("nn:nope", "unknown variant in method label 'nn:nope'; nn has"),
    ],
)
def test_a_bad_label_is_refused_with_one_message_wherever_it_is_read(read, label, message):
    with pytest.raises(ValueError, match=message):
        read(label)


def test_a_label_gives_its_variant_locked_in_the_protocol():
    cfg = defaults.method_config("warca:chi2")
    assert (cfg.kernel, defaults.method_config("warca").kernel) == ("chi2_rbf", "none")
    locked = plan.method_config("warca:chi2")
    assert locked.to_dict() == cfg.to_dict()
    with pytest.raises(AttributeError):
        locked.not_a_field = 1
