"""Discovery and parsing never lose data and fail one item at a time: real files, real links, a real non-root user.

Root ignores permission bits, so the permission tests run the scan in a subprocess as ``nobody`` (``setpriv``) over a
tree under a world-traversable temporary folder; they are skipped, with the reason, where that is impossible.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from citeline import Index, SourceError
from citeline.sources.discovery import Discovery, is_under, resolve_roots, scan
from citeline.sources.parsers import SourceFile, display_path, doc_id_for, parse, parse_source

WORKTREE = str(Path(__file__).resolve().parents[2])


# ---------------------------------------------------------------- permissions (as a non-root user)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary folder ``nobody`` can traverse (pytest's own tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="citeline-perm-"))
    folder.chmod(0o755)
    yield folder
    for dirpath, dirnames, _ in os.walk(folder):  # give back the permissions the test took away, then delete
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    shutil.rmtree(folder)


def scan_unprivileged(roots: list[Path]) -> dict:
    """``scan(roots)`` as a user the permission bits apply to; the Discovery comes back as plain data."""
    script = (
        "import dataclasses, json, sys\n"
        "from citeline.sources.discovery import scan\n"
        "print(json.dumps(dataclasses.asdict(scan(sys.argv[1:]))))\n"
    )
    command = [sys.executable, "-c", script, *map(str, roots)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permission bits cannot be tested")
        command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *command]
    result = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": WORKTREE}, timeout=120
    )
    if result.returncode != 0 and "setpriv" in result.stderr:
        pytest.skip(f"cannot switch to user nobody: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr  # never a traceback
    return json.loads(result.stdout)


def tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o644)
        for parent in path.relative_to(root).parents:
            (root / parent).chmod(0o755)


def test_unreadable_subfolder_is_an_error_and_its_contents_are_unknown(shared_tmp: Path) -> None:
    root = shared_tmp / "docs"
    tree(root, {"a.txt": "alpha", "locked/b.txt": "beta", "locked/deeper/c.md": "# gamma"})
    (root / "locked").chmod(0o000)
    found = scan_unprivileged([root])
    assert [f["source_id"] for f in found["files"]] == ["a.txt"]
    assert found["errors"] == [
        {
            "path": str(root / "locked"),
            "reason": "cannot read folder: Permission denied; its indexed documents are kept",
            "kept": True,
        }
    ]
    assert found["unreadable_dirs"] == [str(root / "locked")] and found["empty_roots"] == []
    discovery = Discovery(**{k: v for k, v in found.items() if k in ("unreadable_dirs", "unreadable_roots")})
    assert discovery.contents_unknown(str(root / "locked" / "deeper" / "c.md"))
    assert not discovery.contents_unknown(str(root / "lockedout.txt")) and not discovery.contents_unknown(
        str(root / "a.txt")
    )


def test_unreadable_root_is_reported_not_empty_and_other_roots_go_on(shared_tmp: Path) -> None:
    locked, fine = shared_tmp / "locked", shared_tmp / "fine"
    tree(locked, {"a.txt": "alpha"})
    tree(fine, {"b.txt": "beta"})
    locked.chmod(0o000)
    found = scan_unprivileged([locked, fine])
    assert found["unreadable_roots"] == [str(locked)] and found["empty_roots"] == []
    assert [f["path"] for f in found["files"]] == [str(fine / "b.txt")]
    assert found["errors"][0]["path"] == str(locked) and "Permission denied" in found["errors"][0]["reason"]


def test_folder_listable_but_not_searchable_keeps_going(shared_tmp: Path) -> None:
    root = shared_tmp / "docs"
    tree(root, {"a.txt": "alpha", "half/b.txt": "beta", "half/sub/c.txt": "gamma"})
    (root / "half").chmod(0o744)  # r but no x for others: names listable, nothing below openable
    found = scan_unprivileged([root])
    assert "a.txt" in [f["source_id"] for f in found["files"]]
    assert str(root / "half" / "sub") in found["unreadable_dirs"]  # its contents cannot be known


# ---------------------------------------------------------------- empty roots and root errors


def test_empty_roots_are_named(tmp_path: Path) -> None:
    empty, images, full = tmp_path / "empty", tmp_path / "images", tmp_path / "full"
    empty.mkdir()
    images.mkdir()
    (images / "x.png").write_bytes(b"\x89PNG")
    (images / ".hidden.txt").write_text("hidden")
    full.mkdir()
    (full / "a.txt").write_text("alpha")
    found = scan([empty, images, full])
    assert found.empty_roots == [str(empty), str(images)]
    assert found.roots == [str(empty), str(images), str(full)] and found.errors == []


@pytest.mark.parametrize(
    ("root", "reason"),
    [
        ("missing", "no such file or directory"),
        ("~citeline-no-such-user/docs", "unknown user in ~ path"),
        ("a\0b", "invalid path"),
        ("loop", "symbolic link loop"),
    ],
)
def test_unusable_root_is_one_clear_source_error(tmp_path: Path, root: str, reason: str) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(SourceError, match=reason) as info:
        scan([root if root.startswith("~") else str(tmp_path / root)])
    assert "\n" not in str(info.value)
    with pytest.raises(SourceError):
        resolve_roots([root if root.startswith("~") else str(tmp_path / root)])


def test_non_utf8_root_is_refused_with_a_printable_name(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(root)
    with pytest.raises(SourceError, match="not valid UTF-8") as info:
        scan([os.fsdecode(root)])
    assert info.value.path.endswith("caf\\xe9") and info.value.path.encode("utf-8")


# ---------------------------------------------------------------- names that are not UTF-8


def test_non_utf8_names_fail_alone_with_a_printable_name(tmp_path: Path) -> None:
    base = os.fsencode(tmp_path)
    (tmp_path / "good.txt").write_text("fine")
    with open(base + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"content")
    os.mkdir(base + b"/dir\xff")
    with open(base + b"/dir\xff/inner.txt", "wb") as handle:
        handle.write(b"content")
    with open(base + b"/ignored\xff.png", "wb") as handle:  # not a supported file: not worth an error
        handle.write(b"x")
    found = scan([tmp_path])
    assert [f.source_id for f in found.files] == ["good.txt"]
    assert [(e.path, e.reason) for e in found.errors] == [
        (f"{tmp_path}/caf\\xe9.txt", "name is not valid UTF-8; rename it to index it"),
        (f"{tmp_path}/dir\\xff", "name is not valid UTF-8; rename it to index it"),
    ]
    # Every error can go to the ledger as is: JSON and DuckDB take it.
    payload = json.dumps([e.__dict__ for e in found.errors], ensure_ascii=False)
    assert duckdb.connect().execute("SELECT json_array_length(?::JSON)", [payload]).fetchone() == (2,)


def test_display_path_escapes_bad_bytes_and_control_characters() -> None:
    assert display_path(os.fsdecode(b"/a/caf\xe9")) == "/a/caf\\xe9"
    assert display_path("/a/line\nbreak") == "/a/line\\nbreak"
    assert display_path("/a/café") == "/a/café"


def test_is_under_compares_whole_path_components() -> None:
    assert is_under("/a/b/c.txt", ["/a/b"]) and is_under("/a/b", ["/a/b"]) and is_under("/x", ["/"])
    assert not is_under("/a/bc.txt", ["/a/b"]) and not is_under("/a", ["/a/b"])


# ---------------------------------------------------------------- symbolic links


def test_symlink_policy(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    tree(root, {"real/a.txt": "alpha", ".shared/s.txt": "shared", "top.md": "# top"})
    tree(outside, {"secret.txt": "must not be indexed", "dir/o.txt": "nor this"})
    (root / "loop1.txt").symlink_to(root / "loop2.txt")
    (root / "loop2.txt").symlink_to(root / "loop1.txt")
    (root / "broken.txt").symlink_to(root / "gone.txt")
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "leakdir").symlink_to(outside / "dir")
    (root / "real" / "up").symlink_to(root)  # a folder link to its own ancestor
    (root / "alias").symlink_to(root / "real")  # a second path to a folder indexed already
    (root / "again.md").symlink_to(root / "top.md")  # a second path to a file indexed already
    (root / "shared").symlink_to(root / ".shared")  # the only visible path to a hidden folder: followed
    found = scan([root])
    assert [f.source_id for f in found.files] == ["real/a.txt", "shared/s.txt", "top.md"]
    # Links not followed are skips, not failures (a folder with a link loop must not make every run partial).
    assert found.errors == []
    skipped = {Path(s.path).name: s.reason for s in found.skipped}
    assert skipped == {
        "broken.txt": f"broken symbolic link (its target {root / 'gone.txt'} does not exist); not followed",
        "leak.txt": f"symbolic link leaves the root (to {outside / 'secret.txt'}); not followed",
        "leakdir": f"symbolic link leaves the root (to {outside / 'dir'}); not followed",
        "loop1.txt": "symbolic link loop; not followed",
        "loop2.txt": "symbolic link loop; not followed",
        "up": f"symbolic link loop: points to its own parent folder {root}",
        "alias": f"same folder as {root / 'real'}, indexed there",
        "again.md": f"same file as {root / 'top.md'}, indexed there",
    }
    (shared,) = [f for f in found.files if f.source_id == "shared/s.txt"]
    assert shared.path == str(root / "shared" / "s.txt") and parse(shared)[0].text == "shared"


def test_links_cannot_blow_up_the_walk(tmp_path: Path) -> None:
    # Each folder links twice to the next: 2**12 paths, but each real folder is listed once.
    root = tmp_path / "root"
    for level in range(12):
        folder = root / ".h" / f"l{level}"
        folder.mkdir(parents=True)
        (folder / "f.txt").write_text(f"level {level}")
    for level in range(11):
        for name in ("a", "b"):
            (root / ".h" / f"l{level}" / name).symlink_to(root / ".h" / f"l{level + 1}")
    (root / "entry").symlink_to(root / ".h" / "l0")
    found = scan([root])
    assert len(found.files) == 12 and found.errors == [] and len(found.skipped) == 11


def test_deep_tree_needs_no_recursion() -> None:
    # Outside pytest's shared basetemp: were the cleanup below ever skipped, pytest's recursive rmtree of a
    # 1,200-deep tree would fail every later pytest session on this machine.
    top = tempfile.mkdtemp(prefix="citeline-deep-")
    deep = top
    for _ in range(1200):  # past Python's recursion limit of 1,000 (os.makedirs itself recurses)
        deep = os.path.join(deep, "d")
        os.mkdir(deep)
    bottom = os.path.join(deep, "bottom.txt")
    with open(bottom, "w") as handle:
        handle.write("at the bottom")
    try:
        (found,) = scan([top]).files
        assert found.source_id.endswith("d/bottom.txt")
    finally:  # shutil.rmtree recurses too (Python 3.11), so pytest could not clean this up
        os.remove(bottom)
        while deep != os.path.dirname(top):
            os.rmdir(deep)
            deep = os.path.dirname(deep)


# ---------------------------------------------------------------- ids


def test_ids_are_unambiguous_and_legacy_ids_are_unchanged(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text(json.dumps({"_id": "1.txt", "text": "record text"}) + "\n")
    (tmp_path / "x.jsonl#1.txt").write_text("file text")
    (tmp_path / "plain.md").write_text("# plain")
    (tmp_path / "a.jsonl").write_text(json.dumps({"_id": "b.jsonl#c", "text": "one"}) + "\n")
    (tmp_path / "a.jsonl#b.jsonl").write_text(json.dumps({"_id": "c", "text": "two"}) + "\n")
    documents = [d for f in scan([tmp_path]).files for d in parse(f)]
    by_text = {d.text: d for d in documents}
    assert len({d.doc_id for d in documents}) == len(documents) == 5
    assert by_text["record text"].source_id == by_text["file text"].source_id == "x.jsonl#1.txt"  # shown alike
    # Files and records whose path has no ".jsonl#" keep the ids existing indexes hold.
    root = str(tmp_path)
    assert by_text["# plain"].doc_id == doc_id_for(root, "plain.md")
    assert by_text["record text"].doc_id == doc_id_for(root, "x.jsonl#1.txt")
    assert by_text["one"].doc_id == doc_id_for(root, "a.jsonl#b.jsonl#c")


def test_colliding_file_and_record_are_both_indexed(tmp_path: Path, fake_embedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "x.jsonl").write_text(json.dumps({"_id": "1.txt", "text": "the record about river crossings"}) + "\n")
    (docs / "x.jsonl#1.txt").write_text("the file about mountain passes")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([docs])
    texts = {r.text for r in index.search("river mountain", k=10)}
    assert texts == {"the record about river crossings", "the file about mountain passes"}


# ---------------------------------------------------------------- JSONL records fail alone


def write_jsonl(path: Path, lines: list[str]) -> SourceFile:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return SourceFile(str(path.parent), str(path), path.name)


def test_lone_surrogates_fail_their_record_alone(tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "c.jsonl",
        [
            '{"_id": "ok1", "text": "fine"}',
            '{"_id": "t", "text": "bad \\ud800 text"}',
            '{"_id": "ti", "title": "bad \\udfff", "text": "body"}',
            '{"_id": "m", "text": "body", "meta": {"k": ["\\ud834"]}}',
            '{"_id": "k", "text": "body", "\\ud800key": 1}',
            '{"_id": "bad\\ud800id", "text": "body"}',
            '{"_id": "ok2", "text": "also fine \\ud83d\\ude00"}',
        ],
    )
    parsed = parse_source(source)
    assert [d.record_id for d in parsed.documents] == ["ok1", "ok2"] and parsed.documents[1].text.endswith("😀")
    lines = [e.reason.split(":")[0] for e in parsed.errors]
    assert lines == ["line 2", "line 3", "line 4", "line 5", "line 6"]
    assert all(e.path == source.path and "lone surrogate" in e.reason for e in parsed.errors)
    assert all(e.reason.encode("utf-8") for e in parsed.errors)  # storable in the ledger
    root = str(tmp_path)
    assert parsed.kept_doc_ids == [doc_id_for(root, f"c.jsonl#{r}") for r in ("t", "ti", "m", "k")]
    assert not parsed.complete  # line 6's id is unknown: none of this file's stored records may be removed
    with pytest.raises(SourceError, match=r"line 2: .*\(and 4 more problems\)"):
        parse(source)


def test_duplicate_ids_keep_the_first_and_report_each_repeat(tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "d.jsonl",
        [
            '{"_id": 1, "text": "first"}',
            '{"_id": "1", "text": "second"}',
            '{"id": 1, "text": "third"}',
            '{"_id": "2", "text": "other"}',
        ],
    )
    parsed = parse_source(source)
    assert [d.text for d in parsed.documents] == ["first", "other"] and parsed.complete
    assert [e.reason for e in parsed.errors] == [
        "line 2: duplicate id '1' (first on line 1); this record is skipped",
        "line 3: duplicate id '1' (first on line 1); this record is skipped",
    ]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"_id": "a", "text": ', "invalid JSON"),
        ('{"_id": ' + "9" * 5000 + ', "text": "x"}', "invalid JSON (ValueError"),
        ("[" * 100_000 + "]" * 100_000, "invalid JSON (RecursionError"),
        ('{"_id": true, "text": "x"}', "must be a string or an integer, not bool"),
        ('{"_id": [1], "text": "x"}', "must be a string or an integer, not list"),
        ('{"_id": "n", "text": 5}', "has no text field"),
        ('["not", "an", "object"]', "expected a JSON object"),
    ],
)
def test_bad_record_fails_alone(tmp_path: Path, line: str, reason: str) -> None:
    source = write_jsonl(tmp_path / "e.jsonl", ['{"_id": "good", "text": "kept"}', line])
    parsed = parse_source(source)
    assert [d.record_id for d in parsed.documents] == ["good"]
    ((error),) = parsed.errors
    assert error.reason.startswith("line 2: ") and reason in error.reason and len(error.reason) < 300


def test_whole_file_problems_fail_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9\x01\x02\x03\x04\x05\x06\x07\x08")  # control bytes: no text encoding fits
    parsed = parse_source(SourceFile(str(tmp_path), str(bad), "bad.txt"))
    assert parsed.documents == [] and not parsed.complete and "not valid UTF-8" in parsed.errors[0].reason
    only_bad = write_jsonl(tmp_path / "f.jsonl", ['{"_id": "x", "text": "\\udc80"}'])
    parsed = parse_source(only_bad)
    assert parsed.documents == [] and parsed.kept_doc_ids == [doc_id_for(str(tmp_path), "f.jsonl#x")]


def test_a_bad_record_or_name_does_not_fail_the_run(tmp_path: Path, fake_embedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write_jsonl(
        docs / "c.jsonl", ['{"_id": "a", "text": "river crossing at night"}', '{"_id": "b", "text": "\\ud800"}']
    )
    (docs / "good.txt").write_text("mountain passes in winter")
    with open(os.fsencode(docs) + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"cafe")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    run = index.ingest([docs])
    # The bad record and the undecodable name each fail alone; the good record of the same file is indexed.
    assert run.status == "partial" and run.failed == 2
    reasons = " ".join(error["reason"] for error in run.errors)
    assert "record 'b'" in reasons and "not valid UTF-8" in reasons
    assert {r.source_id for r in index.search("mountain", k=5, mode="lexical")} == {"good.txt"}
    assert {r.source_id for r in index.search("river crossing", k=5, mode="lexical")} == {"c.jsonl#a"}
