"""Dataset entries <dataset>:<variant> of the protocol: the same images described otherwise
(config.data_variants), and the tables that use them (configs/protocol.py:table3,
:retinex and :past_paper)."""

import json
import os

import numpy as np
import pytest
from repo_configs import config_module

from warca_jax import protocol
from warca_jax.protocol import plan as plan_lib
from warca_jax.runs import defaults

get_config = config_module("protocol").get_config


def _small(**changes):
    """Two closed-form methods, no cross-validation, 2 splits of 40 synthetic identities."""
    c = get_config("small")
    c.unlock()
    c.methods = ("nn", "kissme")
    c.cv.methods = ()
    c.data.synthetic.num_ids = 40
    for key, value in changes.items():
        section, _, field = key.rpartition(".")
        (c[section] if section else c)[field] = value
    c.lock()
    return c


FEW = {"few": {"synthetic": {"num_ids": 30, "noise": 0.5}}}


def test_an_entry_runs_on_its_variants_data_as_a_plain_run_of_that_data(tmp_path):
    c = _small(
        datasets=("synthetic", "synthetic:few"),
        data_variants=FEW,
        skip={"synthetic:few": ("kissme",)},
    )
    results = protocol.run_protocol(c, str(tmp_path / "both"))
    assert set(results) == {"synthetic", "synthetic:few"}
    assert set(results["synthetic:few"]) == {"nn"}  # kissme skipped on this entry alone
    assert set(results["synthetic"]) == {"nn", "kissme"}
    assert os.path.exists(tmp_path / "both" / "data" / "synthetic-few.npz")
    assert os.path.isdir(tmp_path / "both" / "runs" / "synthetic-few" / "nn")
    with open(tmp_path / "both" / "table2.md") as f:
        assert "| synthetic:few |" in f.read()
    plain = _small(**{"data.synthetic.num_ids": 30, "data.synthetic.noise": 0.5})
    alone = protocol.run_protocol(plain, str(tmp_path / "alone"))
    for key in ("rank1", "rank5", "mAP"):
        assert results["synthetic:few"]["nn"][key] == alone["synthetic"]["nn"][key]
    assert results["synthetic:few"]["nn"]["rank1"] != results["synthetic"]["nn"]["rank1"]


def test_an_entry_key_sets_fields_after_its_variants():
    variants = {**FEW, "synthetic:few": {"num_splits": 1, "synthetic": {"noise": 2.0}}}
    c = _small(datasets=("synthetic:few",), data_variants=variants)
    cfg = plan_lib.data_config(c, "synthetic:few")
    assert (cfg.name, cfg.num_splits) == ("synthetic", 1)
    assert (cfg.synthetic.num_ids, cfg.synthetic.noise) == (30, 2.0)
    assert cfg.synthetic.images_per_id == c.data.synthetic.images_per_id  # kept
    assert plan_lib.data_config(c, "synthetic").synthetic.num_ids == 40
    c = _small(
        datasets=("synthetic:few",), data_variants=FEW, dims={"synthetic": 7, "synthetic:few": 5}
    )
    assert protocol.Plan(c).dim("synthetic:few") == 5
    c = _small(datasets=("synthetic:few",), data_variants=FEW, dims={"synthetic": 7})
    assert protocol.Plan(c).dim("synthetic:few") == 7
    # loader_options, empty by default, is the loader's map: a variant and then the entry
    # each add their options to it
    options = {
        "few": {"loader_options": {"a": 1, "b": 2}},
        "synthetic:few": {"loader_options": {"c": 3}},
    }
    c = _small(datasets=("synthetic:few",), data_variants=options)
    cfg = plan_lib.data_config(c, "synthetic:few")
    assert dict(cfg.loader_options) == {"a": 1, "b": 2, "c": 3}


