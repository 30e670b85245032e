"""The ingestion pipeline as plain functions: discover ─► parse ─► plan ─► chunk ─► embed ─► commit.

:meth:`citeline.Index.ingest` runs them in one process; ``flows/ingest.py`` runs the same functions as Prefect
tasks. Each step takes and returns plain data so it can be tested, cached or shipped to a worker on its own.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from citeline import store
from citeline.chunking import Chunker
from citeline.errors import SourceError
from citeline.sources import (
    DEFAULT_MAX_FILE_BYTES,
    Document,
    SourceFile,
    discover,
    parse,
    resolve_roots,
    text_hash,
)


@dataclass(frozen=True)
class FileError:
    """A file that could not be ingested, and why."""

    path: str
    reason: str


@dataclass
class ParsedBatch:
    """What parsing a batch of files produced."""

    documents: list[Document] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)

    @classmethod
    def merge(cls, batches: Iterable[ParsedBatch]) -> ParsedBatch:
        """One batch holding the documents and errors of all ``batches``, in order."""
        merged = cls()
        for batch in batches:
            merged.documents.extend(batch.documents)
            merged.errors.extend(batch.errors)
        return merged


@dataclass
class Plan:
    """What a run must change: documents to (re)index, documents to remove, and the counts for the ledger."""

    roots: list[str]
    to_index: list[Document]
    remove_doc_ids: list[str]
    added: int
    updated: int
    unchanged: int
    errors: list[FileError]

    @property
    def removed(self) -> int:
        """Documents removed because they vanished (not those replaced by a new version)."""
        return len(self.remove_doc_ids) - self.updated


@dataclass
class RunSummary:
    """One row of the run ledger."""

    run_id: str
    started_at: str
    finished_at: str | None
    status: str
    roots: list[str]
    generation: int | None
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready data."""
        return asdict(self)


def new_run_id() -> str:
    """A sortable, unique run id: UTC timestamp plus random suffix."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def utc_now() -> str:
    """The current time in ISO 8601, UTC."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def parse_files(files: Sequence[SourceFile], *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> ParsedBatch:
    """Parse each file; a file that fails becomes a :class:`FileError` and the rest go on."""
    batch = ParsedBatch()
    for source in files:
        try:
            batch.documents.extend(parse(source, max_file_bytes=max_file_bytes))
        except SourceError as exc:
            batch.errors.append(FileError(exc.path, exc.reason))
        except Exception as exc:  # a parser library's own failure must not stop the run
            batch.errors.append(FileError(source.path, f"{type(exc).__name__}: {exc}"))
    return batch


def plan_changes(
    connection: duckdb.DuckDBPyConnection,
    roots: Sequence[str],
    files: Sequence[SourceFile],
    parsed: ParsedBatch,
) -> Plan:
    """Compare parsed documents with the index: new, changed, unchanged, and vanished from the ingested roots.

    Removal is scoped to the roots of this run. A document whose file failed to parse this time is kept as it
    was: a transient read error must never delete what was indexed before.
    """
    roots = sorted(set(roots))
    stored: dict[str, tuple[str, str, str]] = {}
    if roots:
        for doc_id, source_root, source_file, content_hash in connection.execute(
            "SELECT doc_id, source_root, source_file, content_hash FROM documents WHERE source_root = ANY(?)",
            [roots],
        ).fetchall():
            stored[doc_id] = (source_root, source_file, content_hash)

    seen: dict[str, Document] = {}
    for document in parsed.documents:
        seen[document.doc_id] = document  # a repeated record id within a file: the last one wins
    to_index = [doc for doc_id, doc in seen.items() if stored.get(doc_id, ("", "", ""))[2] != doc.content_hash]
    updated_ids = [doc.doc_id for doc in to_index if doc.doc_id in stored]
    failed_files = {(source.root, source.source_id) for source in files if source.path in _error_paths(parsed)}
    vanished = [
        doc_id
        for doc_id, (root, source_file, _) in stored.items()
        if doc_id not in seen and (root, source_file) not in failed_files
    ]
    return Plan(
        roots=roots,
        to_index=to_index,
        remove_doc_ids=updated_ids + vanished,
        added=len(to_index) - len(updated_ids),
        updated=len(updated_ids),
        unchanged=len(seen) - len(to_index),
        errors=list(parsed.errors),
    )


