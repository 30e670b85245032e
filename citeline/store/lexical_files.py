"""A generation's lexical files: its BM25 folder (the manifest), the segment folders it lists, each with its
passage rows (``store.passages``), and how a commit publishes them: a delta segment, or a merge of a size tier, or a
compaction of all (``segments.merge_plan``; the merged segment and its rows streamed from the parts' own
files, ``lexical_merge``). ``store.generation`` runs the commit around them (as ``store.vector_files`` for vectors).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from citeline.lexical.merge import write_merged
from citeline.lexical.segments import Part, Segment, SegmentedIndex, live_parts, merge_plan
from citeline.store import catalog, passages
from citeline.store.files import known_checksum, publish

if TYPE_CHECKING:  # imported where used: a search that reads meta.json never loads DuckDB (store/meta_cache.py)
    import duckdb

#: Artifact names, as the crash trials' stages call them (``<artifact>-tmp``, ``<artifact>-written``).
BM25 = "bm25"
#: Lexical segments: built from the whole catalog, a commit's delta, a merge of some, a compaction of all.
SEGMENT, DELTA, MERGE, COMPACTION = "segment", "delta", "merge", "compaction"


def bm25_path(index_dir: Path, generation: int) -> Path:
    """The BM25 folder of one generation."""
    return index_dir / f"bm25.{generation}"


def new_segment_name(index_dir: Path, generation: int) -> str:
    """A segment folder name for ``generation`` that no file in the directory has yet."""
    taken = {entry.name for entry in index_dir.glob(f"seg.{generation}.*")}
    number = 0
    while any(name == f"seg.{generation}.{number}" or name.startswith(f"seg.{generation}.{number}.") for name in taken):
        number += 1
    return f"seg.{generation}.{number}"


def publish_lexical(
    index_dir: Path,
    generation: int,
    parts: list[tuple[str | None, Part]],
    chunk_ids: np.ndarray,
    connection: duckdb.DuckDBPyConnection,
) -> dict[str, Any]:
    """Merge segments if ``segments.merge_plan`` says so, publish the new segments (artifact names:
    ``segment``, ``delta``, ``merge``, ``compaction``), each with its passage rows (``store.passages``, read from
    ``connection``'s view of the catalog), then the generation's BM25 folder listing them."""
    alive = live_parts([part for _, part in parts])
    entries: list[tuple[str | None, Part | None]] = [(artifact, part) for artifact, part in parts if part in alive]
    plan = merge_plan([part for _, part in entries if part is not None])
    merging: list[Part] = []
    if plan is not None:  # the merged segment is written from its parts' files, in place of the last entry
        stage, group = plan
        merging = [part for number, (_, part) in enumerate(entries) if number in group and part is not None]
        entries = [entry for number, entry in enumerate(entries) if number not in group] + [(stage, None)]
    published = []
    for artifact, entry in entries:
        part = entry
        if part is None or part.name is None:
            segment_name = new_segment_name(index_dir, generation)
            folder = index_dir / segment_name
            if part is None:
                publish(str(artifact), folder, _merged_writer(index_dir, merging, connection))
                part = Part(segment_name, Segment.load(folder), sha256=known_checksum(folder))
            else:
                publish(str(artifact), folder, _segment_writer(part.segment, connection, artifact))
                part = Part(segment_name, part.segment, part.deleted, known_checksum(folder))
        published.append(part)
    folder = bm25_path(index_dir, generation)
    publish(BM25, folder, SegmentedIndex(published, chunk_ids).save)
    return {
        "bm25_sha256": known_checksum(folder),
        "lexical_segments": {part.name: part.sha256 for part in published},
    }


def _segment_writer(
    segment: Segment, connection: duckdb.DuckDBPyConnection, artifact: str | None
) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        segment.save(folder)
        # A segment built from the whole catalog holds every chunk: its rows are read without an id list.
        with catalog.passage_batches(connection, None if artifact == SEGMENT else segment.chunk_ids) as batches:
            passages.write(folder, batches)

    return write


def _merged_writer(
    index_dir: Path, parts: Sequence[Part], connection: duckdb.DuckDBPyConnection
) -> Callable[[Path], None]:
    """Write the segment merging ``parts`` and its rows, streamed from the parts' own files (``lexical_merge``,
    ``passages.write_merged``); a part not yet published (this commit's delta) gives its rows from the catalog."""

    def write(folder: Path) -> None:
        write_merged(parts, folder)
        sources: list[tuple[Path | pa.Table, np.ndarray, np.ndarray]] = []
        for part in parts:
            if part.name is None:
                live = part.segment.chunk_ids[part.live]
                with catalog.passage_batches(connection, live) as batches:
                    rows = batches.read_all()
                sources.append((rows, live, np.ones(len(live), bool)))
            else:
                sources.append((index_dir / part.name, part.segment.chunk_ids, part.live))
        passages.write_merged(folder, sources)

    return write
