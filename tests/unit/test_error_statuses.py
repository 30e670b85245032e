"""Every kind of citeline error is answered as docs/api.md#errors says, on the surfaces that read its class: the
server's HTTP status (``citeline.errors.status_of``), the CLI's exit status (``citeline.cli.common.user_errors``)
and the JSON-RPC code of an MCP resource read (``citeline.server.mcp.tools.rpc_code_of``). A new kind is checked
from its first commit: the kinds are found in the source, not listed here."""

from __future__ import annotations

import importlib
import re

import click
import pytest
from click.testing import CliRunner
from conftest import REPO

from citeline.cli.common import user_errors
from citeline.errors import CitelineError, status_of
from citeline.server.mcp.tools import rpc_code_of

#: A class defined on an error class (``class Gone(SourceError):``): the modules that define kinds of errors.
_ERROR_CLASS = re.compile(r"^class \w+\([^)]*Error\b", re.MULTILINE)


def _documented() -> dict[str, tuple[int, int, int]]:
    """docs/api.md's table under "Errors": error name -> (HTTP status, CLI exit status, MCP resource read's code)."""
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8").split("## Errors", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)`[^|]*\| (\d+) \| (\d+) \| (-\d+) \|$", text, re.MULTILINE)
    return {name: (int(status), int(exit_code), int(code)) for name, status, exit_code, code in rows}


def _kinds() -> list[type[CitelineError]]:
    """Every subclass of CitelineError in citeline/ (its modules that define error classes, imported)."""
    for path in sorted((REPO / "citeline").rglob("*.py")):
        if _ERROR_CLASS.search(path.read_text(encoding="utf-8")):
            parts = path.relative_to(REPO).with_suffix("").parts
            importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    found: list[type[CitelineError]] = []
    todo = [CitelineError]
    while todo:
        kind = todo.pop()
        found.append(kind)
        todo += kind.__subclasses__()
    return sorted(set(found), key=lambda kind: (kind.__module__, kind.__name__))


KINDS = _kinds()


def _instance(kind: type[CitelineError]) -> CitelineError:
    # Each kind's constructor takes its own arguments; the surfaces read only the class and the message.
    error = kind.__new__(kind)
    error.args = ("the problem, and how to fix it",)
    return error


def test_the_table_names_kinds_that_exist() -> None:
    documented = _documented()
    assert "CitelineError" in documented and len(documented) >= 8
    assert set(documented) <= {kind.__name__ for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: f"{kind.__module__}.{kind.__name__}")
def test_each_error_is_answered_as_documented(kind: type[CitelineError]) -> None:
    documented = _documented()
    nearest = next(base for base in kind.__mro__ if base.__name__ in documented)
    error = _instance(kind)
    answered = (kind.http_status, kind.exit_code, rpc_code_of(error))
    assert answered == documented[nearest.__name__], f"{kind.__name__} as {nearest.__name__}"
    assert status_of(error) == kind.http_status

    @click.command()
    @user_errors
    def failing() -> None:
        raise error

    result = CliRunner().invoke(failing, [])
    assert result.exit_code == kind.exit_code, result.output
    assert "the problem, and how to fix it" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # one line, never a traceback


def test_what_is_not_a_citeline_error() -> None:
    assert status_of(ValueError("a bad value")) == 400
    assert status_of(RuntimeError("a bug")) == 500  # its body names no internals: tests/system/test_server.py
    assert rpc_code_of(ValueError("a bad value")) == -32602
