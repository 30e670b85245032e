"""The ``files`` table of the catalog: each source file's size and modification time as the last run that read it
whole saw them, and when that run started. It is what file-level freshness (``citeline.ingest.freshness``) compares a
found file's stat with; this module owns the table and every statement on it.

Why a table of its own: freshness used to ask whether every *document* stored from a file recorded the file's
current stat. A run rewrites only the documents whose content changed, so once some records of a JSONL file
changed, its other documents kept the older stat and the file was read again on every later run (an unchanged
re-run of a 1M-chunk index after a 1 % update re-read those files: docs/scale.md#what-the-figures-show). A touched file
whose documents were all unchanged was read again forever for the same reason. The file's own row, written for
every file a run read whole, is right in both cases.

A row is written (:func:`record`) in the transaction of a run's last commit, for the files that run parsed with
no error: a run that dies earlier records nothing and the next one reads those files again, and a file with a
failed record keeps being read (and its error reported) until it parses. ``checked_at`` is the run's start, before
any file was read, so ``mtime < checked_at - settled`` says the file had been left alone long enough before it
was read (git's "racy" case). Rows of files with no stored documents are dropped in the same transaction
(:func:`forget_orphans`), and so are the rows of the files any removed document came from
(:func:`forget_documents_files`): a record removed on its own (``citeline remove --doc``) must bring its unchanged
file to be read again, or it would never come back.

Each row also names the reader version of the format the file was read with (``@parser(..., reader=N)``,
``citeline.sources.registry.READER_VERSIONS``): when an upgrade changes how a format is read, a file read with an older
version is no longer fresh, so the next run reads it again and stores what the new reader gives (unchanged
documents are not embedded again). Without this, an upgrade reached only the files that changed after it.

Indexes written before the table get it on their next commit (:func:`ensure`), filled from the documents' own
stat where every document of a file agrees, which is exactly what the old rule accepted; until then (a read-only
check of such an index) the old rule answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

import pyarrow as pa

from citeline.store.metadata import PROPERTIES_KEY

if TYPE_CHECKING:
    import duckdb

TABLE = "files"

_CREATE = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    source_root VARCHAR NOT NULL,
    source_file VARCHAR NOT NULL,
    size BIGINT NOT NULL,
    mtime DOUBLE NOT NULL,
    checked_at DOUBLE NOT NULL,
    PRIMARY KEY (source_root, source_file),
    stamp VARCHAR,
    reader INTEGER
)
"""

#: A remote object's stamp (ETag, version, generation: ``citeline.sources.remote``), added to tables written before
#: remote roots; NULL for a local file.
_ADD_STAMP = f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS stamp VARCHAR"
#: The reader version of the format the file was read with (``citeline.sources.registry.READER_VERSIONS``), added
#: to tables written before versions; NULL reads as 1, the version every format had then.
_ADD_READER = f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS reader INTEGER"

# The documents' stat where every document of a file recorded the same one: the files the old rule called fresh
# (given the settling test, applied to the earliest ingestion of the file's documents) keep being fresh.
_SEED = f"""
INSERT INTO {TABLE}
SELECT source_root, source_file, min(size_bytes), min(mtime), min(epoch(ingested_at)), NULL, NULL
FROM documents
GROUP BY source_root, source_file
HAVING count(size_bytes) = count(*) AND count(mtime) = count(*)
   AND min(size_bytes) = max(size_bytes) AND min(mtime) = max(mtime)
"""


class FileStat(NamedTuple):
    """A file a run read whole, and the stat it read it at."""

    source_root: str
    source_file: str  #: relative to the root, as documents record it
    size: int
    mtime: float
    #: a remote object's stamp (its ETag, with its version where the store keeps versions); None for a local file
    stamp: str | None = None
    #: the reader version of the file's format it was read with (``citeline.sources.registry.READER_VERSIONS``)
    reader: int = 1


def exists(connection: duckdb.DuckDBPyConnection) -> bool:
    """Whether the catalog has the table (indexes written before it do not, until their next commit)."""
    rows = connection.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND schema_name = 'main'", [TABLE]
    ).fetchall()
    return bool(rows[0][0])


def ensure(connection: duckdb.DuckDBPyConnection) -> None:
    """Create the table if the catalog lacks it, filled from the documents' stat (inside a writer's
    transaction: an index written before the table gets it with its next commit)."""
    if exists(connection):
        if not _has_column(connection, "stamp"):
            connection.execute(_ADD_STAMP)
        if not _has_column(connection, "reader"):
            connection.execute(_ADD_READER)
        return
    connection.execute(_CREATE)
    connection.execute(_SEED)


def _has_column(connection: duckdb.DuckDBPyConnection, column: str) -> bool:
    rows = connection.execute(
        "SELECT count(*) FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main' AND column_name = ?",
        [TABLE, column],
    ).fetchall()
    return bool(rows[0][0])


