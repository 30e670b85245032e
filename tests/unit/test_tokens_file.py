"""The tokens file of ``citeline serve`` under the conditions real files meet: changed by two ``citeline tokens``
at once, written in place while a server reads it, edited by hand (an entry missing a part, a part of the wrong
kind, a copy of an entry), and left writable by every user. The rule each test holds: a change is never lost, and
a file the server cannot trust makes it refuse (a :class:`SettingsError` naming the file, which the guard answers
503) rather than admit a caller more widely than the file says.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import HashEmbedder
from hypothesis import given, settings
from hypothesis import strategies as st

from citeline import Index
from citeline.cli.main import cli
from citeline.errors import SettingsError
from citeline.server.access import Caller, authenticate
from citeline.store.access import PERMISSIONS, TokenFile, digest_of

SECRET = "cl_" + "s" * 43
ENTRY: dict[str, Any] = {
    "name": "contractors",
    "digest": digest_of(SECRET),
    "scope": {"path_glob": ["handbook/*"]},
    "permissions": ["search"],
    "created_at": "2026-12-07T10:00:00+00:00",
    "rotated_at": None,
}


def _changes(path: str, worker: int, count: int) -> None:
    # One `citeline tokens` user: adds its tokens, rotates and revokes some of them.
    tokens = TokenFile(path)
    for n in range(count):
        tokens.add(f"w{worker}-{n}", {"path_glob": [f"team{worker}/*"]})
        if n % 3 == 2:
            tokens.rotate(f"w{worker}-{n - 1}")
            tokens.revoke(f"w{worker}-{n - 2}")


def test_changes_from_several_processes_at_once_are_all_kept(tmp_path: Path) -> None:
    # Before the lock, each `add` wrote the file it had read plus its own token: 2 processes of 20 adds kept 21.
    path = tmp_path / "tokens.json"
    count, workers = 12, 3
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_changes, args=(str(path), worker, count)) for worker in range(workers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    expected = {f"w{w}-{n}" for w in range(workers) for n in range(count) if not (n % 3 == 0 and n + 2 < count)}
    assert {token.name for token in TokenFile(path).list()} == expected
    assert oct(path.stat().st_mode)[-3:] == "600"


def _file(path: Path, *entries: Any) -> None:
    path.write_text(json.dumps({"format": 1, "tokens": list(entries)}))


def _caller(path: Path) -> Caller | None:
    return authenticate(f"Bearer {SECRET}".encode(), None, TokenFile(path))


#: Values a hand edit leaves in one part of an entry: missing, empty, of another kind, a near miss.
ODD_VALUES = st.sampled_from(
    [None, "", [], {}, 0, 1, True, "search", ["search", 1], [[]], {"path_glob": []}, {"meta": {}}, {"source": ""},
     {"path_glob": "handbook/*"}, {"folder": "x"}, "é" * 64, "A" * 64, ENTRY["digest"].upper(), ["metrics"],
     ["search", "search"], ["SEARCH"], [], {"": 1}]
)  # fmt: skip


@settings(max_examples=120, deadline=None)
@given(part=st.sampled_from(sorted(ENTRY)), value=ODD_VALUES, drop=st.booleans())
def test_a_hand_edited_entry_never_admits_more_than_it_says(
    tmp_path_factory: Any, part: str, value: Any, drop: bool
) -> None:
    """Whatever one part of an entry is edited to, the file either reads (and the token's caller may do at most
    what the entry lists, within a scope whenever the entry names one) or is refused with one line naming the file;
    never an exception of another kind (which the guard would answer 500), never the whole index for a scope that
    names options."""
    path = tmp_path_factory.mktemp("edited") / "tokens.json"
    entry = {key: item for key, item in ENTRY.items() if not (drop and key == part)}
    if not drop:
        entry[part] = value
    _file(path, entry)
    try:
        caller = _caller(path)
    except SettingsError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    if caller is None:
        return
    listed = entry.get("permissions", ["search", "read"])
    assert set(caller.permissions) <= set(listed) <= set(PERMISSIONS)
    if entry.get("scope"):
        assert caller.scope, f"the scope {entry['scope']!r} read as the whole index"


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ([ENTRY, {**ENTRY, "name": "everyone", "scope": {}, "permissions": [*PERMISSIONS]}], "same secret"),
        ([ENTRY, {**ENTRY, "digest": digest_of("other")}], "two tokens are named 'contractors'"),
        ([{**ENTRY, "permissions": []}], None),  # a token that may do nothing, not the default permissions
    ],
)
def test_copies_of_an_entry_and_empty_permissions(tmp_path: Path, entries: list[Any], problem: str | None) -> None:
    path = tmp_path / "tokens.json"
    _file(path, *entries)
    if problem is None:
        caller = _caller(path)
        assert caller is not None and caller.permissions == () and caller.scope
        return
    with pytest.raises(SettingsError, match=problem):
        _caller(path)


def test_a_file_every_user_may_write_is_refused_even_after_it_was_read(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    _file(path, ENTRY)
    tokens = TokenFile(path)
    assert tokens.find(SECRET.encode()) is not None
    os.chmod(path, 0o666)  # neither size nor mtime changes
    with pytest.raises(SettingsError, match=r"every user may write.*chmod 600"):
        tokens.find(SECRET.encode())
    os.chmod(path, 0o640)
    assert tokens.find(SECRET.encode()) is not None


def test_a_file_written_in_place_is_never_read_half_written(tmp_path: Path) -> None:
    """A hand's or a script's truncate-and-write (not the atomic rename `citeline tokens` does), in pieces, while a
    server reads the file on every request: each read is the old file's caller, the new file's, or a refusal."""
    path = tmp_path / "tokens.json"
    narrow = {**ENTRY, "scope": {"path_glob": ["handbook/*"]}}
    other = {**ENTRY, "scope": {"path_glob": ["handbook/public/*"]}, "permissions": ["search", "read"]}
    texts = [json.dumps({"format": 1, "tokens": [entry]}, indent=1) for entry in (narrow, other)]
    path.write_text(texts[0])
    tokens = TokenFile(path)
    expected = {Caller("contractors", TokenFile(path).tokens()[0].filters, ("search",))}
    _file(path, other)
    expected.add(Caller("contractors", TokenFile(path).tokens()[0].filters, ("search", "read")))
    stop = threading.Event()
    seen: list[Any] = []

    def read() -> None:
        while not stop.is_set():
            try:
                seen.append(authenticate(f"Bearer {SECRET}".encode(), None, tokens))
            except SettingsError:
                seen.append("refused")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(150):
            text = texts[n % 2]
            with path.open("r+") as out:
                out.truncate(0)
                for at in range(0, len(text), 40):
                    out.write(text[at : at + 40])
                    out.flush()
    finally:
        stop.set()
        reader.join()
    assert seen and {outcome for outcome in seen if outcome != "refused"} <= expected


@pytest.mark.parametrize("given_file", [False, True])
def test_the_cli_the_api_and_the_server_read_one_tokens_file(tmp_path: Path, given_file: bool) -> None:
    """`citeline tokens add` writes the file that `Index.tokens()` and the server (``TokenFile.of_index``, as
    ``serve`` and ``create_app`` call it) read: INDEX/tokens.json by default, or the file each is given."""
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    elsewhere = tmp_path / "etc" / "citeline-tokens.json"
    elsewhere.parent.mkdir()
    given = ["--file", str(elsewhere)] if given_file else []
    added = CliRunner().invoke(cli, ["tokens", "add", "contractors", "--index", str(index.path), *given])
    assert added.exit_code == 0, added.output
    expected = elsewhere if given_file else index.path / "tokens.json"
    assert expected.exists()
    for named in (
        index.tokens(elsewhere if given_file else None),
        TokenFile.of_index(index.path, elsewhere if given_file else None),
    ):
        assert named.path == expected
        assert [token.name for token in named.tokens()] == ["contractors"]
