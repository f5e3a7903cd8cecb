"""The checks of a ``Metric``'s fields when it is made (``Metric.__post_init__``), so that a
model that would be wrong quietly is never built, loaded or not: real-number arrays of
consistent, non-zero shapes, an integer ``input_dim``, known kernel and distance names,
a usable bandwidth."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from warca_jax.maths import distances, kernels


def real(v) -> bool:
    """A finite real number, as JSON or a caller gives one: an int or a float, not a bool
    (nor an int too large for a float)."""
    if not isinstance(v, int | float | np.integer | np.floating) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def integer(v) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def check_fields(m) -> None:
    """The fields' types and names: ``input_dim`` an integer of at least 1, every array
    of real numbers, ``name`` a string, known kernel and distance names, and a finite
    bandwidth, positive for a kernel that uses one. A subclass extends it for its own
    fields (calling this one)."""
    if not integer(m.input_dim) or m.input_dim < 1:
        raise ValueError(
            f"field 'input_dim': expected an integer of at least 1, got {m.input_dim!r}"
        )
    for f in dataclasses.fields(m):
        v = getattr(m, f.name)
        if isinstance(v, np.ndarray) and v.dtype.kind not in "iuf":
            raise ValueError(
                f"field {f.name!r}: expected an array of real numbers, got dtype {v.dtype}"
            )
    if not isinstance(m.name, str):
        raise ValueError(f"field 'name': expected a string, got {m.name!r}")
    kernel_kind = m.kind in ("kernel", "kernel_distance")
    known = kernels.KERNELS if kernel_kind else ("none", *kernels.KERNELS)
    if m.kernel not in known:
        raise ValueError(
            f"field 'kernel': unknown kernel {m.kernel!r} for a {m.kind} metric; "
            f"expected one of {known}"
        )
    if m.distance not in distances.DISTANCES:
        raise ValueError(
            f"field 'distance': unknown distance {m.distance!r}; expected one of "
            f"{distances.DISTANCES}"
        )
    uses_gamma = kernel_kind and kernels.needs_gamma(m.kernel)
    if not real(m.gamma) or (uses_gamma and not m.gamma > 0):
        raise ValueError(
            f"field 'gamma': the kernel bandwidth must be a finite "
            f"{'positive ' if uses_gamma else ''}number, got {m.gamma!r}"
        )


def check_shapes(m) -> None:
    """The projection (and the support vectors) fit ``input_dim`` and are not empty: a
    model whose arrays no longer match its input dimension is refused here, not inside
    a matrix product at its first use, and one with no output dimension (or no support
    vector) here, not as an [n, 0] embedding whose every distance is 0."""
    if m.kind in ("linear", "kernel"):
        shape = np.shape(m.projection)
        if len(shape) != 2:
            raise ValueError(
                f"a {m.kind} metric's projection must be a 2-D [D', "
                f"{'input_dim' if m.kind == 'linear' else 'N'}] matrix; got shape {shape}"
            )
        if shape[0] == 0:
            raise ValueError(
                f"field 'projection': shape {shape} has no rows, so every embedding would "
                f"be empty and every distance 0; expected [D' >= 1, {shape[1]}]"
            )
    if m.kind == "linear" and np.shape(m.projection)[1] != m.input_dim:
        raise ValueError(
            f"a linear metric's projection of shape {np.shape(m.projection)} does not "
            f"match its input_dim {m.input_dim}: expected [D', {m.input_dim}]"
        )
    if m.kind == "kernel":
        if m.support is None:
            raise ValueError("a kernel metric needs its support vectors")
        support = np.shape(m.support)
        if len(support) != 2 or support[1] != m.input_dim:
            raise ValueError(
                f"a kernel metric's support vectors of shape {support} do not match its "
                f"input_dim {m.input_dim}: expected [N, {m.input_dim}]"
            )
        if support[0] == 0:
            raise ValueError(
                f"field 'support': shape {support} holds no support vector, so every "
                f"embedding would be 0; expected [N >= 1, {m.input_dim}]"
            )
        if m.projection.shape[1] != m.support.shape[0]:
            raise ValueError(
                f"kernel projection has {m.projection.shape[1]} columns but there are "
                f"{m.support.shape[0]} support vectors"
            )
