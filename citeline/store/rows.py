"""Row shapes of the catalog: chunks and documents as Arrow tables in the column order of ``meta.duckdb``'s tables
(the shape DuckDB ingests fastest), and vectors as Arrow fixed-size lists (DuckDB ``FLOAT[dim]``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from citeline.store.metadata import stored_metadata

if TYPE_CHECKING:
    from citeline.sources.parsers import Document


def vectors_to_arrow(vectors: np.ndarray) -> pa.FixedSizeListArray:
    """A ``(n, dim)`` float32 array as an Arrow fixed-size-list column (DuckDB ``FLOAT[dim]``)."""
    dim = vectors.shape[1]
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel(), type=pa.float32())
    return pa.FixedSizeListArray.from_arrays(flat, dim)


def document_vectors_to_arrow(vectors: np.ndarray, held: Sequence[bool]) -> pa.ListArray:
    """Rows of ``vectors`` as a variable-length list column (DuckDB ``FLOAT[]``), NULL where ``held`` is false:
    a NULL list holds no values, so only documents' first chunks pay for their vector."""
    kept = np.ascontiguousarray(vectors[np.asarray(held, dtype=bool)], dtype=np.float32)
    sizes = np.where(held, vectors.shape[1], 0)
    offsets = pa.array(np.concatenate(([0], np.cumsum(sizes))).astype(np.int32))
    mask = pa.array([not h for h in held], type=pa.bool_())
    return pa.ListArray.from_arrays(offsets, pa.array(kept.ravel(), type=pa.float32()), mask=mask)


def arrow_to_vectors(column: pa.ChunkedArray | pa.Array, dimension: int) -> np.ndarray:
    """The inverse of :func:`vectors_to_arrow`."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(array) == 0:
        return np.zeros((0, dimension), dtype=np.float32)
    values = array.flatten().to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(values.reshape(-1, dimension), dtype=np.float32)


@dataclass
class ChunkRows:
    """Chunks to insert, column by column (the shape DuckDB ingests fastest, through Arrow)."""

    chunk_id: list[int]
    doc_id: list[str]
    ordinal: list[int]
    char_start: list[int]
    char_end: list[int]
    text: list[str]
    text_hash: list[str]
    page: list[int | None]
    vectors: np.ndarray
    #: What the model embeds for each chunk (not stored: ``text_hash`` is its hash); empty means ``text``.
    embed_text: list[str] = field(default_factory=list)
    #: With the index's ``document_vectors``: per row, its document's whole text on the document's first chunk
    #: (None on the others; not stored); empty: the index keeps no document vectors.
    document_text: list[str | None] = field(default_factory=list)
    #: The whole-document vector of each row with a ``document_text`` (NaN rows elsewhere), stored in the
    #: ``document_vector`` column (``FLOAT[]``: NULL on the other rows, which then take no space).
    document_vectors: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.chunk_id)

    @classmethod
    def empty(cls, dimension: int = 0) -> ChunkRows:
        """No rows."""
        return cls([], [], [], [], [], [], [], [], np.zeros((0, dimension), dtype=np.float32))

    @classmethod
    def concat(cls, parts: Sequence[ChunkRows], dimension: int) -> ChunkRows:
        """The rows of ``parts`` in order (vectors included)."""
        merged = cls.empty(dimension)
        for part in parts:
            for name in ("chunk_id", "doc_id", "ordinal", "char_start", "char_end", "text", "text_hash", "page"):
                getattr(merged, name).extend(getattr(part, name))
            merged.embed_text.extend(part.embed_text or part.text)
        vectors = [part.vectors for part in parts if len(part)]
        if vectors:
            merged.vectors = np.concatenate(vectors).astype(np.float32)
        if any(part.document_text for part in parts):
            nothing = np.full((1, dimension), np.nan, dtype=np.float32)
            for part in parts:
                merged.document_text.extend(part.document_text or [None] * len(part))
            merged.document_vectors = np.concatenate(
                [
                    part.document_vectors if part.document_vectors is not None else np.repeat(nothing, len(part), 0)
                    for part in parts
                ]
            ).astype(np.float32)
        return merged

    def of_documents(self, doc_ids: set[str] | frozenset[str]) -> ChunkRows:
        """The rows of the documents ``doc_ids`` (vectors included), in order: a commit of part of a batch."""
        keep = [index for index, doc_id in enumerate(self.doc_id) if doc_id in doc_ids]
        part = ChunkRows.empty(self.vectors.shape[1] if self.vectors.ndim == 2 else 0)
        for name in ("chunk_id", "doc_id", "ordinal", "char_start", "char_end", "text", "text_hash", "page"):
            getattr(part, name).extend(getattr(self, name)[i] for i in keep)
        part.embed_text = [self.embed_text[i] for i in keep] if self.embed_text else []
        part.vectors = self.vectors[keep] if len(self.vectors) else self.vectors
        if self.document_text:
            part.document_text = [self.document_text[i] for i in keep]
        if self.document_vectors is not None:
            part.document_vectors = self.document_vectors[keep]
        return part

    def to_arrow(self, run_id: str) -> pa.Table:
        """The rows as an Arrow table in the ``chunks`` column order (``document_vector`` last, when kept)."""
        table = pa.table(
            {
                "chunk_id": pa.array(self.chunk_id, type=pa.int64()),
                "doc_id": pa.array(self.doc_id, type=pa.string()),
                "ordinal": pa.array(self.ordinal, type=pa.int32()),
                "char_start": pa.array(self.char_start, type=pa.int32()),
                "char_end": pa.array(self.char_end, type=pa.int32()),
                "text": pa.array(self.text, type=pa.string()),
                "text_hash": pa.array(self.text_hash, type=pa.string()),
                "page": pa.array(self.page, type=pa.int32()),
                "vector": vectors_to_arrow(self.vectors),
                "run_id": pa.array([run_id] * len(self.chunk_id), type=pa.string()),
            }
        )
        if self.document_vectors is None:
            return table
        held = [text is not None for text in self.document_text]
        return table.append_column("document_vector", document_vectors_to_arrow(self.document_vectors, held))


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
            "metadata": [stored_metadata(d.metadata, d.properties) for d in documents],
            "size_bytes": pa.array([d.size_bytes for d in documents], type=pa.int64()),
            "mtime": pa.array([d.mtime for d in documents], type=pa.float64()),
            "run_id": [run_id] * len(documents),
            "ingested_at": pa.array(
                [datetime.fromisoformat(ingested_at)] * len(documents), type=pa.timestamp("ms", tz="UTC")
            ),
        }
    )
