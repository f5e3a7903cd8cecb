"""WARCA: training by minibatch Adam, linear (primal) and kernel forms.

``fit(features, labels, cfg)`` learns W: [D', D] (``cfg.kernel == "none"``)
or A: [D', N] in the space of a named kernel, and returns a ``Metric``.

Design: one module per concern, the paper's equations in one place.

* ``warca_jax.losses``: every equation the step evaluates (eq. 5/17/22 distances, eq. 8
  rank weights, eq. 13/19 hinge argument, also the violator test of the search, eq. 12/18
  objective, eq. 20-22 hinge gradient, eq. 20/23 penalty gradients, eq. 23-24
  preconditioned hinge direction), one function each, and a table of where every
  equation of section 3 lives; the dense forms that check them are in
  tests/reference_forms.py.
* ``config``: config and input checks, all before any work (``check_config``,
  ``validate``).
* ``prepare``: the program's inputs: scaled features or the centred kernel matrix,
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
* ``fitting``: ``fit``, from data to ``Metric``.

Why WARCA needs three things the paper does not spell out (measured against the
authors' C++ release; numbers in benchmarks/RESULTS.md, "WARCA's accuracy"):

* **The scale of the input against the margin** (``cfg.normalize``). The margin
  gamma = 1 and the AON penalty's W W^T = I fix an absolute length, so the same data
  multiplied by 100 is a different problem: at one scale every negative violates the
  margin, at another none does, and the step size that suits one does not suit the
  other (without it, linear rank-1 on the built-in data was 75.3 for the features
  x1e-4, 77.5 as they are and 89.5 x1e-2; benchmarks/bench_warca_robustness.py).
  ``normalize="msd"`` divides the features (or the kernel matrix) by the square root
  of their mean squared distance between training points (of the mean squared
  feature-space distance for a kernel), so that it is 1: any positive multiple
  of the input then trains the same model, and the ``Metric`` carries the factor in
  its ``input_scale``, so ``transform`` takes the features as the user gives them.
  Features too small or too large for float32 (e.g. x1e-30: squared distances of 1e-60
  underflow, the linear or chi2 kernel matrix is 0; x1e30 overflows) are first multiplied
  by an exact power of two computed in float64 (``methods.checks.training_data``), which
  the ``Metric`` applies again as its ``feature_scale``: the same model at any finite
  scale, float64 features beyond float32's range included. With ``normalize="none"``
  such features are refused.
* **A decaying step** (``cfg.schedule``, ``optim.make_optimizer``): with Adam's
  constant step the last iterate oscillates by an amount that grows with eta.
* **A centred kernel matrix** (kernel form). An RBF-type kernel matrix has one
  eigenvalue of about N x mean(K) along the constant vector. The plain gradient
  A K E K (eq. 20) is dominated by it, so Adam, which moves every coordinate of A by
  about eta, moves all N columns together and the embeddings K A^T jump by about
  N mean(K) eta per step: the plain gradient went to chance (rank-1 0.3) at eta = 1e-2
  with 2,400 training images. Training on H K H (H = I - 11^T / N) instead is an exact
  reparameterisation, A -> A H, that changes no distance between embeddings and
  removes that eigenvalue; the returned ``Metric`` holds A H, which embeds new points
  with the uncentred kernel up to a shift common to all points.

And one thing real descriptors taught (benchmarks/RESULTS.md, "The paper's Table 2 on real
images" and "Defaults on real descriptors"; ``benchmarks/bench_real_defaults.py``):

* **A penalty weak enough for W to reach the margin** (``cfg.lam``). After the ``msd``
  normalisation the margin of 1 is the mean squared distance between training points; the
  AON penalty at lambda = 1e-2 holds W near orthonormal, so the projected distances stay
  below the margin's reach: on VIPeR's 2,580-d descriptor (D' = 100) different-identity
  pairs ended at a projected mean squared distance of 1.9, 38% of the triplets inside the
  margin, 18.35 rank-1; at lambda = 1e-4, 6.1, 2% and 25.63. The stretch the margin needs
  grows with the training set: on CUHK01 (1,940 training images) WARCA-chi2 at 1e-3 ends
  with 73% of the negatives inside the margin and 29.17 rank-1, at 1e-5 with 0.6% and
  44.60, while VIPeR (632 images) is within one point from 1e-6 to 1e-3. The default is
  1e-5 in both forms, where both datasets hold the paper's ordering (RESULTS.md, "WARCA
  beyond VIPeR"); small training sets (a 50-person subset prefers 1e-2, the synthetic
  histograms 1e-3) want more, so the protocol cross-validates it, on enough splits: 2
  splits of 95 validation people chose 1e-2 for WARCA-chi2 on VIPeR (31.42 rank-1), 5
  splits chose 1e-3 (37.03).
* **Cross-camera positive pairs** (``cfg.positives``). Given the training cameras (the
  pipeline passes them), the positive pairs are those of one identity seen by two
  cameras: the pairs a re-id test ranks. CUHK01's two images per camera make a third of
  its same-identity pairs same-camera ones; without them WARCA-chi2 gains 4.5 rank-1 at
  lambda 1e-3 and 0.7 at 1e-5. Without cameras, every same-identity pair.
* **A start at the principal axes** (``cfg.init``). With lambda small the hinge can reach
  zero on a small training set (30 training people: by step 125 of 2,000), and from then
  on only the penalty moves W: the directions the hinge never used stay where they
  started. From random rows (the authors' release draws W ~ N(0, 1/n)) they add a random
  projection of the descriptor to every distance; from the top D' principal axes of the
  training data (the kernel principal axes in the kernel form, A = Lambda^-1/2 U^T on the
  centred K, so W W^T = I) they carry its largest variance. On data/cuhk01_subset
  WARCA-chi2 gives 37.78 / 55.52 rank-1 / mAP from the principal axes against 31.11 /
  51.59 from random rows; on the whole datasets the two are within 0.4 rank-1 (VIPeR
  36.23 against 35.82, CUHK01 56.66 against 56.63, ORL 92.50 both). Above 4,096 training
  points the kernel axes come from subspace iteration (O(N^2 D')), not an N x N eigh.

The C++ release's update, read from its source, is the preconditioned one of eq. 23-25
(its hinge direction is A K E and its penalty's 2 (A K A^T - I) A), not the plain
gradient; this module's ``preconditioned=True`` is the same direction.
"""

from warca_jax.methods import Method
from warca_jax.methods.warca.config import (
    GRADIENTS,
    KERNEL_APPROX,
    NORMALIZE,
    SCHEDULES,
    VARIANTS,
    check_config,
    default_config,
    validate,
)
from warca_jax.methods.warca.fitting import fit
from warca_jax.methods.warca.grid import GridFit
from warca_jax.methods.warca.nystroem import nystroem_features
from warca_jax.methods.warca.prepare import init_params, mean_sq_dist, normalized_gram
from warca_jax.methods.warca.step import (
    Hyperparams,
    compiled_chunk,
    config_optimizer,
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
        takes_callback=True,
        takes_cams=True,
        grid=GridFit,
        kinds=("linear", "kernel"),
    )
}

__all__ = [
    "GRADIENTS",
    "KERNEL_APPROX",
    "NORMALIZE",
    "SCHEDULES",
    "VARIANTS",
    "METHODS",
    "Hyperparams",
    "check_config",
    "compiled_chunk",
    "fit",
    "hyperparams",
    "init_params",
    "init_state",
    "config_optimizer",
    "default_config",
    "make_train_chunk",
    "make_train_step",
    "mean_sq_dist",
    "normalized_gram",
    "nystroem_features",
    "validate",
]
