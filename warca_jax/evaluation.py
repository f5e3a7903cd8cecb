"""Re-identification evaluation: distances, CMC, mAP, mINP and AUC.

The protocol is the Market-1501 / CUHK03 one. For every query, gallery entries of the same
identity *and* the same camera are junk and removed, and gallery entries labelled ``-1``
are always removed. Label ``0`` (distractors) is an ordinary negative. The ranking is a
stable sort on distance: equal distances keep gallery order. A query with no true match
left in the gallery is skipped and counted in ``num_skipped``.

Every metric needs, per query, only the 0-based rank of each same-identity gallery entry j
in that stable order, and the rank is a count: ``rank_j = #{m : d_m < d_j or (d_m == d_j
and m < j)}`` over the gallery without label -1. ``evaluate`` counts instead of sorting:

1. Queries are taken in blocks of ``b`` rows, ordered by their number of same-identity
   entries and then identity, so that a block has few slots ``k`` and shares its entries.
2. Thresholds: the sweep program below, run on the block's same-identity gallery rows
   (gathered), gives each slot's distance ``thr`` as the sweep itself computes it.
3. Sweep: one jitted program walks the gallery in ``[b, c]`` distance tiles
   (``c = gallery_chunk``) and adds up, per slot, the entries that come before it (one
   fused compare-and-sum over the tile per slot); it also returns the tile's own distance
   at each same-identity column. The gallery is sharded by rows over a 1-D device mesh
   (``warca_jax.sharding``); each device scans its own chunks and the counts and distances
   are summed over devices (integers, and one nonzero term per distance: exact). The tile
   shape does not depend on the number of devices, so 1 and N devices give the same numbers.
4. Where a threshold is not bit for bit the sweep's own distance, the block is swept again
   with the sweep's distances as thresholds, so the ranks are exact for the distances of
   the sweep program.

Memory: the gallery (sharded, padded to a multiple of devices x ``c`` rows), a few ``[b, c]``
tiles and O(nq * k) per-query arrays; nothing of size ``b x ng``. Work: the ``nq x ng``
distances once (plus about one tile per block for the thresholds), and about ``k`` compares
per distance. ``evaluate_distances`` ranks a given ``[nq, ng]`` matrix by sorting instead: a
jitted function turns each ``(distance, gallery index)`` pair into one 64-bit key ordered
exactly as the stable order (row | float bits | index), NumPy sorts the keys on the host
(XLA's CPU sort is ~20x slower) and the ranks come from a binary search (memory ~16 * b * ng
bytes per block).

Scale: rankings do not change under a common positive rescaling of query and gallery, so
``evaluate`` and ``single_shot_evaluate`` rank features divided by a common power of two
when their largest magnitude is outside ``distances.SAFE_MAGNITUDE`` (exact; nothing
changes at ordinary scales), and the ranking functions of distance matrices do the same
for distances outside ``[2**-100, 2**100]``. Any finite input is ranked correctly; NaN or
inf, labels that are not integers, mismatched lengths, empty sets and a protocol with no
true match at all are refused with a ValueError saying what and where.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import shard_map
from jax.sharding import Mesh, PartitionSpec

from warca_jax.distances import (  # noqa: F401  (DISTANCES, pairwise_distances re-exported)
    DISTANCES,
    block_distances,
    blocked_distances,
    pad_rows,
    pairwise_distances,
    row_block,
    scale_shift,
    scaled_features,
    sq_norms,
)
from warca_jax.sharding import DATA, make_mesh, replicated, rows

_RANKS = (1, 5, 10, 20)
GALLERY_CHUNK = 2048  # default gallery columns per distance tile of ``evaluate``


# ----------------------------------------------------------------------------- ranking
def _sort_keys(dist: jax.Array, *, idx_bits: int) -> jax.Array:
    """64-bit keys (as uint32 pairs) ordering each row stably by distance.

    key = row << (32 + idx_bits) | monotone_bits(dist) << idx_bits | gallery index, so one
    flat sort of a block orders rows, then distances, then gallery index. dist: [b, g] ->
    [b, g, 2] uint32 in native byte order of a uint64.
    """
    # -0.0 ties with +0.0. On the bits: a float compare would see subnormals as zero (XLA on
    # a CPU flushes them), and they must keep their order.
    u = jax.lax.bitcast_convert_type(dist.astype(jnp.float32), jnp.uint32)
    u = jnp.where(u == jnp.uint32(0x80000000), jnp.uint32(0), u)
    u = jnp.where(u >> 31 != 0, ~u, u | jnp.uint32(0x80000000))  # float order as uint order
    b, g = dist.shape
    row = jnp.arange(b, dtype=jnp.uint32)[:, None]
    col = jnp.arange(g, dtype=jnp.uint32)[None, :]
    high = (row << idx_bits) | (u >> (32 - idx_bits))
    low = (u << idx_bits) | col
    pair = (low, high) if sys.byteorder == "little" else (high, low)
    return jnp.stack(pair, axis=-1)


_dist_keys = jax.jit(_sort_keys, static_argnames="idx_bits")


@functools.cache
def _sweep_fn(mesh: Mesh, metric: str, chunk: int) -> Callable:
    """The jitted sweep of one query block over a gallery sharded by rows on ``mesh``.

    The function returned maps ``(x, xx, y, yy, thr, thr_idx, num_slots, num_cols)`` with
    x: [b, d] and xx: [b] (replicated), y: [n, d] and yy: [n] (sharded by rows; n a multiple
    of mesh size * chunk, rows >= num_cols are padding), thr: [b, k] float32 and thr_idx:
    [b, k] int32 (replicated) to

      counts: [b, k] int32, counts[i, j] = #{m < num_cols : d_im < thr_ij or (d_im == thr_ij
        and m < thr_idx_ij)} for slots j < num_slots, 0 for the others;
      vals: [b, k] float32, d_i,thr_idx_ij as the tile computes it.

    Each device scans its own rows in ``[b, chunk]`` tiles; the tile shape, hence every
    distance, is the same for any number of devices.
    """

    def local(x, xx, y, yy, thr, thr_idx, num_slots, num_cols):
        steps = y.shape[0] // chunk
        offset = jax.lax.axis_index(DATA) * y.shape[0]
        thr_t, idx_t = thr.T, thr_idx.T  # [k, b]: one contiguous row per slot
        tile_cols = jnp.arange(chunk, dtype=jnp.int32)

        def step(carry, tile):
            counts, vals = carry
            y_tile, yy_tile, s = tile
            start = offset + s * chunk
            cols = start + tile_cols
            dist = block_distances(x, y_tile, xx, yy_tile, metric=metric)
            dist = jnp.where(cols[None, :] < num_cols, dist, jnp.inf)
            at = thr_idx - start
            own = jnp.take_along_axis(dist, jnp.clip(at, 0, chunk - 1), axis=1)
            vals = jnp.where((at >= 0) & (at < chunk), own, vals)

            # One [b, chunk] compare-and-sum per slot: XLA vectorises this row reduction; the
            # fused [b, chunk, k] form, not vectorised, counts 5-10x slower on a CPU.
            def count(j, counts):
                t, t_idx = thr_t[j][:, None], idx_t[j][:, None]
                before = (dist < t) | ((dist == t) & (cols[None, :] < t_idx))
                return counts.at[j].add(jnp.sum(before, axis=1, dtype=jnp.int32))

            return (jax.lax.fori_loop(0, num_slots, count, counts), vals), None

        init = (jnp.zeros(thr_t.shape, jnp.int32), jnp.zeros(thr.shape, jnp.float32))
        tiles = (y.reshape(steps, chunk, -1), yy.reshape(steps, chunk), jnp.arange(steps))
        (counts, vals), _ = jax.lax.scan(step, jax.lax.pcast(init, DATA, to="varying"), tiles)
        return jax.lax.psum(counts.T, DATA), _psum_bits(vals)

    rep, row = PartitionSpec(), PartitionSpec(DATA)
    specs = (rep, rep, row, row, rep, rep, rep, rep)
    return jax.jit(shard_map(local, mesh=mesh, in_specs=specs, out_specs=(rep, rep)))


def _psum_bits(a: jax.Array) -> jax.Array:
    """Sum over devices of float32 values that are nonzero on one device: exact bits."""
    bits = jax.lax.psum(jax.lax.bitcast_convert_type(a, jnp.int32), DATA)
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


@functools.cache
def _gather_fn(mesh: Mesh) -> Callable:
    """Jitted ``(y, yy, idx) -> (y[idx], yy[idx])`` replicated, y and yy sharded by rows.

    Each device takes the rows it holds, so no device ever holds the whole gallery.
    """

    def local(y, yy, idx):
        at = idx - jax.lax.axis_index(DATA) * y.shape[0]
        inside = (at >= 0) & (at < y.shape[0])
        at = jnp.clip(at, 0, y.shape[0] - 1)
        return (
            _psum_bits(jnp.where(inside[:, None], y[at], 0.0)),
            _psum_bits(jnp.where(inside, yy[at], 0.0)),
        )

    rep, row = PartitionSpec(), PartitionSpec(DATA)
    return jax.jit(shard_map(local, mesh=mesh, in_specs=(row, row, rep), out_specs=(rep, rep)))


def _host(a: jax.Array) -> np.ndarray:
    """A replicated array on the host (one local copy: works across hosts too)."""
    return np.asarray(a.addressable_data(0))


def _same_bits(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> bool:
    return np.array_equal(a.view(np.uint32)[mask], b.view(np.uint32)[mask])


_PLACE_ROWS = 65536  # gallery rows copied to a device at a time


@functools.partial(jax.jit, donate_argnums=0)
def _write_rows(buf: jax.Array, piece: jax.Array, start: jax.Array) -> jax.Array:
    return jax.lax.dynamic_update_slice(buf, piece, (start, jnp.int32(0)))


def _place_rows(y: np.ndarray, kept: np.ndarray, n: int, mesh: Mesh) -> jax.Array:
    """``y[kept]`` zero-padded to n rows, sharded by rows over ``mesh``.

    Each device's shard is filled in place, a few rows at a time, so that placing the
    gallery needs no second host copy of it.
    """
    sharding = rows(mesh)
    shape = (n, y.shape[1])
    shards = []
    for device, index in sharding.addressable_devices_indices_map(shape).items():
        lo, hi, _ = index[0].indices(n)
        buf = jnp.zeros((hi - lo, y.shape[1]), jnp.float32, device=device)
        for start in range(lo, min(hi, len(kept)), _PLACE_ROWS):
            piece = y[kept[start : min(start + _PLACE_ROWS, hi, len(kept))]]
            buf = _write_rows(buf, jax.device_put(piece, device), np.int32(start - lo))
        shards.append(buf)
    return jax.make_array_from_single_device_arrays(shape, sharding, shards)


class _GallerySweep:
    """The gallery without label -1, on a mesh, and the count ranking of query blocks."""

    def __init__(self, y: np.ndarray, kept: np.ndarray, *, mesh: Mesh, metric: str, chunk: int):
        """Places ``y[kept]`` sharded by rows, zero-padded to a multiple of devices x chunk.

        Args:
          y: [ng, d] float32 gallery features. kept: [g] indices of the rows to rank (g > 0).
          mesh: 1-D mesh over ``sharding.DATA``. metric: one of ``DISTANCES``.
          chunk: gallery columns per distance tile.
        """
        self.mesh, self.chunk, self.num_cols = mesh, chunk, len(kept)
        self.sweep = _sweep_fn(mesh, metric, chunk)
        self.gather = _gather_fn(mesh)
        self.y = _place_rows(y, kept, self._padded(len(kept)), mesh)
        self.yy = sq_norms(self.y)

    def _padded(self, n: int, *, pow2: bool = False) -> int:
        """Rows of an n-row gallery padded to whole tiles on every device.

        With ``pow2`` the tiles per device are rounded up to a power of two, so that the
        thresholds' small galleries, whose sizes vary by block, compile few programs.
        """
        per = self.mesh.devices.size * self.chunk
        tiles = -(-n // per)
        return per * (1 << (tiles - 1).bit_length() if pow2 else tiles)

    def thresholds(self, x, xx, same: np.ndarray, present: np.ndarray) -> jax.Array:
        """[b, k] distance of each query to its same-identity rows as the sweep computes it.

        The block's distinct same-identity rows are gathered into a small gallery and swept
        with zero slots counted; absent slots get -inf (they count nothing).
        """
        uniq, pos = np.unique(same[present], return_inverse=True)
        idx = np.zeros(self._padded(len(uniq), pow2=True), np.int32)
        idx[: len(uniq)] = uniq
        y, yy = self.gather(self.y, self.yy, self._put(idx))
        thr_idx = np.zeros(same.shape, np.int32)
        thr_idx[present] = pos
        dummy = np.zeros(same.shape, np.float32)
        _, vals = self.sweep(x, xx, y, yy, *self._put(dummy, thr_idx, 0, len(uniq)))
        return jnp.where(self._put(present), vals, -jnp.inf)

    def ranks(self, x_block: np.ndarray, same: np.ndarray, present: np.ndarray) -> Callable:
        """Dispatches the sweep of one block; returns ``finish() -> [b, k]`` int32 ranks.

        Args:
          x_block: [b, d] query features. same: [b, k] gallery indices (into the kept rows)
            of each query's same-identity entries. present: [b, k] bool, real slots (the
            first ones of each row).
        """
        if not present.any():  # no query of the block has a same-identity entry
            return lambda: np.zeros(same.shape, np.int32)
        x = self._put(x_block)
        xx = sq_norms(x)
        same32, slots = same.astype(np.int32), int(present.sum(axis=1).max(initial=0))
        args = self._put(same32, slots, self.num_cols)

        def sweep(thr):
            return self.sweep(x, xx, self.y, self.yy, thr, *args)

        thr = self.thresholds(x, xx, same, present)
        counts, vals = sweep(thr)

        def finish() -> np.ndarray:
            own = _host(vals)
            if not np.all(np.isfinite(own[present])):
                raise FloatingPointError(
                    f"the distance sweep gave {int(np.sum(~np.isfinite(own[present])))} "
                    "non-finite distances between finite features; they cannot be ranked"
                )
            if _same_bits(own, _host(thr), present):
                return _host(counts)
            # Float rounding differs between the thresholds and the sweep: sweep again with
            # the sweep's own distances (the program is deterministic, so they now agree).
            thr_exact = np.where(present, own, -np.inf).astype(np.float32)
            counts_exact, vals_exact = sweep(self._put(thr_exact))
            if not _same_bits(_host(vals_exact), thr_exact, present):
                raise RuntimeError(
                    "the distance sweep gave different distances for the same query block "
                    "twice; ranks cannot be made exact (nondeterministic device arithmetic?)"
                )
            return _host(counts_exact)

        return finish

    def _put(self, *arrays):
        """Host arrays (Python ints as int32 scalars) replicated on the mesh."""
        out = [
            jax.device_put(np.int32(a) if isinstance(a, int) else a, replicated(self.mesh))
            for a in arrays
        ]
        return out[0] if len(out) == 1 else out


@jax.jit
def _query_stats(rank, good, junk):
    """Per-query metrics from the ranks of the same-identity entries.

    Args:
      rank: [b, k] int32 0-based rank of each same-identity gallery entry among all
        gallery entries (label -1 already removed), in stable distance order.
      good: [b, k] bool, true match (same identity, other camera).
      junk: [b, k] bool, same identity and same camera (removed from the ranking).

    Returns:
      first: [b] 1-based position of the first true match after junk removal.
      ap: [b] average precision. inp: [b] inverse negative penalty. num_good: [b].
    """
    before = rank[:, None, :] < rank[:, :, None]  # [b, j, k]: entry k ranks before j
    pos = rank + 1 - jnp.sum(before & junk[:, None, :], axis=-1)
    hits = 1 + jnp.sum(before & good[:, None, :], axis=-1)
    num_good = jnp.sum(good, axis=1)
    first = jnp.min(jnp.where(good, pos, jnp.iinfo(jnp.int32).max), axis=1)
    ap = jnp.sum(jnp.where(good, hits / pos, 0.0), axis=1) / jnp.maximum(num_good, 1)
    inp = num_good / jnp.maximum(jnp.max(jnp.where(good, pos, 0), axis=1), 1)
    return first, ap, inp, num_good


# ----------------------------------------------------------------------------- protocol
def _check_ids(name: str, a, n: int, source: str) -> np.ndarray:
    """ids as int64; ValueError unless 1-D, n long and integer-valued.

    source: what has the n entries, for the message, e.g. "the query features have {n}
    rows" (formatted with n).
    """
    a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.shape[0] != n:
        raise ValueError(
            f"{name} has {a.shape[0]} entries but {source.format(n=n)}: one is needed per "
            f"{'query' if name.startswith('query') else 'gallery entry'}"
        )
    if a.dtype.kind not in "biuf":
        example = f" (e.g. {a[0]!r})" if len(a) else ""
        raise ValueError(
            f"{name} must hold integers, got dtype {a.dtype}{example}; map names to integer "
            "ids first, with the same map for query and gallery"
        )
    if a.dtype.kind == "f":
        bad = ~(np.isfinite(a) & (np.mod(a, 1) == 0) & (np.abs(a) < 2.0**53))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{name} must hold integers, got dtype {a.dtype} with {int(bad.sum())} "
                f"non-integer values (first at index {i}: {a[i]})"
            )
    return a.astype(np.int64)


_FEATURE_ROWS = ("the query features have {n} rows", "the gallery features have {n} rows")
_DIST_ROWS = ("dist has {n} rows", "dist has {n} columns")


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


_DIST_RANGE = (2.0**-100, 2.0**100)  # distance matrices outside it are rescaled (ranking)


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
    lo, hi = float(dist.min()), float(dist.max())
    if not (math.isfinite(lo) and math.isfinite(hi)):
        bad = ~np.isfinite(dist)
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        col = int(np.flatnonzero(bad[row])[0])
        raise ValueError(
            f"dist holds {int(bad.sum())} NaN or inf values (first at row {row}, column "
            f"{col}: {dist[row, col]}); expected finite distances"
        )
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
            f"mesh must have the one axis {DATA!r} (warca_jax.sharding.make_mesh), "
            f"got axes {tuple(mesh.axis_names)}"
        )
    return mesh


def _same_identity_table(ql, qc, gl, gc):
    """Gallery indices of each query's identity, padded: ([nq, k] idx, good, junk)."""
    order = np.argsort(gl, kind="stable")
    sorted_gl = gl[order]
    lo = np.searchsorted(sorted_gl, ql, side="left")
    count = np.searchsorted(sorted_gl, ql, side="right") - lo
    k = max(int(count.max(initial=0)), 1)
    slot = np.arange(k)
    present = slot[None, :] < count[:, None]
    idx = (
        order[np.clip(lo[:, None] + slot[None, :], 0, max(len(gl) - 1, 0))]
        if len(gl)
        else (np.zeros((len(ql), k), np.int64))
    )
    same_cam = gc[idx] == qc[:, None] if len(gl) else present
    return idx.astype(np.int64), present & ~same_cam, present & same_cam


