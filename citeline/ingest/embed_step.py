"""The chunk and embed steps of the pipeline (``citeline.ingest.pipeline`` re-exports them): documents into chunk rows,
and the rows' vectors, each distinct text embedded once.

With an index's ``document_vectors`` setting (``Chunker.document_vectors``), each document's first chunk row also
carries the text of the whole document (title and text, :func:`document_text`) and :func:`embed_chunks` fills
its vector in the same encode batches as the chunks' (``citeline.query.doc_signals``'s ``whole`` signal reads it).
A document text equal to a chunk's embedded text (a one-chunk document without a title) is embedded once.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from citeline.ingest import stopping
from citeline.ingest.progress import Reporter
from citeline.model.chunking import Chunker, ChunkSpan, embed_text
from citeline.sources.parsers import Document, text_hash
from citeline.store import catalog
from citeline.store.rows import ChunkRows
from citeline.util.ids import chunk_id_for

#: Texts per encode call when progress is reported: 32 chunks take a few seconds with torch on 2 cores, so the
#: bar moves every few seconds (256 froze it for most of a minute); with texts sorted by length it costs no CPU
#: (below).
EMBED_PROGRESS_STEP = 32
#: Texts embedded in document order, window by window (sorted by length within a window, so each encode call still
#: pads little): a Ctrl-C then finds the documents of the windows done embedded whole, which the run commits
#: (:class:`EmbedInterrupted`); one sort of the whole batch by length would leave most documents with a long chunk
#: still to embed. Cost: none measurable (docs/decisions/settings-from-experiments.md; figures:
#: docs/performance.md#choices-measured-in-the-code).
EMBED_WINDOW = 1024


class EmbedInterrupted(KeyboardInterrupt):
    """Ctrl-C or a stop signal while embedding: ``cache`` holds every vector known so far (text hash -> vector),
    ``new`` the hashes embedded by this call; :func:`completed` keeps the documents they cover whole. ``stop`` is
    the exception that stopped it (None: a stop asked of this thread, ``stopping.stop_requested``)."""

    def __init__(self, cache: dict[str, np.ndarray], new: set[str], stop: BaseException | None = None):
        super().__init__()
        self.cache, self.new, self.stop = cache, new, stop


@runtime_checkable
class WrittenIndex(Protocol):
    """What the pipeline needs of the index it writes to: :class:`citeline.Index` (a plain index, and each shard of a
    sharded one, ``citeline.sharding.runs``); tests/index/test_protocol_conformance.py checks it at run time."""

    @property
    def path(self) -> Path:
        """The index directory."""
        ...

    @property
    def dimension(self) -> int:
        """Length of the index's vectors."""
        ...

    @property
    def chunker(self) -> Chunker:
        """The chunker with the index's settings."""
        ...

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed texts with the index's model."""
        ...

    def prepare_queries(self) -> None:
        """Make later searches start fast (after a run's last commit, outside the writer lock; a no-op for a model
        without a separate query encoder)."""
        ...


#: Documents chunked per call of the (multi-threaded) chunker when progress is reported: small enough that the
#: bar moves every second or two, large enough to keep every CPU busy.
CHUNK_PROGRESS_STEP = 256

#: Characters of a document's text kept for its whole-document vector: the model reads its first 256 tokens
#: (about 1,100 characters of English; 15 characters a token would still fill them), so a long report's text is
#: not tokenized whole only to be truncated.
DOCUMENT_TEXT_CHARS = 4_000


def document_text(title: str | None, text: str) -> str:
    """What the model embeds for a whole document: ``title + " " + text`` (as BEIR, MTEB and
    ``citeline.eval.baseline`` do), cut to :data:`DOCUMENT_TEXT_CHARS`; the encoder truncates it at its window."""
    return f"{(title or '').strip()} {text}".strip()[:DOCUMENT_TEXT_CHARS]


