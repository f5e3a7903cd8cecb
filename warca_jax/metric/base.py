"""A learned metric: a map into an embedding space and the distance used there.

Every learner returns a ``Metric``. Its ``transform`` maps features to
embeddings, and ``distance`` names the distance used between embeddings by the
evaluation:

* ``identity``: x itself (the no-learning baselines: Euclidean, chi2, ...).
* ``linear``: W x with W: [D', D], so that ||W (x - y)|| is the Mahalanobis
  distance of M = W^T W.
* ``kernel``: A k(X, x) with A: [D', N] and the support vectors X: [N, D]
  (the training features), W = A X^T in the kernel's feature space (eq. 15).
* ``kernel_distance``: no map; the distance of the kernel's feature space,
  sqrt(k(x, x) + k(y, y) - 2 k(x, y)) (the study's kernel baselines).

``pairwise_distances(x, y)`` gives the [n, m] distances of any kind; the
evaluation ranks with it. A learner whose distance is not one of these has a frozen
dataclass subclass of ``Metric`` in ``warca_jax.metric.kinds`` with a class attribute
``KIND`` (its kind name), its extra fields (arrays are saved as arrays, the rest
as JSON) and its ``pairwise_distances``; ``Metric.load`` finds the subclass by the
saved kind (importing ``warca_jax.metric`` registers them all).

A metric is saved as one ``.npz`` holding everything ``transform`` needs, the
kernel name and bandwidth and the support vectors included, and loaded back
with ``Metric.load``. ``save`` refuses a metric with a non-finite entry
(``check_finite``); ``load`` raises ``DamagedModelError`` for a file that is not a
whole, finite saved metric (cut short, a corrupt
archive, another file, arrays that no longer match ``input_dim``, an empty projection,
a scale out of range, arrays or a JSON meta beyond the limits of
``warca_jax.io.bounded_reads``, checked before anything is allocated), so that a caller can
redo the model instead of using it.

Every metric is checked when it is made (``__post_init__``), so a model that would be
wrong quietly is never built, loaded or not: real-number arrays of consistent, non-zero
shapes; an integer ``input_dim`` of at least 1; known kernel and distance names; a finite
bandwidth, positive where the kernel uses one; an ``input_scale`` within
``INPUT_SCALE_RANGE``. ``transform`` takes finite numeric features only (a ValueError
naming the dtype otherwise), and an embedding of finite features that is not finite is a
``NonFiniteEmbeddingError`` naming the model (its scale factors and, once loaded, its
file): the model is at fault, not the features.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
import zlib

import jax.numpy as jnp
import numpy as np

from warca_jax.io import bounded_reads, reads, run_files
from warca_jax.maths import distances, kernels
from warca_jax.metric import fields

KINDS = ("identity", "linear", "kernel", "kernel_distance")
MAX_META_BYTES = 1 << 20  # a saved metric's JSON 'meta' (its names and numbers)
# The bounds of ``input_scale``. The scale multiplies the embeddings in float32, whose
# normal numbers span about 1e-38 to 3e38: a scale beyond 1e30 (or below 1e-30) leaves
# less than eight decades for the product of the features and the projection before it
# overflows to inf (or underflows to 0, every distance 0). A learner's scale normalises
# features that ``feature_scale`` has already brought to an ordinary size, so it lies far
# inside this range; only a damaged or forged file holds one outside it.
INPUT_SCALE_RANGE = (1e-30, 1e30)
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_SUBCLASSES: dict = {}  # kind -> Metric subclass (warca_jax.metric.kinds)
# Kinds whose distance is a plain distance between the rows of ``transform``.
EMBEDDING_KINDS = ("identity", "linear", "kernel")


class DamagedModelError(ValueError):
    """A model file that cannot be read back as a whole, finite ``Metric``.

    Raised by ``Metric.load`` for a file cut short, a corrupt archive, a file that is not
    a saved metric (another ``.npz``, a text file) or one holding NaN or inf; the message
    names the file. A ``ValueError``, so callers that treat bad input as such still do.
    """


class NonFiniteMetricError(FloatingPointError):
    """A metric holds NaN or inf (``Metric.check_finite``); never saved or used."""


def _read_meta(archive: bounded_reads.NpzArchive):
    """The JSON 'meta' entry of a saved metric, read within ``MAX_META_BYTES`` and
    ``bounded_reads.MAX_JSON_DEPTH``: a huge or deeply nested one is a ValueError saying
    so (the caller names the file), never a MemoryError or a RecursionError."""
    try:  # a numpy string takes 4 bytes a character
        text = str(archive.read("meta", limit=4 * MAX_META_BYTES))
    except bounded_reads.ArrayTooLargeError:
        raise ValueError(f"its 'meta' entry is longer than {MAX_META_BYTES} characters") from None
    try:
        return bounded_reads.load_json(text, max_bytes=MAX_META_BYTES)
    except bounded_reads.JsonLimitError as e:
        raise ValueError(f"its 'meta' entry {e}") from None


class NonFiniteEmbeddingError(NonFiniteMetricError, ValueError):
    """``transform`` made NaN or inf of finite features: the model's scale or weights
    overflow float32. The message names the model, not the features; a ``ValueError``,
    as the refusal of the embeddings further on was."""


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
      input_scale: factor applied to the features (linear) or to the kernel values (kernel)
        before the projection: the input normalisation the learner trained under (WARCA's
        ``normalize``), so that ``projection`` is the matrix it learned (W W^T near I
        under AON) and ``transform`` takes the features as the user gives them.
      distance: distance between embeddings (see ``evaluation.DISTANCES``).
      name: the learner's name, for reports.
      feature_scale: an exact power of two the features are multiplied by (in float64,
        before anything else) when ``transform`` reads them: a learner given features
        too small or too large for float32 arithmetic trains on them times this factor
        (``methods.checks.training_data``), and the metric takes the user's features.
        1.0 (nothing done) for features of ordinary size.
    """

    kind: str
    input_dim: int
    projection: np.ndarray | None = None
    support: np.ndarray | None = None
    kernel: str = "none"
    gamma: float = 1.0
    input_scale: float = 1.0
    distance: str = "euclidean"
    name: str = ""
    feature_scale: float = 1.0

    KIND = None  # set by subclasses that add a kind of their own

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.KIND is not None:
            _SUBCLASSES[cls.KIND] = cls

    def __post_init__(self):
        own = type(self).KIND
        if (own is None and self.kind not in KINDS) or (own is not None and self.kind != own):
            raise ValueError(
                f"field 'kind': unknown metric kind {self.kind!r}; expected one of "
                f"{KINDS + tuple(_SUBCLASSES)}"
            )
        if self.kind in ("linear", "kernel") and self.projection is None:
            raise ValueError(f"field 'projection': a {self.kind} metric needs a projection matrix")
        lo, hi = INPUT_SCALE_RANGE
        if not (fields.real(self.input_scale) and lo <= self.input_scale <= hi):
            raise ValueError(
                f"field 'input_scale': a metric's input_scale must be a finite positive number "
                f"in [{lo:g}, {hi:g}] (beyond it float32 embeddings overflow or vanish), got "
                f"{self.input_scale!r}"
            )
        if not (
            fields.real(self.feature_scale)
            and self.feature_scale > 0
            and np.frexp(self.feature_scale)[0] == 0.5
        ):
            raise ValueError(
                "field 'feature_scale': a metric's feature_scale must be a positive power of "
                f"two, got {self.feature_scale!r}"
            )
        self._check_shapes()
        self._check_fields()

    def _check_fields(self) -> None:
        """``fields.check_fields``; a subclass extends it for its own fields."""
        fields.check_fields(self)

    def _check_shapes(self) -> None:
        fields.check_shapes(self)

    @property
    def output_dim(self) -> int:
        return self.input_dim if self.projection is None else int(self.projection.shape[0])

    def non_finite_fields(self) -> list[str]:
        """The names of the fields (arrays or floats) holding NaN or inf."""
        bad = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray) and v.dtype.kind in "fc" and not np.all(np.isfinite(v)):
                bad.append(f.name)
            elif isinstance(v, float | np.floating) and not np.isfinite(v):
                bad.append(f.name)
        return bad

    def is_finite(self) -> bool:
        """Whether every array and float of the metric is finite."""
        return not self.non_finite_fields()

    def check_finite(self, context: str = "") -> Metric:
        """Returns the metric; raises ``NonFiniteMetricError`` naming any non-finite field.

        Args:
          context: the start of the message, e.g. ``"refusing to save: "``.
        """
        bad = self.non_finite_fields()
        if bad:
            raise NonFiniteMetricError(
                f"{context}the {self.name or self.kind} metric is non-finite (NaN or inf in {bad})"
            )
        return self

    def scaled_features(self, x: np.ndarray) -> np.ndarray:
        """``x`` checked (numeric, shape [n, input_dim], finite) and times ``feature_scale``.

        The product is taken in float64 and cast to float32 (exact for a power of two);
        with a scale of 1 ``x`` is returned as it is, so that features of ordinary size go
        through unchanged. Features that times the scale leave float32's range are a
        ``NonFiniteEmbeddingError`` naming both their size and the model's scale: the
        features are not of the size the model was trained on.
        """
        x = np.asarray(x)
        if x.dtype.kind not in "biuf":
            raise ValueError(
                f"transform expects numeric features (an [n, {self.input_dim}] array of "
                f"floats or integers); got an array of dtype {x.dtype}"
            )
        if x.ndim != 2 or x.shape[1] != self.input_dim:
            raise ValueError(
                f"transform expects features of shape [n, {self.input_dim}], got {x.shape}"
            )
        if not np.all(np.isfinite(x)):
            raise ValueError("transform got NaN or inf in the features")
        if self.feature_scale == 1.0 and x.dtype in (np.float32, np.float16, np.bool_):
            return x  # fits float32 as it is
        largest = float(np.max(np.abs(x))) if x.size else 0.0
        if largest * self.feature_scale > _FLOAT32_MAX:
            raise NonFiniteEmbeddingError(
                f"features of largest magnitude {largest:g} times the feature_scale "
                f"{self.feature_scale:g} of {self.describe()} leave float32's range (up to "
                f"{_FLOAT32_MAX:g}): the features are not of the size the model was trained on"
            )
        if self.feature_scale == 1.0:
            return x
        return (x.astype(np.float64) * self.feature_scale).astype(np.float32)

    def describe(self) -> str:
        """The model, for a message: its name and kind, and its file once loaded."""
        source = self.__dict__.get("_source")
        what = f"the {self.name or 'unnamed'} model ({self.kind} metric"
        return what + (f", loaded from {source})" if source else ")")

    def finite_output(self, out: np.ndarray) -> np.ndarray:
        """``out``, what the model made of finite features; ``NonFiniteEmbeddingError``
        naming the model (and its scale factors) when it holds NaN or inf."""
        if np.all(np.isfinite(out)):
            return out
        raise NonFiniteEmbeddingError(
            f"{self.describe()} maps finite features to {int(np.sum(~np.isfinite(out)))} NaN or "
            f"inf values: its weights or scale factors (input_scale {self.input_scale:g}, "
            f"feature_scale {self.feature_scale:g}) overflow float32; the model is at fault, "
            "not the features"
        )

    def transform(self, x: np.ndarray, *, block_size: int = 4096) -> np.ndarray:
        """Embeds features.

        Args:
          x: [n, D] features.
          block_size: rows embedded at once (bounds the [n, N] kernel block).

        Returns:
          [n, D'] float32 embeddings (x itself for an identity metric).

        Raises:
          ValueError: features that are not numbers, of another width, or with NaN or inf.
          NonFiniteEmbeddingError: (a ValueError) finite features that leave float32's range
            times ``feature_scale``, or whose embedding is not finite: the message names the
            model (and its file once loaded) and its scale factors, not the features.
        """
        x = self.scaled_features(x)
        if self.kind in ("identity", "kernel_distance"):
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
            out.append(np.asarray((xb @ proj.T) * self.input_scale))
        if not out:
            return np.zeros((0, self.output_dim), np.float32)
        return self.finite_output(np.concatenate(out).astype(np.float32))

    def pairwise_distances(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """[n, m] distances between the rows of x and y under this metric."""
        ex, ey = self.transform(x), self.transform(y)
        if self.kind == "kernel_distance":
            kernels.check_kernel_input(ex, self.kernel)
            kernels.check_kernel_input(ey, self.kernel)
            kxy = kernels.kernel_matrix(ex, ey, kernel=self.kernel, gamma=self.gamma)
            kxx = kernels.kernel_diagonal(ex, kernel=self.kernel, gamma=self.gamma)
            kyy = kernels.kernel_diagonal(ey, kernel=self.kernel, gamma=self.gamma)
            sq = kxx[:, None] + kyy[None, :] - 2.0 * kxy
            return np.sqrt(np.maximum(np.asarray(sq), 0.0))
        return np.asarray(distances.pairwise_distances(ex, ey, distance=self.distance))

    def mahalanobis_matrix(self) -> np.ndarray:
        """M = W^T W of a linear metric ([D, D]); identity for an identity metric."""
        factor = (self.input_scale * self.feature_scale) ** 2
        if self.kind == "linear":
            return factor * (self.projection.T @ self.projection)
        if self.kind == "identity":
            return (self.feature_scale**2) * np.eye(self.input_dim, dtype=np.float32)
        raise ValueError("a kernel metric has no finite Mahalanobis matrix in input space")

    def save(self, path: str | os.PathLike) -> None:
        """Writes the metric to ``path`` (.npz); refuses one that ``load`` would refuse.

        Raises:
          NonFiniteMetricError: an array or float of the metric is NaN or inf (nothing is
            written).
        """
        self.check_finite("refusing to save: ")
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        arrays = {k: v for k, v in values.items() if isinstance(v, np.ndarray)}
        meta = {k: v for k, v in values.items() if k not in arrays and v is not None}
        meta["array_fields"] = sorted(arrays)
        # a file object: np.savez adds no ".npz" to a path that lacks it
        with run_files.atomic_file(os.fspath(path), "wb") as f:
            np.savez(f, meta=np.asarray(json.dumps(meta)), **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Metric:
        """Reads a metric written by ``save``.

        Raises:
          FileNotFoundError: no file at ``path``.
          DamagedModelError: the file is not a whole saved metric: cut short or corrupt,
            not an ``.npz`` archive, an archive without the saved metric's entries, entries
            that do not make a metric (a projection or support vectors that do not match
            ``input_dim``, both shapes named, or that are empty; a field of the wrong type,
            an unknown kernel or distance, a scale out of range), NaN or inf in it;
            an array declaring more bytes than it holds or than the memory budget
            (``bounded_reads``, refused before allocating), a 'meta' entry over
            ``MAX_META_BYTES`` or nested deeper than ``bounded_reads.MAX_JSON_DEPTH``.
            One line, naming the file and the field. A workdir's run redoes such a model.
            Whether the model is one its ``name``'s method learns is asked by the code
            that knows the learners (``methods.load_model``).
        """
        if not os.path.exists(path):
            raise FileNotFoundError(f"no saved metric at {path}")

        def damaged(why: str) -> DamagedModelError:
            return DamagedModelError(
                f"{path} is damaged (truncated or corrupt) or not a warca_jax model: {why}"
            )

        try:  # the file opened here, so that it is closed whatever is made of it
            fh = reads.open_regular(path, what="saved metric")  # a FIFO: refused, not opened
            with fh, bounded_reads.load(fh, os.fspath(path)) as f:
                if "meta" not in f.files:
                    raise damaged(f"no 'meta' entry, not a saved Metric (entries: {f.files})")
                meta = _read_meta(f)
                if not isinstance(meta, dict):
                    raise damaged(f"its 'meta' entry is not a JSON object: {meta!r:.200}")
                names = meta.pop("array_fields", [])
                if not isinstance(names, list) or not all(isinstance(k, str) for k in names):
                    raise damaged(f"its 'array_fields' is not a list of names: {names!r:.200}")
                missing = [k for k in names if k not in f.files]
                if missing:
                    raise damaged(f"arrays {missing} are missing (entries: {f.files})")
                arrays = {k: f[k] for k in names}
        except (DamagedModelError, reads.NotARegularFileError):
            raise
        except bounded_reads.EnvironmentSettingError:  # the setting's fault, not the file's
            raise
        except bounded_reads.ArrayTooLargeError as e:  # one line naming the file already
            raise DamagedModelError(f"model {e}") from None
        except (AttributeError, TypeError) as e:  # a plain .npy gives an array, no .files
            raise damaged(f"not an .npz archive of named arrays ({e})") from e
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as e:
            raise damaged(f"{type(e).__name__}: {e}") from e
        kind = meta.get("kind")
        target = _SUBCLASSES.get(kind, Metric) if isinstance(kind, str) else Metric
        try:
            metric = target(**meta, **arrays)
        except (TypeError, ValueError) as e:
            raise damaged(f"its entries do not make a metric ({e})") from e
        bad = metric.non_finite_fields()
        if bad:
            raise damaged(f"NaN or inf in {bad}")
        object.__setattr__(metric, "_source", os.fspath(path))  # named by its messages
        return metric
