"""The commit protocol, written once: how an index directory moves from one generation to the next.

Layout of an index directory::

    meta.duckdb                 the catalog (store.catalog) and the ledger (store.ledger)
    vectors.<gen>.<suffix>      a vector base written by generation <gen> (a ``citeline.vectors`` kind; flat: .faiss)
    vdelta.<gen>/               a vector delta segment written by generation <gen> (``citeline.vectors.segments``)
    bm25.<gen>/                 the BM25 folder of a generation (``citeline.lexical.analyzer``): which segments,
    deletions
    seg.<gen>.<k>/              an immutable lexical segment, written by generation <gen>, listed by later ones
    db.lock, db.gate            store.locks (the writer lock is on the directory itself)

**Publishing an artifact** (:func:`publish`, the only place citeline renames a file into place): write it under a
temporary name, fsync its files and folder, rename it into place, fsync the index directory, and record its size
and checksum in ``index_meta``.

**A commit** (:func:`commit`) writes the catalog changes and publishes generation g+1's artifacts *inside* one
DuckDB transaction, from that transaction's own view of the rows, then sets ``generation = g+1`` and commits;
files of other generations are removed only afterwards. A crash at any point leaves DuckDB at g or g+1 with its
artifacts complete on disk; files of generations DuckDB never committed are orphans, removed by the next writer or
the next open (:func:`remove_orphans`). The same publish step serves :func:`create` (generation 0),
:func:`rebuild` (the current generation, from the catalog, without re-embedding) and the repair on open
(:func:`repair`).

**Incremental commits** (:func:`publish_incremental`): generation g+1's vectors are g's base and deltas plus one
delta segment (its added vectors and its removed ids), listed with their checksums in ``index_meta``
(``vector_base``, ``faiss_sha256`` of the base, ``vector_deltas``); past ``segments.plan``'s thresholds the deltas
are merged into one, or everything compacted into a new base (``VectorIndex.updated``; ``store.vector_files``).
Its lexical index is g's segments, with the removed chunks marked deleted, plus one delta segment; segments are
merged past a threshold (``merge_plan``). Segments, delta or merged, are published like any
artifact and listed with their checksums in g+1's BM25 folder and ``index_meta``. Only when g's artifacts cannot
serve (damaged, or a BM25 folder from before segments) is g+1 built from all the catalog's rows, as
:func:`rebuild` always does (a full compaction).
"""

from __future__ import annotations

import contextlib
import errno
import re
import shutil
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from citeline.errors import (
    CitelineError,
    CommitRefusedError,
    IndexCorruptError,
    IndexLockedError,
    IndexRepairedWarning,
    IndexWriteError,
)
from citeline.lexical.analyzer import settings_problems
from citeline.lexical.segments import Part, Segment, SegmentedIndex, load_folder, read_segments
from citeline.store import catalog, checks, file_stats, ledger, passages, works
from citeline.store.files import (
    _remove,
    artifact_bytes,
    folder_checksum,
    known_checksum,
    rename_into_place,
)
from citeline.store.lexical_files import (
    DELTA,
    bm25_path,
    publish_lexical,
)
from citeline.store.locks import writer_lock
from citeline.store.vector_files import (
    QUICK_CHECKSUM_BYTES,
    load_vectors,
    publish_delta,
    vector_artifacts,
    vector_kind,
    vector_problems,
    vectors_path,
)
from citeline.util.arrays import positions_of

if TYPE_CHECKING:  # imported where used: a search that reads meta.json never loads DuckDB (store/meta_cache.py)
    import duckdb

#: Files of generations (vector files, BM25 folders, segments) and their temporaries, as this module names them.
_GENERATION_FILE = re.compile(r"^(vectors|vdelta|bm25|seg)\.(\d+)((?:\.(?!tmp)\w+)*)(\.tmp.*)?$")


# ---------------------------------------------------------------- where things are


def ensure_directory(index_dir: Path) -> None:
    """Create the index directory, refusing a path that is a file."""
    if index_dir.exists() and not index_dir.is_dir():
        raise CitelineError(f"{index_dir} is a file, not an index directory; choose another --index")
    index_dir.mkdir(parents=True, exist_ok=True)


