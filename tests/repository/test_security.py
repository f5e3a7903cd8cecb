"""docs/security.md's "never" rules, read from the source of the library and entry points.

No pickle (every ``np.load`` passes ``allow_pickle=False``; no pickling module), no code
from data (no ``eval``, ``exec``, ``compile`` or ``__import__``), no network (no client
module; ``socket`` only for the host name). The source is parsed, not grepped, so a word
in a comment or a docstring is no finding and an aliased import is.
"""

from __future__ import annotations

import ast
import glob
import os

import numpy as np
import pytest
from repo_configs import ROOT

SCANNED = ("warca_jax", "experiments")
PICKLING = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib"}
NETWORK = {"urllib", "urllib3", "http", "requests", "httpx", "aiohttp", "ftplib", "smtplib",
           "socketserver", "xmlrpc", "telnetlib", "webbrowser"}  # fmt: skip
RUNS_CODE = {"eval", "exec", "compile", "__import__"}
# attribute calls that unpickle or run code whatever their module is called
UNSAFE_CALLS = {"read_pickle", "unsafe_load", "full_load"}
SOCKET_ALLOWED = {"gethostname"}


def _sources() -> list[str]:
    files = []
    for folder in SCANNED:
        files += glob.glob(os.path.join(ROOT, folder, "**", "*.py"), recursive=True)
    return sorted(files)


def _is_false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def findings(source: str, name: str = "<source>") -> list[str]:
    """Every breach of the rules in ``source``, as ``name:line: what``."""
    tree = ast.parse(source, name)
    numpy_names = {"np", "numpy", "jnp"}
    socket_names = set()
    bare_loads = set()  # ``from numpy import load [as name]``
    found = []

    def report(node, what):
        found.append(f"{name}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            for module in modules:
                top = module.split(".")[0]
                if top in PICKLING:
                    report(node, f"imports {module} (pickling)")
                if top in NETWORK:
                    report(node, f"imports {module} (network)")
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in ("numpy", "jax.numpy"):
                        numpy_names.add(a.asname or a.name)
                    if a.name == "socket":
                        socket_names.add(a.asname or a.name)
            elif node.module in ("numpy", "jax.numpy"):
                bare_loads |= {a.asname or a.name for a in node.names if a.name == "load"}
            elif node.module == "socket":
                bad = [a.name for a in node.names if a.name not in SOCKET_ALLOWED]
                if bad:
                    report(node, f"imports {bad} from socket (network)")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in socket_names and node.attr not in SOCKET_ALLOWED:
                report(node, f"uses socket.{node.attr} (network)")
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in RUNS_CODE:
            report(node, f"calls {func.id} (runs code)")
        if isinstance(func, ast.Attribute) and func.attr in UNSAFE_CALLS:
            report(node, f"calls .{func.attr} (unpickles or runs code)")
        for kw in node.keywords:
            if kw.arg == "allow_pickle" and not _is_false(kw.value):
                report(node, "passes allow_pickle other than False")
        loads = (
            isinstance(func, ast.Attribute)
            and func.attr == "load"
            and isinstance(func.value, ast.Name)
            and func.value.id in numpy_names
        ) or (isinstance(func, ast.Name) and func.id in bare_loads)
        if loads and not any(k.arg == "allow_pickle" and _is_false(k.value) for k in node.keywords):
            report(node, f"calls {ast.unparse(func)} without allow_pickle=False")
    return found


def test_the_scan_reads_the_library():
    files = _sources()
    names = {os.path.relpath(f, ROOT) for f in files}
    assert {"warca_jax/metric/base.py", "warca_jax/datasets/npz_file.py"} <= names
    assert any(f.startswith("experiments/") for f in names)


@pytest.mark.parametrize(
    "path", [os.path.relpath(f, ROOT) for f in _sources()], ids=lambda p: p.replace("/", ".")
)
def test_no_pickle_no_code_from_data_no_network(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        assert findings(f.read(), path) == []


@pytest.mark.slow
def test_the_library_reads_numpy_files_through_one_reader_that_never_unpickles(tmp_path):
    """Every .npy / .npz is read by ``bounded_reads`` (no ``np.load`` left to scan: the
    breach scan below refuses one without allow_pickle=False), and that reader refuses an
    array of Python objects, whose reading would unpickle."""
    from warca_jax.io import bounded_reads

    uses = 0
    for path in _sources():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        uses += sum(
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "bounded_reads"
            and n.attr in ("load", "read_npy", "NpzArchive")
            for n in ast.walk(tree)
        )
    assert uses >= 3  # the dataset .npz, the feature cache's .npy, a saved model
    path = tmp_path / "objects.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with open(path, "rb") as f, pytest.raises(ValueError, match="Python objects"):
        bounded_reads.read_npy(f, str(path))


BREACHES = {
    "import pickle": "imports pickle (pickling)",
    "import joblib as jl": "imports joblib (pickling)",
    "from marshal import loads": "imports marshal (pickling)",
    "import urllib.request": "imports urllib.request (network)",
    "from http import client": "imports http (network)",
    "import socket\nsocket.create_connection(('h', 80))": "uses socket.create_connection",
    "from socket import socket": "imports ['socket'] from socket",
    "import numpy as np\nnp.load('f.npz')": "calls np.load without allow_pickle=False",
    "import numpy as xp\nxp.load('f.npy', mmap_mode='r')": "calls xp.load without allow_pickle",
    "import numpy as np\nnp.load('f', allow_pickle=True)": "passes allow_pickle other than",
    "import numpy as np\nnp.load('f', allow_pickle=flag)": "calls np.load without allow_pickle",
    "from numpy import load as read\nread('f.npz')": "calls read without allow_pickle=False",
    "eval(text)": "calls eval (runs code)",
    "exec(compile(text, 'x', 'exec'))": "calls compile (runs code)",
    "__import__(name)": "calls __import__ (runs code)",
    "pandas.read_pickle(path)": "calls .read_pickle",
    "yaml.unsafe_load(text)": "calls .unsafe_load",
}


@pytest.mark.parametrize("source", sorted(BREACHES))
def test_the_scan_finds_each_breach(source):
    found = findings(source)
    assert any(BREACHES[source] in f for f in found), found


def test_the_scan_passes_what_the_rules_allow():
    allowed = (
        "import numpy as np\n"
        "np.load(fh, allow_pickle=False)\n"
        "import socket\nsocket.gethostname()\n"
        "import ast\nast.literal_eval('1')\n"
        "# import pickle, eval(x): words in a comment\n"
        "'''np.load(path) in a docstring'''\n"
        "import re\nre.compile('x')\n"
    )
    assert findings(allowed) == []