def _evaluate_blocks(block_ranks, ql, qc, gl, gc, *, block_size, max_rank) -> dict:
    """Ranks every query block and reduces the ranks to the metrics.

    Args:
      block_ranks: ``(queries, same, present) -> finish``; queries: [<= b] query indices,
        same: [b, k] indices (into the gallery without label -1) of their same-identity
        entries, present: [b, k] bool real slots (rows padded to b); ``finish()`` returns
        the [b, k] 0-based ranks. The next block is dispatched before a block is finished.
      ql, qc, gl, gc: protocol ids. block_size: queries per block. max_rank: CMC length.
    """
    kept = gl != -1  # label -1 is junk for every query: drop it up front
    gl, gc = gl[kept], gc[kept]
    g, nq = len(gl), len(ql)
    same, good, junk = _same_identity_table(ql, qc, gl, gc)
    if not good.any():
        _no_true_match(ql, junk)
    # Queries with as many same-identity entries, of one identity, side by side: a block
    # then has few slots and shares its same-identity rows. Results go back to query order.
    order = np.lexsort((ql, (good | junk).sum(axis=1)))
    b = max(1, min(block_size, nq))
    stats, pending = [], None
    for start in range(0, nq if g else 0, b):
        queries = order[start : start + b]
        same_b, good_b, junk_b = (pad_rows(a[queries], b) for a in (same, good, junk))
        finish = block_ranks(queries, same_b, good_b | junk_b)
        if pending is not None:  # the device works on this block while the host finishes
            stats.append(_finish_block(*pending))
        pending = (finish, len(queries), good_b, junk_b)
    if pending is not None:
        stats.append(_finish_block(*pending))
    per_query = [np.zeros(0)] * 4
    if stats:  # back to query order
        per_query = [np.empty_like(a, shape=nq) for a in stats[0]]
        for out, parts in zip(per_query, zip(*stats, strict=True), strict=True):
            out[order] = np.concatenate(parts)
    first, ap, inp, num_good = per_query
    valid = num_good > 0
    num_valid = int(valid.sum())
    if num_valid == 0:  # every query was checked to have a true match above
        raise RuntimeError("no query with a true match was ranked")
    hist = np.bincount(first[valid] - 1, minlength=g)[:g]
    cmc_full = 100.0 * np.cumsum(hist) / num_valid
    max_rank = g if max_rank is None else int(max_rank)
    cmc = cmc_full[np.minimum(np.arange(max_rank), g - 1)]
    result = {"cmc": cmc}
    for r in _RANKS:
        result[f"rank{r}"] = float(cmc_full[min(r, g) - 1])
    result.update(
        mAP=float(100.0 * ap[valid].mean()),
        mINP=float(100.0 * inp[valid].mean()),
        AUC=float(cmc_full.mean()),
        num_queries=int(nq),
        num_valid=num_valid,
        num_skipped=int(nq - num_valid),
    )
    return result