def chunk_documents(
    documents: Sequence[Document], chunker: Chunker, *, advance: Callable[[int], None] | None = None
) -> ChunkRows:
    """Chunk every document; vectors are left empty for :func:`embed` to fill. ``advance(n)`` is called as
    documents are done (progress)."""
    rows = ChunkRows.empty()
    step = CHUNK_PROGRESS_STEP if advance is not None else max(len(documents), 1)
    all_spans: list[Any] = []
    for start in range(0, len(documents), step):
        part = documents[start : start + step]
        all_spans.extend(
            _shifted(spans, document.chunks_from)
            for document, spans in zip(
                part,
                chunker.split_many([(_indexed(document), document.format == "markdown") for document in part]),
                strict=True,
            )
        )
        if advance is not None:
            advance(len(part))
    headers = chunker.embed_text == "title + chunk"
    whole = chunker.document_vectors
    for document, spans in zip(documents, all_spans, strict=True):
        content_hash = document.content_hash
        title = (document.title or "").strip() if headers else ""
        page_starts = document.page_starts
        for span in spans:
            rows.chunk_id.append(chunk_id_for(document.doc_id, content_hash, span.ordinal))
            rows.doc_id.append(document.doc_id)
            rows.ordinal.append(span.ordinal)
            rows.char_start.append(span.char_start)
            rows.char_end.append(span.char_end)
            rows.text.append(span.text)
            embedded = embed_text(title, span.text)
            rows.embed_text.append(embedded)
            # The embedding cache's key: the hash of what the model reads, so a chunk is reused only with its title.
            rows.text_hash.append(text_hash(embedded))
            # Pages are 1-based; page_starts[i] is the character offset where page i+1 begins.
            rows.page.append(bisect.bisect_right(page_starts, span.char_start) if page_starts else None)
            if whole:
                rows.document_text.append(
                    document_text(document.title, _indexed(document)) if span.ordinal == 0 else None
                )
    return rows


def _indexed(document: Document) -> str:
    """The text chunks cover: all of it but what ``chunks_from`` leaves out (a Markdown file's front matter)."""
    return document.text[document.chunks_from :] if document.chunks_from else document.text


def _shifted(spans: list[ChunkSpan], offset: int) -> list[ChunkSpan]:
    """``spans`` of the indexed text as offsets into the whole document text."""
    if not offset:
        return spans
    return [replace(span, char_start=span.char_start + offset, char_end=span.char_end + offset) for span in spans]


def embed_chunks(
    rows: ChunkRows,
    encode: Callable[[list[str]], np.ndarray],
    dimension: int,
    *,
    cache: dict[str, np.ndarray] | None = None,
    batch_size: int = 256,
    progress: bool = False,
    reporter: Reporter | None = None,
) -> tuple[int, int]:
    """Fill ``rows.vectors``, embedding each distinct text once and reusing cached vectors.

    Returns ``(embedded, reused)`` chunk counts. With a ``reporter`` (or ``progress``: a bar), the ``embed``
    stage counts the texts to embed and advances every :data:`EMBED_PROGRESS_STEP` of them.
    """
    from citeline.ingest.progress import Bar

    cache = dict(cache or {})
    if progress and reporter is None:
        reporter = Bar()
    text_of = dict(zip(rows.text_hash, rows.embed_text or rows.text, strict=True))
    # Whole-document texts share the cache (keyed by the hash of what the model reads) and the encode batches.
    document_hashes = [text_hash(text) if text else None for text in rows.document_text]
    text_of.update((h, text) for h, text in zip(document_hashes, rows.document_text, strict=True) if h and text)
    # Shortest first within each window of EMBED_WINDOW texts in document order: each encode call then pads little.
    # 512 texts of 20-180 words, torch, 2 cores: 32 per call sorted by length took 49-52 CPU s, 256 per call
    # unsorted 55 CPU s, 32 unsorted 62 CPU s. (A document's whole-text vector comes right after its first chunk.)
    wanted = (
        [h for pair in zip(rows.text_hash, document_hashes, strict=True) for h in pair if h]
        if document_hashes
        else rows.text_hash
    )
    order = list(dict.fromkeys(h for h in wanted if h not in cache))
    missing = [
        h
        for start in range(0, len(order), EMBED_WINDOW)
        for h in sorted(order[start : start + EMBED_WINDOW], key=lambda h: len(text_of[h]))
    ]
    if reporter is not None:
        reporter.stage("embed", len(missing))
        batch_size = min(batch_size, EMBED_PROGRESS_STEP)
        if missing:
            encode([" "])  # load the model before the first batch, so the bar's rate is not the loading time
    try:
        for start in range(0, len(missing), batch_size):
            if stopping.stop_requested():  # a stop signal reached the main thread, not this one (a task runner's)
                raise EmbedInterrupted(cache, {h for h in missing if h in cache})
            batch = missing[start : start + batch_size]
            vectors = encode([text_of[h] for h in batch])
            cache.update(zip(batch, vectors, strict=True))
            if reporter is not None:
                reporter.advance(len(batch))
    except EmbedInterrupted:
        raise
    except BaseException as exc:  # Ctrl-C, SIGTERM (stopping.StopSignal) or a host's stop exception
        if not stopping.is_stop(exc):
            raise
        raise EmbedInterrupted(cache, {h for h in missing if h in cache}, exc) from None
    rows.vectors = (
        np.stack([cache[h] for h in rows.text_hash]).astype(np.float32)
        if len(rows)
        else np.zeros((0, dimension), dtype=np.float32)
    )
    if rows.document_text:
        nothing = np.full(dimension, np.nan, dtype=np.float32)
        rows.document_vectors = np.stack([cache[h] if h else nothing for h in document_hashes]).astype(np.float32)
    newly_embedded = set(missing)
    embedded = sum(1 for h in rows.text_hash if h in newly_embedded)
    return embedded, len(rows) - embedded


