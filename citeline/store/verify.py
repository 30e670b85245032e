"""The invariants of an index directory, named once: ``verify()`` checks them and the tests assert them.

Each invariant is a function from a :class:`State` (everything read under one read-only connection, so a writer
cannot publish a generation midway) to the problems it finds. :data:`INVARIANTS` maps names to them;
:func:`check` runs some or all of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from citeline.errors import IndexCorruptError
from citeline.lexical.segments import LexicalFolder, load_folder, probe_ids, probe_problems, structure_problems
from citeline.store import catalog, checks, ledger, passages, works
from citeline.store.generation import (
    bm25_path,
    bm25_problems,
    load_vectors,
    orphan_files,
    vector_artifacts,
    vector_problems,
)
from citeline.vectors.segments import SegmentedVectors


@dataclass
class State:
    """What the invariants look at: the catalog's rows and the current generation's artifacts."""

    index_dir: Path
    meta: dict[str, Any]
    generation: int
    ids: np.ndarray  #: catalog chunk ids, ascending
    dangling: int
    duplicates: dict[str, int]  #: per table, rows that repeat a key taken by another row
    ledger_error: str | None
    offset_errors: tuple[int, list[int]]
    vector_path: Path  #: the base file
    vector_files: list[Path] = field(default_factory=list)  #: the base file and the delta segments
    vector_index: SegmentedVectors | None = None
    vector_error: str | None = None
    bm25_dir: Path = field(default_factory=Path)
    lexical: LexicalFolder | None = None
    bm25_issues: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    passage_issues: list[str] = field(default_factory=list)
    lexical_issues: list[str] = field(default_factory=list)  #: why the BM25 index cannot answer a search
    #: whether the vector index holds other vectors than the catalog (compared only when the ids match)
    vectors_differ: bool = False
    work_issues: list[str] = field(default_factory=list)  #: store.works.problems


def read_state(index_dir: Path) -> State:
    """Read everything the invariants need under one read-only connection."""
    with contextlib.closing(catalog.connect(index_dir, read_only=True)) as connection:
        meta = catalog.read_meta(connection)
        generation, dimension = int(meta["generation"]), int(meta["dimension"])
        ids = catalog.damage_reported(catalog.chunk_ids, connection)
        ledger_error = None
        try:
            ledger.read_runs(connection, 2**31 - 1)
        except IndexCorruptError as exc:
            ledger_error = str(exc).split("; ")[0]
        state = State(
            index_dir=index_dir,
            meta=meta,
            generation=generation,
            ids=ids,
            dangling=catalog.damage_reported(checks.dangling_chunks, connection),
            duplicates=catalog.damage_reported(checks.duplicate_rows, connection, ledger_error is None),
            ledger_error=ledger_error,
            offset_errors=catalog.damage_reported(checks.offset_mismatches, connection),
            vector_path=index_dir,
            bm25_dir=bm25_path(index_dir, generation),
            orphans=[entry.name for entry in orphan_files(index_dir, generation, meta)],
            work_issues=catalog.damage_reported(works.problems, connection, meta),
        )
        try:
            state.vector_files = [path for path, *_ in vector_artifacts(index_dir, meta)]
            state.vector_path = state.vector_files[0]
            if all(path.exists() for path in state.vector_files):
                state.vector_index = load_vectors(index_dir, meta)
        except IndexCorruptError as exc:
            state.vector_error = str(exc).replace(f"{index_dir}/", "")
        if state.vector_index is not None and not ids_match(state):
            state.vectors_differ = catalog.damage_reported(_vectors_differ, connection, state.vector_index, dimension)
        state.bm25_issues = bm25_problems(index_dir, meta, full=True)
        if not state.bm25_issues or "is missing" not in state.bm25_issues[0]:
            try:
                state.lexical = load_folder(state.bm25_dir, mmap=True)
            except IndexCorruptError as exc:
                state.bm25_issues.append(str(exc).split("; run")[0])
        if state.lexical is not None:
            state.passage_issues = passages.problems(
                index_dir, state.lexical, lambda ids: catalog.passage_batches(connection, ids)
            )
            state.lexical_issues = structure_problems(state.lexical)
            if not state.lexical_issues:
                probe = probe_ids(state.lexical)
                texts = catalog.damage_reported(catalog.lexical_texts, connection, probe)[1]
                state.lexical_issues = probe_problems(state.lexical, texts)
    return state


def _vectors_differ(connection: Any, index: SegmentedVectors, dimension: int) -> bool:
    # Streamed: reading every vector at once held them twice (Arrow and numpy;
    # docs/scale.md#choices-measured-in-the-code).
    with catalog.vector_batches(connection, dimension) as batches:
        return any(not np.allclose(index.vectors(ids), vectors, atol=1e-6) for ids, vectors in batches)


# ---------------------------------------------------------------- the invariants


def artifacts_present(state: State) -> list[str]:
    """The current generation's vector files (base and deltas) exist and can be read."""
    for path in state.vector_files:
        if not path.exists():
            return [f"{path.name} is missing though {catalog.DB_FILE} records generation {state.generation}"]
    if state.vector_error:
        return [state.vector_error]
    return []