# ---------------------------------------------------------------- building a generation's artifacts


def publish_incremental(
    index_dir: Path,
    generation: int,
    connection: duckdb.DuckDBPyConnection,
    meta: dict[str, Any],
    removed: np.ndarray,
    added: pa.Table,
) -> dict[str, Any] | None:
    """Publish ``generation`` from the previous generation's artifacts (``meta`` describes it) and the delta:
    chunk ids ``removed`` (sorted) and the ``added`` chunk rows (``chunks`` columns, vectors included).

    Returns the ``index_meta`` entries, or None when the previous artifacts cannot serve (damaged, or a BM25
    folder from before segments): the caller then builds from the catalog (:func:`publish_derived`).
    """
    dimension = int(meta["dimension"])
    if quick_check(index_dir, meta):
        return None
    try:
        previous_vectors = load_vectors(index_dir, meta)
        previous_lexical = load_folder(bm25_path(index_dir, generation - 1), mmap=True)
    except IndexCorruptError:
        return None
    if not isinstance(previous_lexical, SegmentedIndex) or not passages.present(index_dir, previous_lexical):
        # An index written before segments or before their rows files: built once in full, so it gets both.
        return None
    add_ids = added.column("chunk_id").to_numpy().astype(np.int64)
    add_vectors = catalog.arrow_to_vectors(added.column("vector"), dimension)
    entries = publish_delta(index_dir, generation, meta, previous_vectors.updated(add_ids, add_vectors, removed))
    del previous_vectors
    text_ids, texts = catalog.lexical_texts(connection, add_ids)
    delta = Segment.build(text_ids, texts)
    parts: list[tuple[str | None, Part]] = [(None, part.without(removed)) for part in previous_lexical.parts]
    if len(delta):
        parts.append((DELTA, Part(None, delta)))
    # The live chunk ids, from the previous ones without a full sort (a sixteenth of the cost at 1M chunks).
    kept = np.asarray(previous_lexical.chunk_ids)
    kept = np.delete(kept, positions_of(kept, removed))
    chunk_ids = np.insert(kept, np.searchsorted(kept, delta.chunk_ids), delta.chunk_ids)
    entries.update(publish_lexical(index_dir, generation, parts, chunk_ids, connection))
    return entries


# ---------------------------------------------------------------- create, commit, rebuild


def create(index_dir: Path, meta: dict[str, Any]) -> bool:
    """Create an empty index (generation 0) with ``meta``; False if another process created one meanwhile.

    The database appears under its real name only once complete, so a crash leaves no index rather than half of
    one.
    """
    ensure_directory(index_dir)
    with writer_lock(index_dir):
        if catalog.db_path(index_dir).exists():
            return False
        staged = index_dir / (catalog.DB_FILE + ".creating")
        staged.unlink(missing_ok=True)
        connection = catalog.create_file(staged)
        try:
            catalog.create_schema(connection, int(meta["dimension"]), bool(meta.get("document_vectors")))
            ledger.create_table(connection)
            from citeline.store.full_build import publish_derived  # (not on a reader's path: it loads the ivf build)

            meta.update(publish_derived(index_dir, 0, connection, meta))
            catalog.write_meta(connection, meta)
            catalog.checkpoint(connection)
        finally:
            connection.close()
        rename_into_place(staged, catalog.db_path(index_dir))
    return True


@dataclass
class Changes:
    """What one commit changes in the catalog: documents to remove, document and chunk rows to insert."""

    remove_doc_ids: Sequence[str]
    documents: pa.Table
    chunks: pa.Table
    #: files read whole by the run, whose stat the catalog records (``file_stats.record``); not a change of the
    #: searchable index, so recording them alone publishes no new generation
    files: Sequence[file_stats.FileStat] = ()

    def __bool__(self) -> bool:
        return bool(self.remove_doc_ids) or bool(self.documents.num_rows) or bool(self.chunks.num_rows)


