"""The vector files of a generation: where they are, how they are published and checked (``store.generation``
runs the commit around them; ``citeline.vectors.segments`` is their format).

A generation's vectors are a *base* file of the index's kind, ``vectors.<g'>.<suffix>``, written by the
generation g' that last built or compacted it, and the *delta* segments ``vdelta.<g''>/`` of later commits. The
catalog lists them: ``vector_base`` (absent in indexes written before segments: the base is then the
generation's own file), its size and checksum (``faiss_bytes``, ``faiss_sha256``: names from 0.1.0), and
``vector_deltas`` (name, bytes, sha256 of each, oldest first). A commit writes and hashes only its new delta; the
others' checksums are carried over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from citeline.errors import IndexCorruptError, IndexMismatchError
from citeline.store import catalog
from citeline.store.files import artifact_bytes, artifact_checksum, known_checksum, publish
from citeline.vectors import DEFAULT_KIND, VectorIndex, kind_of, segments
from citeline.vectors.segments import Delta, SegmentedVectors

#: Artifact names, as the crash trials' stages call them (``<artifact>-tmp``, ``<artifact>-written``): a full
#: build and a commit's delta are ``vectors``; a merge of the deltas and a compaction into a new base:
VECTORS = "vectors"
VECTOR_MERGE, VECTOR_COMPACTION = "vector-merge", "vector-compaction"
#: Opening an index hashes artifacts up to this size; larger ones get the size check only (verify() hashes all).
#: At 64 MiB a cold search hashed every lexical segment (docs/performance.md#choices-measured-in-the-code): what a
#: reader hashes now is the small, recent segments and deltas, the files a commit last wrote.
QUICK_CHECKSUM_BYTES = 4 * 1024 * 1024


def vector_kind(meta: dict[str, Any]) -> type[VectorIndex]:
    """The vector index kind an index uses (indexes built before kinds were recorded are flat)."""
    return kind_of(str(meta.get("vector_index", DEFAULT_KIND)))


def check_same_kind(index_dir: Path, meta: dict[str, Any], requested: str | None) -> None:
    """Refuse a requested kind (None: any) other than the one the index at ``index_dir`` has."""
    have = vector_kind(meta).kind
    if requested and requested != have:
        raise IndexMismatchError(f"{index_dir} has a {have} vector index, not {requested}; omit --vector-index")


def vectors_path(index_dir: Path, generation: int, kind: type[VectorIndex]) -> Path:
    """The vector index file of one generation."""
    return index_dir / f"vectors.{generation}.{kind.suffix}"


def vector_artifacts(index_dir: Path, meta: dict[str, Any]) -> list[tuple[Path, int | None, str | None]]:
    """The files of the current generation's vectors, base first, with their recorded sizes and checksums (an
    index written before segments has no ``vector_base``: its base is its generation's file)."""
    base = meta.get("vector_base") or vectors_path(index_dir, int(meta.get("generation", 0)), vector_kind(meta)).name
    deltas = meta.get("vector_deltas") or []
    if not isinstance(deltas, list) or not all(isinstance(item, dict) and "name" in item for item in deltas):
        raise IndexCorruptError(f"index_meta 'vector_deltas' is {deltas!r}; run `citeline rebuild`")
    found = [(index_dir / str(base), meta.get("faiss_bytes"), meta.get("faiss_sha256"))]
    return found + [(index_dir / str(item["name"]), item.get("bytes"), item.get("sha256")) for item in deltas]


def load_vectors(index_dir: Path, meta: dict[str, Any]) -> SegmentedVectors:
    """The current generation's vectors: its base and delta segments, memory-mapped (``IndexCorruptError`` naming
    a missing or unreadable file)."""
    (base, *_), *deltas = vector_artifacts(index_dir, meta)
    for path in [base] + [path for path, *_ in deltas]:
        if not path.exists():
            raise IndexCorruptError(
                f"{path} is missing though {catalog.DB_FILE} records generation {meta['generation']}"
            )
    dimension = int(meta["dimension"])
    return SegmentedVectors(vector_kind(meta).load(base), [Delta.load(path, dimension) for path, *_ in deltas])


