"""The library's defaults: what a config file (configs/*.py) starts from.

* ``base_config()``: seed, data (the built-in synthetic data), evaluation and progress,
  an unlocked ConfigDict without a ``method`` section (``progress_bars`` reads progress);
* ``method_config(label)``: a learner's default hyperparameters, the ``method`` section,
  named ``<method>[:<variant>]`` (``warca:chi2``, ``kissme``); each learner owns its
  defaults (``default_config(variant)`` in its module, listed by ``warca_jax.methods``);
* ``experiment_config(label, ...)``: the two together, locked: a whole run's config;
* ``load_config(path)``: a config file by path, ``configs/warca.py:chi2``, as the
  ``--config`` flag of the entry points reads it (for notebooks and tests);
* ``overridden(section, **fields)``: a copy with some fields changed.

A file in configs/ is an experiment: it starts from these and sets data, variants and
overrides. Nothing here reads configs/ except ``load_config``, by the path it is given.
"""

import copy
import sys

import ml_collections

from warca_jax import methods


def base_config(*, histogram: bool = False, small: bool = False) -> ml_collections.ConfigDict:
    """Seed, data (the built-in synthetic data by default) and evaluation settings.

    Args:
      histogram: use the non-negative, L1-normalised variant of the synthetic data
        (for chi2 distances and kernels).
      small: a shrunk dataset (60 identities, 2 splits) for smoke tests.
    """
    c = ml_collections.ConfigDict()
    c.seed = 0  # one PRNG key from it, split once; same seed, same result.

    c.data = ml_collections.ConfigDict()
    # 'synthetic' (built in), 'npz' (the generic format, docs/datasets.md) or a dataset of
    # warca_jax.datasets (market1501, cuhk03, viper, ...).
    c.data.name = "synthetic"
    c.data.path = ""  # the .npz file, or the dataset's folder (or feature file).
    # image descriptor: 'color_lbp' (2,580-d), 'lomo', 'lomo_retinex' (LOMO with the
    # original's Retinex; 'lomo_msrcr', 'lomo_msrcp': earlier readings of it), 'gog' or
    # one of its colour spaces (features.DESCRIPTORS).
    c.data.descriptor = "color_lbp"
    c.data.cache_dir = ""  # where image descriptors are cached ('': not cached).
    c.data.batch_size = 256  # images per batch while extracting descriptors.
    # the size (height x width) images are resized to before description: 128 x 48, VIPeR's
    # own; CUHK01's images are 160 x 60, at which LOMO gives XQDA and WARCA more on CUHK01
    # (docs/datasets.md, "Image size").
    c.data.height = 128
    c.data.width = 48
    # images smaller than the descriptor's smallest size (6 x 5 for color_lbp, 11 x 11 for
    # lomo): False refuses them, naming them; True leaves them out, logged.
    c.data.skip_small_images = False
    # per-split normalisation of the features (warca_jax.features.feature_norm): 'none', or
    # 'center_l2' (each descriptor part, e.g. fused GOG's colour spaces, centred by the
    # split's training mean and L2-normalised per image, as GOG's release does).
    c.data.normalize = "none"
    # further loader options, a map, e.g. --config.data.loader_options="{'variant': 'detected'}".
    c.data.loader_options = ml_collections.ConfigDict()
    c.data.num_splits = 10  # random identity splits when the data has no fixed splits.
    c.data.num_train_ids = 0  # identities for training (0: all that are not for test).
    c.data.num_test_ids = 0  # identities for test (0: half of them).
    c.data.seed = 0  # seed of the synthetic data and of the random splits.
    # fraction of the training identities of each split held out for validation (0: none):
    # an iterative learner is evaluated on them (query/gallery drawn as for test) after
    # every logged chunk, val_rank1 and val_mAP in metrics.jsonl; it trains on the rest.
    # Drawn from seed and the split index. A closed-form learner refuses a non-zero value.
    c.data.val_fraction = 0.0
    c.data.synthetic = ml_collections.ConfigDict()
    c.data.synthetic.num_ids = 200  # identities.
    c.data.synthetic.images_per_id = 4  # images per identity, spread over cameras.
    c.data.synthetic.num_cams = 2  # cameras.
    c.data.synthetic.dim = 64  # feature dimension D.
    c.data.synthetic.signal_dim = 8  # dimension of the identity subspace.
    c.data.synthetic.num_nuisance = 4  # strong nuisance directions.
    c.data.synthetic.nuisance_scale = 5.0  # std of the nuisance coefficients.
    c.data.synthetic.noise = 1.0  # isotropic noise level.
    c.data.synthetic.histogram = False  # non-negative L1-normalised variant (for chi2).

    c.eval = ml_collections.ConfigDict()
    c.eval.baseline = True  # also evaluate plain Euclidean distance on each split.
    # CUHK03 single-shot as torchreid draws it: per query, one random gallery image per
    # identity after its own identity-and-camera entries are removed; averaged over repeats.
    c.eval.single_shot = False
    c.eval.repeats = 10  # single-shot repetitions.
    c.eval.plot_max_rank = 50  # ranks shown in the CMC plot.
    # k-reciprocal re-ranking (Zhong et al., CVPR 2017; k1=20, k2=6, lambda=0.3) of the
    # query-gallery distances before they are ranked (evaluation.rerank; memory bounded).
    c.eval.rerank = False
    # with data.val_fraction > 0: keep the model of the logged chunk with the best
    # validation mAP (the earliest of ties) instead of the last one.
    c.eval.keep_best = False
    # progress bars: None shows them when stderr is a terminal (not in a log file), True
    # and False always and never (``progress_bars``).
    c.progress = ml_collections.config_dict.placeholder(bool)

    if histogram:
        c.data.synthetic.histogram = True
    if small:
        c.data.num_splits = 2
        c.data.synthetic.num_ids = 60
        c.progress = False
    return c


