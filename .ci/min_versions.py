"""Prints pip constraints pinning every core dependency of pyproject.toml to its floor.

``name>=X`` becomes ``name==X``, and jaxlib is pinned to jax's floor (jax needs the jaxlib
of its own release). .ci/run installs the package under these constraints in a second
virtualenv and runs the quick tier, so that the floors pyproject declares are tested.
"""

import pathlib
import re
import tomllib

project = tomllib.loads((pathlib.Path(__file__).parents[1] / "pyproject.toml").read_text())
pins = {}
for requirement in project["project"]["dependencies"]:
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", requirement.strip())
    if not match:
        raise SystemExit(f"pyproject dependency {requirement!r} is not 'name>=floor'")
    pins[match[1]] = match[2]
pins["jaxlib"] = pins["jax"]
print("\n".join(f"{name}=={version}" for name, version in pins.items()))