def _error_paths(parsed: ParsedBatch) -> set[str]:
    return {error.path for error in parsed.errors}


def chunk_id_for(doc_id: str, content_hash: str, ordinal: int) -> int:
    """A stable 63-bit chunk id, so an incremental build and a fresh build give the same ids."""
    digest = hashlib.blake2b(f"{doc_id}\0{content_hash}\0{ordinal}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF


def chunk_documents(documents: Sequence[Document], chunker: Chunker) -> store.ChunkRows:
    """Chunk every document; vectors are left empty for :func:`embed_chunks` to fill."""
    rows = store.ChunkRows.empty()
    all_spans = chunker.split_many([(document.text, document.format == "markdown") for document in documents])
    for document, spans in zip(documents, all_spans, strict=True):
        content_hash = document.content_hash
        page_starts: list[int] = document.metadata.get("page_starts") or []
        for span in spans:
            rows.chunk_id.append(chunk_id_for(document.doc_id, content_hash, span.ordinal))
            rows.doc_id.append(document.doc_id)
            rows.ordinal.append(span.ordinal)
            rows.char_start.append(span.char_start)
            rows.char_end.append(span.char_end)
            rows.text.append(span.text)
            rows.text_hash.append(text_hash(span.text))
            # Pages are 1-based; page_starts[i] is the character offset where page i+1 begins.
            rows.page.append(bisect.bisect_right(page_starts, span.char_start) if page_starts else None)
    return rows


def cached_vectors(
    connection: duckdb.DuckDBPyConnection, hashes: Sequence[str], dimension: int
) -> dict[str, np.ndarray]:
    """Vectors already in the index for chunk texts with these hashes (the embedding cache).

    An index holds one model, so the chunks table keyed by text hash *is* a cache keyed by
    (model fingerprint, text hash).
    """
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    table = connection.sql(
        "SELECT text_hash, any_value(vector) AS vector FROM chunks WHERE text_hash = ANY(?) GROUP BY text_hash",
        params=[wanted],
    ).to_arrow_table()
    vectors = store.arrow_to_vectors(table.column("vector"), dimension)
    return dict(zip(table.column("text_hash").to_pylist(), vectors, strict=True))


def embed_chunks(
    rows: store.ChunkRows,
    encode: Callable[[list[str]], np.ndarray],
    dimension: int,
    *,
    cache: dict[str, np.ndarray] | None = None,
    batch_size: int = 256,
    progress: bool = False,
) -> tuple[int, int]:
    """Fill ``rows.vectors``, embedding each distinct text once and reusing cached vectors.

    Returns ``(embedded, reused)`` chunk counts.
    """
    from tqdm.auto import tqdm

    cache = dict(cache or {})
    if progress:
        encode([" "])  # load the model before the bar starts, so its own loading output does not garble the bar
    missing = list(dict.fromkeys(h for h in rows.text_hash if h not in cache))
    text_of = dict(zip(rows.text_hash, rows.text, strict=True))
    with tqdm(total=len(missing), desc="embedding", unit="chunk", disable=not progress or not missing) as bar:
        for start in range(0, len(missing), batch_size):
            batch = missing[start : start + batch_size]
            vectors = encode([text_of[h] for h in batch])
            cache.update(zip(batch, vectors, strict=True))
            bar.update(len(batch))
    rows.vectors = (
        np.stack([cache[h] for h in rows.text_hash]).astype(np.float32)
        if len(rows)
        else np.zeros((0, dimension), dtype=np.float32)
    )
    newly_embedded = set(missing)
    embedded = sum(1 for h in rows.text_hash if h in newly_embedded)
    return embedded, len(rows) - embedded


def documents_table(documents: Sequence[Document], run_id: str, ingested_at: str) -> pa.Table:
    """Documents as an Arrow table in the ``documents`` column order."""
    return pa.table(
        {
            "doc_id": [d.doc_id for d in documents],
            "source_root": [d.source_root for d in documents],
            "source_id": [d.source_id for d in documents],
            "source_file": [d.source_file for d in documents],
            "path": [d.path for d in documents],
            "title": [d.title for d in documents],
            "format": [d.format for d in documents],
            "content_hash": [d.content_hash for d in documents],
            "text": [d.text for d in documents],
            "metadata": [json.dumps(d.metadata, ensure_ascii=False) for d in documents],
            "size_bytes": pa.array([d.size_bytes for d in documents], type=pa.int64()),
            "mtime": pa.array([d.mtime for d in documents], type=pa.float64()),
            "run_id": [run_id] * len(documents),
            "ingested_at": pa.array(
                [datetime.fromisoformat(ingested_at)] * len(documents), type=pa.timestamp("ms", tz="UTC")
            ),
        }
    )


def record_run(connection: duckdb.DuckDBPyConnection, run: RunSummary) -> None:
    """Insert or replace a run's ledger row."""
    connection.execute("DELETE FROM runs WHERE run_id = ?", [run.run_id])
    connection.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run.run_id,
            run.started_at,
            run.finished_at,
            run.status,
            json.dumps(run.roots),
            run.generation,
            run.added,
            run.updated,
            run.unchanged,
            run.removed,
            run.failed,
            run.chunks_embedded,
            run.chunks_reused,
            json.dumps(run.errors, ensure_ascii=False),
        ],
    )


