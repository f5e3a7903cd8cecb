"""LMNN (Weinberger & Saul, JMLR 2009) on the built-in synthetic re-id data (or a .npz).

Run:
  python -m warca_jax.main --config=configs/lmnn.py --workdir=/tmp/lmnn

Variants (``--config=configs/lmnn.py:<arg>``):
  default  full-rank L on the default data.
  small    shrunk data and iterations, for smoke tests.
  large    for 7,368 x 2,048 problems: L: [128, D] from PCA, 100 steps.
"""

import ml_collections

from configs import common


def get_config(arg: str = "default") -> ml_collections.ConfigDict:
    """Returns the LMNN config for variant ``arg``."""
    if arg not in ("default", "small", "large"):
        raise ValueError(f"unknown variant {arg!r}; expected default, small or large")
    c = common.base_config(small=arg == "small")
    c.method = ml_collections.ConfigDict()
    c.method.name = "lmnn"
    c.method.k = 3  # target neighbours per point (same label, nearest in the input space).
    c.method.dim = 0  # output dimension D' of L (0: D, a square L; < D: PCA-initialised).
    c.method.mu = 1.0  # weight of the push (impostor) term: loss = pull + mu * push.
    c.method.margin = 1.0  # margin in squared distance.
    c.method.num_impostors = 32  # nearest differently labelled points kept per point.
    c.method.refresh_every = 10  # steps between impostor searches (one logged row each).
    c.method.num_iters = 300  # Adam steps (full batch).
    c.method.learning_rate = 1e-3  # Adam step size (L starts at the identity: entries ~1).
    c.method.block_size = 512  # rows per [block, N] distance matrix in the searches.
    if arg == "small":
        c.method.num_iters = 60
    elif arg == "large":  # L: [128, D] from PCA, so each step costs N D 128, not N D^2.
        c.method.dim = 128
        c.method.num_iters = 100
    c.lock()
    return c
