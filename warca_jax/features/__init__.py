"""Image descriptors in JAX: loading, the WARCA paper's colour + LBP features, LOMO, GOG.

Submodules (each descriptor lives in the module of the same name, e.g.
``from warca_jax.features.color_lbp import color_lbp``):

* ``image_files``: ``load_images(paths, *, height=128, width=48) -> [n, H, W, 3] uint8``,
  each image upright by its EXIF orientation, its pixel count bounded.
* ``color_lbp``: stripe colour and uniform LBP histograms, 2,580-d (WARCA section 4.2).
* ``lomo``: Local Maximal Occurrence features (Liao et al. 2015), 26,960-d at 128 x 48,
  and its Retinex (``retinex``).
* ``gog``: the hierarchical Gaussian descriptor (Matsukawa et al. 2016): descriptor "gog"
  (four colour spaces fused, 27,622-d) or "gog_rgb", "gog_lab", "gog_hsv" (7,567-d),
  "gog_nrng" (4,921-d).
* ``extraction``: batched extraction from files, images below a descriptor's ``min_size``
  refused before any work; its functions are the package's (``features.extract``).
* ``feature_cache``: the on-disk feature cache, each entry valid only for the exact inputs
  it was computed from, its array checksummed.
* ``feature_norm``: the per-split normalisation of a dataset's descriptors
  (``data.normalize``), each descriptor part centred and L2-normalised.
"""

from warca_jax.features.extraction import (
    DESCRIPTORS,
    extract,
    extract_arrays,
)
from warca_jax.features.gog import gog_dim

__all__ = [
    "DESCRIPTORS",
    "extract",
    "extract_arrays",
    "gog_dim",
]
