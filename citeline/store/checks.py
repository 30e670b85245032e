"""The catalog's consistency queries: what ``verify``'s invariants count (chunks without documents, offsets that
do not match, rows that repeat a key) and what ``rebuild`` repairs (duplicate rows, missing primary keys). SQL of
the catalog's tables, kept beside ``catalog.py`` so that each stays under 500 lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: a search that reads meta.json never loads DuckDB (store/meta_cache.py)
    import duckdb

#: Each table and the column that identifies its rows (its primary key in indexes created since the keys).
KEYS = {"index_meta": "key", "documents": "doc_id", "chunks": "chunk_id", "runs": "run_id"}


def duplicate_rows(connection: duckdb.DuckDBPyConnection, with_runs: bool = True) -> dict[str, int]:
    """For each table, how many rows repeat a key already taken by another row (0 everywhere in a sound index).
    ``with_runs=False`` leaves the runs table out (a damaged ledger is reported on its own)."""
    return {
        table: int(connection.execute(f"SELECT count(*) - count(DISTINCT {key}) FROM {table}").fetchall()[0][0])
        for table, key in KEYS.items()
        if with_runs or table != "runs"
    }


def remove_duplicate_rows(connection: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Delete rows that repeat a key, keeping the newest run's (inside the caller's transaction); returns how many
    rows each table lost.

    A document kept from run R keeps the chunks written with it (a chunk's ``run_id`` is its document's): chunks
    of that document's other, dropped versions go too, so offsets stay exact. Other chunk rows that repeat a chunk
    id are identical copies; the newest stays. Ledger rows: a finished run's row wins over an unfinished one.
    """
    before = duplicate_rows(connection)
    if not any(before.values()):
        return before
    twice = [
        row[0]
        for row in connection.execute("SELECT doc_id FROM documents GROUP BY doc_id HAVING count(*) > 1").fetchall()
    ]
    order = {
        "index_meta": "rowid DESC",
        "documents": "ingested_at DESC, run_id DESC, rowid DESC",
        "chunks": "run_id DESC, rowid DESC",
        "runs": "finished_at DESC NULLS LAST, rowid DESC",
    }
    removed = {}
    for table, key in KEYS.items():
        if not before[table] and table != "chunks":
            removed[table] = 0
            continue
        count = int(connection.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])
        if table == "chunks" and twice:
            connection.execute(
                "DELETE FROM chunks c WHERE c.doc_id = ANY(?) AND c.run_id <> (SELECT any_value(d.run_id) FROM "
                "documents d WHERE d.doc_id = c.doc_id)",
                [twice],
            )
        connection.execute(
            f"DELETE FROM {table} WHERE rowid NOT IN (SELECT rowid FROM (SELECT rowid, row_number() OVER "
            f"(PARTITION BY {key} ORDER BY {order[table]}) AS n FROM {table}) WHERE n = 1)"
        )
        removed[table] = count - int(connection.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])
    return removed


def add_primary_keys(connection: duckdb.DuckDBPyConnection) -> list[str]:
    """Give the tables of an index created before the primary keys their keys; returns the tables changed.

    Run it outside a transaction, after duplicates were removed and committed (DuckDB checks a new key against
    the rows a transaction has deleted too).
    """
    keyed = {
        row[0]
        for row in connection.execute(
            "SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'"
        ).fetchall()
    }
    changed = [table for table in KEYS if table not in keyed]
    for table in changed:
        connection.execute(f"ALTER TABLE {table} ADD PRIMARY KEY ({KEYS[table]})")
    return changed


def dangling_chunks(connection: duckdb.DuckDBPyConnection) -> int:
    """Chunk rows whose document row is missing."""
    return int(
        connection.execute("SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT doc_id FROM documents)").fetchall()[
            0
        ][0]
    )


def offset_mismatches(connection: duckdb.DuckDBPyConnection, limit: int = 5) -> tuple[int, list[int]]:
    """Chunks whose text is not ``document_text[char_start:char_end]``: how many, and the first few ids.

    DuckDB's ``substring`` counts characters (code points) from 1, as Python's slices count them from 0.
    """
    rows = connection.execute(
        "SELECT c.chunk_id FROM chunks c JOIN documents d USING (doc_id) "
        "WHERE substring(d.text, c.char_start + 1, c.char_end - c.char_start) IS DISTINCT FROM c.text "
        "ORDER BY c.chunk_id"
    ).fetchall()
    return len(rows), [int(row[0]) for row in rows[:limit]]
