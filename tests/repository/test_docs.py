"""README.md and docs/*.md against the repository: commands, config paths, names, links.

The pages are the front door; a command that no longer runs, a config that moved or a link
that leads nowhere is a bug in them. For README.md and every docs/*.md page:

* every shell command (fenced ``bash`` / ``sh`` / ``console`` / untagged blocks, lines
  joined at a trailing backslash or an open quote; inline code that starts with
  ``python``) that runs ``python -m <module>`` or ``python <file>.py`` names a module or
  file that exists; for the entry points (``experiments.<name>``) every ``--flag`` is one
  the entry point defines (read from its source: ``flags.DEFINE_*("name"``,
  ``config_flags.DEFINE_config_file("name"`` and ``cli.define_run_flags``), every
  ``--config=PATH[:variant]`` names a file under the repository's root whose ``VARIANTS``
  holds the variant, and every ``--config.<field path>`` override is a field of that config;
* every lone inline flag (``--config.eval.rerank=True``, ``--num_workers=N``) is a field of
  some config file or a flag of some entry point;
* every ``configs/<file>.py[:variant]`` the text names exists and has that variant;
* every repository path the text names (``warca_jax/...``, ``experiments/...``,
  ``benchmarks/...``) exists, every dotted ``warca_jax.<name>...`` resolves, and every
  import of the Python blocks resolves;
* every relative markdown link (and image) resolves to a file, and its ``#anchor`` to a
  heading of that page; the README links every docs page.

Placeholders are fine where they are plainly placeholders: values (``PATH/VIPeR``, ``DIR``),
``<file>`` in a path, ``...`` for elided flags. Nothing is run: configs are loaded in
process, so the whole file takes a few seconds.
"""

from __future__ import annotations

import ast
import functools
import glob
import importlib
import io
import os
import re
import shlex
import tokenize

import numpy as np
import pytest
from ml_collections import config_dict
from repo_configs import ROOT

from warca_jax.io import config_files

PAGES = ["README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))
)
SHELL_LANGS = {"", "bash", "sh", "shell", "console", "zsh"}
PYTHON_LANGS = {"python", "py", "python3"}
# absl's own flags, which every entry point accepts.
ABSL_FLAGS = {"help", "helpshort", "helpfull", "helpxml", "flagfile", "undefok", "v", "verbosity"}
REPO_DIRS = (
    "warca_jax",
    "configs",
    "experiments",
    "benchmarks",
    "tests",
    "notebooks",
    "docs",
    "data",
)
PLACEHOLDER_CHARS = set("<>{}*")

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)[^\n]*$")
_INLINE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CONFIG_MENTION = re.compile(r"(?<![\w/.~$-])configs/([\w-]+)\.py(?::(\w+)|\[:(\w+)\])?")
_REPO_PATH = re.compile(r"(?<![\w/.~$-])((?:" + "|".join(REPO_DIRS) + r")/[\w./{}<>*-]*)")
_DOTTED = re.compile(r"(?<![\w.])warca_jax(?:\.\w+)+")
_FLAG_TOKEN = re.compile(r"^--([A-Za-z_][\w.]*)(?:=(.*))?$", re.S)
_DEFINE = re.compile(r"\b(flags|config_flags)\.DEFINE_(\w+)\(\s*(?:name\s*=\s*)?[\"'](\w+)[\"']")
_SEPARATORS = {"&&", "||", ";", "|", "&"}


# --------------------------------------------------------------------------------------
# Reading the pages.


def _read(page: str) -> str:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return f.read()


def _split_fences(text: str) -> tuple[list[tuple[str, int, list[str]]], str]:
    """The fenced blocks (lang, first line number, lines) and the text without them.

    Fenced lines are blanked in the returned text (line numbers are kept), so that inline
    code, links and headings are only looked for outside code blocks.
    """
    blocks, prose, lines = [], [], text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            prose.append(lines[i])
            i += 1
            continue
        fence, lang, start = m.group(2), m.group(3).lower(), i + 1
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"a code block opened on line {start} is never closed"
        blocks.append((lang, start + 1, body))
        prose.extend([""] * (len(body) + 2))
        i += 1
    return blocks, "\n".join(prose)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _shell_commands(lang: str, first_line: int, body: list[str]) -> list[tuple[int, str]]:
    """(line, command) of a shell block: comments dropped, continued lines joined."""
    out, buf, start = [], "", 0
    for n, raw in enumerate(body, first_line):
        line = raw.rstrip()
        if lang == "console":
            if not buf:
                if not line.lstrip().startswith("$ "):
                    continue  # output, not a command
                line = line.lstrip()[2:]
        elif not buf and line.lstrip().startswith("$ "):
            line = line.lstrip()[2:]
        if not buf:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = n
        continued = line.endswith("\\")
        buf += (line[:-1] if continued else line) + ("" if continued else "\n")
        if continued:
            buf += " "
            continue
        try:
            shlex.split(buf, comments=True)
        except ValueError:
            continue  # an open quote: the command goes on on the next line
        out.append((start, buf.strip()))
        buf = ""
    if buf.strip():
        out.append((start, buf.strip()))  # reported as unparsable by the check
    return out


