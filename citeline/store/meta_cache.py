"""``meta.json``: the catalog's ``index_meta`` as of the database file's last change, so that a reader (a cold
``citeline search``) opens an index without DuckDB.

Importing DuckDB and reading the meta through a read-only connection was a large share of a cold search
(docs/performance.md#choices-measured-in-the-code). Every writer's connection refreshes the file as it closes
(``connection.after_writes``): it reads the meta through that connection in a transaction of its own (none if one is
open: then the file is left stale), and once DuckDB has closed the file, still under the exclusive database lock, writes
it with the stamp (times, size and inode) of ``meta.duckdb``
and its WAL as they are then. A reader takes the shared database lock and uses the file only
while that stamp still holds; any other change of the database files (a commit, a ledger row, a writer killed
before it refreshed the file, a damaged or replaced file) leaves a stamp that no longer matches, and the reader
reads the catalog as before. The file is a cache, no part of a generation: ``verify`` and ``rebuild`` ignore it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from citeline.store import catalog, connection, files

CACHE_FILE = "meta.json"
#: What the file's layout is; another value is read as no file.
CACHE_FORMAT = 1

Stamp = tuple[tuple[int, ...], ...]


def db_stamp(index_dir: Path) -> Stamp:
    """Modification and change times, size and inode of the index's database file and its WAL: any commit changes
    them. (The change time and inode also tell a file restored from a backup, its old modification time kept, from
    the one ``meta.json`` was written beside.)"""
    stamps = []
    path = catalog.db_path(index_dir)
    for candidate in (path, path.with_name(catalog.DB_FILE + ".wal")):
        try:
            stat = candidate.stat()
            stamps.append((stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino))
        except FileNotFoundError:
            stamps.append((0, 0, 0, 0))
    return tuple(stamps)


def read(index_dir: Path, stamp: Stamp) -> dict[str, Any] | None:
    """The cached meta if the file was written at ``stamp`` (the caller holds the database lock), else None."""
    try:
        cached = json.loads((index_dir / CACHE_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(cached, dict) or cached.get("format") != CACHE_FORMAT:
        return None
    if [tuple(part) for part in cached.get("stamp", ())] != list(stamp) or not any(stamp[0]):
        return None
    meta = cached.get("meta")
    return meta if isinstance(meta, dict) and meta else None


@connection.after_writes
def refresh(index_dir: Path, writer: Any) -> Callable[[], None] | None:
    """Read the meta through a writer's connection as it closes; write ``meta.json`` after the close (then the
    database file's stamp is final). Nothing while the connection is inside a transaction: what it would read
    may be rolled back at the close (the file is then left stale, and readers read the catalog)."""
    import duckdb  # loaded already: ``writer`` is DuckDB's

    try:
        catalog.begin(writer)
    except duckdb.Error:  # a transaction is open
        return None
    try:
        meta = catalog.read_meta(writer)
    finally:
        catalog.finish(writer, commit=False)
    if not meta:
        return None

    def write() -> None:
        record = {"format": CACHE_FORMAT, "stamp": db_stamp(index_dir), "meta": meta}
        files.replace_small_file(index_dir / CACHE_FILE, json.dumps(record, sort_keys=True).encode())

    return write
