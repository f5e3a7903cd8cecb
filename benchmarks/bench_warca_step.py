r"""Times the parts of linear WARCA's training step at a training set's shape, and the two
arrangements of its hinge gradient (``losses.hinge_grad``'s "pairs" and "rows").

  python -m benchmarks.bench_warca_step                      # VIPeR's and CUHK01's shapes
  python -m benchmarks.bench_warca_step --shapes=506x505x100,1940x1939x40

A shape is N x k x D' (training images, input dimensions, e.g. the span's k = N - 1, and
output dimension) with the minibatch's B pairs (``--batch``). Each part is jitted alone
on random data and timed over ``--reps`` calls after one to compile: the embedding X W^T,
the violator search (distances to every candidate, ``sampling.find_violators``, and the
two logged fractions), the hinge gradient in each arrangement (with the gathers and
scatters it needs) and the AON penalty's gradient. Run it with one BLAS thread and one
core (``taskset -c 0``) to see a protocol worker's share of a 2-core machine.
"""

from __future__ import annotations

import json
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from warca_jax.maths import losses, penalties, sampling

flags.DEFINE_string("shapes", "506x505x100,632x631x100,1940x1939x40", "N x k x D' shapes")
flags.DEFINE_integer("batch", 512, "pairs in the minibatch (B)")
flags.DEFINE_integer("reps", 200, "timed calls of each part")
FLAGS = flags.FLAGS


def _seconds(fn, *args, reps: int) -> float:
    jitted = jax.jit(fn)
    jax.block_until_ready(jitted(*args))  # compiled
    t0 = time.perf_counter()
    for _ in range(reps):
        out = jitted(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / reps


def parts(n: int, k: int, dp: int, b: int, reps: int) -> dict:
    """Milliseconds of each part of the step at shape (n, k, dp) with b pairs."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(n, k)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(dp, k)) / np.sqrt(k), jnp.float32)
    i, j, v = (jnp.asarray(rng.integers(0, n, b)) for _ in range(3))
    labels = jnp.asarray(np.arange(n) // 2)
    u = jnp.asarray(rng.uniform(size=(2, b)), jnp.float32)
    weights = jnp.ones(b, jnp.float32)
    emb = x @ w.T

    def search(e):
        ea, ep = e[i], e[j]
        d_ij = losses.distance(ea - ep)
        d_ik = losses.candidate_distances(ea, e)
        negative = labels[None, :] != labels[i][:, None]
        found = sampling.find_violators(
            u, d_ij, d_ik, negative, jnp.full((b,), n - 2.0), margin=1.0
        )
        fractions = [  # the step's logged margin_frac and closer_frac
            jnp.mean(sampling.closer_fraction(d_ij + margin, d_ik, negative))
            for margin in (1.0, 0.0)
        ]
        return found.index, found.rank, *fractions

    def gradient(form):
        def g(e):
            pu, pv = e[i] - e[j], e[i] - e[v]
            return losses.hinge_grad(pu, pv, x, i, j, v, weights, margin=1.0, form=form)[0]

        return g

    out = {
        "embedding": _seconds(lambda w: x @ w.T, w, reps=reps),
        "violator_search": _seconds(search, emb, reps=reps),
        "hinge_grad_pairs": _seconds(gradient("pairs"), emb, reps=reps),
        "hinge_grad_rows": _seconds(gradient("rows"), emb, reps=reps),
        "penalty_grad": _seconds(lambda w: penalties.penalty_grad(w, kind="aon"), w, reps=reps),
    }
    return {key: round(1e3 * s, 3) for key, s in out.items()}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    print(json.dumps({"machine": platform.processor() or platform.machine(),
                      "backend": jax.default_backend(), "jax": jax.__version__}))  # fmt: skip
    print("| N x k x D' | embedding | violator search | gradient, pairs | gradient, rows | "
          "penalty gradient | pairs / rows | auto |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for shape in FLAGS.shapes.split(","):
        n, k, dp = (int(s) for s in shape.split("x"))
        ms = parts(n, k, dp, FLAGS.batch, FLAGS.reps)
        print(json.dumps({"shape": shape, "batch": FLAGS.batch, **ms}), flush=True)
        ratio = ms["hinge_grad_pairs"] / ms["hinge_grad_rows"]
        auto = "rows" if n < 2 * FLAGS.batch else "pairs"
        print(f"| {shape} | {ms['embedding']} | {ms['violator_search']} | "
              f"{ms['hinge_grad_pairs']} | {ms['hinge_grad_rows']} | {ms['penalty_grad']} | "
              f"{ratio:.2f} | {auto} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    app.run(main)
