"""The repository's shape: the specified top level, a library that imports neither configs/
nor experiments/, imports that go one way, rooms that import only the rooms below them, and
functions of a readable size (a module holds one idea, whatever its length)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "warca_jax"
TOP_LEVEL = {
    "pyproject.toml", "README.md", "warca_jax", "configs", "experiments", "tests",
    "benchmarks", "data", "docs", "notebooks", ".ci", ".gitignore",
}  # fmt: skip
MAX_FUNCTION_CODE_LINES = 60  # docstring, comment-only and blank lines not counted


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every module an import statement names, at any depth (functions included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_the_top_level_is_the_specified_one():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if tracked.returncode == 0 and tracked.stdout:
        top = {line.split("/", 1)[0] for line in tracked.stdout.splitlines()}
    else:  # not a git checkout: what is there, less the usual local folders
        top = {p.name for p in ROOT.iterdir()} - {".git", ".venv", ".ci-venv", ".pytest_cache"}
        top = {n for n in top if not n.endswith(".egg-info") and n != "__pycache__"}
    assert top == TOP_LEVEL, (
        f"unexpected: {sorted(top - TOP_LEVEL)}; missing: {sorted(TOP_LEVEL - top)}"
    )


def test_only_the_library_is_installed():
    pyproject = (ROOT / "pyproject.toml").read_text()
    section = pyproject.split("[tool.setuptools.packages.find]", 1)[1].split("\n[", 1)[0]
    assert section.strip() == 'include = ["warca_jax*"]', section
    assert not (ROOT / "configs" / "__init__.py").exists()  # loaded by path, never imported
    setuptools = pytest.importorskip("setuptools")
    found = setuptools.find_namespace_packages(str(ROOT), include=["warca_jax*"])
    assert "warca_jax.methods.warca" in found and all(
        p == "warca_jax" or p.startswith("warca_jax.") for p in found
    ), found


@pytest.mark.slow
def test_the_library_imports_neither_configs_nor_experiments():
    bad = {
        name: sorted(i for i in _imports(path) if i.split(".")[0] in ("configs", "experiments"))
        for name, path in MODULES.items()
    }
    assert not {k: v for k, v in bad.items() if v}


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        # a module's own package (a parent) is not an edge: Python imports it first anyway
        graph[name] = {
            i for i in _imports(path) if i in MODULES and i != name and not name.startswith(i + ".")
        }
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def test_no_import_cycle_counting_imports_inside_functions():
    assert _cycles(_graph()) == []


# The library's rooms, bottom first: each imports only the rooms before it. Reading and
# writing; the data as arrays (the one check of features, ids and splits); the maths;
# the descriptors; a learned metric; the evaluation; the dataset readers; the learners; the
# figures; a run of the main job; the paper's protocol; the studies; scikit-learn's face.
LAYERS = (
    "io", "data", "maths", "features", "metric", "evaluation", "datasets", "methods",
    "plots", "runs", "protocol", "studies", "sklearn",
)  # fmt: skip
ROOMS = {
    f"warca_jax.{room}": {f"warca_jax.{below}" for below in LAYERS[:i]}
    for i, room in enumerate(LAYERS)
}


def test_every_module_stands_in_a_room():
    """The package's top holds only rooms (sub-packages), and each is in ``LAYERS``: a new
    module or room is placed in the layering, not left beside it."""
    top = {p.stem if p.is_file() else p.name for p in LIBRARY.iterdir() if p.name != "__pycache__"}
    assert top - {"__init__"} == set(LAYERS), sorted(top)
    assert all((LIBRARY / room / "__init__.py").is_file() for room in LAYERS)
    assert not (LIBRARY / "__init__.py").read_text().strip()  # nothing re-exported at the top


def _room_violations(graph: dict[str, set[str]], rooms: dict[str, set[str]]) -> list[str]:
    out = []
    for room, allowed in rooms.items():
        for name in sorted(n for n in graph if _within(n, room)):
            for i in sorted(graph[name]):
                if not (_within(i, room) or any(_within(i, a) for a in allowed)):
                    out.append(f"{name} imports {i}")
    return out


# The test folders that cut across the rooms (docs/layout.md, "where a test goes").
TEST_CORPORA = {"bad_input", "end_to_end", "repository"}


def test_the_tests_mirror_the_library():
    """Every test file stands in a folder named for a room (or a room's sub-package:
    tests/methods/warca/) or for a corpus that cuts across them, none at the top, each name
    once (pytest imports a test file by its name)."""
    tests = ROOT / "tests"
    files = sorted(tests.rglob("test_*.py"))
    at_top = [p.name for p in files if p.parent == tests]
    assert not at_top, f"test files at the top of tests/: {at_top}"
    for path in files:
        folder = path.parent.relative_to(tests).parts
        room = (LIBRARY / Path(*folder)).is_dir() and folder[0] in LAYERS
        assert room or folder == (folder[0],) and folder[0] in TEST_CORPORA, path
    names = [p.name for p in files]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_each_room_imports_only_the_rooms_below_it():
    assert _room_violations(_graph(), ROOMS) == []


def test_the_room_check_finds_an_import_up():
    graph = {"p.io.a": {"p.io.b"}, "p.io.b": set(), "p.maths.c": {"p.io.a", "p.top"}}
    rooms = {"p.io": set(), "p.maths": {"p.io"}}
    assert _room_violations(graph, rooms) == ["p.maths.c imports p.top"]
    graph["p.io.b"] = {"p.maths.c"}
    assert _room_violations(graph, rooms) == ["p.io.b imports p.maths.c", "p.maths.c imports p.top"]


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _learner_units() -> set[str]:
    """The modules (or packages, for WARCA) that define the registered learners."""
    from warca_jax import methods

    units = set()
    for method in methods.registry().values():
        module = method.fit.__module__
        parts = module.split(".")
        units.add(".".join(parts[:3]) if parts[2:3] and parts[2] in MODULES_PACKAGES else module)
    return units


MODULES_PACKAGES = {
    n.split(".")[2] for n in MODULES if n.count(".") >= 3 and n.startswith("warca_jax.methods.")
}  # learners that are packages (warca_jax/methods/<name>/)


def _within(name: str, unit: str) -> bool:
    return name == unit or name.startswith(unit + ".")


def test_learners_import_shared_pieces_never_each_other():
    units = _learner_units()
    assert "warca_jax.methods.warca" in units and "warca_jax.methods.lmnn" in units
    for unit in sorted(units):
        for name, path in MODULES.items():
            if not _within(name, unit):
                continue
            others = sorted(i for i in _imports(path) if any(_within(i, u) for u in units - {unit}))
            assert not others, f"{path.relative_to(ROOT)} imports other learners: {others}"


def test_every_learner_owns_its_defaults():
    from warca_jax import methods

    for name, method in methods.registry().items():
        assert method.variants, name
        for variant in method.variants:
            cfg = method.default_config(variant)
            assert cfg.name == name, (name, variant)
        with pytest.raises(ValueError, match="unknown variant"):
            method.default_config("no_such_variant")


def _code_lines(lines: list[str], node: ast.AST) -> int:
    skip = set()
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            skip = set(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(
        1
        for i in range(node.lineno, node.end_lineno + 1)
        if i not in skip and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#")
    )


@pytest.mark.slow
def test_functions_have_a_readable_size():
    long_functions = []
    for path in MODULES.values():
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = _code_lines(lines, node)
                if n > MAX_FUNCTION_CODE_LINES:
                    long_functions.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n}"
                    )
    assert not long_functions, long_functions
