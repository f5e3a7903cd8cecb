"""WARCA: training by minibatch Adam, linear (primal) and kernel forms.

``fit(features, labels, cfg)`` learns W: [D', D] (``cfg.kernel == "none"``)
or A: [D', N] in the space of a named kernel, and returns a ``Metric``.

Design: one module per concern, the paper's equations in one place.

* ``warca_jax.maths.losses``: every equation the step evaluates (eq. 5/17/22 distances, eq. 8
  rank weights, eq. 13/19 hinge argument, also the violator test of the search, eq. 12/18
  objective, eq. 20-22 hinge gradient, eq. 20/23 penalty gradients, eq. 23-24
  preconditioned hinge direction), one function each, and a table of where every
  equation of section 3 lives; the dense forms that check them are in
  tests/reference_forms.py.
* ``config``: config and input checks, all before any work (``check_config``,
  ``validate``).
* ``inputs``: the program's inputs: scaled features or the centred kernel matrix,
  ``init_params``, placement on the mesh.
* ``nystroem``: ``nystroem_features``.
* ``step``: ``primal_step`` and ``kernel_step``, each a sequence of those equations:
  1. draw a minibatch of same-label pairs (i, j) uniformly from S;
  2. embed the anchors, positives and candidates (all training points, or a random
     pool of ``candidate_pool`` of them; in the kernel form the embeddings K A^T of
     all N points, once per step, shared by the search, the gradient and the penalty);
  3. draw a violator k per pair and estimate rank^gamma_ij (eq. 14, ``sampling``);
  4. the hinge gradient (eq. 20-22, or the eq. 23-24 direction) and the penalty's;
  5. ``tx`` = lambda R' + Adam (``optim.make_optimizer``), built in the program from
     its ``Hyperparams`` argument (lambda, eta), so one compiled program serves a grid.
  ``make_train_step`` / ``make_train_chunk`` jit them; ``compiled_chunk`` caches.
* ``problem``: one config's training problem on one training set, made once from those
  inputs (``prepare_fit``), and ``GridFit``, its points at several (lambda, eta).
* ``lam_select``: the rule that chooses lambda from ``lam_grid`` on held-out identities.
* ``fitting``: ``fit``, from data to ``Metric``.

What the paper does not spell out, and this module does (why, with the measurements:
docs/methods.md#what-warca-needs-beyond-the-paper): the input's scale against the margin
(``cfg.normalize="msd"``, the ``Metric`` carrying the factor), a decaying step
(``cfg.schedule``), a centred kernel matrix (an exact reparameterisation that removes the
kernel's constant eigenvalue from the plain gradient), a penalty weak enough for W to
reach the margin (``cfg.lam``), cross-camera positive pairs (``cfg.positives``) and a
start at the principal axes (``cfg.init``).

The C++ release's update, read from its source, is the preconditioned one of eq. 23-25
(its hinge direction is A K E and its penalty's 2 (A K A^T - I) A), not the plain
gradient; this module's ``preconditioned=True`` is the same direction.
"""

from warca_jax.methods import Method
from warca_jax.methods.warca import lam_select
from warca_jax.methods.warca.config import (
    VARIANTS,
    default_config,
    validate,
)
from warca_jax.methods.warca.fitting import fit
from warca_jax.methods.warca.inputs import init_params, mean_sq_dist, normalized_gram
from warca_jax.methods.warca.nystroem import nystroem_features
from warca_jax.methods.warca.problem import GridFit
from warca_jax.methods.warca.step import (
    Hyperparams,
    compiled_chunk,
    hyperparams,
    init_state,
    make_train_chunk,
    make_train_step,
)

METHODS = {
    "warca": Method(
        fit=fit,
        validate=validate,
        default_config=default_config,
        variants=VARIANTS,
        grid=GridFit,
        kinds=("linear", "kernel"),
        fit_rows=lam_select.fit_rows,
    )
}

__all__ = [
    "METHODS",
    "Hyperparams",
    "compiled_chunk",
    "fit",
    "hyperparams",
    "init_params",
    "init_state",
    "default_config",
    "make_train_chunk",
    "make_train_step",
    "mean_sq_dist",
    "normalized_gram",
    "nystroem_features",
    "validate",
]
