"""A learned metric: a map into an embedding space and the distance used there.

Every learner returns a ``Metric``. Its ``transform`` maps features to
embeddings, and ``distance`` names the distance used between embeddings by the
evaluation:

* ``identity``: x itself (the no-learning baselines: Euclidean, chi2, ...).
* ``linear``: W x with W: [D', D], so that ||W (x - y)|| is the Mahalanobis
  distance of M = W^T W.
* ``kernel``: A k(X, x) with A: [D', N] and the support vectors X: [N, D]
  (the training features), W = A X^T in the kernel's feature space (eq. 15).

A metric is saved as one ``.npz`` holding everything ``transform`` needs, the
kernel name and bandwidth and the support vectors included, and loaded back
with ``Metric.load``.
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax.numpy as jnp
import numpy as np

from warca_jax import kernels

KINDS = ("identity", "linear", "kernel")


@dataclasses.dataclass(frozen=True)
class Metric:
    """A distance learned (or chosen) for re-identification.

    Attributes:
      kind: one of ``KINDS``.
      input_dim: D, the feature dimension ``transform`` accepts.
      projection: W [D', D] (linear) or A [D', N] (kernel); None for identity.
      support: [N, D] support vectors of a kernel metric.
      kernel: kernel name for ``kind == "kernel"``.
      gamma: kernel bandwidth.
      distance: distance between embeddings (see ``evaluation.DISTANCES``).
      name: the learner's name, for reports.
    """

    kind: str
    input_dim: int
    projection: np.ndarray | None = None
    support: np.ndarray | None = None
    kernel: str = "none"
    gamma: float = 1.0
    distance: str = "euclidean"
    name: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown metric kind {self.kind!r}; expected one of {KINDS}")
        if self.kind != "identity" and self.projection is None:
            raise ValueError(f"a {self.kind} metric needs a projection matrix")
        if self.kind == "kernel":
            if self.support is None:
                raise ValueError("a kernel metric needs its support vectors")
            if self.projection.shape[1] != self.support.shape[0]:
                raise ValueError(
                    f"kernel projection has {self.projection.shape[1]} columns but there are "
                    f"{self.support.shape[0]} support vectors"
                )

    @property
    def output_dim(self) -> int:
        return self.input_dim if self.projection is None else int(self.projection.shape[0])

    def is_finite(self) -> bool:
        arrays = [a for a in (self.projection, self.support) if a is not None]
        return all(bool(np.all(np.isfinite(a))) for a in arrays) and np.isfinite(self.gamma)

    def transform(self, x: np.ndarray, *, block_size: int = 4096) -> np.ndarray:
        """Embeds features.

        Args:
          x: [n, D] features.
          block_size: rows embedded at once (bounds the [n, N] kernel block).

        Returns:
          [n, D'] float32 embeddings (x itself for an identity metric).
        """
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.input_dim:
            raise ValueError(
                f"transform expects features of shape [n, {self.input_dim}], got {x.shape}"
            )
        if not np.all(np.isfinite(x)):
            raise ValueError("transform got NaN or inf in the features")
        if self.kind == "identity":
            return x.astype(np.float32)
        if self.kind == "kernel":
            kernels.check_kernel_input(x, self.kernel)
        proj = jnp.asarray(self.projection)
        out = []
        for s in range(0, x.shape[0], block_size):
            xb = jnp.asarray(x[s : s + block_size], jnp.float32)
            if self.kind == "kernel":
                xb = kernels.kernel_matrix(
                    xb, jnp.asarray(self.support), kernel=self.kernel, gamma=self.gamma
                )
            out.append(np.asarray(xb @ proj.T))
        if not out:
            return np.zeros((0, self.output_dim), np.float32)
        return np.concatenate(out).astype(np.float32)

    def mahalanobis_matrix(self) -> np.ndarray:
        """M = W^T W of a linear metric ([D, D]); identity for an identity metric."""
        if self.kind == "linear":
            return self.projection.T @ self.projection
        if self.kind == "identity":
            return np.eye(self.input_dim, dtype=np.float32)
        raise ValueError("a kernel metric has no finite Mahalanobis matrix in input space")

    def save(self, path: str | os.PathLike) -> None:
        """Writes the metric to ``path`` (.npz); refuses a non-finite metric."""
        if not self.is_finite():
            raise FloatingPointError(
                f"refusing to save a non-finite {self.name or self.kind} metric"
            )
        meta = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("projection", "support")
        }
        arrays = {
            k: getattr(self, k) for k in ("projection", "support") if getattr(self, k) is not None
        }
        tmp = f"{os.fspath(path)}.tmp.npz"
        np.savez(tmp, meta=np.asarray(json.dumps(meta)), **arrays)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Metric:
        """Reads a metric written by ``save``."""
        if not os.path.exists(path):
            raise FileNotFoundError(f"no saved metric at {path}")
        with np.load(path, allow_pickle=False) as f:
            if "meta" not in f.files:
                raise KeyError(f"{path} is not a saved Metric: no 'meta' entry (has {f.files})")
            meta = json.loads(str(f["meta"]))
            arrays = {k: f[k] for k in ("projection", "support") if k in f.files}
        return cls(**meta, **arrays)