def _no_true_match(ql: np.ndarray, junk: np.ndarray):
    """Raises the ValueError of a protocol in which no query has a true match."""
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


def _finish_block(finish: Callable, n: int, good: np.ndarray, junk: np.ndarray) -> list:
    out = _query_stats(jnp.asarray(finish(), jnp.int32), jnp.asarray(good), jnp.asarray(junk))
    return [np.asarray(o)[:n] for o in out]


_PROTOCOL_DOC = """
    Junk (same identity and same camera, and every gallery label -1) is removed per query;
    ties in distance are broken by gallery order (stable sort). Queries without a true
    match left are skipped. All rates are percentages in [0, 100]:

    - ``cmc``: [max_rank] numpy array, CMC(r) = % of valid queries whose first true match
      is at position <= r (max_rank defaults to G; beyond G it repeats).
    - ``rank1``, ``rank5``, ``rank10``, ``rank20``: CMC at r (CMC(G) when G < r).
    - ``mAP``: mean over valid queries of AP = mean over true matches of precision at
      their position.
    - ``mINP``: mean of (number of true matches) / (position of the last true match).
    - ``AUC``: normalised area under the CMC curve, mean of CMC(r) for r = 1..G with G the
      number of gallery entries not labelled -1 (paper, Table 2c); 100 iff every first
      match is at rank 1.
    - ``num_queries``, ``num_valid``, ``num_skipped``: ints.
"""