def _inline_spans(prose: str) -> list[tuple[int, str]]:
    spans = []
    for m in _INLINE.finditer(prose):
        body = m.group(2)
        if "\n\n" in body:
            continue
        spans.append((_line_of(prose, m.start()), " ".join(body.strip().split())))
    return spans


@functools.cache
def _page(page: str):
    text = _read(page)
    blocks, prose = _split_fences(text)
    commands, python_blocks = [], []
    for lang, first, body in blocks:
        if lang in SHELL_LANGS:
            commands += _shell_commands(lang, first, body)
        elif lang in PYTHON_LANGS:
            python_blocks.append((first, "\n".join(body)))
    spans = _inline_spans(prose)
    for line, span in spans:
        if re.match(r"^(?:\w+=\S*\s+)*python3?\s", span):
            commands.append((line, span))
    return text, prose, commands, python_blocks, spans


# --------------------------------------------------------------------------------------
# What the repository holds.


@functools.cache
def _entry_flags(module_file: str) -> tuple[frozenset, frozenset]:
    """(every flag the entry point defines, those that are config-file flags)."""
    with open(module_file, encoding="utf-8") as f:
        source = f.read()
    names, config_names = set(), set()
    for owner, kind, name in _DEFINE.findall(source):
        names.add(name)
        if owner == "config_flags" and kind.startswith("config"):
            config_names.add(name)
    if "cli.define_run_flags(" in source:  # --config (a config file), --workdir, --traceback
        names.update(("config", "workdir", "traceback"))
        config_names.add("config")
    return frozenset(names), frozenset(config_names)


def _entry_points() -> list[str]:
    return sorted(glob.glob(os.path.join(ROOT, "experiments", "*.py")))


@functools.cache
def _all_flags() -> frozenset:
    names = set(ABSL_FLAGS)
    for file in _entry_points():
        names |= _entry_flags(file)[0]
    return frozenset(names)


@functools.cache
def _config_module(path: str):
    return config_files.load_config_module(os.path.join(ROOT, path))


@functools.cache
def _config(path: str, variant: str):
    module = _config_module(path)
    return module.get_config(variant) if variant else module.get_config()


def _check_config_file(path: str, variant: str) -> str | None:
    """Why ``path[:variant]`` (relative to the root) is not a config, or None."""
    if not os.path.isfile(os.path.join(ROOT, path)):
        present = sorted(
            os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "configs", "*.py"))
        )
        return f"no config file {path!r} under the repository root (configs/ holds {present})"
    try:
        module = _config_module(path)
    except Exception as e:  # noqa: BLE001 - reported as the finding
        return f"{path} does not load as a config file: {type(e).__name__}: {e}"
    variants = getattr(module, "VARIANTS", None)
    if variants is None:
        return f"{path} defines no VARIANTS"
    if variant and variant not in variants:
        return f"{path} has no variant {variant!r}; its VARIANTS are {tuple(variants)}"
    return None


def _parse_config_spec(value: str) -> tuple[str, str, bool]:
    """``PATH[:variant]`` or ``PATH:variant`` -> (path, variant, is_placeholder)."""
    m = re.fullmatch(r"([^\[:]+)(?:\[:([^\]]*)\]|:(.*))?", value)
    path, variant = (m.group(1), m.group(2) or m.group(3) or "") if m else (value, "")
    placeholder = "..." in path or bool(PLACEHOLDER_CHARS & set(path))
    return path, variant, placeholder


def _check_config_spec(value: str) -> tuple[str | None, object | None]:
    """(problem or None, the loaded config or None) of a ``--config=`` value."""
    path, variant, placeholder = _parse_config_spec(value)
    if placeholder:
        pattern = re.sub(r"<[^>]*>|\.\.\.", "*", path)
        if pattern.strip("*") and not glob.glob(os.path.join(ROOT, pattern)):
            return f"--config={value}: no file matches {path!r} under the repository root", None
        return None, None
    problem = _check_config_file(path, variant)
    if problem:
        return f"--config={value}: {problem}", None
    try:
        return None, _config(path, variant)
    except Exception as e:  # noqa: BLE001
        return f"--config={value}: get_config({variant!r}) failed: {type(e).__name__}: {e}", None


def _check_field(config, name: str, field_path: str) -> str | None:
    node, done = config, [name]
    for part in field_path.split("."):
        if not isinstance(node, config_dict.ConfigDict):
            return (
                f"{'.'.join(done)} is a value ({node!r}), not a section: it has no field {part!r}"
            )
        if part not in node:
            fields = sorted(node.keys())
            return f"no config field {part!r} in {'.'.join(done)}; its fields are {fields}"
        node = node[part]
        done.append(part)
    return None


