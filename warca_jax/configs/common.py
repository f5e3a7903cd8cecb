"""The parts every method's config shares: seed, data, evaluation, progress.

``base_config()`` returns an unlocked ConfigDict without a ``method`` section;
each warca_jax/configs/<method>.py adds its documented ``method`` section and locks it.
"""

import copy

import ml_collections


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
    c.data.name = "synthetic"  # 'synthetic' (built in), 'npz' (generic format, DESIGN.md) or
    #                            a dataset of warca_jax.datasets (market1501, cuhk03, viper, ...).
    c.data.path = ""  # the .npz file, or the dataset's folder (or feature file).
    c.data.descriptor = "color_lbp"  # image descriptor: 'color_lbp' (2,580-d) or 'lomo'.
    c.data.cache_dir = ""  # where image descriptors are cached ('': not cached).
    c.data.batch_size = 256  # images per batch while extracting descriptors.
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
    c.progress = True  # progress bars.

    if histogram:
        c.data.synthetic.histogram = True
    if small:
        c.data.num_splits = 2
        c.data.synthetic.num_ids = 60
        c.progress = False
    return c


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