def commit(index_dir: Path, changes: Changes, run: ledger.RunSummary) -> int:
    """Apply ``changes`` in one transaction and publish a new generation; returns the generation now current.

    With nothing to change, only the run is recorded and the generation stays. The caller holds the writer lock.
    A failure (a full disk, a read-only filesystem) raises :class:`IndexWriteError` saying why; the index stays
    at its generation and the files staged for the next one are removed at once (they are orphans, and on a full
    disk the space is what the ledger row of the failure needs).
    """
    with contextlib.closing(catalog.connect(index_dir, read_only=False)) as connection:
        meta = catalog.read_meta(connection)
        generation = int(meta["generation"])
        with _transaction(connection, index_dir, generation):
            file_stats.ensure(connection)  # before the changes: an older index's table is filled from its rows
            if changes:
                file_stats.forget_documents_files(connection, changes.remove_doc_ids)  # read again next run
                removed = catalog.chunk_ids_of_documents(connection, changes.remove_doc_ids)
                catalog.apply_changes(connection, changes.remove_doc_ids, changes.documents, changes.chunks)
                added = changes.documents.column("doc_id").to_pylist() if changes.documents.num_rows else []
                recognised = works.refresh(connection, changes.remove_doc_ids, added)  # store/works.py
                generation += 1
                derived = publish_incremental(index_dir, generation, connection, meta, removed, changes.chunks)
                if derived is None:
                    from citeline.store.full_build import publish_derived

                    derived = publish_derived(index_dir, generation, connection, meta)
                meta = {**meta, "generation": generation, **derived, **recognised.meta}
                catalog.write_meta(connection, {"generation": generation, **derived, **recognised.meta})
            if changes.files or changes.remove_doc_ids:
                file_stats.record(connection, changes.files, run.started_at)
                file_stats.forget_orphans(connection)
            run.generation = generation
            run.finished_at = ledger.utc_now()
            ledger.record_run(connection, run)
        remove_orphans(index_dir, generation, meta)
    return generation


@contextlib.contextmanager
def _transaction(connection: duckdb.DuckDBPyConnection, index_dir: Path, generation: int) -> Iterator[None]:
    # One DuckDB transaction of a writer at ``generation``: committed if the block succeeds, else rolled back,
    # the staged files of the next generation removed, and the error reported as what it is.
    import duckdb  # loaded already: ``connection`` is DuckDB's

    catalog.begin(connection)
    try:
        yield
        catalog.finish(connection, commit=True)
    except BaseException as exc:
        full = _nearly_full(index_dir)  # before the staged files are removed and free their space
        # A COMMIT that failed (a full disk) has ended the transaction already: ROLLBACK would then raise "cannot
        # rollback - no transaction is active", and that message used to replace the real one in the ledger.
        with contextlib.suppress(duckdb.Error):
            catalog.finish(connection, commit=False)
        with contextlib.suppress(OSError):
            remove_orphans(index_dir, generation)
        # RuntimeError: FAISS reports its write failures (a full disk) that way.
        if isinstance(exc, duckdb.Error | OSError | RuntimeError):
            first = first_error(exc, duckdb.Error)
            error = write_error(index_dir, generation, first, disk_full=full)
            if isinstance(first, duckdb.Error) and not full and not isinstance(first, duckdb.IOException):
                reason = str(first).splitlines()[0][:300] if str(first) else type(first).__name__
                error = CommitRefusedError(str(error), reason)  # what was written, not the disk: CommitRefusedError
            raise error from exc
        raise


def first_error(exc: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]) -> BaseException:
    """The first of the errors of ``kind`` that led to ``exc`` (``exc`` itself if it is the first): once a
    statement fails, DuckDB aborts the transaction and every later statement (a clean-up's too) raises
    "Current transaction is aborted", which said nothing of what went wrong (an out-of-memory error, a value the
    catalog refused)."""
    first, seen = exc, {id(exc)}
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, kind):
            first = cause
        cause = cause.__cause__ or cause.__context__
    return first if isinstance(exc, kind) else exc


#: Free bytes below which a failed write is reported as a full disk (numpy's short writes carry no errno:
#: "381969 requested and 77792 written").
NEARLY_FULL_BYTES = 16 * 1024 * 1024


