"""The learners' config files read as the experiment: each spells the settings a reader asks
about, and what it spells agrees with the library's defaults (one home for a default, the
learner's ``default_config``; the file says it where the reader looks)."""

import ast
import pkgutil

import pytest
from repo_configs import CONFIGS, config_module, config_path

from warca_jax import methods
from warca_jax.runs import defaults

# The settings each learner's config file spells (assigned to ``m``, its method section):
# its main knobs as its paper and its ``default_config`` name them. A file may spell more.
SPELLED = {
    "frml": ("dim", "lam", "margin", "learning_rate", "num_iters", "batch_size"),
    "itml": ("gamma", "num_constraints", "prior", "max_iter", "tol"),
    "kernel_nn": ("kernel", "kernel_gamma"),
    "kissme": ("pca_variance", "pca_dim", "num_negative_pairs", "reg"),
    "kmeans": ("num_clusters", "iterations", "init"),
    "lfda": ("kernel", "dim", "knn", "reg", "embedding"),
    "lmnn": ("k", "dim", "mu", "learning_rate", "num_iters", "stop_val_fraction"),
    "lsml": ("n_constraints", "prior", "lam", "max_iter", "tol"),
    "mahalanobis": ("covariance", "reg"),
    "mlapg": ("pca_dim", "dim", "max_iters", "tol"),
    "mmc": ("num_constraints", "max_iter", "tol", "projection"),
    "nca": ("dim", "optimizer", "num_iters", "learning_rate", "tol"),
    "nfst": ("kernel", "kernel_gamma"),
    "nn": ("distance",),
    "pairwise_sgd": ("dim", "lam", "learning_rate", "batch_size", "num_epochs"),
    "rca": ("n_chunks", "chunk_size", "dim", "reg"),
    "rpcca": ("kernel", "dim", "beta", "lam", "learning_rate", "num_iters", "batch_size"),
    "scml": ("k_genuine", "k_impostor", "n_basis", "beta", "max_iter", "batch_size"),
    "sdml": ("balance_param", "sparsity_param", "prior", "max_iter"),
    "svmml": ("pca_variance", "lam", "num_iters", "solver"),
    "triplet_sgd": ("dim", "margin", "learning_rate", "batch_size", "num_epochs"),
    "warca": (
        "kernel", "dim", "lam", "lam_grid", "lam_val_fraction", "learning_rate", "num_iters",
        "batch_size",
    ),
    "xqda": ("dim", "reg", "ridge", "pairs"),
}  # fmt: skip


def _learner_files() -> list[str]:
    """configs/<name>.py of the learners (the drivers' files have no method section)."""
    names = []
    for info in pkgutil.iter_modules([CONFIGS]):
        config = config_module(info.name).get_config()
        method = config.method.get("name", "") if "method" in config else ""
        if method in methods.registry() and method.startswith(info.name):  # kmeans: kmeans_nn
            names.append(info.name)
    return names


LEARNER_FILES = _learner_files()


def _spelled(name: str) -> set[str]:
    """The fields ``get_config`` of configs/<name>.py assigns to ``m`` (its method section)."""
    with open(config_path(name)) as f:
        tree = ast.parse(f.read())
    get_config = next(n for n in tree.body if getattr(n, "name", "") == "get_config")
    return {
        t.attr
        for node in ast.walk(get_config)
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "m"
    }


def test_every_learner_has_its_config_file_and_its_settings():
    assert len(LEARNER_FILES) == len(methods.registry()) and set(SPELLED) == set(LEARNER_FILES)


@pytest.mark.parametrize("name", sorted(SPELLED))
def test_a_learners_config_file_spells_its_main_settings(name):
    config = config_module(name).get_config()
    missing = sorted(set(SPELLED[name]) - _spelled(name))
    assert not missing, f"configs/{name}.py does not spell {missing}"
    assert _spelled(name) <= set(config.method.keys())


def _shared_variants():
    """(file, method, variant) for each variant a config file shares with its learner."""
    out = []
    for name in LEARNER_FILES:
        module = config_module(name)
        method = module.get_config().method.name
        out += [(name, method, v) for v in module.VARIANTS if v in methods.get(method).variants]
    return out


@pytest.mark.parametrize("name,method,variant", _shared_variants())
def test_what_a_config_file_spells_agrees_with_the_library(name, method, variant):
    """A variant the file and its learner both have: the file's method section is the
    learner's default, field for field, value and type (a default changed in one place and
    not the other fails here)."""
    got = config_module(name).get_config(variant).method.to_dict()
    want = defaults.method_config(f"{method}:{variant}").to_dict()
    assert got == want
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}


def test_the_agreement_check_sees_a_changed_default(monkeypatch):
    """The check above fails when the library's default moves and the file's does not."""
    learner = methods.get("kissme")
    real = learner.default_config

    def moved(variant="default"):
        cfg = real(variant)
        cfg.reg = cfg.reg * 10
        return cfg

    monkeypatch.setitem(methods.registry(), "kissme", learner._replace(default_config=moved))
    with pytest.raises(AssertionError):
        test_what_a_config_file_spells_agrees_with_the_library("kissme", "kissme", "default")
