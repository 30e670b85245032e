"""Fault trials for issue 14's classes: inject a fault a scheduled run meets (an empty mount, an unreadable
subfolder, a deleted lock file, duplicate rows, a full disk, damaged files), run ingestion into it and after it,
and count the documents lost (must be 0). ``bench/reliability.py`` prints the table; ``tests/index/test_safety.py``
runs one round of each.

A round: build an index of ``DOCS`` documents, inject the fault, run what a user or a schedule would run (it
must end in success or in one clear :class:`CitelineError`, never anything else), remove the fault, run again
(must succeed), and compare the index's documents with those on disk.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import duckdb  # noqa: E402
from conftest import HashEmbedder  # noqa: E402

from citeline import Index  # noqa: E402
from citeline.errors import CitelineError, IndexLockedError  # noqa: E402
from citeline.store import catalog, checks  # noqa: E402
from citeline.store.locks import DB_LOCK_FILE, WRITE_LOCK_FILE, writer_lock  # noqa: E402

DOCS = 12


class Skip(Exception):
    """The machine cannot inject this fault (the reason says why)."""


@dataclass
class FaultResult:
    """One fault class's figures."""

    fault: str
    injected: int = 0
    runs: int = 0  #: runs started into or after a fault
    completed: int = 0  #: runs that ended in success or one clear CitelineError
    #: documents the faulted run removed although they were only out of reach, plus documents on disk that the
    #: index does not hold after the recovery run
    lost: int = 0
    skipped: str = ""
    notes: list[str] = field(default_factory=list)


def _docs(root: Path) -> Path:
    for number in range(DOCS):
        folder = root / ("sub" if number % 3 == 0 else "")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"doc{number}.md").write_text(f"# Doc {number}\n\nThe river bridge {number} and the mill.\n")
    return root


def _indexed(index: Index) -> set[str]:
    with contextlib.closing(catalog.connect(index.path, read_only=True)) as connection:
        return {row[0] for row in connection.execute("SELECT DISTINCT path FROM documents").fetchall()}


def _on_disk(docs: Path) -> set[str]:
    return {str(path) for path in docs.rglob("*.md")}


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


# ---------------------------------------------------------------- the faults: each yields while injected


@contextlib.contextmanager
def empty_root(work: Path, docs: Path, index: Index) -> Iterator[Callable[[], object]]:
    """The root's folder is there, its files are not (an unmounted share, an empty Docker volume)."""
    away = work / "away"
    docs.rename(away)
    docs.mkdir()
    try:
        yield lambda: index.ingest([docs])
    finally:
        docs.rmdir()
        away.rename(docs)


@contextlib.contextmanager
def unreadable_subfolder(work: Path, docs: Path, index: Index) -> Iterator[Callable[[], object]]:
    """A subfolder that cannot be read (permission denied)."""
    if os.geteuid() == 0:
        raise Skip(
            "root reads every folder; run as a normal user (discovery reports unreadable folders once the "
            "sources branch lands)"
        )
    sub = docs / "sub"
    sub.chmod(0)
    try:
        yield lambda: index.ingest([docs])
    finally:
        sub.chmod(0o755)


@contextlib.contextmanager
def deleted_lock(work: Path, docs: Path, index: Index) -> Iterator[Callable[[], object]]:
    """A writer runs; someone deletes the lock files; a second writer starts."""
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with writer_lock(index.path):
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=writer)
    thread.start()
    holding.wait(10)
    for name in (WRITE_LOCK_FILE, DB_LOCK_FILE):
        (index.path / name).unlink(missing_ok=True)

    def second_writer() -> object:
        try:
            index.ingest([docs], wait=0.5)
        except IndexLockedError:
            return "kept out"
        raise RuntimeError("a second writer got in while the first held the lock")

    try:
        yield second_writer
    finally:
        release.set()
        thread.join()


@contextlib.contextmanager
def duplicate_rows(work: Path, docs: Path, index: Index) -> Iterator[Callable[[], object]]:
    """Every row stored twice, as two writers at once (or a citeline before the primary keys) left them."""
    with contextlib.closing(duckdb.connect(str(catalog.db_path(index.path)))) as connection:
        for table in checks.KEYS:
            connection.execute(f"CREATE TABLE copy AS SELECT * FROM {table}")
            connection.execute(f"DROP TABLE {table}")
            connection.execute(f"CREATE TABLE {table} AS SELECT * FROM copy UNION ALL SELECT * FROM copy")
            connection.execute("DROP TABLE copy")

    def rebuild_then_ingest() -> object:
        index.rebuild()
        return index.ingest([docs])

    yield rebuild_then_ingest