@functools.cache
def _every_config() -> tuple:
    """The default variant of every config file: what a lone ``--config.x`` may refer to."""
    out = []
    for file in sorted(glob.glob(os.path.join(ROOT, "configs", "*.py"))):
        out.append(_config(os.path.relpath(file, ROOT), ""))
    return tuple(out)


def _module_file(module: str) -> str | None:
    if PLACEHOLDER_CHARS & set(module):  # experiments.<name>: some module must match
        matches = glob.glob(os.path.join(ROOT, *re.sub(r"<[^>]*>", "*", module).split(".")) + ".py")
        return sorted(matches)[0] if matches else None
    base = os.path.join(ROOT, *module.split("."))
    for candidate in (base + ".py", os.path.join(base, "__main__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


# --------------------------------------------------------------------------------------
# The checks, each returning a list of problems.


def check_command(command: str) -> list[str]:
    """Problems of one shell command (empty when every part of it is current)."""
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError as e:
        if not re.search(r"\bpython3?\s", command):
            return []  # output in an untagged block, not a command
        return [f"does not parse as a shell command ({e})"]
    segments, current = [], []
    for token in tokens:
        if token in _SEPARATORS:
            segments.append(current)
            current = []
        else:
            current.append(token)
    segments.append(current)
    problems = []
    for seg in segments:
        i = next((k for k, t in enumerate(seg) if re.fullmatch(r"(?:.*/)?python3?", t)), None)
        if i is None or i + 1 >= len(seg):
            continue
        if seg[i + 1] == "-m":
            if i + 2 >= len(seg):
                problems.append("`python -m` without a module")
                continue
            module, args = seg[i + 2], seg[i + 3 :]
            file = _module_file(module)
            if file is None:
                if module.split(".")[0] in REPO_DIRS:
                    problems.append(
                        f"module {module!r} does not exist (no {module.replace('.', '/')}.py "
                        "under the repository root)"
                    )
                continue  # another package's module (pip, pytest): not ours to check
            if module.split(".")[0] == "experiments" and not PLACEHOLDER_CHARS & set(module):
                problems += _check_entry_args(module, file, args)
        elif seg[i + 1].endswith(".py"):
            script, args = seg[i + 1], seg[i + 2 :]
            file = os.path.join(ROOT, script)
            if not os.path.isfile(file):
                problems.append(f"script {script!r} does not exist under the repository root")
            elif script.startswith("experiments/"):
                problems += _check_entry_args(script, file, args)
    return problems


def _check_entry_args(entry: str, file: str, args: list[str]) -> list[str]:
    defined, config_flag_names = _entry_flags(file)
    problems, configs, overrides = [], {}, []
    elided = "..." in args
    for arg in args:
        if arg == "...":
            continue
        m = _FLAG_TOKEN.match(arg)
        if not m:
            problems.append(
                f"{entry}: unexpected argument {arg!r} (the entry points take no positional "
                "arguments; flags are --name=value)"
            )
            continue
        name, value = m.group(1), m.group(2)
        head, dot, field_path = name.partition(".")
        if dot:
            if head not in config_flag_names:
                problems.append(
                    f"{entry}: --{name}: {head!r} is not a config flag of {entry} "
                    f"(its config flags: {sorted(config_flag_names)})"
                )
            else:
                overrides.append((head, field_path, arg))
            continue
        if name in config_flag_names:
            if value is None:
                problems.append(f"{entry}: --{name} without a value (--{name}=PATH[:variant])")
                continue
            problem, config = _check_config_spec(value)
            if problem:
                problems.append(f"{entry}: {problem}")
            configs[name] = (value, config)
            continue
        bare = name[2:] if name.startswith("no") and name[2:] in defined else name
        if bare not in defined and bare not in ABSL_FLAGS:
            problems.append(f"{entry}: unknown flag --{name}; {entry} defines {sorted(defined)}")
    for head, field_path, arg in overrides:
        if head not in configs:
            if not elided:
                problems.append(
                    f"{entry}: {arg} overrides a config field, but no --{head}= is given"
                )
            continue
        value, config = configs[head]
        if config is None:
            continue  # a placeholder or a broken --config, reported above
        problem = _check_field(config, head, field_path)
        if problem:
            problems.append(f"{entry}: {arg}: {problem} (config {value})")
    return problems


def check_lone_flag(token: str) -> str | None:
    """A flag quoted on its own: a field of some config, or a flag of some entry point."""
    m = _FLAG_TOKEN.match(token)
    if not m:
        return None
    name, value = m.group(1), m.group(2)
    if PLACEHOLDER_CHARS & set(name):
        return None
    head, dot, field_path = name.partition(".")
    if dot:
        if head != "config":
            return f"{token}: {head!r} is not a config flag of any entry point"
        problems = [_check_field(c, "config", field_path) for c in _every_config()]
        if all(problems):
            return f"{token}: no config file in configs/ has the field {field_path!r}"
        return None
    if name == "config" and value is not None:
        return _check_config_spec(value)[0]
    bare = name[2:] if name.startswith("no") and name[2:] in _all_flags() else name
    if bare not in _all_flags():
        return f"{token}: no entry point in experiments/ defines --{name}"
    return None


def check_config_mentions(text: str) -> list[str]:
    problems = []
    for m in _CONFIG_MENTION.finditer(text):
        path = f"configs/{m.group(1)}.py"
        problem = _check_config_file(path, m.group(2) or m.group(3) or "")
        if problem:
            problems.append(f"line {_line_of(text, m.start())}: `{m.group(0)}`: {problem}")
    return problems


def check_repo_paths(text: str) -> list[str]:
    problems = []
    for m in _REPO_PATH.finditer(text):
        path = m.group(1).rstrip(".,")
        if PLACEHOLDER_CHARS & set(path) or path.endswith("/.."):
            continue
        if not os.path.exists(os.path.join(ROOT, path)):
            problems.append(f"line {_line_of(text, m.start())}: no {path!r} in the repository")
    return problems


def _resolve(dotted: str) -> str | None:
    """Why ``warca_jax.a.b`` does not resolve (module, then attributes), or None."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and not name.startswith(e.name) and e.name != name:
                return f"{dotted}: importing {name} needs {e.name!r}, which is not installed"
            continue
        for k, part in enumerate(parts[i:], i):
            if not hasattr(obj, part):
                return f"{dotted}: {'.'.join(parts[:k])} has no {part!r}"
            obj = getattr(obj, part)
        return None
    return f"{dotted}: no such module"


def check_dotted_names(text: str) -> list[str]:
    problems = []
    for m in _DOTTED.finditer(text):
        problem = _resolve(m.group(0))
        if problem:
            problems.append(f"line {_line_of(text, m.start())}: {problem}")
    return problems


def check_python_block(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [f"does not parse as Python: {e}"]
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("warca_jax"):
            problems += [p for p in (_resolve(f"{node.module}.{a.name}") for a in node.names) if p]
        elif isinstance(node, ast.Import):
            problems += [
                p
                for p in (_resolve(a.name) for a in node.names if a.name.startswith("warca_jax"))
                if p
            ]
    return problems


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip())
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


@functools.cache
def _anchors(page: str) -> frozenset:
    _, prose = _split_fences(_read(page))
    seen, out = {}, set()
    for line in prose.split("\n"):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(out)


def check_links(page: str, prose: str) -> list[str]:
    problems, here = [], os.path.dirname(page)
    for m in _LINK.finditer(prose):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        rel = os.path.normpath(os.path.join(here, path)) if path else page
        where = f"line {_line_of(prose, m.start())}: [{target}]"
        if not os.path.exists(os.path.join(ROOT, rel)):
            problems.append(f"{where}: {rel!r} does not exist")
        elif anchor and rel.endswith(".md") and anchor not in _anchors(rel):
            problems.append(
                f"{where}: {rel} has no heading #{anchor}; its anchors: {sorted(_anchors(rel))}"
            )
    return problems


# --------------------------------------------------------------------------------------
# The tests.


def _report(page: str, what: str, problems: list[str]) -> str:
    return f"{page}: {len(problems)} {what}:\n  " + "\n  ".join(problems)


def test_pages_are_found_and_hold_commands():
    assert "docs/configs_and_flags.md" in PAGES, f"docs/ pages found: {PAGES}"
    commands = [c for page in PAGES for _, c in _page(page)[2]]
    entry = [c for c in commands if "experiments." in c or "experiments/" in c]
    assert len(entry) >= 20, f"only {len(entry)} entry-point commands found in {PAGES}: {entry}"
    readme = _page("README.md")[2]
    assert any("--config=configs/warca.py:chi2" in c for _, c in readme), (
        f"the README's config-variant command was not extracted; its commands: {readme}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_commands_run_current_entry_points(page):
    _, _, commands, _, _ = _page(page)
    problems = [
        f"line {line}: `{command[:120]}`: {p}"
        for line, command in commands
        for p in check_command(command)
    ]
    assert not problems, _report(page, "stale commands", problems)


@pytest.mark.parametrize("page", PAGES)
def test_lone_flags_exist(page):
    _, _, _, _, spans = _page(page)
    problems = []
    for line, span in spans:
        if re.match(r"^(?:\w+=\S*\s+)*python3?\s", span):
            continue  # a whole command: test_commands_run_current_entry_points
        if span.startswith("pytest "):
            continue  # pytest's own flags (and its plugins'), not an entry point's
        try:
            tokens = shlex.split(span)
        except ValueError:
            tokens = span.split()
        problems += [f"line {line}: `{span}`: {p}" for p in map(check_lone_flag, tokens) if p]
    assert not problems, _report(page, "flags or config fields that do not exist", problems)


@pytest.mark.parametrize("page", PAGES)
def test_named_configs_exist(page):
    problems = check_config_mentions(_read(page))
    assert not problems, _report(page, "config files or variants that do not exist", problems)


@pytest.mark.parametrize("page", PAGES)
def test_named_paths_and_modules_exist(page):
    text = _read(page)
    problems = check_repo_paths(text) + check_dotted_names(text)
    for first, source in _page(page)[3]:
        problems += [f"python block at line {first}: {p}" for p in check_python_block(source)]
    assert not problems, _report(page, "paths or names that do not exist", problems)


@pytest.mark.parametrize("page", PAGES)
def test_links_resolve(page):
    problems = check_links(page, _page(page)[1])
    assert not problems, _report(page, "broken links", problems)


def test_readme_links_every_docs_page():
    linked = {
        os.path.normpath(m.group(1).partition("#")[0])
        for m in _LINK.finditer(_page("README.md")[1])
    }
    missing = [p for p in PAGES if p != "README.md" and p not in linked]
    assert not missing, f"README.md does not link these docs pages: {missing}"


def test_the_checks_catch_stale_references():
    """Each check on a known-bad snippet: the suite fails when a page goes stale."""
    cases = {
        "python -m experiments.main --config=configs/gone.py --workdir=/tmp/w": "no config file",
        "python -m experiments.main --config=configs/warca.py:nope --workdir=/tmp/w": "no variant",
        "python -m experiments.main --config=configs/warca.py --config.method.nope=1": (
            "no config field"
        ),
        "python -m experiments.main --config=configs/warca.py --no_such_flag=1": "unknown flag",
        "python -m experiments.gone --config=configs/warca.py": "does not exist",
        "python -m warca_jax.main --config=configs/warca.py": "does not exist",
        "python -m experiments.protocol --config=configs/protocol.py --config.data_roots=D": (
            "no config field"
        ),
    }
    for command, expected in cases.items():
        problems = check_command(command)
        assert any(expected in p for p in problems), (
            f"{command!r}: expected {expected!r}, got {problems}"
        )
    assert (
        check_command(
            "python -m experiments.main --config=configs/warca.py:chi2 --workdir=/tmp/w "
            "--config.method.lam=1e-3 --config.data.loader_options=\"{'variant': 'detected'}\""
        )
        == []
    )
    assert check_config_mentions("see `configs/warca.py:nope`") != []
    assert check_repo_paths("`warca_jax/configs/warca.py`") != []
    assert check_dotted_names("`warca_jax.train.train_and_evaluate`") != []
    assert check_python_block("from warca_jax.configs.warca import get_config") != []
    assert check_lone_flag("--config.method.no_such_field=1") is not None
    assert check_links("README.md", "[x](docs/gone.md)") != []
    assert check_links("README.md", "[x](docs/methods.md#no-such-heading)") != []


def _readme_row(config: str) -> list[str]:
    """The cells of the README's main-job table row naming ``config``."""
    for line in _page("README.md")[1].splitlines():
        if line.startswith("|") and f"(`{config}`)" in line:
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"README.md's main-job table has no row for {config}")


# The README's main-job rows and the rows of docs/results.md's per-split table behind them.
MAIN_JOB = {
    "linear": ("configs/warca.py", "WARCA, linear", "Euclidean distance"),
    "chi2": (
        "configs/warca.py:chi2",
        "WARCA, chi2-RBF kernel",
        "Euclidean distance, histogram variant",
    ),
}


def _per_split(row: str) -> list[float]:
    """The values of docs/results.md's main-job per-split table row ``row``."""
    for line in _page("docs/results.md")[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == row:
            return [float(c) for c in cells[1:]]
    raise AssertionError(f"docs/results.md's per-split table has no row {row!r}")


@pytest.mark.parametrize("variant", sorted(MAIN_JOB))
def test_the_readme_main_job_table_is_the_mean_of_the_per_split_runs(variant):
    # The README's cells are a 10-split run's mean (± std); docs/results.md lists the same
    # run split by split, at two decimals each, so the two agree to that rounding.
    config, warca_row, euclid_row = MAIN_JOB[variant]
    cells = _readme_row(config)
    for cell, measure in zip(cells[1:], ("rank-1", "mAP"), strict=True):
        values = np.array(_per_split(f"{warca_row}, {measure}"))
        mean, std = (float(v) for v in cell.split(" ± "))
        assert len(values) == 10
        assert abs(values.mean() - mean) <= 0.011 and abs(values.std() - std) <= 0.011, cell
    if variant == "linear":  # the Euclidean row is the linear run's baseline
        for cell, measure in zip(_readme_row_named(euclid_row)[1:], ("rank-1", "mAP"), strict=True):
            values = np.array(_per_split(f"{euclid_row}, {measure}"))
            assert abs(values.mean() - float(cell)) <= 0.011, cell


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(MAIN_JOB))
def test_the_main_job_gives_the_documented_splits(variant, tmp_path):
    # Splits 0 and 1 of the README's commands, run again: split s draws from (seed, s)
    # alone, so a 2-split run's splits are the 10-split run's first two. On the CPU that
    # ran the table they come back to the digit; another CPU rounds WARCA's float32 sums
    # otherwise (docs/results.md: half a rank-1 point, one query of 200, and 0.15 mAP
    # between two machines on these splits), so WARCA's are held within one rank-1 point
    # and one mAP point. Euclidean distance's ranking does not move: to the digit.
    from repo_configs import config_module

    from warca_jax.runs import pipeline

    config, warca_row, euclid_row = MAIN_JOB[variant]
    cfg = config_module("warca").get_config(variant)
    cfg.data.num_splits = 2
    res = pipeline.train_and_evaluate(cfg, str(tmp_path))
    for measure, key in (("rank-1", "rank1"), ("mAP", "mAP")):
        got = np.array([r[key] for r in res["splits"]])
        want = np.array(_per_split(f"{warca_row}, {measure}")[:2])
        assert np.all(np.abs(got - want) <= 1.0), (measure, got, want)
        base = [f"{r['baseline_euclidean'][key]:.2f}" for r in res["splits"]]
        assert base == [f"{v:.2f}" for v in _per_split(f"{euclid_row}, {measure}")[:2]]


def _readme_row_named(name: str) -> list[str]:
    for line in _page("README.md")[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == name:
            return cells
    raise AssertionError(f"README.md has no table row {name!r}")


# --------------------------------------------------------------------------------------
# Measured figures: in docs/, beside their source, never in the library's docstrings.
#
# A figure measured by a run (an accuracy, a timing, a comparison with the paper) lives in a
# docs page, in a paragraph that names the command and the section of benchmarks/RESULTS.md
# it comes from; the library's docstrings and comments say what a thing does and why, and
# point to that paragraph (``docs/methods.md#anchor``).

RESULTS = "benchmarks/RESULTS.md"
# (page, heading): the sections whose every figure must be in the RESULTS.md section that
# the same paragraph names, as `benchmarks/RESULTS.md`, "<start of its heading>".
MEASURED_SECTIONS = (
    ("docs/methods.md", "What WARCA needs beyond the paper"),
    ("docs/methods.md", "WARCA against the authors' C++ release"),
    ("docs/methods.md", "Measurements behind the other learners' defaults"),
    ("docs/results.md", "The probe rule"),
)
_DEC = r"\d+(?:,\d{3})*\.\d+"
_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
_PCT = r"(?<![\w.])\d\d?\.\d\d"  # a rate in percent, as the runs report them
_MEAS = r"(?:rank-1|rank-5|rank-10|rank-20|mAP|AUC|RMS)"
_DATA = r"(?:VIPeR|CUHK01|CUHK03|ORL|Market-1501|PRID450s)"
# What a measured figure looks like in prose; each pattern is one way the library's
# docstrings used to quote one (test_the_figure_check_catches_what_was_moved).
MEASURED_FIGURE = {
    "a measure and its value": rf"\b{_MEAS}\b[^\n]{{0,32}}?(?<![\w.]){_DEC}(?!\w)",
    "a value and its measure": rf"(?<![\w.-]){_NUM}(?: ?/ ?{_NUM})*\s+(?:points?\s+)?{_MEAS}\b",
    "a dataset and its value": rf"\b{_DATA}\b[^\n.;]{{0,20}}?(?<![\w.]){_DEC}(?!\w)",
    "a pair of values": rf"(?<![\w.]){_DEC} / {_DEC}(?!\w)",
    "a before and after": (
        rf"(?<![\w.]){_DEC}\s*(?:->|against)\s*{_DEC}(?!\w)"
        rf"|(?<![\w.-]){_NUM} at [^\n]{{1,20}}? against {_NUM}(?!\w)"
    ),
    "two percentages in a breath": rf"{_PCT}(?!\w)[^\n.]{{1,40}}?{_PCT}(?!\w)",
    "a spread": rf"(?:±|\+-)\s*{_DEC}",
    "a timing": (
        rf"(?<![\w.]){_DEC}\s?(?:s|ms)\b|~{_NUM}\s?(?:s|ms)\b|{_NUM}\s?s a fit"
        rf"|\b(?:took|takes|take|costs?)\s+(?:about\s+|~)?{_NUM}\s?(?:s|ms|min|minutes)\b"
    ),
    "a speed ratio": rf"~?{_NUM}(?:-{_NUM})?x\s+(?:faster|slower)|~{_NUM}x\b",
    "an approximate share": rf"(?:about|near|~)\s*{_NUM}\s?%",
}
_MEASURED = re.compile("|".join(f"(?:{p})" for p in MEASURED_FIGURE.values()))
_CITE = re.compile(r"RESULTS\.md`?,?\s+\"([^\"]+)\"")
_FIGURE = re.compile(r"(?<![\w.])(?:\d+(?:,\d{3})*\.\d+|\d+%)(?![\w%]|\.\d)")
_NOT_A_FIGURE = re.compile(r"(?:section|eq\.|Table|Fig\.)\s*$")


def measured_figures(text: str) -> list[str]:
    """The measured figures quoted in ``text`` (double-backtick literals aside)."""
    flat = " ".join(re.sub(r"``.*?``", "", text, flags=re.S).split())
    return [m.group(0) for m in _MEASURED.finditer(flat)]


def _library_texts() -> list[tuple[str, int, str]]:
    """(module, line, text) of every docstring and comment of the library."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "warca_jax", "**", "*.py"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8") as f:
            source = f.read()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc is not None:
                    out.append((rel, node.body[0].lineno, doc))
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out.append((rel, tok.start[0], tok.string))
    return out


@pytest.mark.slow
def test_no_library_docstring_or_comment_holds_a_measured_figure():
    texts = _library_texts()
    assert len(texts) > 1000, f"only {len(texts)} docstrings and comments found"
    found = [
        f"{module}:{line}: {figure!r}"
        for module, line, text in texts
        for figure in measured_figures(text)
    ]
    assert not found, (
        f"{len(found)} measured figures in the library's docstrings and comments (move each to "
        "docs/methods.md or docs/results.md with its command, and point there):\n  "
        + "\n  ".join(found)
    )


def test_the_figure_check_catches_what_was_moved():
    """Sentences the library's docstrings held before their figures moved to docs/."""
    moved = [
        "rank-1 14.87 -> 14.66: converged",
        "lam on the mean: 0: 19.51 / 51.58, 1e-5: 18.99 / 50.21",
        "(the protocol's 10 splits: 17.18), not the 21.31 above",
        "gave 16.88 rank-1 on VIPeR splits 0-2",
        "ORL 90.67 -> 89.67 rank-1, synthetic 85.00 -> 87.83",
        "# dominate: VIPeR 25.5 -> 34.5 rank-1 with 'plain' (lfda.py docstring).",
        "XQDA gave 11.1 / 24.4 (3 splits), below KISSME's 21.7 / 46.7",
        "The former learner gave rank-1 1.9 / rank-5 8.2 on VIPeR split 0",
        "m.pca_dim = 256  # 64 dims lose too much: rank-1 27.8 against Euclidean's 83.8.",
        "rank-1 / mAP 14.03 / 25.84 at the default 3e-3",
        "its 10 test splits give 24.43 +- 1.13 rank-1, 52.82 rank-5",
        "One VIPeR split of 500 steps takes about 10 s on one CPU core",
        "test mAP falls from 87.0 after 50 steps to 74.1",
        "mAP on the ORL faces 78.8 -> 76.1",
        "ranks as Euclidean distance does (rank-1 15.5)",
        "VIPeR 32.09 (msrcr), 37.28 (msrcp), 37.94 (none)",
        "the mean over the whole gallery (today's ``AUC``): RMS 21.2, bias +18.1;",
        "WARCA-chi2 falls from 37.03 to 31.68 rank-1",
        "with it the project's defaults give 56.14 (WARCA-chi2) and 53.87",
        "(76 rank-1 at 1000 steps)",
        "(1 and 10 under-train there: 3 and 75 rank-1)",
        "4,800 Python dispatches took 13.7 s where these 0.8 s",
        "intermediate in cache (4x faster than 64M-element blocks on a 2-core CPU)",
        "(XLA's CPU sort is ~20x slower)",
        "(each threefry instance in a jitted step costs ~0.3 s of CPU compile time)",
        "rank-1 at the last step depended on eta (77 at eta = 1e-2 against 86 at 1e-3)",
        "Euclidean 1-NN rank-1 on a half/half split is about 25% while",
        "(about 44% of the queries when the gallery shares the query cameras)",
        "data/cuhk01_subset WARCA-chi2 gives 37.78 / 55.52 rank-1 / mAP from 'pca'",
        "CUHK01's rPCCA-chi2 gave 36.2 at 1,000 steps and 48.3 at 20,000",
        "stopped at 14,100 steps, 36 s a fit",
    ]
    missed = [s for s in moved if not measured_figures(s)]
    assert not missed, f"the check misses: {missed}"
    kept = [  # what stays: equation constants, defaults, formulas, the paper's own settings
        "A perfect ranking gives 100 * 29/30 = 96.67.",
        "``cfg.pca_variance`` = 0.95 as the WARCA paper did",
        "stripe s in 0..5 starts at 430 s",
        "k1 = 20, k2 = 6, lambda = 0.3 are the paper's",
        "a band of +-1 std over the splits",
        "``<what>: 120 of 632 images, about 40 s left``",
        "m.pca_dim = 256  # 64 dims lose too much (docs/methods.md#svmml).",
        "Y = 0.299 R + 0.587 G + 0.114 B (BT.601)",
    ]
    flagged = {s: measured_figures(s) for s in kept if measured_figures(s)}
    assert not flagged, f"the check flags what is not a measurement: {flagged}"


def _results_sections(prefix: str) -> list[str]:
    """The text of each RESULTS.md section (## or ###) whose heading starts with ``prefix``."""
    text = _read(RESULTS)
    heads = [
        (m.start(), len(m.group(1)), m.group(2))
        for m in re.finditer(r"^(#{2,3}) (.*)$", text, re.M)
    ]
    out = []
    for i, (start, level, heading) in enumerate(heads):
        if heading.startswith(prefix):
            end = next((s for s, lv, _ in heads[i + 1 :] if lv <= level), len(text))
            out.append(text[start:end])
    return out


def _page_section(page: str, heading: str) -> str:
    """The prose of ``page``'s section ``heading``, up to the next heading of its level."""
    lines = _split_fences(_read(page))[1].split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
        if m and m.group(2) == heading:
            level, body = len(m.group(1)), []
            for rest in lines[i + 1 :]:
                n = re.match(r"^(#{1,6})\s", rest)
                if n and len(n.group(1)) <= level:
                    break
                body.append(rest)
            return "\n".join(body)
    raise AssertionError(f"{page} has no heading {heading!r}")


def _units(prose: str) -> list[str]:
    """Paragraphs and list items; a table belongs to the paragraph before it."""
    units: list[str] = []
    for block in re.split(r"\n\s*\n", prose):
        for item in re.split(r"\n(?=[*-] )", block.strip()):
            if item.startswith("|") and units:
                units[-1] += "\n" + item
            elif item:
                units.append(item)
    return units


def check_figures_and_sources(prose: str) -> list[str]:
    """Problems of the figures of ``prose``: each unit quoting a figure names a RESULTS.md
    section, and each of its figures is in one of the sections it names."""
    problems = []
    for unit in _units(prose):
        flat = " ".join(unit.split())
        bare = re.sub(r"`[^`]*`", "", flat)
        figures = [
            m.group(0)
            for m in _FIGURE.finditer(bare)
            if not _NOT_A_FIGURE.search(bare[max(0, m.start() - 9) : m.start()])
        ]
        if not figures:
            continue
        cited = _CITE.findall(flat)
        sections = [s for c in cited for s in _results_sections(c)]
        where = f"{flat[:70]!r}..."
        if not cited:
            problems.append(f"{where}: quotes {figures} but names no {RESULTS} section")
            continue
        problems += [
            f"{where}: no {RESULTS} section starts with {c!r}"
            for c in cited
            if not _results_sections(c)
        ]
        missing = [
            f
            for f in figures
            if not any(re.search(rf"(?<![\w.]){re.escape(f)}(?![\w%]|\.\d)", s) for s in sections)
        ]
        if missing:
            problems.append(f"{where}: {missing} are not in the sections it names {cited}")
    return problems


@pytest.mark.parametrize("page,heading", MEASURED_SECTIONS)
def test_quoted_figures_are_in_the_results_section_named(page, heading):
    problems = check_figures_and_sources(_page_section(page, heading))
    assert not problems, _report(f"{page}, {heading!r}", "figures without their source", problems)


def test_the_source_check_catches_a_figure_without_its_source():
    good = 'rank-1 75.33 without it (`benchmarks/RESULTS.md`, "WARCA\'s accuracy").'
    assert check_figures_and_sources(good) == []
    assert check_figures_and_sources(good.replace("75.33", "75.34")) != []
    assert check_figures_and_sources('rank-1 75.33 (`benchmarks/RESULTS.md`, "Gone")') != []
    assert check_figures_and_sources("rank-1 75.33 on the built-in data.") != []


_DOCS_ANCHOR = re.compile(r"\bdocs/(\w+\.md)#([\w-]+)")


@pytest.mark.slow
def test_the_library_points_to_docs_anchors_that_exist():
    problems = []
    for module, line, text in _library_texts():
        for page, anchor in _DOCS_ANCHOR.findall(text):
            if not os.path.isfile(os.path.join(ROOT, "docs", page)):
                problems.append(f"{module}:{line}: docs/{page} does not exist")
            elif anchor not in _anchors(f"docs/{page}"):
                problems.append(f"{module}:{line}: docs/{page} has no heading #{anchor}")
    assert not problems, "\n".join(problems)


# Files outside the repository that text once named (spelt in two parts so that this file
# does not name them).
OUTSIDE_FILES = ("DESIGN" + ".md", "STYLE" + ".md", "../" + "shared")
_TEXT_SUFFIXES = (".py", ".md", ".ipynb", ".toml", ".txt", ".cfg", ".yml", ".yaml", ".sh")


def test_no_text_names_a_file_outside_the_repository():
    files = [os.path.join(ROOT, "README.md")]
    for top in ("warca_jax", "docs", "tests", "configs", "experiments", "benchmarks", "notebooks"):
        for here, _, names in os.walk(os.path.join(ROOT, top)):
            files += [os.path.join(here, n) for n in names if n.endswith(_TEXT_SUFFIXES)]
    found = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                found += [
                    f"{os.path.relpath(path, ROOT)}:{n}: {name}"
                    for name in OUTSIDE_FILES
                    if name in line
                ]
    assert not found, "files outside the repository named:\n  " + "\n  ".join(found)
