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
import os
import re
import shlex

import pytest
from ml_collections import config_dict
from repo_configs import ROOT

from warca_jax import config_files

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


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["linear", "chi2"])
def test_the_readme_main_job_table_is_what_a_run_gives(variant, tmp_path):
    from repo_configs import config_module

    from warca_jax import pipeline

    config = config_module("warca").get_config(variant)
    res = pipeline.train_and_evaluate(config, str(tmp_path))
    mean, std = res["mean"], res["std"]
    cells = _readme_row("configs/warca.py" + ("" if variant == "linear" else ":chi2"))
    assert cells[1:] == [
        f"{mean['rank1']:.2f} ± {std['rank1']:.2f}",
        f"{mean['mAP']:.2f} ± {std['mAP']:.2f}",
    ]
    if variant == "linear":  # the Euclidean row is the linear run's baseline
        base = res["baseline_euclidean"]["mean"]
        assert _readme_row_named("Euclidean distance")[1:] == [
            f"{base['rank1']:.2f}",
            f"{base['mAP']:.2f}",
        ]


def _readme_row_named(name: str) -> list[str]:
    for line in _page("README.md")[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == name:
            return cells
    raise AssertionError(f"README.md has no table row {name!r}")


def test_no_file_names_a_file_outside_the_repository():
    """A clone stands on its own: nothing names the design notes or the data folder that sit
    beside the repository where it is developed."""
    outside = re.compile(r"DESIGN\.md|STYLE\.md|\.\./shared\b")
    folders = ("warca_jax", "experiments", "configs", "benchmarks", "docs", "tests", "notebooks")
    paths = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "pyproject.toml")]
    for folder in folders:
        paths += glob.glob(os.path.join(ROOT, folder, "**", "*"), recursive=True)
    found = []
    for path in paths:
        if path.endswith((".py", ".md", ".ipynb", ".sh", ".toml")) and os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                hits = [m.group(0) for m in outside.finditer(f.read())]
            found += [f"{os.path.relpath(path, ROOT)}: {h}" for h in hits]
    assert not found, found