def evaluate(
    query_features: jax.typing.ArrayLike,
    gallery_features: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    metric: str = "euclidean",
    max_rank: int | None = None,
    block_size: int = 256,
    mesh: Mesh | None = None,
    gallery_chunk: int = GALLERY_CHUNK,
) -> dict:
    """Re-id metrics of features under the Market-1501 / CUHK03 protocol.

    The gallery is sharded by rows over ``mesh`` and ranked by counting (module docstring).
    Memory is the gallery, a few ``[block_size, gallery_chunk]`` tiles and O(nq * k) ints
    (k: the most same-identity entries of a query); nothing of size ``block_size x ng``. The
    results do not depend on the number of devices.

    Args:
      query_features: [nq, d]. gallery_features: [ng, d].
      query_labels, query_cams: [nq] ints. gallery_labels, gallery_cams: [ng] ints.
      metric: one of ``DISTANCES``.
      max_rank: length of the returned CMC (default: gallery size).
      block_size: queries per distance tile (for ``manhattan``/``chi2`` capped so that
        block * gallery_chunk * d stays below 2M elements, as in ``pairwise_distances``).
      mesh: 1-D mesh over ``sharding.DATA`` (``warca_jax.sharding.make_mesh``); None: all
        devices.
      gallery_chunk: gallery columns per distance tile (at most the gallery size). The
        default keeps a CPU tile in cache; on an accelerator, larger tiles (fewer loop steps)
        may pay off.

    Features of any finite scale are ranked correctly (module docstring: Scale).

    Raises:
      ValueError: bad features (not 2-D, NaN or inf, dims differ, negative for chi2), ids
        (not integers, lengths not matching the features), metric, ``max_rank``,
        ``block_size``, ``mesh`` or ``gallery_chunk``; no query or gallery entry; or no
        query with a true match in the gallery.
      RuntimeError: the device gave different distances for the same tile twice.
      FloatingPointError: the device gave a non-finite distance (never, for finite input).

    Returns:
      dict of plain Python numbers and one numpy array:
    """
    # Rescaled by a common power of two: the same ranking, at any finite scale.
    x, y, _ = scaled_features(query_features, gallery_features, metric, block_size)
    ql, gl, qc, gc = _check_protocol(
        query_labels, gallery_labels, query_cams, gallery_cams, len(x), len(y), max_rank
    )
    _check_sizes(len(x), gl, "the features have")
    mesh = _check_mesh_and_chunk(mesh, gallery_chunk)
    kept = np.flatnonzero(gl != -1)
    chunk = max(1, min(int(gallery_chunk), len(kept)))
    b = row_block(block_size, chunk, y.shape[1], metric)
    gallery = _GallerySweep(y, kept, mesh=mesh, metric=metric, chunk=chunk) if len(kept) else None

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

    Distances are cast to float32 before ranking, so ties are float32 ties (distances whose
    largest magnitude is outside [2**-100, 2**100] are first divided by a common power of
    two, so that float64 distances of any finite scale rank correctly). Each block of
    queries is ranked by a host sort of 64-bit keys (memory ~16 * block_size * ng bytes).

    Args:
      dist: [nq, ng] distances (numpy or jax), finite.
      query_labels, query_cams: [nq] ints. gallery_labels, gallery_cams: [ng] ints.
      max_rank: length of the returned CMC (default: gallery size).
      block_size: queries per jitted block.

    Returns:
      dict of plain Python numbers and one numpy array:
    """
    dist = _check_dist(dist)
    if not isinstance(block_size, int | np.integer) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    ql, gl, qc, gc = _check_protocol(
        query_labels,
        gallery_labels,
        query_cams,
        gallery_cams,
        *dist.shape,
        max_rank,
        rows=_DIST_ROWS,
    )
    _check_sizes(len(ql), gl, "dist has")
    kept = gl != -1
    g = int(kept.sum())
    idx_bits = max(1, (g - 1).bit_length())

    def block_ranks(queries, same, present):
        b = same.shape[0]
        block = pad_rows(dist[queries][:, kept], b)
        pending = _dist_keys(jnp.asarray(block), idx_bits=idx_bits)

        def finish() -> np.ndarray:
            keys = np.asarray(pending).view(np.uint64).reshape(b, g)
            sorted_keys = np.sort(keys.ravel())
            rank = np.searchsorted(sorted_keys, np.take_along_axis(keys, same, axis=1))
            return rank - np.arange(b)[:, None] * g

        return finish

    b = min(block_size, 2 ** (32 - idx_bits))
    return _evaluate_blocks(block_ranks, ql, qc, gl, gc, block_size=b, max_rank=max_rank)


evaluate.__doc__ += _PROTOCOL_DOC
evaluate_distances.__doc__ += _PROTOCOL_DOC


def single_shot_evaluate(
    query_features: jax.typing.ArrayLike,
    gallery_features: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    metric: str = "euclidean",
    repeats: int = 10,
    seed: int = 0,
    max_rank: int | None = None,
) -> dict:
    """CUHK03-style single-shot evaluation, averaged over random galleries.

    Each repeat keeps one uniformly random gallery image per gallery label (every distinct
    label, 0 and -1 included), drawn with ``np.random.default_rng(seed)``, and runs
    ``evaluate_distances`` on the kept columns (gallery order preserved). Distances are
    computed once.

    Args:
      query_features: [nq, d]. gallery_features: [ng, d].
      query_labels, query_cams: [nq] ints. gallery_labels, gallery_cams: [ng] ints.
      metric: one of ``DISTANCES``.
      repeats: number of random galleries (>= 1).
      seed: seed of the gallery draws.
      max_rank: CMC length per repeat (default: the single-shot gallery size).

    Returns:
      The ``evaluate`` dict with every metric averaged over repeats (``cmc`` elementwise,
      truncated to the shortest), plus ``rank1_std`` and ``mAP_std`` (population std over
      repeats) and ``repeats``.
    """
    # Rescaled by a common power of two (the same ranking, at any finite scale); the
    # distances ranked are those of the rescaled features.
    x, y, _ = scaled_features(query_features, gallery_features, metric, 1)
    _, gl, _, _ = _check_protocol(
        query_labels, gallery_labels, query_cams, gallery_cams, len(x), len(y), max_rank
    )
    _check_sizes(len(x), gl, "the features have")
    dist = np.asarray(blocked_distances(x, y, metric=metric, block_size=1024))
    return single_shot_evaluate_distances(
        dist,
        query_labels,
        gallery_labels,
        query_cams,
        gallery_cams,
        repeats=repeats,
        seed=seed,
        max_rank=max_rank,
    )


def single_shot_evaluate_distances(
    dist: jax.typing.ArrayLike,
    query_labels: jax.typing.ArrayLike,
    gallery_labels: jax.typing.ArrayLike,
    query_cams: jax.typing.ArrayLike,
    gallery_cams: jax.typing.ArrayLike,
    *,
    repeats: int = 10,
    seed: int = 0,
    max_rank: int | None = None,
) -> dict:
    """``single_shot_evaluate`` on a precomputed [nq, ng] distance matrix."""
    if not isinstance(repeats, int | np.integer) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    dist = _check_dist(dist)
    ql, gl, qc, gc = _check_protocol(
        query_labels,
        gallery_labels,
        query_cams,
        gallery_cams,
        *dist.shape,
        max_rank,
        rows=_DIST_ROWS,
    )
    _check_sizes(len(ql), gl, "dist has")
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(repeats):
        perm = rng.permutation(len(gl))
        _, first = np.unique(gl[perm], return_index=True)  # first of each label in perm
        cols = np.sort(perm[first])
        runs.append(
            evaluate_distances(dist[:, cols], ql, gl[cols], qc, gc[cols], max_rank=max_rank)
        )
    out = {}
    for key, value in runs[0].items():
        if key == "cmc":
            n = min(len(r["cmc"]) for r in runs)
            out[key] = np.mean([r["cmc"][:n] for r in runs], axis=0)
        elif isinstance(value, int):
            out[key] = int(round(np.mean([r[key] for r in runs])))
        else:
            out[key] = float(np.mean([r[key] for r in runs]))
    out["rank1_std"] = float(np.std([r["rank1"] for r in runs]))
    out["mAP_std"] = float(np.std([r["mAP"] for r in runs]))
    out["repeats"] = int(repeats)
    return out
