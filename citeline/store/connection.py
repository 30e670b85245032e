"""Connections to ``meta.duckdb``: the database lock around each, and the settings every connection gets.

DuckDB's defaults let one connection's buffer pool, hash tables and checkpoint grow to 80% of the machine's
memory, and its spill files go to ``meta.duckdb.tmp`` inside the index directory. A citeline connection gets
:data:`MEMORY_LIMIT` instead, with spill files in a folder of the system's temporary directory (one per process
and database file, which DuckDB creates when it first spills and removes when the connection closes), so
DuckDB spills to disk instead of growing with the catalog. ``catalog`` re-exports :func:`connect`; the SQL
stays there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from citeline.errors import (
    CitelineError,
    IndexCorruptError,
    IndexLockedError,
    IndexNotFoundError,
    IndexWriteError,
    QueryError,
)
from citeline.store.locks import database_lock

if TYPE_CHECKING:  # imported where used: a search that reads meta.json never loads DuckDB (store/meta_cache.py)
    import duckdb

#: The largest ``LIMIT`` or ``OFFSET`` a query takes: DuckDB's BIGINT, which both convert to (a larger one failed
#: inside DuckDB and read like a damaged database).
MAX_ROWS = 2**63 - 1


def check_rows(name: str, value: object, least: int) -> None:
    """Raise :class:`QueryError` unless ``value`` is a whole number from ``least`` to :data:`MAX_ROWS`: what a
    ``limit`` or ``offset`` a caller gives must be before it reaches DuckDB."""
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_ROWS:
        raise QueryError(f"{name} must be a whole number from {least} to {MAX_ROWS}, got {value!r}")


def check_text(what: str, value: str, why: str = "") -> None:
    """Raise :class:`QueryError` (``WHAT 'VALUE' is not valid text (not UTF-8)WHY``) unless ``value`` can be
    encoded as UTF-8, as DuckDB needs every text it is given: an argument with bytes that are not UTF-8 (a file name,
    a terminal in another encoding) reaches Python as lone surrogates, and DuckDB's error for it read as damage."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise QueryError(f"{what} {value!r} is not valid text (not UTF-8){why}") from None


def argument_error(exc: BaseException) -> QueryError | None:
    """The caller's error in DuckDB's ``exc``, if that is what it is: a text argument it could not convert (one not
    checked by :func:`check_text` where it came in). None for anything else (damage, a bug)."""
    message = str(exc)
    if type(exc).__name__ == "InvalidInputException" and "Python Conversion Failure" in message:
        return QueryError(f"a value given is not valid text (not UTF-8): {message.splitlines()[0]}")
    return None


DB_FILE = "meta.duckdb"

#: DuckDB's memory ceiling for each connection, in MB (its buffer pool, joins, sorts and the checkpoint at close).
#: With DuckDB's default a commit into the 1M-chunk index peaked at twice this ceiling's peak, most of it the
#: checkpoint as the writer's connection closed, for the same CPU (figures: docs/scale.md#choices-measured-in-the-code).
MEMORY_LIMIT_MB = 512
#: DuckDB's threads per connection. Each thread pins buffers of its own: at 512 MB with two threads, the passage
#: rows of a 330k-chunk segment (``catalog.passage_batches``, which ``verify`` compares) failed with "failed to pin
#: block" at 1M chunks; with one thread they spill and pass, as do all 1M rows and all BM25 texts (``rebuild``),
#: and a commit's peak and CPU do not move (figures: docs/scale.md#choices-measured-in-the-code).
THREADS = 1
#: Past this share of the catalog file's size, the ceiling grows with it: what DuckDB cannot spill (the primary
#: keys' ART indexes, a transaction's undo) grows with the rows, and a statement that reaches the ceiling fails.
#: The 1M-chunk catalog (1.9 GB) stays at 512 MB; a 10M-chunk one (about 19 GB) would get about 4.7 GB.
MEMORY_SHARE_OF_CATALOG = 0.25


def settings(path: Path) -> dict[str, Any]:
    """DuckDB's configuration for a connection to the database file ``path``.

    DuckDB refuses a second connection to a file it has open in the process with other settings; the settings
    depend only on the process, the file and its size, and its size cannot change while a connection of ours
    holds ``db.lock`` (a writer's is exclusive), so connections open at the same time always agree."""
    resolved = path.resolve()
    digest = hashlib.blake2b(str(resolved).encode(), digest_size=6).hexdigest()
    spill = Path(tempfile.gettempdir()) / f"citeline-duckdb-{os.getpid()}-{digest}"
    try:
        grown = int(resolved.stat().st_size * MEMORY_SHARE_OF_CATALOG) // 10**6
    except OSError:
        grown = 0
    limit = f"{max(MEMORY_LIMIT_MB, grown)}MB"
    return {"memory_limit": limit, "threads": THREADS, "temp_directory": str(spill)}


#: DuckDB's message when another process holds the database file ("Could not set lock on file ...: Conflicting
#: lock is held in ...").
_LOCK_CONFLICT = re.compile(r"could not set lock|conflicting lock", re.IGNORECASE)


