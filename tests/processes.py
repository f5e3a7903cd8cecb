"""Python in a fresh process from the repository root, on the CPU, for the multi-device tests.

Forced host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=N``) and
``jax.distributed`` both have to be set up before JAX starts, so those tests run their
code in a child process.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_env(host_devices: int = 0, **extra: str) -> dict:
    """This process's environment on the CPU, with ``host_devices`` forced devices (0: as is)
    or, with 0, without inherited XLA_FLAGS; ``extra`` variables added."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", **extra)
    if host_devices:
        flag = f"--xla_force_host_platform_device_count={host_devices}"
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flag}".strip()
    else:
        env.pop("XLA_FLAGS", None)
    return env


def run_python(args: list[str], env: dict, *, timeout: int = 600) -> subprocess.CompletedProcess:
    """Runs ``python *args`` from the repository root; fails the test unless it exits 0."""
    proc = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc
