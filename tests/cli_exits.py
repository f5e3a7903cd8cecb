"""An entry point's exit on bad input, run in this process: one ``error:`` line, exit 1."""

import pytest

from warca_jax.runs import cli


def one_line_exit(capsys, run) -> str:
    """Runs ``run()`` as an entry point does; asserts exit 1 with one line; returns it."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.one_line_errors(lambda argv: run())(["main"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert err.endswith(line + "\n")  # the last thing said, on one line
    return line
