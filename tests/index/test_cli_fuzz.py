"""Fuzzing the command line: random argument lists over small file trees may be refused, but never with a traceback.

Every command runs in-process through click's CliRunner with the HashEmbedder standing in for the model. An
outcome is acceptable when the command exits 0, 1 (an error, one ``Error:`` line) or 2 (a usage error), and the
output holds no traceback; an exception escaping the CLI fails the test. The examples are derived from the test's
name (``derandomize``), so CI always runs the same ones; ``CITELINE_FUZZ_EXAMPLES=500`` hunts longer by hand.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from _common import DAMAGE, examples, no_library_warnings
from _worst_values import worst_folder
from click.testing import CliRunner
from conftest import HashEmbedder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citeline import Index
from citeline.cli.main import cli

EXAMPLES = int(os.environ.get("CITELINE_FUZZ_EXAMPLES", examples(60)))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("CITELINE_FUZZ_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: Every command that reads or changes an index (not the long-running servers, watch and schedule, nor eval).
COMMANDS = ["ingest", "search", "status", "runs", "verify", "rebuild", "show", "remove", "documents"]
OPTIONS = {
    "ingest": [
        "--max-tokens",
        "--overlap-tokens",
        "--max-file-bytes",
        "--wait",
        "--allow-removals",
        "--dry-run",
        "--removal-threshold",
        "--json",
        "--backend",
        "--model",
    ],
    "search": [
        "-k",
        "--mode",
        "--source",
        "--path",
        "--where",
        "--ingested-after",
        "--ingested-before",
        "--collapse-threshold",
        "--json",
        "--no-collapse",
    ],
    "status": ["--json"],
    "runs": ["--limit", "--json"],
    "verify": ["--json"],
    "rebuild": ["--wait", "--json"],
    "show": ["--chunk", "--around", "--json"],
    "remove": ["--source", "--doc", "--dry-run", "--wait", "--json"],
    "documents": ["--source", "--path", "--where", "--limit", "--offset", "--columns", "--json"],
}
#: Values that have broken argument handling somewhere: negative and huge numbers, paths that cannot be
#: resolved, NUL bytes, undecodable bytes (as Python sees them: lone surrogates), globs, empty strings.
TRICKY = [
    "0",
    "-1",
    "1e400",
    "nan",
    "-0.5",
    "2",
    "99999999999999999999",
    "",
    " ",
    "~nosuchuser/x",
    "a\0b",
    "\udcff",
    "*",
    "[",
    "x=",
    "=y",
    "k=v",
    "2026-13-45",
    "1970-01-01",
    "river bridge",
    "DOCS",
    "DOCS/a.md",
    "LOOP",
    "MISSING",
    "INDEX",
    "onnx",
    "torch",
    "dense",
    "lexical",
    "hybrid",
]


def _value() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(TRICKY), st.text(max_size=12))


@st.composite
def argument_lists(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(COMMANDS))
    args = [command]
    if command in ("ingest", "search", "show", "remove"):
        args.append(draw(_value()))
    for _ in range(draw(st.integers(0, 4))):
        option = draw(st.sampled_from(OPTIONS[command]))
        args.append(option)
        if option not in ("--json", "--allow-removals", "--dry-run", "--no-collapse"):
            args.append(draw(_value()))
    return args


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small file tree (good, bad and odd files, a symlink loop, tests/_worst_values.py's hostile values) and an
    index built from it."""
    root = tmp_path_factory.mktemp("cli-fuzz")
    docs = root / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("# A\n\nThe river bridge and the mill.\n")
    (docs / "sub" / "b.txt").write_text("Letters about wages in winter.\n")
    (docs / "bad.txt").write_bytes(b"\xff\xfe not utf-8")
    (docs / "empty.md").write_text("")
    (docs / "r.jsonl").write_text('{"id": 1, "text": "one record"}\n{"id": "1", "text": "same id"}\n')
    (root / "loop").symlink_to(root / "loop")
    worst_folder(docs / "worst")  # the worst values the door accepts: every command must read them back (issue 50)
    Index.create(root / "index", embedder=HashEmbedder()).ingest([docs])
    return root


@FUZZ
@given(args=argument_lists())
def test_no_command_prints_a_traceback(tree: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *a, **k: HashEmbedder())
    index = tree / "work-index"
    shutil.rmtree(index, ignore_errors=True)
    shutil.copytree(tree / "index", index)
    names = {
        "DOCS": str(tree / "docs"),
        "LOOP": str(tree / "loop"),
        "MISSING": str(tree / "missing"),
        "INDEX": str(index),
    }
    argv = [next((arg.replace(name, path) for name, path in names.items() if name in arg), arg) for arg in args]
    with no_library_warnings(argv):
        result = CliRunner().invoke(cli, [*argv, "--index", str(index)], catch_exceptions=True)
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"{argv}: {result.exc_info[0].__name__ if result.exc_info else ''}: {result.exception}"
    assert "Traceback" not in result.output, argv
    assert result.exit_code in (0, 1, 2), (argv, result.output)
    if result.exit_code:
        assert result.output.count("Error:") <= 1, (argv, result.output)
        assert not DAMAGE.search(result.output), (argv, result.output)  # the index is healthy: never told as damage
