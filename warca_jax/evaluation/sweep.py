"""The count sweep: ranks of same-identity entries in a gallery of features on a device mesh.

The engine of ``evaluate``. Every metric needs, per query, only the 0-based rank of each
same-identity gallery entry j in the stable distance order, and the rank is a count:
``rank_j = #{m : d_m < d_j or (d_m == d_j and m < j)}`` over the gallery without label -1.
For one block of ``b`` queries with ``k`` same-identity slots each (``_GallerySweep.ranks``):

1. Thresholds: the sweep program, run on the block's same-identity gallery rows (gathered
   into a small gallery), gives each slot's distance ``thr`` as the sweep itself computes it.
2. Sweep: one jitted program walks the gallery in ``[b, c]`` distance tiles
   (``c = gallery_chunk``) and adds up, per slot, the entries that come before it (one
   fused compare-and-sum over the tile per slot); it also returns the tile's own distance
   at each same-identity column. The gallery is sharded by rows over a 1-D device mesh
   (``warca_jax.maths.device_mesh``); each device scans its own chunks and the counts and distances
   are summed over devices (integers, and one nonzero term per distance: exact). The tile
   shape does not depend on the number of devices, so 1 and N devices give the same numbers.
3. Where a threshold is not bit for bit the sweep's own distance, the block is swept again
   with the sweep's distances as thresholds, so the ranks are exact for the distances of
   the sweep program.

Memory: the gallery (sharded, padded to a multiple of devices x ``c`` rows), a few ``[b, c]``
tiles; nothing of size ``b x ng``. Work: the ``nq x ng`` distances once (plus about one
tile per block for the thresholds), and about ``k`` compares per distance.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import shard_map
from jax.sharding import Mesh, PartitionSpec

from warca_jax.maths.device_mesh import DATA, replicated, rows
from warca_jax.maths.distances import block_distances, sq_norms

GALLERY_CHUNK = 2048  # default gallery columns per distance tile of ``evaluate``


@functools.cache
def _sweep_fn(mesh: Mesh, distance: str, chunk: int) -> Callable:
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
            dist = block_distances(x, y_tile, xx, yy_tile, distance=distance)
            dist = jnp.where(cols[None, :] < num_cols, dist, jnp.inf)
            at = thr_idx - start
            own = jnp.take_along_axis(dist, jnp.clip(at, 0, chunk - 1), axis=1)
            vals = jnp.where((at >= 0) & (at < chunk), own, vals)

            # One [b, chunk] compare-and-sum per slot: XLA vectorises this row reduction; the
            # fused [b, chunk, k] form, not vectorised, counts several times slower on a CPU.
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

    def __init__(self, y: np.ndarray, kept: np.ndarray, *, mesh: Mesh, distance: str, chunk: int):
        """Places ``y[kept]`` sharded by rows, zero-padded to a multiple of devices x chunk.

        Args:
          y: [ng, d] float32 gallery features. kept: [g] indices of the rows to rank (g > 0).
          mesh: 1-D mesh over ``device_mesh.DATA``. distance: one of ``DISTANCES``.
          chunk: gallery columns per distance tile.
        """
        self.mesh, self.chunk, self.num_cols = mesh, chunk, len(kept)
        self.sweep = _sweep_fn(mesh, distance, chunk)
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