@pytest.mark.parametrize(
    "changes, match",
    [
        (
            {"datasets": ("synthetic:nope",)},
            r"'synthetic:nope' names the data variant 'nope', which config\.data_variants "
            r"does not hold.*e\.g\. --config\.data_variants=",
        ),
        (
            {"datasets": ("mnist:few",), "data_variants": FEW},
            "unknown dataset",
        ),
        (
            {"datasets": ("synthetic:few",), "data_variants": {"few": {"descriptr": "gog"}}},
            r"config\.data_variants\['few'\]\['descriptr'\]: the data section has no such field",
        ),
        (
            {"datasets": ("synthetic:few",), "data_variants": {"few": {"path": "/elsewhere"}}},
            r"config\.data_variants\['few'\]\['path'\].*name and path are the dataset's",
        ),
        (
            {"datasets": ("synthetic:few",), "data_variants": {"few": {"num_splits": "two"}}},
            r"config\.data_variants\['few'\]\['num_splits'\] must be an integer.*'two'",
        ),
        (
            {"datasets": ("synthetic:few",), "data_variants": {"few": 3}},
            r"config\.data_variants\['few'\] must be a map data field -> value.*got 3",
        ),
        (
            {"datasets": ("synthetic:few",), "data_variants": {"few": {"synthetic": 3}}},
            r"config\.data_variants\['few'\]\['synthetic'\] must be a map",
        ),
        (
            {
                "datasets": ("synthetic:few",),
                "data_variants": {"few": {"synthetic": {"num_idz": 3}}},
            },
            r"data section's synthetic has no field 'num_idz'",
        ),
        (
            {"datasets": ("synthetic",), "data_variants": {"vipr:gog": {"num_splits": 1}}},
            r"config\.data_variants names 'vipr:gog': unknown dataset",
        ),
        (
            {"skip": {"synthetic:nope": ("nn",)}},
            r"config\.skip names 'synthetic:nope'.*names the data variant 'nope'",
        ),
    ],
)
def test_bad_data_variants_are_refused_before_any_work(changes, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        protocol.run_protocol(_small(**changes), str(tmp_path / "w"))
    assert not os.path.exists(tmp_path / "w")


def _method_section(config_name: str, label: str, variant: str = "lomo") -> dict:
    section = config_module(config_name).get_config(variant).method.to_dict()
    assert section["name"] == label.partition(":")[0]
    return section


@pytest.mark.parametrize("arg", ["table3", "retinex", "past_paper"])
def test_the_lomo_tables_run_each_learner_as_its_lomo_config_does(arg):
    c = defaults.overridden(
        get_config(arg), paths={"viper": "/data/VIPeR", "cuhk01": "/data/CUHK01"}
    )
    plan = protocol.Plan(c)
    # WARCA's lambda chosen by the validation people, a decade either side of its :lomo
    # config's, at that config's step; the closed forms have nothing to choose
    assert plan.cv_methods == ["warca:kernel"]
    assert sorted(plan.grids["warca:kernel"]) == [(1e-5, 1e-2), (1e-4, 1e-2), (1e-3, 1e-2)]
    warca = _method_section("warca", "warca:kernel")
    # the kernel form with NFST's RBF kernel at D' 100, its bandwidth from the data
    assert (warca["lam"], warca["kernel"], warca["dim"], warca["kernel_gamma"]) == (
        1e-4,
        "rbf",
        100,
        0.0,
    )
    files = {"warca:kernel": "warca", "mlapg": "mlapg", "xqda": "xqda", "nfst": "nfst"}
    for name in plan.datasets:
        for label in plan.runs(name):
            got = protocol.run_method_config(c, label, name, plan.dim(name)).to_dict()
            if label in files:
                assert got == _method_section(files[label], label), (name, label)
            else:  # the references, at the paper's output dimension
                want = defaults.method_config(label).to_dict()
                if "dim" in want:
                    want["dim"] = 100 if name.startswith("viper") else 40
                assert got == want, (name, label)
    data = {name: protocol.data_config(c, name) for name in plan.datasets}
    for name, cfg in data.items():
        assert cfg.name == name.partition(":")[0]
        assert cfg.path == ("/data/VIPeR" if cfg.name == "viper" else "/data/CUHK01")
    got = {
        name: (d.descriptor, d.normalize, d.height, dict(d.loader_options))
        for name, d in data.items()
    }
    shot = {"protocol": "multi_shot"}
    liao = ("lomo_retinex", "none", 128, {"folds": "liao", "probe": "cam_b"})
    if arg == "table3":
        assert got == {
            "viper": ("lomo", "none", 128, {}),
            "viper:liao": liao,
            "cuhk01:gallery_draw": ("lomo", "none", 160, {}),
            "cuhk01:multi_shot": ("lomo", "none", 160, shot),
        }
        assert "mlapg" in plan.runs("cuhk01:gallery_draw")
        assert "mlapg" not in plan.runs("cuhk01:multi_shot")
        return
    if arg == "retinex":  # each reading its own descriptor, CUHK01 as Table 3's multi shot
        for reading in ("none", "msrcr", "msrcp", "retinex"):
            lomo = "lomo" if reading == "none" else f"lomo_{reading}"
            assert got[f"viper:{reading}"] == (lomo, "none", 128, {})
            assert got[f"cuhk01:{reading}"] == (lomo, "none", 160, shot)
        assert len(got) == 8
        assert all(plan.runs(name) == ["xqda", "warca:kernel"] for name in plan.datasets)
        return
    assert got == {
        "viper:lomo": ("lomo", "none", 128, {}),
        "viper:liao": liao,
        "viper:gog": ("gog", "center_l2", 128, {}),
        "cuhk01:lomo": ("lomo", "none", 160, shot),
        "cuhk01:gog": ("gog", "center_l2", 160, shot),
    }
    assert all(plan.runs(name) == list(c.methods) for name in plan.datasets)


def test_a_protocol_run_of_an_entry_stores_its_own_features(tmp_path):
    c = _small(datasets=("synthetic:few",), data_variants=FEW)
    protocol.run_protocol(c, str(tmp_path))
    with np.load(tmp_path / "data" / "synthetic-few.npz") as z:
        assert len(np.unique(z["labels"])) == 30
        assert json.loads(str(z["config"]))["synthetic"]["noise"] == 0.5