def record(connection: duckdb.DuckDBPyConnection, files: Sequence[FileStat], started_at: str) -> None:
    """Upsert the stat of ``files``, read whole by a run that started at ``started_at`` (ISO 8601)."""
    if not files:
        return
    checked_at = datetime.fromisoformat(started_at).timestamp()
    rows = pa.table(
        {
            "source_root": pa.array([f.source_root for f in files], pa.string()),
            "source_file": pa.array([f.source_file for f in files], pa.string()),
            "size": pa.array([f.size for f in files], pa.int64()),
            "mtime": pa.array([f.mtime for f in files], pa.float64()),
            "checked_at": pa.array([checked_at] * len(files), pa.float64()),
            "stamp": pa.array([f.stamp for f in files], pa.string()),
            "reader": pa.array([f.reader for f in files], pa.int32()),
        }
    )
    connection.register("citeline_file_stats", rows)
    try:
        # A file may appear twice when a run lists it under two roots' views of one path: the last stat wins.
        connection.execute(
            f"INSERT OR REPLACE INTO {TABLE} (source_root, source_file, size, mtime, checked_at, stamp, reader) "
            "SELECT source_root, source_file, last(size), last(mtime), last(checked_at), last(stamp), last(reader) "
            "FROM citeline_file_stats GROUP BY source_root, source_file"
        )
    finally:
        connection.unregister("citeline_file_stats")


def forget_documents_files(connection: duckdb.DuckDBPyConnection, doc_ids: Sequence[str]) -> None:
    """Drop the rows of the files ``doc_ids`` (documents about to be removed) were read from: a file a document
    left the index from no longer holds, in the index, what its stat vouches for. Without this a document removed
    on its own (``citeline remove --doc`` of a CSV row or a JSONL record) never came back: its file, unchanged, was
    not read again. The next run reads such a file and adds back what is missing; its other documents are
    unchanged (same content hash) and are not embedded again. A run that reads the file whole records its row
    again in the same or a later commit (:func:`record`)."""
    if not doc_ids:
        return
    connection.execute(
        f"DELETE FROM {TABLE} WHERE (source_root, source_file) IN "
        "(SELECT source_root, source_file FROM documents WHERE doc_id = ANY(?))",
        [list(doc_ids)],
    )


def forget_orphans(connection: duckdb.DuckDBPyConnection) -> None:
    """Drop the rows of files no stored document comes from (removed, vanished, or never stored)."""
    connection.execute(
        f"DELETE FROM {TABLE} WHERE NOT EXISTS (SELECT 1 FROM documents d "
        f"WHERE d.source_root = {TABLE}.source_root AND d.source_file = {TABLE}.source_file)"
    )


#: A run told the encoding (``--encoding``) reads again, unchanged or not, a file whose documents were read in a
#: legacy encoding other than that one (the user re-runs with --encoding to fix a wrong guess); one read as UTF-8,
#: through a byte-order mark, or with no encoding to speak of (a PDF) reads the same, and is not read again.
_SAME_READING = (
    "bool_and(f.encoding IS NULL OR coalesce(json_extract_string(d.metadata, "
    f"'$.{PROPERTIES_KEY}.encoding'), f.encoding) IN (f.encoding, 'utf-8', 'utf-16', 'utf-32'))"
)


def fresh_files(
    connection: duckdb.DuckDBPyConnection, found: pa.Table, settled_seconds: float
) -> list[tuple[str, str, int, bool]]:
    """Per file of ``found`` (columns ``root``, ``source_file``, ``size``, ``mtime``, ``encoding``, ``stamp`` and
    ``reader``: the files a run found, their stat, the encoding the run reads them in, a remote object's stamp and
    the reader version of their format) that has stored documents: ``(root, source_file, documents, fresh)``, where
    ``fresh`` says the file's row holds this size and modification time, the file had been left alone for
    ``settled_seconds`` when that run started (a remote object with a stamp: the row holds this size and stamp, no
    settling), it was read with this reader version (an upgraded format reads its files again), and reading it in
    the run's encoding cannot change its text (:data:`_SAME_READING`). One row per file, computed in SQL: the
    documents never come to Python.

    Without the table (an index no writer has touched since it was added) the old rule answers: every document
    stored from the file recorded this stat, and the file had settled when each was indexed."""
    if exists(connection):
        # A remote object with a stamp is unchanged when its size and stamp are (an ETag names the content: no
        # settling, and a re-upload of the same bytes is no change); anything else by size and settled time.
        stored_stamp = "s.stamp" if _has_column(connection, "stamp") else "NULL"
        stored_reader = "coalesce(s.reader, 1)" if _has_column(connection, "reader") else "1"
        sql = (
            "SELECT f.root, f.source_file, count(*) AS documents, "
            f"coalesce(any_value(s.size = f.size AND {stored_reader} = f.reader AND CASE WHEN f.stamp IS NOT NULL "
            f"THEN {stored_stamp} IS NOT DISTINCT FROM f.stamp "
            "ELSE s.mtime = f.mtime AND f.mtime < s.checked_at - ? END), false) "
            f"AND {_SAME_READING} "
            "FROM citeline_found_files f "
            "JOIN documents d ON d.source_root = f.root AND d.source_file = f.source_file "
            f"LEFT JOIN {TABLE} s ON s.source_root = f.root AND s.source_file = f.source_file "
            "GROUP BY f.root, f.source_file"
        )
    else:
        sql = (
            "SELECT f.root, f.source_file, count(*) AS documents, coalesce(bool_and(d.size_bytes = f.size "
            "AND d.mtime = f.mtime AND f.reader = 1 AND f.mtime < epoch(d.ingested_at) - ?), false) "
            f"AND {_SAME_READING} AS fresh "
            "FROM citeline_found_files f JOIN documents d ON d.source_root = f.root AND d.source_file = f.source_file "
            "GROUP BY f.root, f.source_file"
        )
    connection.register("citeline_found_files", found)
    try:
        rows = connection.execute(sql, [settled_seconds]).fetchall()
        return [(root, source_file, int(n), bool(fresh)) for root, source_file, n, fresh in rows]
    finally:
        connection.unregister("citeline_found_files")
