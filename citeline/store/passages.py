"""Passage rows: what a search result and a filter read about a chunk, beside each lexical segment.

Each lexical segment folder (``seg.<g>.<k>/``, :mod:`citeline.lexical.segments`) holds ``rows.arrow``: an Arrow IPC
file with one row per chunk of the segment, in the segment's order (ascending chunk id), carrying the chunk's row
(text included) joined with its document's (``catalog.PASSAGE_COLUMNS``). The file is written with the segment, in
the same staged folder, so it is published, checksummed, merged, compacted and removed with it, and the deletions a
generation's BM25 folder records for a segment are the deletions of its rows. A reader memory-maps the files of the
segments its generation lists (:func:`open_segments`): opening costs the same at 1M chunks as at 10k, and a query
touches only the pages of the rows it returns (or, with filters, of the columns the filter reads).

Why not DuckDB point lookups per query: a reader holding ``meta.duckdb`` open blocks writers (and waits behind a
commit's exclusive lock, seconds long), and a query's rows would come from whatever generation the catalog is at
then. The rows files belong to one generation's segments and stay readable after a writer unlinks them.

Indexes written before these files (no ``rows.arrow`` in a segment, or a 0.1.0 BM25 folder) are read from an
in-memory copy of the catalog's passage rows instead (:meth:`Passages.of_table`); the next commit or
``citeline rebuild`` writes the files. The SQL here runs on these Arrow rows, never on the catalog.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from citeline.errors import IndexCorruptError
from citeline.lexical.segments import LexicalFolder, SegmentedIndex
from citeline.store import catalog
from citeline.store.documents import count_facets
from citeline.util.arrays import unique

if TYPE_CHECKING:
    import duckdb

    from citeline.store.documents import FacetCounts
    from citeline.store.filters import Filters

ROWS_FILE = "rows.arrow"
_UNIT_MICROSECONDS = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0.001}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def write(folder: Path, batches: pa.RecordBatchReader) -> int:
    """Write ``batches`` (the segment's passage rows, in its chunk id order) as ``folder/rows.arrow``; returns the
    row count. Streams: memory holds one batch at a time."""
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    with pa.OSFile(str(folder / ROWS_FILE), "wb") as sink, pa.ipc.new_file(sink, batches.schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
            count += batch.num_rows
    return count


#: Rows a merged rows file is written in at a time (the batch size the catalog's rows are written in).
MERGE_BATCH_ROWS = 65_536


def write_merged(folder: Path, sources: Sequence[tuple[Path | pa.Table, np.ndarray, np.ndarray]]) -> int:
    """Write ``folder/rows.arrow``: the live rows of ``sources`` in ascending chunk id order, as a merged segment
    holds them. A source is a segment folder whose rows file is read (or its rows, in memory), its segment's chunk
    ids (ascending, one per row) and its live mask. Streams: each source is read a record batch at a time (never
    memory-mapped, so none of its pages count towards the process's resident memory), and :data:`MERGE_BATCH_ROWS`
    rows are written at a time. Returns the row count."""
    with ExitStack() as files:  # each source's rows file is closed however the write ends (a full disk)
        cursors = [files.enter_context(_Cursor(source, chunk_ids, live)) for source, chunk_ids, live in sources]
        return _write_merged(folder, cursors)


def _write_merged(folder: Path, cursors: list[_Cursor]) -> int:
    counts = [len(cursor.live_ids) for cursor in cursors]
    owner = np.repeat(np.arange(len(cursors)), counts)
    ids = np.concatenate([cursor.live_ids for cursor in cursors] or [np.zeros(0, np.int64)])
    order = np.argsort(ids, kind="stable")
    owner = owner[order]
    if not cursors:
        raise ValueError("a merged rows file needs at least one source")
    schema = cursors[0].schema
    folder.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(folder / ROWS_FILE), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for start in range(0, len(order), MERGE_BATCH_ROWS):
            owners = owner[start : start + MERGE_BATCH_ROWS]
            # Each source's next rows, source by source; then interleaved back into chunk id order.
            wanted = np.bincount(owners, minlength=len(cursors))
            table = pa.concat_tables(
                [cursors[number].take(int(count)).cast(schema) for number, count in enumerate(wanted) if count]
            )
            if np.count_nonzero(wanted) > 1:
                grouped = np.argsort(owners, kind="stable")
                inverse = np.empty(len(grouped), dtype=np.int64)
                inverse[grouped] = np.arange(len(grouped))
                table = table.take(pa.array(inverse))
            for batch in table.combine_chunks().to_batches():
                writer.write_batch(batch)
    return len(order)


class _Cursor:
    """The live rows of one source, read in order a record batch at a time."""

    def __init__(self, source: Path | pa.Table, chunk_ids: np.ndarray, live: np.ndarray):
        self._name = str(source / ROWS_FILE) if isinstance(source, Path) else "rows"
        self._file: pa.NativeFile | None = None
        if isinstance(source, pa.Table):
            self.schema, self._batches = source.schema, iter(source.to_batches())
        else:
            try:
                self._file = pa.OSFile(self._name)
                arrow_file = pa.ipc.open_file(self._file)
            except (OSError, pa.ArrowInvalid) as exc:
                self.close()
                raise IndexCorruptError(f"{self._name} cannot be read ({exc}); run `citeline rebuild`") from exc
            self.schema = arrow_file.schema
            self._batches = (arrow_file.get_batch(number) for number in range(arrow_file.num_record_batches))
        self._ids, self._live = np.asarray(chunk_ids, dtype=np.int64), np.asarray(live, dtype=bool)
        self.live_ids = self._ids[self._live]
        self._read, self._held = 0, 0
        self._pending: list[pa.Table] = []

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the rows file (a no-op for rows in memory)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def take(self, count: int) -> pa.Table:
        """The next ``count`` live rows (``IndexCorruptError`` if the rows are not its segment's)."""
        while self._held < count:
            batch = next(self._batches, None)
            expected = self._ids[self._read : self._read + (batch.num_rows if batch is not None else 0)]
            if batch is None or not np.array_equal(batch.column("chunk_id").to_numpy(), expected):
                raise IndexCorruptError(f"{self._name} does not hold its segment's rows; run `citeline rebuild`")
            mask = self._live[self._read : self._read + batch.num_rows]
            self._read += batch.num_rows
            table = pa.Table.from_batches([batch])
            if not mask.all():
                table = table.filter(pa.array(mask))
            self._pending.append(table)
            self._held += table.num_rows
        held = pa.concat_tables(self._pending)
        self._pending, self._held = [held.slice(count)], held.num_rows - count
        return held.slice(0, count)


def read(folder: Path) -> pa.Table:
    """The rows of one segment folder, memory-mapped (nothing is read until used)."""
    path = folder / ROWS_FILE
    try:
        return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
    except (OSError, pa.ArrowInvalid) as exc:
        raise IndexCorruptError(f"{path} cannot be read ({exc}); run `citeline rebuild`") from exc


def present(index_dir: Path, lexical: LexicalFolder) -> bool:
    """Whether every segment ``lexical`` lists has its rows file (False for a BM25 folder from before segments)."""
    return isinstance(lexical, SegmentedIndex) and all(
        (index_dir / str(part.name) / ROWS_FILE).is_file() for part in lexical.parts
    )


@dataclass
class _Part:
    chunk_ids: np.ndarray  #: ascending, one per row of ``rows``
    live: np.ndarray | None  #: boolean mask, None when every row is live
    rows: pa.Table

    @cached_property
    def _batches(self) -> tuple[list[pa.RecordBatch], np.ndarray]:
        batches = self.rows.to_batches()
        return batches, np.cumsum([0] + [batch.num_rows for batch in batches])

    @cached_property
    def _values_at(self) -> list[list[tuple[str, Callable[[int], Any]]]]:
        batches, _ = self._batches
        return [[(f.name, _value_at(f, c)) for f, c in zip(b.schema, b.columns, strict=True)] for b in batches]

    def value(self, name: str) -> Callable[[int], Any]:
        """The function giving column ``name``'s value at a position of this part (from the buffers, as :meth:`row`)."""
        _, starts = self._batches
        values_at = [dict(per_batch)[name] for per_batch in self._values_at]
        if len(values_at) == 1:
            return values_at[0]

        def read(position: int) -> Any:
            number = int(np.searchsorted(starts, position, side="right")) - 1
            return values_at[number](position - int(starts[number]))

        return read

    def row(self, position: int) -> dict[str, Any]:
        """One row as a dict, each value read straight from the mapped buffers (:func:`_value_at`: a few times
        cheaper than ``column[offset].as_py()`` per value or a slice's ``to_pylist``, and ``Table.take`` imports
        ``pyarrow.compute``; figures: docs/performance.md#choices-measured-in-the-code)."""
        _, starts = self._batches
        number = int(np.searchsorted(starts, position, side="right")) - 1
        offset = position - int(starts[number])
        return {name: read(offset) for name, read in self._values_at[number]}


def _value_at(field: pa.Field, column: pa.Array) -> Callable[[int], Any]:
    """A function reading value ``i`` of ``column`` as a Python object, from its buffers (zero-copy views of the
    memory map, so only the pages of the values read are touched). Strings, integers, floats and timestamps are
    read this way; any other type by ``column[i].as_py()``. Timestamps with a time zone are converted here:
    pyarrow's own conversion imports pandas to resolve the zone (a third of a cold search), though UTC needs
    none."""
    kind, base = field.type, column.offset
    buffers = column.buffers()
    if column.null_count == 0 or buffers[0] is None:
        valid: Callable[[int], bool] = lambda i: True  # noqa: E731
    else:
        bits = memoryview(buffers[0])

        def valid(i: int) -> bool:
            at = base + i
            return bool(bits[at >> 3] >> (at & 7) & 1)

    if pa.types.is_string(kind):
        offsets = np.frombuffer(buffers[1], dtype=np.int32)
        data = memoryview(buffers[2]) if buffers[2] is not None else memoryview(b"")

        def text(i: int) -> str | None:
            if not valid(i):
                return None
            return str(data[offsets[base + i] : offsets[base + i + 1]], "utf-8")

        return text
    if pa.types.is_timestamp(kind) and kind.tz:
        stamps = np.frombuffer(buffers[1], dtype=np.int64)
        unit = _UNIT_MICROSECONDS[kind.unit]
        return lambda i: _EPOCH + timedelta(microseconds=int(stamps[base + i]) * unit) if valid(i) else None
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        code = "f" if pa.types.is_floating(kind) else "i" if pa.types.is_signed_integer(kind) else "u"
        values = np.frombuffer(buffers[1], dtype=f"{code}{kind.bit_width // 8}")
        return lambda i: values[base + i].item() if valid(i) else None
    return lambda i: column[i].as_py()


#: The facets' rows of one part: each selected document's metadata, from its first chunk's row (one row a document).
_FACET_ROWS = "SELECT d.chunk_id, d.doc_id, d.format, d.metadata FROM {{rows}} d WHERE d.ordinal = 0 AND ({condition})"


#: Filters whose chunk ids a generation's rows keep (oldest dropped first): the rows never change, so a filter asked
#: again (a scoped token's every search, a page's facet links) costs a dict lookup instead of a query.
_ALLOWED_KEPT = 64


class Passages:
    """The passage rows of one generation: per segment, its sorted chunk ids, deletions and memory-mapped rows."""

    def __init__(self, parts: Sequence[_Part]):
        self._parts = list(parts)
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()
        self._documents: int | None = None
        self._facets: FacetCounts | None = None
        #: the chunk ids of the filters asked lately (a token's scope is asked on each of its searches)
        self._allowed: dict[Filters, np.ndarray] = {}

    @classmethod
    def open_segments(cls, index_dir: Path, lexical: SegmentedIndex) -> Passages:
        """The rows files of the segments ``lexical`` lists, memory-mapped; raises :class:`IndexCorruptError` if
        one does not hold its segment's rows."""
        parts = []
        for part in lexical.parts:
            rows = read(index_dir / str(part.name))
            ids = part.segment.chunk_ids
            if rows.num_rows != len(ids) or (len(ids) and rows.column("chunk_id")[0].as_py() != int(ids[0])):
                raise IndexCorruptError(
                    f"{index_dir / str(part.name) / ROWS_FILE} does not hold its segment's rows; run `citeline rebuild`"
                )
            parts.append(_Part(ids, part.live if len(part.deleted) else None, rows))
        return cls(parts)

    @classmethod
    def of_table(cls, rows: pa.Table) -> Passages:
        """Rows read whole from the catalog (ascending chunk id): an index written before the rows files."""
        return cls([_Part(rows.column("chunk_id").to_numpy().astype(np.int64), None, rows)])

    def live_parts(self) -> Iterator[tuple[np.ndarray, pa.Table]]:
        """Per segment, its live chunk ids (ascending) and their rows (``verify`` compares them with the catalog's,
        one segment in memory at a time)."""
        for part in self._parts:
            if part.live is None:
                yield part.chunk_ids, part.rows
            else:
                yield part.chunk_ids[part.live], part.rows.filter(pa.array(part.live))

    def rows(self, chunk_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The passage row of each chunk id (chunk columns, document columns; ``document_doc_id`` and
        ``document_run_id`` for the document's clashing ones). Ids this generation does not hold are left out, and
        so are chunks whose document row is missing (a damaged catalog, which ``verify`` reports)."""
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        found: dict[int, dict[str, Any]] = {}
        for part in self._parts:
            where = _matching(part, wanted)
            if not len(where):
                continue
            for position in where.tolist():
                row = part.row(position)
                if row["document_doc_id"] is not None:
                    found[row["chunk_id"]] = row
        return found

    def doc_ids(self, chunk_ids: Sequence[int]) -> dict[int, str]:
        """The document id of each live chunk id held (one column read from the maps: cheaper than :meth:`rows`
        when only the documents matter)."""
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        found: dict[int, str] = {}
        for part in self._parts:
            where = _matching(part, wanted)
            if len(where):
                # Read from the buffers (:func:`_value_at`), not ``column[position].as_py()`` per value, which was
                # most of collapse's lookup of copies (docs/performance.md#choices-measured-in-the-code).
                doc = part.value("doc_id")
                found.update(zip(part.chunk_ids[where].tolist(), map(doc, where.tolist()), strict=True))
        return found

    def chunk_documents(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str, str, int]]:
        """``(doc_id, content_hash, ordinal)`` of each live chunk id held: three columns read from the maps (the
        hybrid document signals group hundreds of candidates a query with it, too many to read whole rows)."""
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        found: dict[int, tuple[str, str, int]] = {}
        for part in self._parts:
            where = _matching(part, wanted)
            if not len(where):
                continue
            batches, starts = part._batches
            numbers = np.searchsorted(starts, where, side="right") - 1
            names = batches[0].schema.names if batches else []
            columns = [names.index(name) for name in ("doc_id", "content_hash", "ordinal")]
            for position, number in zip(where.tolist(), numbers.tolist(), strict=True):
                # the row's values read by part._values_at (from the buffers, several times cheaper than as_py)
                values_at, offset = part._values_at[number], position - int(starts[number])
                found[int(part.chunk_ids[position])] = tuple(values_at[c][1](offset) for c in columns)
        return found

    def chunk_lengths(self, chunk_ids: Sequence[int]) -> dict[int, int]:
        """Each live chunk id's length in characters (``char_end - char_start``), read from the maps as
        :meth:`chunk_documents` reads its columns (the dense stage's length-weighted document centroids)."""
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        found: dict[int, int] = {}
        for part in self._parts:
            where = _matching(part, wanted)
            if len(where):
                # Vectorised over the mapped buffers: reading the two values per chunk as chunk_documents does was a
                # third of the stage's CPU (docs/performance.md#choices-measured-in-the-code).
                lengths = _integers(part, "char_end", where) - _integers(part, "char_start", where)
                found.update(zip(part.chunk_ids[where].tolist(), lengths.tolist(), strict=True))
        return found

    def document_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The whole-document vector stored on each of ``chunk_ids`` (documents' first chunks) that has one: an
        index without the ``document_vector`` column, or a chunk without a vector, is left out."""
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        found: dict[int, np.ndarray] = {}
        for part in self._parts:
            where = _matching(part, wanted)
            if not len(where) or "document_vector" not in part.rows.column_names:
                continue
            batches, starts = part._batches
            numbers = np.searchsorted(starts, where, side="right") - 1
            for position, number in zip(where.tolist(), numbers.tolist(), strict=True):
                value = batches[number].column("document_vector")[position - int(starts[number])]
                if value.is_valid:
                    found[int(part.chunk_ids[position])] = value.values.to_numpy(zero_copy_only=False)
        return found

    def _query(self, sql: str, params: list[Any]) -> dict[str, np.ndarray]:
        # Per part: the matching rows, then only the live ones (the SQL cannot see a segment's deletions); the
        # columns come back ordered by chunk id. DuckDB scans the memory-mapped Arrow rows in place, reading only
        # the columns the query names.
        found: list[dict[str, np.ndarray]] = []
        with self._lock:
            if self._connection is None:
                import duckdb

                self._connection = duckdb.connect(":memory:")
            for number, part in enumerate(self._parts):
                name = f"passages_{number}"
                self._connection.register(name, part.rows)
                try:
                    columns = self._connection.execute(sql.format(rows=name), params).fetchnumpy()
                finally:
                    self._connection.unregister(name)
                ids = np.asarray(columns["chunk_id"], dtype=np.int64)
                keep = (
                    np.ones(len(ids), dtype=bool)
                    if part.live is None
                    else part.live[np.searchsorted(part.chunk_ids, ids)]
                )
                found.append({key: np.asarray(values)[keep] for key, values in {**columns, "chunk_id": ids}.items()})
        if not found:
            return {"chunk_id": np.zeros(0, dtype=np.int64)}
        merged = {key: np.concatenate([columns[key] for columns in found]) for key in found[0]}
        order = np.argsort(merged["chunk_id"], kind="stable")
        return {key: values[order] for key, values in merged.items()}

    def allowed(self, filters: Filters) -> np.ndarray | None:
        """The sorted chunk ids (int64) ``filters`` lets through, or None when it restricts nothing."""
        if not filters:
            return None
        try:
            known = self._allowed.get(filters)
        except TypeError:  # a value that cannot be hashed (a list inside a hand-built Filters): not kept
            known, filters_key = None, None
        else:
            filters_key = filters
        if known is not None:
            return known
        condition, params = filters.to_sql()
        ids = self._query(f"SELECT d.chunk_id FROM {{rows}} d WHERE ({condition})", params)["chunk_id"]
        allowed = np.ascontiguousarray(ids, dtype=np.int64)
        allowed.flags.writeable = False  # shared by the searches that ask the same filters
        if filters_key is not None:
            if len(self._allowed) >= _ALLOWED_KEPT:
                self._allowed.pop(next(iter(self._allowed)))
            self._allowed[filters_key] = allowed
        return allowed

    def facet_counts(self, filters: Filters, doc_ids: Sequence[str] | None = None) -> FacetCounts:
        """The documents per value of every top-level metadata field (``citeline.store.documents.Facet``), over the
        live documents ``filters`` selects and, given ``doc_ids``, only those. The filter is SQL over the mapped
        rows (one row a document: its first chunk's); each document's metadata is then read as the listing reads
        it (``metadata.split_metadata``: citeline's own fields are not metadata) and counted
        (``documents.count_facets``). The unfiltered counts are kept (a generation's rows do not change).

        Why not count in SQL: DuckDB's JSON functions over every document (keys, values, list items) cost ten times
        selecting the metadata text and parsing it here (docs/performance.md#choices-measured-in-the-code)."""
        whole = not filters and doc_ids is None
        if whole and self._facets is not None:
            return self._facets
        condition, params = filters.to_sql()
        if doc_ids is not None:
            condition, params = f"({condition}) AND d.doc_id IN (SELECT unnest(?::VARCHAR[]))", [*params, list(doc_ids)]
        columns = self._query(_FACET_ROWS.format(condition=condition), params)
        counts = count_facets(zip(columns.get("format", ()), columns.get("metadata", ()), strict=True))
        if whole:
            self._facets = counts
        return counts

    def root_chunks(self, root: str) -> list[tuple[int, str]]:
        """``(chunk_id, source_id)`` of every chunk of the documents ingested from ``root``, by chunk id."""
        columns = self._query("SELECT chunk_id, source_id FROM {rows} WHERE source_root = ?", [root])
        if "source_id" not in columns:
            return []
        return list(zip(columns["chunk_id"].tolist(), [str(value) for value in columns["source_id"]], strict=True))

    def document_count(self) -> int:
        """Live documents (their ordinal-0 chunks), counted once (a generation's rows do not change): the document
        BM25 signal's mean document length is the corpus's, not the candidates' (``citeline.query.doc_signals``).

        Counted with numpy over the mapped ``ordinal`` column and the segments' live masks, not by SQL: the SQL count
        weighed on each reader's first hybrid search and imported DuckDB into a search process; this reads one
        mapped int32 column (figures: docs/performance.md#choices-measured-in-the-code)."""
        if self._documents is None:
            self._documents = sum(_first_chunks(part) for part in self._parts)
        return self._documents

    def close(self) -> None:
        """Close the connection filters ran on."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def _first_chunks(part: _Part) -> int:
    # The live rows of ``part`` whose ordinal is 0, one record batch at a time, read from the column's buffers
    # (views of the map): pyarrow's to_numpy imports pandas, a large share of a reader's first hybrid search.
    count, start = 0, 0
    for chunk in part.rows.column("ordinal").chunks:
        values, valid = _int_column(chunk)
        first = values == 0
        if valid is not None:
            first &= valid
        if part.live is not None:
            first &= part.live[start : start + len(chunk)]
        count += int(np.count_nonzero(first))
        start += len(chunk)
    return count


def _integers(part: _Part, name: str, where: np.ndarray) -> np.ndarray:
    # Integer column ``name`` of ``part`` at positions ``where`` (int64; a null reads 0), from the buffers of each
    # record batch the positions fall in (views of the map, as _first_chunks reads them).
    batches, starts = part._batches
    numbers = np.searchsorted(starts, where, side="right") - 1
    out = np.zeros(len(where), dtype=np.int64)
    for number in unique(numbers).tolist():  # not np.unique: it imports numpy.ma on a cold search
        chosen = numbers == number
        values, valid = _int_column(batches[number].column(name))
        at = where[chosen] - int(starts[number])
        read = values[at].astype(np.int64)
        if valid is not None:
            read[~valid[at]] = 0
        out[chosen] = read
    return out


def _int_column(column: Any) -> tuple[np.ndarray, np.ndarray | None]:
    # A signed integer Arrow array's values as a view of its buffer, and its validity as booleans (None: no nulls).
    validity, data = column.buffers()[:2]
    width = column.type.bit_width // 8
    values = np.frombuffer(data, dtype=f"i{width}", count=len(column), offset=column.offset * width)
    if not column.null_count or validity is None:
        return values, None
    bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
    return values, bits[column.offset : column.offset + len(column)].astype(bool)


def _matching(part: _Part, wanted: np.ndarray) -> np.ndarray:
    # Positions in ``part`` of the wanted ids it holds live, in ``wanted``'s order.
    where = np.searchsorted(part.chunk_ids, wanted)
    inside = where < len(part.chunk_ids)
    where, values = where[inside], wanted[inside]
    where = where[part.chunk_ids[where] == values]
    return where if part.live is None else where[part.live[where]]


def problems(
    index_dir: Path,
    lexical: LexicalFolder,
    batches_of: Callable[[np.ndarray], AbstractContextManager[pa.RecordBatchReader]],
) -> list[str]:
    """Problems with the rows files of the segments ``lexical`` lists: one missing while others exist, or rows
    other than those ``batches_of(live chunk ids)`` streams (a context manager: the catalog's, compared a batch at
    a time). An index without any (written before them) has none."""
    if not isinstance(lexical, SegmentedIndex) or not lexical.parts:
        return []
    missing = [str(part.name) for part in lexical.parts if not (index_dir / str(part.name) / ROWS_FILE).is_file()]
    if len(missing) == len(lexical.parts):
        return []
    if missing:
        return [f"{missing[0]}/{ROWS_FILE} is missing; run `citeline rebuild` to restore it"]
    try:
        passages = Passages.open_segments(index_dir, lexical)
    except IndexCorruptError as exc:
        return [str(exc).replace(str(index_dir) + "/", "")]
    for (ids, rows), part in zip(passages.live_parts(), lexical.parts, strict=True):
        offset = 0
        with batches_of(ids) as batches:  # closed here even when the comparison stops early
            for batch in batches:
                expected = pa.Table.from_batches([batch])
                if not rows.slice(offset, batch.num_rows).equals(expected):
                    offset = -1
                    break
                offset += batch.num_rows
        if offset != rows.num_rows:
            return [f"{part.name}/{ROWS_FILE} holds other passage rows than {catalog.DB_FILE}; run `citeline rebuild`"]
    return []
