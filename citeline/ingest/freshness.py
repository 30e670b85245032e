"""File-level planning: which discovered files need not be read again (those whose size and modification time
are still what they were when their documents were indexed, as make and rsync decide), and what the plan loads
of the catalog (only the documents of the other files).

A run used to parse every file to compare content hashes, so an unchanged re-run cost what the corpus costs to
parse, and then it loaded every stored document's fingerprint and key into Python, most of a one-document update
at 1M chunks (figures: docs/scale.md#choices-measured-in-the-code). Now both questions are asked in SQL per
file: the files' stat goes to DuckDB
as one Arrow table, a file comes back with its document count and whether it is fresh, and
the plan loads only the documents of files that were read or vanished (:func:`plan`).

A file is skipped only when the catalog's ``files`` table (``citeline.store.file_stats``) holds its current size
and modification time, written by the last run that read it whole, and the file had been left alone for
:data:`SETTLED_SECONDS` when that run started (a file written in the same tick as it was read, on a filesystem with
coarse timestamps, could change again without its time moving: git's "racy" case). A skipped file's documents
count as unchanged; one that failed to parse, wholly or in one record, is not recorded and is read again (its
error reported again). ``touch`` a file to make the next run read it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from citeline.ingest import removal, texts
from citeline.ingest.planning import ParsedBatch, Plan, plan_changes
from citeline.sources.discovery import Discovery
from citeline.sources.parsers import SourceFile, reader_version
from citeline.store import catalog, file_stats
from citeline.store.documents import documents_to_plan

#: How long a file must have been unmodified when it was indexed for its time and size to vouch for it.
SETTLED_SECONDS = 2.0


def found_files(files: Sequence[SourceFile]) -> pa.Table:
    """Each file's ``root``, ``source_file``, ``size``, ``mtime``, the ``encoding`` the run reads it in (None:
    detected), a remote object's ``stamp`` (its listing's, with its size and time) and the ``reader`` version of
    its format (``citeline.sources.registry.READER_VERSIONS``): the table
    ``file_stats.fresh_files`` joins against the catalog. A file that cannot be stat'ed is left out (never fresh:
    parsing reads and reports it)."""
    stats: list[tuple[SourceFile, int, float]] = []
    for source in files:
        if source.size is not None:  # a remote object: its listing's size and time, never a download
            stats.append((source, source.size, source.mtime or 0.0))
            continue
        try:
            stat = os.stat(source.path)
        except OSError:
            continue
        stats.append((source, stat.st_size, stat.st_mtime))
    found = pa.table(
        {
            "root": pa.array([source.root for source, _, _ in stats], pa.string()),
            "source_file": pa.array([source.source_id for source, _, _ in stats], pa.string()),
            "size": pa.array([size for _, size, _ in stats], pa.int64()),
            "mtime": pa.array([mtime for _, _, mtime in stats], pa.float64()),
            "encoding": pa.array([source.encoding for source, _, _ in stats], pa.string()),
            "stamp": pa.array([source.stamp for source, _, _ in stats], pa.string()),
            "reader": pa.array([reader_version(source) for source, _, _ in stats], pa.int32()),
        }
    )
    return found


def unchanged_files(
    index_dir: Path, roots: Sequence[str], files: Sequence[SourceFile]
) -> tuple[ParsedBatch, list[SourceFile]]:
    """A :class:`ParsedBatch` standing for the files that need not be read again (``fresh_files`` and their
    ``fresh_documents``), and the files that must be read."""
    if not files or not catalog.db_path(index_dir).exists():
        return ParsedBatch(), list(files)
    found = found_files(files)
    with contextlib.closing(catalog.connect(index_dir, read_only=True)) as connection:
        rows = file_stats.fresh_files(connection, found, SETTLED_SECONDS)
    fresh = {(root, source_file): documents for root, source_file, documents, is_fresh in rows if is_fresh}
    batch = ParsedBatch(fresh_files=sorted(fresh), fresh_documents=sum(fresh.values()))
    to_read = [source for source in files if (source.root, source.source_id) not in fresh]
    return batch, to_read


def plan(index_dir: Path, roots: Sequence[str], discovery: Discovery, parsed: ParsedBatch) -> Plan:
    """The run's plan, loading of the catalog only the documents outside ``parsed.fresh_files`` (those of files
    read again or vanished) and every root's document count (the removal guard's), both in SQL. Given texts
    (``parsed.given``) are planned against the stored versions of their ids only (``texts.plan``), an explicit
    removal (``parsed.removing``) is the documents its selectors match (``removal.plan``): every run plans here,
    so a sharded root's shards plan each kind as a plain index does."""
    if parsed.removing:
        return removal.plan(index_dir, list(roots), parsed.removing)
    if parsed.given:
        return texts.plan(index_dir, roots, discovery, parsed)
    with contextlib.closing(catalog.connect(index_dir, read_only=True)) as connection:
        stored, stored_by_root = documents_to_plan(connection, sorted(set(roots)), parsed.fresh_files)
    return plan_changes(stored, roots, discovery, parsed, stored_by_root)
