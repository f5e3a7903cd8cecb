"""WARCA training on a mesh of devices: one device is a mesh of one, N devices agree with it.

The multi-device checks run in a subprocess with ``XLA_FLAGS=--xla_force_host_platform_
device_count=8`` (the flag must be set before JAX starts), where the same fits run on a
mesh of 1 and of 8 host devices.
"""

import json
import subprocess
import sys

import jax
import numpy as np
import pytest
from processes import ROOT, cpu_env, run_python

from warca_jax.maths import device_mesh
from warca_jax.methods import warca
from warca_jax.runs import defaults

# Fits every layout of the training step (all candidates split by candidate, a pool split
# by pair, the kernel form with and without preconditioning, Nystroem) on 1 and 8 devices,
# with a training set of 197 samples (not a multiple of 8: the rows are padded).
SCRIPT = r"""
import json
import jax
import numpy as np
from warca_jax.runs import defaults
from warca_jax.methods import warca

rng = np.random.default_rng(0)
y = np.repeat(np.arange(50), 4)[:197]
x = (rng.normal(size=(200, 24)) + np.repeat(rng.normal(size=(50, 24)), 4, 0))[:197]
x = x.astype(np.float32)
cases = {
    "linear": {},
    "linear_pool_wsabie_autodiff": {"candidate_pool": 64, "sampler": "wsabie",
                                    "gradient": "autodiff"},
    "kernel": {"kernel": "chi2_rbf", "dim": 8},
    "kernel_plain": {"kernel": "chi2_rbf", "dim": 8, "preconditioned": False},
    "nystroem": {"kernel": "chi2_rbf", "dim": 8, "kernel_approx": "nystroem",
                 "num_landmarks": 60},
}
out = {"devices": len(jax.devices()), "cases": {}}
for name, over in cases.items():
    feats = np.abs(x) if "kernel" in over else x
    res = {}
    for nd in (1, 8):
        cfg = defaults.method_config("warca:small")
        cfg.update(num_iters=20, log_every=10, num_devices=nd, lam=1e-3, **over)
        metric, hist = warca.fit(feats, y, cfg, seed=3)
        res[nd] = (np.asarray(metric.projection), [h["loss"] for h in hist])
    p1, pn = res[1][0], res[8][0]
    out["cases"][name] = {
        "max_abs_diff": float(np.abs(p1 - pn).max()),
        "scale": float(np.abs(p1).max()),
        "loss_1": res[1][1],
        "loss_8": res[8][1],
    }

# The compiled step on 8 devices keeps the [B, N] violator search split by candidate: no
# collective gathers a [B, N] array (only per-block counts, [B, N / 32], travel).
import re
from warca_jax.maths import device_mesh
from warca_jax.maths import sampling
from warca_jax.methods.warca import inputs
cfg = defaults.method_config("warca:small")
cfg.lam = 1e-3
mesh = device_mesh.make_mesh(8)
chunk = warca.make_train_chunk(cfg, kernel_form=False, mesh=mesh)
w = warca.init_params(jax.random.PRNGKey(0), dim=cfg.dim, d=x.shape[1])
feats, w = inputs.place(mesh, x, w)
rep = device_mesh.replicated(mesh)
hyper = jax.device_put(warca.hyperparams(cfg), rep)
state = jax.device_put(warca.init_state(cfg, hyper, w), rep)
table = jax.device_put(sampling.make_pair_table(y), rep)
key = jax.device_put(jax.random.PRNGKey(1), rep)
hlo = chunk.lower(state, hyper, feats, table, key, 2).compile().as_text()
gathered = re.findall(r"= \w+\[([\d,]*)\]\S* all-gather\(", hlo)
out["rows"] = int(feats.shape[0])
out["feats_shards"] = len(feats.addressable_shards)
out["gathered_shapes"] = gathered
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def eight_devices():
    proc = run_python(["-c", SCRIPT], cpu_env(host_devices=8))
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


@pytest.mark.slow
def test_eight_forced_devices_are_seen(eight_devices):
    assert eight_devices["devices"] == 8


@pytest.mark.slow
def test_violator_search_stays_where_the_candidates_live(eight_devices):
    # 197 rows padded to whole selection blocks on each of the 8 devices
    rows = eight_devices["rows"]
    assert rows % (8 * 32) == 0 and rows >= 197 and eight_devices["feats_shards"] == 8
    for shape in eight_devices["gathered_shapes"]:
        assert str(rows) not in shape.split(","), eight_devices["gathered_shapes"]


@pytest.mark.slow  # a child process on 8 forced devices
@pytest.mark.parametrize(
    "case",
    ["linear", "linear_pool_wsabie_autodiff", "kernel", "kernel_plain", "nystroem"],
)
def test_eight_devices_give_the_one_device_model(eight_devices, case):
    res = eight_devices["cases"][case]
    # Same draws, same steps: only the order of float sums across devices may differ.
    assert res["max_abs_diff"] <= 1e-4 * max(res["scale"], 1.0), res
    np.testing.assert_allclose(res["loss_8"], res["loss_1"], rtol=1e-4, atol=1e-6)


def _cfg(**over):
    cfg = defaults.method_config("warca:small")
    cfg.update(num_iters=20, log_every=10, **over)
    return cfg


@pytest.mark.slow
def test_a_mesh_of_one_is_the_default_here(reid):
    # The suite runs on one CPU device: num_devices=0 (all) and 1 are the same mesh.
    x, y = reid.x_train, reid.y_train
    assert device_mesh.make_mesh(0).devices.size == len(jax.devices())
    m0, _ = warca.fit(x, y, _cfg(num_devices=0), seed=1)
    m1, _ = warca.fit(x, y, _cfg(num_devices=1), seed=1)
    np.testing.assert_array_equal(m0.projection, m1.projection)


def test_more_devices_than_there_are_is_a_clear_error(reid):
    x, y = reid.x_train, reid.y_train
    n, kind = len(jax.devices()), jax.devices()[0].platform
    with pytest.raises(ValueError, match=f"only {n} {kind} devices are visible"):
        warca.fit(x, y, _cfg(num_devices=len(jax.devices()) + 1))
    with pytest.raises(ValueError, match="num_devices must be an int >= 0"):
        warca.fit(x, y, _cfg(num_devices=-1))


def test_make_mesh_checks_its_argument():
    with pytest.raises(ValueError, match="num_devices must be an int >= 0"):
        device_mesh.make_mesh(-2)
    with pytest.raises(ValueError, match="num_devices must be an int >= 0"):
        device_mesh.make_mesh(True)  # a bool is not a count
    mesh = device_mesh.make_mesh(1)
    assert mesh.axis_names == (device_mesh.DATA,)
    assert device_mesh.pad_to_multiple(7, mesh) == 7


@pytest.mark.slow
def test_two_processes_train_as_one_mesh_like_one_process(tmp_path):
    # The multi-host path on one machine: two processes joined by jax.distributed (gloo
    # collectives on the CPU), one device each, form one mesh of 2 devices.
    import socket

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    env = cpu_env(JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo")
    # one split of the config's two: each process runs the held-out choice of lambda and
    # the final fit on the mesh
    common = [
        "--config=configs/warca.py:small",
        "--config.data.num_splits=1",
        "--config.progress=False",
    ]
    dist = [f"--coordinator_address=localhost:{port}", "--num_processes=2"]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "experiments.main",
                "--distributed",
                *dist,
                f"--process_id={i}",
                f"--workdir={tmp_path / 'two'}",
                *common,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    assert "process 0 of 2; 2 devices in all" in outs[0][1]
    assert "process 1 of 2; 2 devices in all" in outs[1][1]
    run_python(["-m", "experiments.main", f"--workdir={tmp_path / 'one'}", *common], env)
    results = [
        json.loads((tmp_path / path / "results.json").read_text())
        for path in ("two", "two/process_1", "one")
    ]
    for key in ("rank1", "mAP"):
        assert results[0]["mean"][key] == results[1]["mean"][key]  # both processes agree
        assert results[0]["mean"][key] == pytest.approx(results[2]["mean"][key], abs=1.0)