def _nearly_full(index_dir: Path) -> bool:
    try:
        return shutil.disk_usage(index_dir).free < NEARLY_FULL_BYTES
    except OSError:
        return False


def write_error(index_dir: Path, generation: int, exc: BaseException, *, disk_full: bool = False) -> IndexWriteError:
    """One line for a failed write: what failed (``no space left on device`` for a full disk) and that the index
    stays at ``generation``."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        reason = f"{where}{exc.strerror or exc}"
    else:
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    if disk_full or "no space left" in reason.lower() or getattr(exc, "errno", None) == errno.ENOSPC:
        reason = f"no space left on device ({reason})"
    return IndexWriteError(f"could not write to {index_dir}: {reason}; the index stays at generation {generation}")


def record(index_dir: Path, run: ledger.RunSummary) -> None:
    """Record a run that changes nothing (a failed run) in the ledger."""
    with contextlib.closing(catalog.connect(index_dir, read_only=False)) as connection:
        ledger.record_run(connection, run)


def rebuild(index_dir: Path) -> int:
    """Rewrite the current generation's artifacts from the catalog (vectors and texts; nothing is re-embedded).

    The caller holds the writer lock. Rows that repeat a key (an index created before the primary keys, written
    by two writers at once) are removed first, keeping the newest run's (``checks.remove_duplicate_rows``, with
    an :class:`IndexRepairedWarning` saying how many), and the tables get their primary keys. Both artifacts are
    replaced atomically and their new sizes and checksums recorded in the same transaction; files of other
    generations are removed afterwards. Returns the generation.
    """
    import duckdb  # a search never rebuilds: loaded here, not with the module

    with contextlib.closing(catalog.connect(index_dir, read_only=False)) as connection:
        meta = catalog.read_meta(connection)
        generation = int(meta["generation"])
        with _transaction(connection, index_dir, generation):
            removed = checks.remove_duplicate_rows(connection)
            from citeline.store.full_build import publish_derived

            derived = publish_derived(index_dir, generation, connection, meta)
            # An index written before works gets them here too (every document hashed once; store/works.py).
            derived.update(works.refresh(connection, (), ()).meta)
            catalog.write_meta(connection, derived)
        try:
            checks.add_primary_keys(connection)
        except duckdb.Error as exc:
            raise write_error(index_dir, generation, exc) from exc
        remove_orphans(index_dir, generation, {**meta, **derived})
    if any(removed.values()):
        counts = ", ".join(f"{count} {table}" for table, count in removed.items() if count)
        warnings.warn(
            f"citeline: removed rows that repeated a key from {catalog.DB_FILE} (kept the newest run's): {counts}",
            IndexRepairedWarning,
            stacklevel=3,
        )
    return generation


# ---------------------------------------------------------------- orphans, checks on open, repair


def orphan_files(index_dir: Path, generation: int, meta: dict[str, Any] | None = None) -> list[Path]:
    """Files of generations other than ``generation`` (and temporaries): leftovers of runs that died.

    Vector segments belong to the generation whose ``meta`` lists them; without ``meta`` (a failed commit's
    clean-up) only those of later generations are orphans. Only meaningful while holding the writer lock or a
    DuckDB connection: a live writer's next-generation file looks the same as an orphan.
    """
    listed = read_segments(bm25_path(index_dir, generation))
    names = {item["name"] for item in listed} if listed is not None else None
    in_use = None
    if meta is not None:
        with contextlib.suppress(IndexCorruptError):  # damaged meta: keep every vector file until it is rebuilt
            in_use = {path.name for path, *_ in vector_artifacts(index_dir, meta)}
    found = []
    for entry in sorted(index_dir.iterdir()):
        match = _GENERATION_FILE.match(entry.name)
        if not match:
            continue
        if match.group(1) == "seg":
            # Segments belong to the generations that list them. While the current BM25 folder cannot be read,
            # none is an orphan: the repair that rebuilds the folder lists fresh ones and removes these.
            if match.group(4) or (names is not None and entry.name not in names):
                found.append(entry)
        elif match.group(1) in ("vectors", "vdelta") and not match.group(4):
            if (entry.name not in in_use) if in_use is not None else int(match.group(2)) > generation:
                found.append(entry)
        elif int(match.group(2)) != generation or match.group(4):
            found.append(entry)
    return found


def remove_orphans(index_dir: Path, generation: int, meta: dict[str, Any] | None = None) -> list[Path]:
    """Delete every file of other generations than ``generation`` (and temporaries); returns them."""
    removed = []
    for entry in orphan_files(index_dir, generation, meta):
        _remove(entry)
        removed.append(entry)
    return removed


def bm25_problems(index_dir: Path, meta: dict[str, Any], *, full: bool) -> list[str]:
    """Problems with the current generation's BM25 folder: missing, other settings, other checksum."""
    path = bm25_path(index_dir, int(meta.get("generation", 0)))
    problems = settings_problems(path)
    if problems:
        return problems
    hash_it = "bm25_sha256" in meta and (full or artifact_bytes(path) <= QUICK_CHECKSUM_BYTES)
    if hash_it and (folder_checksum(path) if full else known_checksum(path)) != meta["bm25_sha256"]:
        return [f"{path.name}/ does not match the checksum recorded in {catalog.DB_FILE}"]
    for item in read_segments(path) or []:
        segment = index_dir / item["name"]
        if not segment.is_dir():
            return [f"{segment.name}/ is missing though {path.name}/ lists it"]
        if (full or artifact_bytes(segment) <= QUICK_CHECKSUM_BYTES) and (
            folder_checksum(segment) if full else known_checksum(segment)
        ) != item["sha256"]:
            return [f"{segment.name}/ does not match the checksum {path.name}/ records"]
    return []