#: DuckDB's messages for a file it may not write (a read-only mount, permissions): not damage.
_NOT_WRITABLE = re.compile(r"read-only file system|permission denied", re.IGNORECASE)


def db_path(index_dir: Path) -> Path:
    """The DuckDB file of an index directory."""
    return index_dir / DB_FILE


#: A writer's connection, as it closes, calls ``callback(index_dir, connection)`` just before DuckDB closes it; what
#: that returns (if not None) is called after the close (DuckDB has checkpointed), while the exclusive database lock
#: is still held, so no other process has changed the file in between. ``store.meta_cache`` reads the meta then,
#: and writes ``meta.json`` with the file's stamp after the close (see :func:`after_writes`).
AfterWrites = Callable[[Path, Any], Callable[[], None] | None]
_AFTER_WRITES: list[AfterWrites] = []


def after_writes(callback: AfterWrites) -> AfterWrites:
    """Register ``callback`` for every writer's connection as it closes (a decorator). Its failures are ignored:
    what it derives (a cache) must be checked by its readers."""
    _AFTER_WRITES.append(callback)
    return callback


class _LockedConnection:
    """A DuckDB connection that also holds the index's database lock (see :func:`connect`) until closed."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, lock: Any, index_dir: Path, writer: bool):
        self._connection = connection
        self._lock = lock
        self._index_dir = index_dir
        self._writer = writer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    def __enter__(self) -> _LockedConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (DuckDB checkpoints here), then release the lock."""
        try:
            then = self._before_close() if self._writer and self._lock is not None else []
            self._connection.close()
            for call in then:
                with contextlib.suppress(OSError, CitelineError):
                    call()
        finally:
            if self._lock is not None:
                self._lock.close()  # closing the descriptor releases the flock
                self._lock = None

    def _before_close(self) -> list[Callable[[], None]]:
        # Through the writer's own connection: a fresh read-only connection after the close cost many times more
        # (docs/scale.md#choices-measured-in-the-code).
        import duckdb

        then = []
        for callback in _AFTER_WRITES:
            with contextlib.suppress(duckdb.Error, OSError, CitelineError):
                if (call := callback(self._index_dir, self._connection)) is not None:
                    then.append(call)
        return then


# One DuckDB connect at a time in a process. DuckDB's Python module keeps one database instance per file and
# process, shared by its connections and torn down with the last; a connect racing another thread's (a reader's
# while the writer opened the file) got an instance whose Python table functions were not registered yet, and
# the writer's next query failed with "Table Function with name python_arrow_scan does not exist"
# (tests/index/test_thread_safety.py). Connecting costs about a millisecond; queries still run in parallel.
_CONNECTING = threading.Lock()


def connect(index_dir: Path, *, read_only: bool, timeout: float = 30.0) -> duckdb.DuckDBPyConnection:
    """Open the index's DuckDB file, waiting while another process holds a conflicting lock.

    DuckDB lets one process write or several processes read a file; a writer holds it only while it plans and
    commits, so a reader (or writer) that finds it locked waits briefly instead of failing. Close the returned
    connection (or use it as a context manager) to release the lock.
    """
    import duckdb  # here, not with the module: a search that reads meta.json never connects

    path = db_path(index_dir)
    if read_only and not path.exists():
        raise IndexNotFoundError(
            f"no citeline index at {index_dir} (no {DB_FILE}); build one with "
            f"`citeline ingest PATH --index {index_dir}`"
        )
    deadline = time.monotonic() + timeout
    lock = database_lock(index_dir, exclusive=not read_only, deadline=deadline, what=str(path))
    delay = 0.005
    config = settings(path)
    try:
        while True:
            try:
                with _CONNECTING:
                    opened = duckdb.connect(str(path), read_only=read_only, config=config)
                return _LockedConnection(opened, lock, index_dir, not read_only)  # type: ignore[return-value]
            except duckdb.Error as exc:
                # Only DuckDB's lock conflict is worth waiting for. (Matching any "lock" also matched damage:
                # a damaged header's message speaks of a "block", and was reported as locked after 30 s.)
                if _NOT_WRITABLE.search(str(exc)):
                    raise IndexWriteError(
                        f"cannot open {path}{'' if read_only else ' for writing'}: {str(exc).splitlines()[0]}"
                    ) from exc
                if not _LOCK_CONFLICT.search(str(exc)):
                    raise IndexCorruptError(
                        f"cannot open {path}: {str(exc).splitlines()[0]}; the file is damaged or not a citeline "
                        "index. Restore it from a backup, or build a new index with "
                        "`citeline ingest PATH --index NEW_DIR`"
                    ) from exc
                if time.monotonic() > deadline:
                    raise IndexLockedError(
                        f"{path} is locked by another process and stayed locked for {timeout:.0f} s: {exc}"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
    except BaseException:
        if lock is not None:
            lock.close()
        raise


def create_file(path: Path) -> duckdb.DuckDBPyConnection:
    """A connection to a new, unlocked DuckDB file (an index under construction, not yet under its real name)."""
    import duckdb

    return duckdb.connect(str(path), config=settings(path))