def checksums_match(state: State) -> list[str]:
    """Artifacts match the sizes and checksums recorded at commit (BM25: also its analyzer settings)."""
    problems = [
        problem
        for problem in vector_problems(state.index_dir, state.meta, full=True)
        if "is missing" not in problem and problem != state.vector_error
    ]
    return problems + state.bm25_issues


def ids_match(state: State) -> list[str]:
    """The vector index and the BM25 folder hold exactly the catalog's chunk ids."""
    problems = []
    index = state.vector_index
    dimension = int(state.meta["dimension"])
    if index is not None and (index.dimension != dimension or not np.array_equal(index.ids(), state.ids)):
        problems.append(
            f"{state.vector_path.name} holds other chunk ids than {catalog.DB_FILE} ({len(index)} vs {len(state.ids)})"
        )
    if state.lexical is not None and not np.array_equal(state.lexical.chunk_ids, state.ids):
        problems.append(f"{state.bm25_dir.name}/ indexes other chunk ids than {catalog.DB_FILE}")
    return problems


def vectors_match(state: State) -> list[str]:
    """The vector index stores exactly the catalog's vectors."""
    if state.vector_index is None or ids_match(state) or not len(state.ids):
        return []
    if state.vectors_differ:
        return [f"{state.vector_path.name} holds other vectors than {catalog.DB_FILE}"]
    return []


def counts_match(state: State) -> list[str]:
    """``index_meta.vector_count`` equals the catalog's chunk count."""
    recorded = int(state.meta.get("vector_count", len(state.ids)))
    if recorded != len(state.ids):
        return [f"index_meta says {recorded} vectors, {catalog.DB_FILE} holds {len(state.ids)} chunks"]
    return []


def chunks_have_documents(state: State) -> list[str]:
    """Every chunk row belongs to a document row."""
    return [f"{state.dangling} chunk rows belong to no document"] if state.dangling else []


def no_duplicate_rows(state: State) -> list[str]:
    """No two rows of a table share a key (document id, chunk id, run id, meta key)."""
    repeated = {table: count for table, count in state.duplicates.items() if count}
    if not repeated:
        return []
    return [
        "rows that repeat a key in "
        + ", ".join(f"{table} ({count})" for table, count in repeated.items())
        + " (two writers at once?); `citeline rebuild` removes them, keeping the newest run's"
    ]


def ledger_readable(state: State) -> list[str]:
    """Every row of the run ledger reads (``citeline runs`` and ``status`` depend on it)."""
    return [state.ledger_error] if state.ledger_error else []


def offsets_exact(state: State) -> list[str]:
    """Every chunk's text is exactly ``document_text[char_start:char_end]``."""
    count, examples = state.offset_errors
    if count:
        return [f"{count} chunks are not their document's text at their offsets (chunk ids {examples})"]
    return []


