"""Multi-shot evaluation (the whole gallery): of features, and of a distance matrix.

``evaluate`` ranks features with the count sweep (``sweep``), ``evaluate_distances`` a
given matrix with the host sort (``sort``); both then share ``blocks._evaluate_blocks``.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh

from warca_jax.evaluation.blocks import _evaluate_blocks
from warca_jax.evaluation.checks import (
    _check_distance_input,
    _check_mesh_and_chunk,
    _check_positive_int,
    _check_protocol,
    _check_sizes,
)
from warca_jax.evaluation.sort import _sort_ranks
from warca_jax.evaluation.sweep import GALLERY_CHUNK, _GallerySweep
from warca_jax.maths.distances import pad_rows, row_block, scaled_features


def evaluate(
    query_features: jax.typing.ArrayLike,
    gallery_features: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    distance: str = "euclidean",
    max_rank: int | None = None,
    block_size: int = 256,
    mesh: Mesh | None = None,
    gallery_chunk: int = GALLERY_CHUNK,
) -> dict:
    """Re-id metrics of features under the Market-1501 / CUHK03 protocol.

    The protocol and the results are those of the ``warca_jax.evaluation`` docstring
    (Protocol, Results). The gallery is sharded by rows over ``mesh`` and ranked by counting
    (``warca_jax.evaluation.sweep``). Memory is the gallery, a few ``[block_size,
    gallery_chunk]`` tiles and O(nq * k) ints (k: the most same-identity entries of a
    query); nothing of size ``block_size x ng``. The results do not depend on the number of
    devices.

    Args:
      query_features: [nq, d]. gallery_features: [ng, d].
      query_labels, query_cams: [nq] ints. gallery_labels, gallery_cams: [ng] ints.
      distance: one of ``DISTANCES``.
      max_rank: length of the returned CMC (default: gallery size).
      block_size: queries per distance tile (for ``manhattan``/``chi2`` capped so that
        block * gallery_chunk * d stays below 2M elements, as in ``pairwise_distances``).
      mesh: 1-D mesh over ``device_mesh.DATA`` (``warca_jax.maths.device_mesh.make_mesh``);
        None: all devices.
      gallery_chunk: gallery columns per distance tile (at most the gallery size). The
        default keeps a CPU tile in cache; on an accelerator, larger tiles (fewer loop steps)
        may pay off.

    Features of any finite scale are ranked correctly (package docstring: Scale).

    Raises:
      ValueError: bad features (not 2-D, NaN or inf, dims differ, negative for chi2), ids
        (not integers, lengths not matching the features), distance, ``max_rank``,
        ``block_size``, ``mesh`` or ``gallery_chunk``; no query or gallery entry; or no
        query with a true match in the gallery.
      RuntimeError: the device gave different distances for the same tile twice.
      FloatingPointError: the device gave a non-finite distance (never, for finite input).

    Returns:
      dict of plain Python numbers and one numpy array (package docstring: Results):
      ``cmc``, ``rank1``, ``rank5``, ``rank10``, ``rank20``, ``mAP``, ``mINP``, ``AUC``,
      ``AUC_top30`` (percentages), ``num_queries``, ``num_valid``, ``num_skipped``.
    """
    # Rescaled by a common power of two: the same ranking, at any finite scale.
    x, y, _ = scaled_features(query_features, gallery_features, distance, block_size)
    ql, gl, qc, gc = _check_protocol(
        query_labels, gallery_labels, query_cams, gallery_cams, len(x), len(y), max_rank
    )
    _check_sizes(len(x), gl, "the features have")
    mesh = _check_mesh_and_chunk(mesh, gallery_chunk)
    kept = np.flatnonzero(gl != -1)
    chunk = max(1, min(int(gallery_chunk), len(kept)))
    b = row_block(block_size, chunk, y.shape[1], distance)
    gallery = (
        _GallerySweep(y, kept, mesh=mesh, distance=distance, chunk=chunk) if len(kept) else None
    )

    def block_ranks(queries, same, present):
        return gallery.ranks(pad_rows(x[queries], same.shape[0]), same, present)

    return _evaluate_blocks(block_ranks, ql, qc, gl, gc, block_size=b, max_rank=max_rank)


def evaluate_distances(
    dist: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    max_rank: int | None = None,
    block_size: int = 256,
) -> dict:
    """Re-id metrics of a precomputed distance matrix (smaller is closer).

    The protocol and the results are those of the ``warca_jax.evaluation`` docstring
    (Protocol, Results). Distances are cast to float32 before ranking, so ties are float32
    ties (distances whose largest magnitude is outside [2**-100, 2**100] are first divided
    by a common power of two, so that float64 distances of any finite scale rank
    correctly). Each block of queries is ranked by a host sort of 64-bit keys
    (``warca_jax.evaluation.sort``; memory ~16 * block_size * ng bytes).

    Args:
      dist: [nq, ng] distances (numpy or jax), finite.
      query_labels, query_cams: [nq] ints. gallery_labels, gallery_cams: [ng] ints.
      max_rank: length of the returned CMC (default: gallery size).
      block_size: queries per jitted block.

    Raises:
      ValueError: bad ``dist`` (not 2-D real, NaN or inf), ids (not integers, lengths not
        matching ``dist``), ``max_rank`` or ``block_size``; no query or gallery entry; or
        no query with a true match in the gallery.

    Returns:
      dict of plain Python numbers and one numpy array (package docstring: Results):
      ``cmc``, ``rank1``, ``rank5``, ``rank10``, ``rank20``, ``mAP``, ``mINP``, ``AUC``,
      ``AUC_top30`` (percentages), ``num_queries``, ``num_valid``, ``num_skipped``.
    """
    _check_positive_int("block_size", block_size)
    dist, ql, gl, qc, gc = _check_distance_input(
        dist, query_labels, gallery_labels, query_cams, gallery_cams, max_rank
    )
    block_ranks, b = _sort_ranks(dist, gl != -1, block_size)
    return _evaluate_blocks(block_ranks, ql, qc, gl, gc, block_size=b, max_rank=max_rank)
