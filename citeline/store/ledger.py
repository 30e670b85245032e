"""The run ledger: one row per ingestion run in ``meta.duckdb``'s ``runs`` table (this module owns that table)."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from citeline.errors import IndexCorruptError
from citeline.store.connection import argument_error, check_rows
from citeline.util.output import iso_utc

if TYPE_CHECKING:  # imported where used: a search that reads meta.json never loads DuckDB (store/meta_cache.py)
    import duckdb

_TABLE = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR NOT NULL PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    status VARCHAR NOT NULL,
    roots JSON NOT NULL,
    generation BIGINT,
    added INTEGER DEFAULT 0,
    updated INTEGER DEFAULT 0,
    unchanged INTEGER DEFAULT 0,
    removed INTEGER DEFAULT 0,
    failed INTEGER DEFAULT 0,
    chunks_embedded INTEGER DEFAULT 0,
    chunks_reused INTEGER DEFAULT 0,
    errors JSON,
    unsupported INTEGER DEFAULT 0,
    excluded INTEGER DEFAULT 0,
    links_skipped INTEGER DEFAULT 0
);
"""
#: The columns added after the first ledger (issue 50): a ledger written before them gets them at its next write
#: (``ADD COLUMN IF NOT EXISTS``) and is read with 0 in them until then.
_SKIP_COLUMNS = ("unsupported", "excluded", "links_skipped")


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
    #: files discovery left out: no parser for their type, and files or folders excluded by the selection rules
    #: (``citeline.sources.selection``); stored in the ledger, as the run's summary says them
    unsupported: int = 0
    excluded: int = 0
    #: symbolic links not followed (broken, looping, leaving the root, or a second path to what is indexed):
    #: skips, not failures (``citeline.sources.discovery``); stored as the two above (the ledger said 0 while the
    #: summary said 4 before issue 50: one count, written once by ``pipeline.with_skipped``)
    links_skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready data."""
        return asdict(self)

    def to_markdown(self) -> str:
        """The run as a Markdown report (published as a Prefect artifact by the flow)."""
        lines = [
            f"# citeline run `{self.run_id}`: {self.status}",
            "",
            "| added | updated | unchanged | removed | failed | chunks embedded | chunks reused | generation |",
            "|---|---|---|---|---|---|---|---|",
            f"| {self.added} | {self.updated} | {self.unchanged} | {self.removed} | {self.failed} | "
            f"{self.chunks_embedded} | {self.chunks_reused} | {self.generation} |",
            "",
            f"Roots: {', '.join(f'`{root}`' for root in self.roots)}",
        ]
        if self.errors:
            lines += ["", "| file | problem |", "|---|---|"]
            lines += [f"| `{e['path']}` | {e['reason'].replace('|', '/')} |" for e in self.errors]
        return "\n".join(lines) + "\n"


def new_run_id() -> str:
    """A sortable, unique run id: UTC timestamp plus random suffix."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def utc_now() -> str:
    """The current time in ISO 8601, UTC, in the one form every output uses (``citeline.util.output.iso_utc``)."""
    return str(iso_utc(datetime.now(UTC)))


def create_table(connection: duckdb.DuckDBPyConnection) -> None:
    """Create the runs table of a new index (idempotent)."""
    connection.execute(_TABLE)


def record_run(connection: duckdb.DuckDBPyConnection, run: RunSummary) -> None:
    """Insert or replace a run's ledger row."""
    for column in sorted(set(_SKIP_COLUMNS) - _columns(connection)):  # a ledger from before the columns
        connection.execute(f"ALTER TABLE runs ADD COLUMN IF NOT EXISTS {column} INTEGER DEFAULT 0")
    connection.execute("DELETE FROM runs WHERE run_id = ?", [run.run_id])
    connection.execute(
        "INSERT INTO runs (run_id, started_at, finished_at, status, roots, generation, added, updated, unchanged, "
        f"removed, failed, chunks_embedded, chunks_reused, errors, {', '.join(_SKIP_COLUMNS)}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            run.unsupported,
            run.excluded,
            run.links_skipped,
        ],
    )


def mark_interrupted(connection: duckdb.DuckDBPyConnection) -> None:
    """Runs still ``running`` (their writer died between two of their commits) become ``interrupted``: called
    by the next writer, under the writer lock, so none of them is going on."""
    connection.execute("UPDATE runs SET status = 'interrupted' WHERE status = 'running'")


def read_runs(connection: duckdb.DuckDBPyConnection, limit: int) -> list[RunSummary]:
    """The newest ``limit`` runs, newest first; a damaged ledger raises :class:`IndexCorruptError` in one line, a
    ``limit`` that is not a whole number from 0 to ``MAX_ROWS`` :class:`QueryError` (checked first: DuckDB's own
    error for it would read as a damaged ledger)."""
    import duckdb  # loaded already: ``connection`` is DuckDB's

    check_rows("limit", limit, 0)
    try:
        return _read_runs(connection, limit)
    except (duckdb.Error, TypeError, ValueError, AttributeError) as exc:
        if (mistake := argument_error(exc)) is not None:
            raise mistake from exc
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise IndexCorruptError(
            f"the run ledger (the runs table of meta.duckdb) is damaged: {reason}; the index itself may be fine "
            "(`citeline verify`), restore meta.duckdb from a backup to get the ledger back"
        ) from exc


def _columns(connection: duckdb.DuckDBPyConnection) -> set[str]:
    # The runs table's columns (a ledger written before the skip columns lacks them).
    query = "SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs' AND schema_name = current_schema()"
    return {row[0] for row in connection.execute(query).fetchall()}


def _read_runs(connection: duckdb.DuckDBPyConnection, limit: int) -> list[RunSummary]:
    present = _columns(connection)
    skips = ", ".join(column if column in present else f"0 AS {column}" for column in _SKIP_COLUMNS)
    rows = connection.execute(
        "SELECT run_id, started_at, finished_at, status, roots, generation, added, updated, unchanged, removed, "
        f"failed, chunks_embedded, chunks_reused, errors, {skips} FROM runs "
        "ORDER BY started_at DESC, run_id DESC LIMIT ?",
        [limit],
    ).fetchall()
    return [
        RunSummary(
            run_id=r[0],
            started_at=str(iso_utc(r[1])),
            finished_at=iso_utc(r[2]),
            status=r[3],
            roots=json.loads(r[4]),
            generation=r[5],
            added=r[6],
            updated=r[7],
            unchanged=r[8],
            removed=r[9],
            failed=r[10],
            chunks_embedded=r[11],
            chunks_reused=r[12],
            errors=json.loads(r[13]) if r[13] else [],
            unsupported=r[14] or 0,
            excluded=r[15] or 0,
            links_skipped=r[16] or 0,
        )
        for r in rows
    ]