def quick_check(index_dir: Path, meta: dict[str, Any]) -> list[str]:
    """Problems with the current generation's artifacts that cheap checks find (empty list: none found).

    Call it with a DuckDB connection open, so that no writer can publish a new generation in between.
    """
    return vector_problems(index_dir, meta, full=False) + bm25_problems(index_dir, meta, full=False)


def inspect(index_dir: Path) -> tuple[dict[str, Any], list[str], list[Path]]:
    """An index's meta, the problems cheap checks find with its artifacts, and its orphan files, read under one
    read-only connection (so no writer can publish a generation in between)."""
    with contextlib.closing(catalog.connect(index_dir, read_only=True)) as connection:
        meta = catalog.read_meta(connection)
        problems = quick_check(index_dir, meta) if "generation" in meta else []
        orphans = orphan_files(index_dir, int(meta.get("generation", 0)), meta)
    return meta, problems, orphans


def read_meta(index_dir: Path) -> dict[str, Any]:
    """The index's ``index_meta`` (one short read-only connection)."""
    with contextlib.closing(catalog.connect(index_dir, read_only=True)) as connection:
        return catalog.read_meta(connection)


def repair(index_dir: Path, problems: list[str]) -> None:
    """Rebuild damaged artifacts and remove orphan files if no writer is running; warn about what was done.

    Never waits: a reader must not stall behind a writer, and a running writer publishes a fresh generation
    (and removes orphans) itself when it commits.
    """
    try:
        with writer_lock(index_dir, wait=0):
            if problems:
                generation = rebuild(index_dir)
                meta = read_meta(index_dir)
                warnings.warn(
                    f"citeline: {'; '.join(problems)}; rebuilt "
                    f"{vectors_path(index_dir, generation, vector_kind(meta)).name} and "
                    f"{bm25_path(index_dir, generation).name}/ from {catalog.DB_FILE} (nothing was re-embedded)",
                    IndexRepairedWarning,
                    stacklevel=4,
                )
            else:
                meta = read_meta(index_dir)
                remove_orphans(index_dir, int(meta["generation"]), meta)
    except (IndexLockedError, OSError) as exc:  # a running writer, or a read-only index directory
        if problems:
            warnings.warn(
                f"citeline: {'; '.join(problems)}; could not rebuild it now ({exc}); run "
                f"`citeline rebuild --index {index_dir}`",
                IndexRepairedWarning,
                stacklevel=4,
            )
