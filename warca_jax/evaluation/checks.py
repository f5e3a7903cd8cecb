"""Input validation of the evaluation: ids, distance matrices, sizes, mesh and chunk.

Every check raises a ValueError that says what is wrong and where (the count and the
first place of bad values), before any work is dispatched. Features are checked by
``warca_jax.maths.distances.scaled_features``, which the ranking of features shares with
``pairwise_distances``.
"""

from __future__ import annotations

import numpy as np
from jax.sharding import Mesh

from warca_jax.data.dataset_arrays import integer_ids
from warca_jax.maths.device_mesh import DATA, make_mesh
from warca_jax.maths.distances import finite_range, scale_shift

# What holds the nq queries and the ng gallery entries, for the messages of _check_ids.
_FEATURE_ROWS = ("the query features have {n} rows", "the gallery features have {n} rows")
_DIST_ROWS = ("dist has {n} rows", "dist has {n} columns")

_DIST_RANGE = (2.0**-100, 2.0**100)  # distance matrices outside it are rescaled (ranking)


def _check_positive_int(name: str, value) -> None:
    """ValueError unless value is an int (or NumPy integer) >= 1."""
    if not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _check_ids(name: str, a, n: int, source: str) -> np.ndarray:
    """``data.integer_ids`` with the message's ``source`` formatted with n."""
    return integer_ids(a, name, n, source.format(n=n))


def _check_protocol(ql, gl, qc, gc, nq: int, ng: int, max_rank, *, rows=_FEATURE_ROWS):
    """The four id arrays as int64, checked against nq queries and ng gallery entries.

    rows: what holds the nq queries and the ng gallery entries, for the messages.
    """
    if max_rank is not None and (not isinstance(max_rank, int | np.integer) or max_rank < 1):
        raise ValueError(f"max_rank must be a positive int or None, got {max_rank!r}")
    q_src, g_src = rows
    return (
        _check_ids("query_labels", ql, nq, q_src),
        _check_ids("gallery_labels", gl, ng, g_src),
        _check_ids("query_cams", qc, nq, q_src),
        _check_ids("gallery_cams", gc, ng, g_src),
    )


def _check_sizes(nq: int, gl: np.ndarray, what: str) -> None:
    """ValueError on no queries, no gallery entries, or a gallery of label -1 only."""
    if nq == 0:
        raise ValueError(f"no queries to evaluate: {what} 0 query rows")
    if len(gl) == 0:
        raise ValueError(f"empty gallery, so no query has a true match: {what} 0 gallery rows")
    if np.all(gl == -1):
        raise ValueError(
            f"no query has a true match in the gallery: all its {len(gl)} labels are -1 "
            "(junk, removed for every query), so there is nothing to rank"
        )


def _no_true_match(ql: np.ndarray, junk: np.ndarray):
    """Raises the ValueError of a protocol in which no query has a true match.

    junk: [nq, k] bool, the same-identity same-camera entries of each query.
    """
    only_same_cam = int(np.sum(junk.any(axis=1)))
    absent = len(ql) - only_same_cam
    raise ValueError(
        "no query has a true match in the gallery, so no metric can be computed. A true "
        "match is a gallery entry with the query's label from another camera (entries from "
        "the query's own camera, and gallery label -1, are junk under the Market-1501 / "
        f"CUHK03 protocol). Of the {len(ql)} queries, {absent} have no gallery entry with "
        f"their label and {only_same_cam} only entries from their own camera: check that "
        "query and gallery use the same label ids and that the camera ids are right"
    )


def _check_dist(dist) -> np.ndarray:
    """A distance matrix as float32 for ranking; ValueError on a bad one.

    Finite float64 distances beyond float32's range, or so small that float32 would round
    them to subnormals or zeros, are divided by a common power of two first (rankings do
    not change); others are the plain float32 cast.
    """
    dist = np.asarray(dist)
    if dist.dtype.kind not in "biuf":
        raise ValueError(f"dist must hold real numbers, got dtype {dist.dtype}")
    if dist.ndim != 2:
        raise ValueError(f"dist must be 2-D [nq, ng], got shape {dist.shape}")
    if dist.size == 0:
        return dist.astype(np.float32)
    lo, hi = finite_range(dist, "dist holds", "finite distances")
    top = max(-lo, hi)
    if top == 0 or _DIST_RANGE[0] <= top <= _DIST_RANGE[1]:
        return np.asarray(dist, dtype=np.float32)
    wide = dist if dist.dtype in (np.float32, np.float64) else dist.astype(np.float64)
    return np.ldexp(wide, -scale_shift(top)).astype(np.float32, copy=False)


def _check_mesh_and_chunk(mesh: Mesh | None, gallery_chunk: int) -> Mesh:
    """The mesh to use (None: all devices); ValueError on a bad mesh or chunk."""
    if isinstance(gallery_chunk, bool) or not isinstance(gallery_chunk, int | np.integer):
        raise ValueError(f"gallery_chunk must be a positive int, got {gallery_chunk!r}")
    if gallery_chunk < 1:
        raise ValueError(f"gallery_chunk must be a positive int, got {gallery_chunk!r}")
    if mesh is None:
        return make_mesh(0)
    if not isinstance(mesh, Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh or None, got {type(mesh).__name__}")
    if tuple(mesh.axis_names) != (DATA,):
        raise ValueError(
            f"mesh must have the one axis {DATA!r} (warca_jax.maths.device_mesh.make_mesh), "
            f"got axes {tuple(mesh.axis_names)}"
        )
    return mesh


def _check_distance_input(dist, query_labels, gallery_labels, query_cams, gallery_cams, max_rank):
    """The checks of a distance matrix and its protocol arrays, shared by both evaluations.

    Returns:
      (dist as a float array, query labels, gallery labels, query cams, gallery cams).
    """
    dist = _check_dist(dist)
    ids = _check_protocol(
        query_labels, gallery_labels, query_cams, gallery_cams, *dist.shape, max_rank,
        rows=_DIST_ROWS,
    )  # fmt: skip
    _check_sizes(len(ids[0]), ids[1], "dist has")
    return (dist, *ids)
