"""A generation's artifacts built from every row of the catalog (``citeline rebuild``, the repair on open, and a
commit whose previous artifacts cannot serve), in bounded memory. ``store.generation`` runs the commit around it.

Reading every vector and every BM25 text at once held them several times over (the vectors as Arrow and numpy,
FAISS's copy, every text as a Python string; figures: docs/scale.md#choices-measured-in-the-code). Here:

- the vectors are read from DuckDB a batch at a time into a spill file (``vectors.<g>.rows.tmp``: float32 rows in
  the catalog's order, an orphan by name if the process dies), and read back a span at a time with ``pread`` (the
  file is never memory-mapped, so its pages do not count towards the process's resident memory). A kind that can
  write its file from spans (:data:`STREAMED`: ``flat``, ``ivf``, ``auto``) does so; ``hnsw`` (a graph built in memory
  whatever the build) gets every vector in one array, read from the spill file.
- the lexical segment is built from :data:`TEXT_BATCH` texts at a time, each batch saved as a temporary segment
  (``seg.<g>.tmp-rebuild-<k>``), and the batches merged into the published segment (``lexical_merge``, a range
  of terms at a time), which is array for array the segment ``Segment.build`` makes of every text.

The artifacts and their publication are those of the in-memory build: a vector base (``vectors``) and one lexical
segment (``segment``) with its passage rows, then the BM25 folder, each through ``files.publish``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from citeline.lexical.merge import write_merged
from citeline.lexical.segments import Part, Segment
from citeline.store import catalog, passages
from citeline.store.files import _remove, artifact_bytes, artifact_checksum, known_checksum, publish
from citeline.store.lexical_files import SEGMENT, new_segment_name, publish_lexical
from citeline.store.vector_files import VECTORS, publish_base, vector_kind, vectors_path
from citeline.vectors import flat_files
from citeline.vectors.auto import kind_for
from citeline.vectors.ivf import build

if TYPE_CHECKING:  # the caller's connection: a search that imports this module never loads DuckDB (store/meta_cache.py)
    import duckdb

#: Kinds that write their file from vectors read a span at a time: kind name -> ``write(path, ids, rows, dim)``
#: (``ids`` ascending, ``rows(positions)`` their vectors), returning the count written.
STREAMED: dict[str, Callable[[Path, np.ndarray, Callable[[np.ndarray], np.ndarray], int], int]] = {
    "flat": flat_files.write_built,
    "ivf": build.write_built,
}


def _auto(path: Path, ids: np.ndarray, rows: Callable[[np.ndarray], np.ndarray], dimension: int) -> int:
    # ``auto`` writes the file of the kind it picks for the size (byte for byte that kind's).
    return STREAMED[kind_for(len(ids)).kind](path, ids, rows, dimension)


STREAMED["auto"] = _auto
#: Rows read from DuckDB per batch into the spill file (32k rows of 384 floats: 48 MB).
VECTOR_BATCH = 32_768
#: Texts analysed into one temporary segment (at 1M chunks: 15 segments, then merged a range of terms at a time):
#: a batch holds its terms as Python lists, so the rebuild's lexical step stays near its vector step's peak
#: (docs/scale.md#choices-measured-in-the-code).
TEXT_BATCH = 65_536


def publish_derived(
    index_dir: Path, generation: int, connection: duckdb.DuckDBPyConnection, meta: dict[str, Any]
) -> dict[str, Any]:
    """Build and publish every artifact of ``generation`` from all the rows ``connection`` sees (its
    transaction's view): the vector base, and one lexical segment (a full compaction).

    Returns the ``index_meta`` entries that describe them, which the caller writes in the transaction that
    publishes the generation, so the sizes and checksums in DuckDB are always those of the files it points at.
    """
    entries = _publish_vectors(index_dir, generation, connection, meta)
    entries.update(_publish_lexical(index_dir, generation, connection))
    return entries


# ---------------------------------------------------------------- vectors


class _Spill:
    """Every chunk's vector, in a file of float32 rows in the order the catalog gave them, and their ids."""

    def __init__(self, path: Path, connection: duckdb.DuckDBPyConnection, dimension: int):
        self.path, self.dimension = path, dimension
        found = []
        with path.open("wb") as out, catalog.vector_batches(connection, dimension, VECTOR_BATCH) as batches:
            for ids, vectors in batches:
                out.write(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
                found.append(ids)
        stored = np.concatenate(found or [np.zeros(0, np.int64)])
        #: Row of the file holding each id, ids ascending (None: the catalog gave them in ascending order).
        self.order: np.ndarray | None = None if np.all(stored[1:] > stored[:-1]) else np.argsort(stored, kind="stable")
        self.ids = stored if self.order is None else stored[self.order]

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The vectors of ``positions`` (ascending) of :attr:`ids`, read with one ``pread`` per run of
        consecutive rows of the file."""
        wanted = np.asarray(positions, dtype=np.int64) if self.order is None else self.order[positions]
        out = np.empty((len(wanted), self.dimension), dtype=np.float32)
        if not len(wanted):
            return out
        sorted_at = np.argsort(wanted, kind="stable")
        ordered = wanted[sorted_at]
        breaks = np.flatnonzero(ordered[1:] != ordered[:-1] + 1) + 1
        width = self.dimension * 4
        with self.path.open("rb") as handle:
            for start, end in zip(np.r_[0, breaks].tolist(), np.r_[breaks, len(ordered)].tolist(), strict=True):
                first, count = int(ordered[start]), end - start
                data = os.pread(handle.fileno(), count * width, first * width)
                if len(data) != count * width:
                    raise OSError(f"{self.path} ended before its rows did")
                out[sorted_at[start:end]] = np.frombuffer(data, dtype="<f4").reshape(count, self.dimension)
        return out


def _publish_vectors(
    index_dir: Path, generation: int, connection: duckdb.DuckDBPyConnection, meta: dict[str, Any]
) -> dict[str, Any]:
    kind, dimension = vector_kind(meta), int(meta["dimension"])
    spill_path = index_dir / f"vectors.{generation}.rows.tmp"
    try:
        spill = _Spill(spill_path, connection, dimension)
        stream = STREAMED.get(kind.kind)
        if stream is not None and len(spill.ids):
            path = vectors_path(index_dir, generation, kind)
            written: list[int] = []
            publish(VECTORS, path, lambda staged: written.append(stream(staged, spill.ids, spill.rows, dimension)))
            return {
                "vector_count": written[0],
                "vector_base": path.name,
                "vector_deltas": [],
                "faiss_bytes": artifact_bytes(path),
                "faiss_sha256": artifact_checksum(path),
            }
        vectors = spill.rows(np.arange(len(spill.ids)))
        return publish_base(index_dir, generation, kind.build(spill.ids, vectors, dimension))
    finally:
        _remove(spill_path)


# ---------------------------------------------------------------- lexical


def _publish_lexical(index_dir: Path, generation: int, connection: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        # The texts' stream is closed once read (a build of several batches reads it to the end first).
        with catalog.lexical_text_batches(connection, TEXT_BATCH) as batches:
            first = next(batches, None)
            second = next(batches, None) if first is not None else None
            if first is not None and second is not None:
                built = stack.enter_context(_batch_segments(index_dir, generation, _chain(first, second, batches)))
        if second is None:  # one batch (or none): built in memory, as it always was
            ids, texts = first if first is not None else (np.zeros(0, np.int64), [])
            segment = Segment.build(ids, texts)
            parts: list[tuple[str | None, Part]] = [(SEGMENT, Part(None, segment))] if len(segment) else []
            return publish_lexical(index_dir, generation, parts, segment.chunk_ids, connection)
        name = new_segment_name(index_dir, generation)
        folder = index_dir / name

        def write(staged: Path) -> None:
            write_merged(built, staged)
            with catalog.passage_batches(connection, None) as rows:
                passages.write(staged, rows)

        publish(SEGMENT, folder, write)
    merged = Segment.load(folder)
    part = Part(name, merged, sha256=known_checksum(folder))
    return publish_lexical(index_dir, generation, [(None, part)], np.asarray(merged.chunk_ids), connection)


def _chain(*items: Any) -> Iterator[tuple[np.ndarray, list[str]]]:
    *heads, rest = items
    yield from heads
    yield from rest


@contextlib.contextmanager
def _batch_segments(
    index_dir: Path, generation: int, batches: Iterator[tuple[np.ndarray, list[str]]]
) -> Iterator[list[Part]]:
    """A temporary segment of each batch of texts (memory-mapped), removed afterwards."""
    folders: list[Path] = []
    try:
        parts = []
        for ids, texts in batches:
            folder = index_dir / f"seg.{generation}.tmp-rebuild-{len(folders)}"
            folders.append(folder)
            _remove(folder)
            Segment.build(ids, texts).save(folder)
            del texts
            parts.append(Part(None, Segment.load(folder)))
        yield parts
    finally:
        for folder in folders:
            _remove(folder)
