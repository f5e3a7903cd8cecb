"""Device meshes: how warca_jax spreads training and evaluation over devices and hosts.

Everything that runs on more than one device takes a ``jax.sharding.Mesh`` with one axis,
``DATA`` ("data"). ``make_mesh(n)`` builds it from the first ``n`` devices of
``jax.devices()`` (0: all of them, across every host once ``jax.distributed.initialize()``
has run), so one CPU, one GPU, several GPUs and a TPU slice run the same code: one device
is a mesh of one.

On a CPU, ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (set before JAX is
imported) makes 8 host devices, which is how the tests check that N devices give the
single-device results.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA = "data"


def check_num_devices(num_devices) -> None:
    """The one check of a ``num_devices`` setting that needs no device: an int >= 0 (0:
    all). A config check calls it before any work without starting JAX's backend (which a
    multi-host run starts only after ``jax.distributed.initialize``); ``make_mesh`` also
    checks the count against the devices there are.

    Raises:
      ValueError: ``num_devices`` not an int (a bool is not one) or negative.
    """
    if (
        not isinstance(num_devices, int | np.integer)
        or isinstance(num_devices, bool)
        or num_devices < 0
    ):
        raise ValueError(f"num_devices must be an int >= 0 (0: all), got {num_devices!r}")


def make_mesh(num_devices: int = 0) -> Mesh:
    """A 1-D mesh over the first ``num_devices`` devices (0: all, on every host).

    Raises:
      ValueError: ``num_devices`` not an int >= 0 (``check_num_devices``) or more than
        there are.
    """
    check_num_devices(num_devices)
    devices = jax.devices()
    if num_devices > len(devices):
        raise ValueError(
            f"num_devices={num_devices} but only {len(devices)} {devices[0].platform} "
            "devices are visible (on a CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N "
            "before importing JAX makes N)"
        )
    chosen = devices[: num_devices or len(devices)]
    return Mesh(np.asarray(chosen), (DATA,))


def rows(mesh: Mesh) -> NamedSharding:
    """Arrays split by their first axis (rows) over the mesh."""
    return NamedSharding(mesh, PartitionSpec(DATA))


def replicated(mesh: Mesh) -> NamedSharding:
    """Arrays held whole on every device of the mesh."""
    return NamedSharding(mesh, PartitionSpec())


def pad_to_multiple(n: int, mesh: Mesh, *, block: int = 1) -> int:
    """The smallest multiple of (mesh size x ``block``) that is >= n.

    Rows split over the mesh in whole blocks of ``block`` rows per device.
    """
    size = mesh.devices.size * block
    return -(-n // size) * size