def commit(
    index_dir: Path,
    connection: duckdb.DuckDBPyConnection,
    plan: Plan,
    rows: store.ChunkRows,
    run: RunSummary,
    dimension: int,
) -> int:
    """Apply ``plan`` in one transaction and publish a new generation; returns the generation now current.

    With nothing to change, only the run is recorded and the generation stays. Otherwise the FAISS file and the
    BM25 folder of the new generation are written (from the transaction's own view of the chunks) before the
    transaction commits, so DuckDB never points at a file that is not complete on disk.
    """
    connection.execute("BEGIN TRANSACTION")
    try:
        generation = int(store.read_meta(connection)["generation"])
        if plan.to_index or plan.remove_doc_ids:
            store.delete_documents(connection, plan.remove_doc_ids)
            store.insert_arrow(connection, "documents", documents_table(plan.to_index, run.run_id, run.started_at))
            store.insert_arrow(connection, "chunks", rows.to_arrow(run.run_id))
            generation += 1
            derived_meta = store.publish_generation(index_dir, generation, connection, dimension)
            store.write_meta(connection, {"generation": generation, **derived_meta})
        run.generation = generation
        run.finished_at = utc_now()
        record_run(connection, run)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    store.remove_other_generations(index_dir, generation)
    return generation


def run_markdown(run: RunSummary) -> str:
    """A run's ledger row as a Markdown report (published as a Prefect artifact by the flow)."""
    lines = [
        f"# citeline run `{run.run_id}`: {run.status}",
        "",
        "| added | updated | unchanged | removed | failed | chunks embedded | chunks reused | generation |",
        "|---|---|---|---|---|---|---|---|",
        f"| {run.added} | {run.updated} | {run.unchanged} | {run.removed} | {run.failed} | "
        f"{run.chunks_embedded} | {run.chunks_reused} | {run.generation} |",
        "",
        f"Roots: {', '.join(f'`{root}`' for root in run.roots)}",
    ]
    if run.errors:
        lines += ["", "| file | problem |", "|---|---|"]
        lines += [f"| `{e['path']}` | {e['reason'].replace('|', '/')} |" for e in run.errors]
    return "\n".join(lines) + "\n"


def summarize(run_id: str, started_at: str, plan: Plan) -> RunSummary:
    """The ledger row for a run about to commit ``plan``."""
    return RunSummary(
        run_id=run_id,
        started_at=started_at,
        finished_at=None,
        status="partial" if plan.errors else "succeeded",
        roots=plan.roots,
        generation=None,
        added=plan.added,
        updated=plan.updated,
        unchanged=plan.unchanged,
        removed=plan.removed,
        failed=len(plan.errors),
        errors=[{"path": e.path, "reason": e.reason} for e in plan.errors],
    )


__all__ = [
    "Document",
    "FileError",
    "ParsedBatch",
    "Plan",
    "RunSummary",
    "SourceFile",
    "chunk_documents",
    "commit",
    "discover",
    "embed_chunks",
    "parse_files",
    "plan_changes",
    "resolve_roots",
]
