"""The docstrings of the generated estimators: their parameters, defaults and meanings.

A learner's hyper-parameters are the scalar fields of its ``default_config()``, and every
field there is commented where it is set (``m.dim = 40  # output dimension ...``, or a
comment block just above). ``config_comments`` reads those comments from the function's
source: for each field, the comment lines directly above its assignment (at the same
indentation), the comment on its line and the comment lines that continue it (indented
further); the first assignment whose value is the default wins (a learner that sets a
field in several branches, the study's SGD, comments each), else the first commented one.
A field without a comment gets its name and default only.
"""

from __future__ import annotations

import ast
import functools
import inspect
import io
import textwrap
import tokenize

from warca_jax import methods

SEED_DOC = "Seed of what the fit draws (same seed, same metric; unused by a closed form)."
FITTED_DOC = (
    "After ``fit``: ``metric_`` (the learned ``warca_jax.metric.Metric``), ``history_``, "
    "``n_features_in_``, and metric-learn's face (``components_``, "
    "``get_mahalanobis_matrix()``, ``get_metric()``, ``pair_distance``, ``pair_score``; "
    "``warca_jax.sklearn``'s docstring)."
)
_WIDTH = 88


def _source(method: str) -> str | None:
    func = methods.get(method).default_config
    while isinstance(func, functools.partial):
        func = func.func
    try:
        return textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):  # no source (a frozen install): names and defaults only
        return None


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NO_LITERAL


_NO_LITERAL = object()


def _assignment_comment(node: ast.Assign, lines: list[str], comments: dict) -> str:
    """The comments above, on and continuing the assignment, joined into one line.

    comments: {line: (column, raw comment)}. A comment-only line continues the comment
    of the line above when it is indented further or its text is padded ("#    more").
    """

    def comment_only(i: int) -> bool:
        return 1 <= i <= len(lines) and lines[i - 1].lstrip().startswith("#")

    def continues(i: int) -> bool:
        return comments[i][0] > col or comments[i][1].startswith("#  ")

    def text(i: int) -> str:
        return comments[i][1].lstrip("#").strip()

    col, first, last = node.col_offset, node.lineno, node.end_lineno
    lead, i = [], first - 1
    while comment_only(i) and not continues(i):
        lead.insert(0, text(i))
        i -= 1
    inline = [text(j) for j in range(first, last + 1) if j in comments]
    trail, i = [], last + 1
    while inline and comment_only(i) and continues(i):
        trail.append(text(i))
        i += 1
    return " ".join(" ".join(lead + inline + trail).split())


def config_comments(method: str, defaults: dict) -> dict[str, str]:
    """{field: its comment in the source of the learner's ``default_config``} (module doc)."""
    src = _source(method)
    if src is None:
        return {}
    lines = src.splitlines()
    comments = {
        tok.start[0]: (tok.start[1], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(src).readline)
        if tok.type == tokenize.COMMENT
    }
    assigns = sorted(
        (
            n
            for n in ast.walk(ast.parse(src))
            if isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Attribute)
            and isinstance(n.targets[0].value, ast.Name)
        ),
        key=lambda n: n.lineno,
    )
    first: dict[str, str] = {}  # field -> comment of its first commented assignment
    of_default: dict[str, str] = {}  # field -> comment of its first one setting the default
    for node in assigns:
        field = node.targets[0].attr
        text = _assignment_comment(node, lines, comments)
        if field not in defaults or not text:
            continue
        first.setdefault(field, text)
        value = _literal(node.value)
        if type(value) is type(defaults[field]) and value == defaults[field]:
            of_default.setdefault(field, text)
    return {k: of_default.get(k, first[k]) for k in defaults if k in first}


def parameters_section(defaults: dict, meanings: dict) -> list[str]:
    """numpydoc's ``Parameters`` lines: ``name : type, default=value`` and its meaning."""
    out = ["Parameters", "----------"]
    for key, value in defaults.items():
        out.append(f"{key} : {type(value).__name__}, default={value!r}")
        text = meanings.get(key) or "(no comment of its own in the learner's default_config)"
        out += textwrap.wrap(
            text, _WIDTH, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False
        )
    return out


def estimator_doc(method: str, defaults: dict) -> str:
    """The docstring of the generated estimator of ``method`` (defaults: its ``__init__``'s)."""
    meanings = dict(config_comments(method, defaults), seed=SEED_DOC)
    module = methods.get(method).fit.__module__
    head = [
        f"The ``{method}`` learner ({module}) as a scikit-learn estimator.",
        "",
        *textwrap.wrap(
            "Its hyper-parameters are the scalar fields of the learner's ``default_config()`` "
            "with their defaults; each meaning is the comment beside the field in that "
            "function's source.",
            _WIDTH,
        ),
        "",
    ]
    tail = ["", *textwrap.wrap(FITTED_DOC, _WIDTH)]
    return "\n".join(head + parameters_section(defaults, meanings) + tail)