@contextlib.contextmanager
def disk_full(work: Path, docs: Path, index: Index) -> Iterator[Callable[[], object]]:
    """The index's filesystem fills up while a run writes (a small tmpfs, filled to the last byte)."""
    disk = work / "disk"
    disk.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)):
        raise Skip("cannot mount a tmpfs here (needs root and mount privileges)")
    try:
        shutil.copytree(index.path, disk / "index")
        small = Index.open(disk / "index", embedder=HashEmbedder())
        new = work / "more"
        _docs(new)
        with (disk / "filler").open("wb", buffering=0) as handle, contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        yield lambda: small.ingest([new])
        (disk / "filler").unlink()
        shutil.rmtree(index.path)  # the recovery run and the counts look at the index the full disk held
        shutil.copytree(disk / "index", index.path)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@contextlib.contextmanager
def damaged_files(work: Path, docs: Path, index: Index) -> Iterator[Callable[[], object]]:
    """The vector file truncated, a BM25 file overwritten, and one source file made undecodable."""
    meta = index.meta
    generation = int(meta["generation"])
    vectors = index.path / f"vectors.{generation}.faiss"
    vectors.write_bytes(vectors.read_bytes()[: vectors.stat().st_size // 2])
    bm25 = sorted((index.path / f"bm25.{generation}").iterdir())[0]
    bm25.write_bytes(b"\0" * 64)
    bad = docs / "doc1.md"
    original = bad.read_bytes()
    bad.write_bytes(b"\xff\xfe" + original)

    def open_then_ingest() -> object:
        reopened = Index.open(index.path, embedder=HashEmbedder())
        return reopened.ingest([docs])

    try:
        yield open_then_ingest
    finally:
        bad.write_bytes(original)


FAULTS: dict[str, Callable[[Path, Path, Index], contextlib.AbstractContextManager[Callable[[], object]]]] = {
    "empty root": empty_root,
    "unreadable subfolder": unreadable_subfolder,
    "deleted lock file": deleted_lock,
    "duplicate rows": duplicate_rows,
    "disk full": disk_full,
    "damaged files": damaged_files,
}


def run_fault_trials(work: Path, rounds: int = 1, faults: list[str] | None = None) -> list[FaultResult]:
    """``rounds`` rounds of each fault class under ``work``; returns one :class:`FaultResult` per class."""
    import warnings

    results = []
    for name in faults or list(FAULTS):
        result = FaultResult(name)
        for round_ in range(rounds):
            place = work / f"{name.replace(' ', '-')}-{round_}"
            docs = _docs(place / "docs")
            index = Index.create(place / "index", embedder=HashEmbedder())
            index.ingest([docs])
            before = _indexed(index)
            try:
                with warnings.catch_warnings(), FAULTS[name](place, docs, index) as faulted_run:
                    warnings.simplefilter("ignore")
                    result.injected += 1
                    result.runs += 1
                    try:
                        faulted_run()
                        result.completed += 1
                    except CitelineError as exc:  # a clear refusal or error is a completed run
                        result.completed += 1
                        if "\n" in str(exc):
                            result.notes.append(f"multi-line error: {exc!r}")
                    except Exception as exc:
                        result.notes.append(f"{type(exc).__name__}: {exc}")
            except Skip as skip:
                result.skipped = str(skip)
                break
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                index = Index.open(index.path, embedder=HashEmbedder())
                result.lost += len(before - _indexed(index))  # removed by the faulted run
                result.runs += 1
                try:
                    index.ingest([docs])
                    result.completed += 1
                except Exception as exc:
                    result.notes.append(f"recovery run: {type(exc).__name__}: {exc}")
                result.lost += len(_on_disk(docs) - _indexed(index))
                if not index.verify().ok:
                    result.notes.append(f"inconsistent after recovery: {index.verify().problems}")
        results.append(result)
    return results


def fault_table(results: list[FaultResult]) -> str:
    """The figures as a Markdown table."""
    lines = ["| fault | injected | runs completed | documents lost | note |", "|---|---|---|---|---|"]
    for r in results:
        note = f"skipped: {r.skipped}" if r.skipped else "; ".join(r.notes)[:200]
        lines.append(f"| {r.fault} | {r.injected} | {r.completed} of {r.runs} | {r.lost} | {note} |")
    return "\n".join(lines)