def progress_bars(progress: bool | None) -> bool:
    """Whether to show progress bars for a config's ``progress`` field: True and False force
    them on and off; None (the default) shows them when stderr is a terminal, so that a
    run logged to a file gets none."""
    if progress is not None:
        return bool(progress)
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return False


def overridden(section: ml_collections.ConfigDict, **overrides) -> ml_collections.ConfigDict:
    """An unlocked copy of a config section with some fields changed.

    For notebooks and tests: ``overridden(get_config().method, lam=1e-3)``. A field the
    section does not have is refused, as a locked config would refuse it.
    """
    unknown = sorted(set(overrides) - set(section.keys()))
    if unknown:
        raise KeyError(f"unknown config fields {unknown}; the section has {sorted(section.keys())}")
    out = copy.deepcopy(section)
    out.unlock()
    out.update(overrides)
    return out


def method_config(label: str) -> ml_collections.ConfigDict:
    """The default ``method`` section named by ``label``, ``<method>[:<variant>]``, unlocked.

    ``warca`` is WARCA's default variant, ``warca:chi2`` its chi2 variant; the variants are
    the learner's ``default_config`` ones (``methods.get(name).variants``).

    Raises:
      ValueError: an unknown method or variant, naming the known ones.
    """
    if not isinstance(label, str) or not label:
        raise ValueError(
            f"a method label is '<method>[:<variant>]', e.g. 'warca:chi2'; got {label!r}"
        )
    name, sep, variant = label.partition(":")
    if sep and not variant:
        raise ValueError(f"method label {label!r} has an empty variant; e.g. 'warca:chi2'")
    known = methods.registry()
    if name not in known:
        raise ValueError(
            f"unknown method label {label!r}: a label is <method>[:<variant>], e.g. "
            f"warca:chi2 or kissme; the methods are {sorted(known)}"
        )
    method = known[name]
    if variant and variant not in method.variants:
        raise ValueError(f"unknown variant in method label {label!r}; {name} has {method.variants}")
    return method.default_config(variant) if variant else method.default_config()


def experiment_config(
    label: str,
    variant: str = "",
    *,
    histogram: bool = False,
    small: bool = False,
    lock: bool = True,
) -> ml_collections.ConfigDict:
    """A whole run's config: ``base_config(histogram, small)`` with ``method_config``'s section.

    ``experiment_config("lfda", "chi2", histogram=True)`` is what configs/lfda.py:chi2 runs.
    ``variant`` may instead be part of ``label`` (``"lfda:chi2"``). Locked unless ``lock`` is
    False, so that a misspelt field is an error.
    """
    c = base_config(histogram=histogram, small=small)
    c.method = method_config(f"{label}:{variant}" if variant else label)
    if lock:
        c.lock()
    return c