def delta_path(index_dir: Path, generation: int) -> Path:
    """The vector delta segment written by one generation."""
    return index_dir / f"vdelta.{generation}"


def publish_base(index_dir: Path, generation: int, vectors: VectorIndex, artifact: str = VECTORS) -> dict[str, Any]:
    """Publish ``vectors`` as generation ``generation``'s base (no deltas); returns its ``index_meta`` entries."""
    path = vectors_path(index_dir, generation, type(vectors))
    publish(artifact, path, vectors.save)
    return {
        "vector_count": len(vectors),
        "vector_base": path.name,
        "vector_deltas": [],
        "faiss_bytes": artifact_bytes(path),
        "faiss_sha256": artifact_checksum(path),
    }


def publish_compaction(index_dir: Path, generation: int, index: SegmentedVectors) -> dict[str, Any]:
    """Publish every live vector of ``index`` as generation ``generation``'s new base: the kind writes the file of
    its ``updated`` base straight to the staged path (``write_updated``: ``ivf`` streams it list by list, so a
    compaction holds the deltas, not the index), with no re-embedding."""
    merged = index.merged_delta()
    path = vectors_path(index_dir, generation, type(index.base))
    written: list[int] = []

    def write(staged: Path) -> None:
        written.append(index.base.write_updated(staged, merged.ids, np.asarray(merged.vectors), merged.removed))

    publish(VECTOR_COMPACTION, path, write)
    return {
        "vector_count": written[0],
        "vector_base": path.name,
        "vector_deltas": [],
        "faiss_bytes": artifact_bytes(path),
        "faiss_sha256": artifact_checksum(path),
    }


def publish_delta(index_dir: Path, generation: int, meta: dict[str, Any], index: SegmentedVectors) -> dict[str, Any]:
    """Publish the last delta of ``index`` (g's segments plus this commit's), or a merge of its deltas, or a
    compaction into a new base (``segments.plan``); only the new file is written and hashed."""
    stage = segments.plan(index)
    if stage == segments.COMPACTION:
        return publish_compaction(index_dir, generation, index)
    base, *listed = vector_artifacts(index_dir, meta)
    carried = {"vector_base": base[0].name, "faiss_bytes": base[1], "faiss_sha256": base[2]}
    entries = {key: value for key, value in carried.items() if value is not None}
    deltas = [{"name": path.name, "bytes": size, "sha256": checksum} for path, size, checksum in listed]
    delta, artifact = index.deltas[-1], VECTORS
    if stage == segments.MERGE:
        delta, artifact, deltas = index.merged_delta(), VECTOR_MERGE, []
    if len(delta.ids) or len(delta.removed) or stage:
        path = delta_path(index_dir, generation)
        publish(artifact, path, delta.save)
        deltas.append({"name": path.name, "bytes": artifact_bytes(path), "sha256": known_checksum(path)})
    return {**entries, "vector_deltas": deltas, "vector_count": len(index)}


def vector_problems(index_dir: Path, meta: dict[str, Any], *, full: bool) -> list[str]:
    """Problems with the current generation's vector files (base and deltas) that their recorded sizes and
    checksums reveal (files over :data:`QUICK_CHECKSUM_BYTES` are hashed only when ``full``)."""
    try:
        found = vector_artifacts(index_dir, meta)
    except IndexCorruptError as exc:
        return [str(exc)]
    for path, recorded_size, recorded_checksum in found:
        if not path.exists():
            return [f"{path.name} is missing"]
        size = artifact_bytes(path)
        if recorded_size is not None and size != recorded_size:
            return [f"{path.name} is {size:,} bytes, but {catalog.DB_FILE} recorded {recorded_size:,}"]
        if (
            recorded_checksum
            and (full or size <= QUICK_CHECKSUM_BYTES)
            and (artifact_checksum(path) if full else known_checksum(path)) != recorded_checksum
        ):
            return [f"{path.name} does not match the checksum recorded in {catalog.DB_FILE}"]
    return []