def completed(
    documents: Sequence[Document], rows: ChunkRows, stop: EmbedInterrupted, dimension: int
) -> tuple[list[Document], ChunkRows, int]:
    """After a Ctrl-C while embedding ``rows`` (:class:`EmbedInterrupted`): the documents whose every vector was
    made, their rows with vectors filled, and how many of those rows were embedded (not reused)."""
    hashes: dict[str, set[str]] = {}
    for index, doc_id in enumerate(rows.doc_id):
        own = hashes.setdefault(doc_id, set())
        own.add(rows.text_hash[index])
        if rows.document_text and rows.document_text[index]:
            own.add(text_hash(rows.document_text[index] or ""))
    whole = {doc_id for doc_id, own in hashes.items() if own <= stop.cache.keys()}
    keep = [index for index, doc_id in enumerate(rows.doc_id) if doc_id in whole]
    columns = ("chunk_id", "doc_id", "ordinal", "char_start", "char_end", "text", "text_hash", "page")
    kept = ChunkRows.empty(dimension)
    for name in columns:
        getattr(kept, name).extend(getattr(rows, name)[i] for i in keep)
    kept.embed_text = [rows.embed_text[i] for i in keep] if rows.embed_text else []
    kept.document_text = [rows.document_text[i] for i in keep] if rows.document_text else []
    embed_chunks(kept, _nothing_left, dimension, cache=stop.cache)  # every vector is in the cache
    embedded = sum(1 for h in kept.text_hash if h in stop.new)
    return [document for document in documents if document.doc_id in whole], kept, embedded


def _nothing_left(texts: list[str]) -> np.ndarray:
    raise AssertionError(f"{len(texts)} texts were not embedded")


def embed(
    index: WrittenIndex, rows: ChunkRows, *, progress: bool = False, reporter: Reporter | None = None
) -> tuple[int, int]:
    """Fill ``rows.vectors`` with the index's model, reusing vectors of identical chunk text already in the index.

    Returns ``(embedded, reused)``.
    """
    with contextlib.closing(catalog.connect(index.path, read_only=True)) as connection:
        hashes = rows.text_hash + [text_hash(text) for text in rows.document_text if text]
        cache = catalog.cached_vectors(connection, hashes, index.dimension)
        # A document stored again with the same text and title (its metadata changed) keeps its vector.
        firsts = [chunk_id for chunk_id, text in zip(rows.chunk_id, rows.document_text, strict=False) if text]
        for title, text, vector in catalog.stored_document_vectors(connection, firsts).values():
            cache.setdefault(text_hash(document_text(title, text)), vector)
    return embed_chunks(rows, index.encode, index.dimension, cache=cache, progress=progress, reporter=reporter)