def passages_match(state: State) -> list[str]:
    """Each segment's passage rows file holds the catalog's rows of its live chunks (texts, offsets, documents)."""
    return state.passage_issues


def lexical_answers(state: State) -> list[str]:
    """The BM25 index can answer: each segment's arrays are well formed, and a probe of its first and last chunks'
    texts (the k best, scores, term frequencies, the rare-term lookup collapse uses) runs without error."""
    return [f"{state.bm25_dir.name}/ {problem}" for problem in state.lexical_issues]


def works_match(state: State) -> list[str]:
    """The works (``store.works``) are of documents the catalog holds, each of two or more named by its smallest doc
    id, and ``index_meta``'s map is the table's."""
    return state.work_issues


INVARIANTS: dict[str, Callable[[State], list[str]]] = {
    "artifacts_present": artifacts_present,
    "checksums_match": checksums_match,
    "ids_match": ids_match,
    "vectors_match": vectors_match,
    "counts_match": counts_match,
    "chunks_have_documents": chunks_have_documents,
    "no_duplicate_rows": no_duplicate_rows,
    "ledger_readable": ledger_readable,
    "offsets_exact": offsets_exact,
    "passages_match": passages_match,
    "lexical_answers": lexical_answers,
    "works_match": works_match,
}


def check(index_dir: Path, names: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Run the named invariants (all by default) on an index; returns each one's problems."""
    state = read_state(index_dir)
    return {name: INVARIANTS[name](state) for name in (names or INVARIANTS)}


@dataclass
class VerifyReport:
    """What :func:`verify` found. ``ok`` is false when any invariant fails. (Field names are those of 0.1.0's
    ``citeline verify --json``.)"""

    path: str
    generation: int
    chunks: int  #: chunk rows in DuckDB
    vector_count: int  #: vectors index_meta says the vector file holds
    faiss_file: str
    faiss_present: bool
    faiss_ntotal: int | None
    ids_equal: bool
    vectors_equal: bool
    checksum_ok: bool | None  #: None when the index predates recorded checksums
    dangling_chunks: int  #: chunk rows whose document row is missing
    bm25_dir: str
    bm25_present: bool
    bm25_ids_equal: bool  #: the BM25 folder indexes exactly DuckDB's chunk ids
    orphans: list[str]
    problems: list[str]
    invariants: dict[str, list[str]] = field(default_factory=dict)  #: each invariant's problems

    @property
    def ok(self) -> bool:
        """True when the index is consistent (orphan files are leftovers, not inconsistencies)."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {**asdict(self), "ok": self.ok}


def verify(index_dir: Path) -> VerifyReport:
    """Check every invariant of the current generation: artifacts present, checksums, ids, vectors, counts,
    chunks with documents, no duplicate rows, exact offsets, a BM25 index that answers."""
    state = read_state(index_dir)
    results = {name: invariant(state) for name, invariant in INVARIANTS.items()}
    index = state.vector_index
    vector_ids_equal = index is not None and np.array_equal(index.ids(), state.ids)
    checksum_ok = None
    if "faiss_sha256" in state.meta:
        names = [path.name for path in state.vector_files]
        checksum_ok = not [found for found in results["checksums_match"] if any(name in found for name in names)]
    return VerifyReport(
        path=str(index_dir),
        generation=state.generation,
        chunks=len(state.ids),
        vector_count=int(state.meta.get("vector_count", -1)),
        faiss_file=state.vector_path.name,
        faiss_present=state.vector_path.exists(),
        faiss_ntotal=None if index is None else len(index),
        ids_equal=bool(vector_ids_equal),
        vectors_equal=bool(vector_ids_equal) and not results["vectors_match"],
        checksum_ok=checksum_ok,
        dangling_chunks=state.dangling,
        bm25_dir=state.bm25_dir.name,
        bm25_present=not state.bm25_issues or "is missing" not in state.bm25_issues[0],
        bm25_ids_equal=state.lexical is not None and np.array_equal(state.lexical.chunk_ids, state.ids),
        orphans=state.orphans,
        problems=[problem for found in results.values() for problem in found],
        invariants=results,
    )
