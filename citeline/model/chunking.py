"""Token-budgeted, sentence-aware chunking with exact character offsets.

A chunk's size is measured in the tokens the embedding model will actually see, so no chunk is silently
truncated at embedding time, and ``document.text[chunk.char_start:chunk.char_end] == chunk.text`` always holds.

How (version 3, see ``CHUNKER_VERSION``): the text is cut into whitespace-delimited runs. For a BERT-style
tokenizer (BertNormalizer, BertPreTokenizer, WordPiece: every bundled model) tokens never cross whitespace, so a
chunk that starts and ends at whitespace has exactly the sum of its runs' token counts. Each distinct run is
tokenized once (a per-chunker cache keyed by the run's text), and chunk ends are chosen on the cumulative counts
with precomputed boundary positions: paragraph (and Markdown heading), then line, then sentence, then word,
then anything. Chunks are filled as version 1 filled them: a chunk ends at the last boundary of the highest
level that has one within the budget, and overlaps the next one by whole sections of that same level (the
last sentences, lines or paragraphs of at most ``overlap_tokens``), or not at all. Runs of 32 characters or
more that make over a tenth of a document (base64, hex dumps, a megabyte without spaces) are not tokenized
at all: they are counted by an upper bound (one token per normalised character) and may be cut anywhere,
which keeps every input linear in its length; the few in prose (URLs, DOIs, chemical names; below 256
characters) are tokenized. A chunk cut inside a run that was tokenized (only possible with
a small budget) is checked with the real tokenizer and shortened until it fits. Other tokenizers get the
same plan, but every chunk is checked that way.

**Blobs are left out** (version 4): a run of at least :data:`BLOB_RUN` characters made only of base64's or hex's
letters (a base64 attachment, a ``data:`` URI, a hex dump), with the runs of the same kind that follow it across
whitespace (a MIME body wrapped at 76 characters), is no language: no chunk covers it, as none covers a Markdown
file's front matter. The text is stored as it was, and every offset is still into it (``text[start:end]`` is the
passage); the chunks on either side of a blob end and start at it. A 2 MB base64 blob in a Markdown file made
9,447 chunks of noise, each embedded, and each a BM25 match for any query sharing a few letters with it.

Version 1 was ``semantic-text-splitter`` with the model's tokenizer: slower per chunk, and superlinear on
pathological input (figures: docs/performance.md#choices-measured-in-the-code).
"""

from __future__ import annotations

import bisect
import json
import operator
import re
import unicodedata
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate
from typing import Any

from tokenizers import Tokenizer

from citeline.errors import IndexMismatchError, SettingsError

#: Tokens the model adds around every input ([CLS] and [SEP] for BERT-style encoders).
SPECIAL_TOKENS = 2
#: Changes whenever the same text and settings may give other chunks; recorded in the index meta so that chunk
#: ids stay comparable. 1: semantic-text-splitter 0.33; 2: this module's run-based planner; 3: the same,
#: filling and overlapping chunks as version 1 did (SciFact: 13,081 chunks like version 1, against 13,868).
CHUNKER_VERSION = 4  # 4: blobs left out (the module docstring)
#: What the model embeds for each chunk, recorded in a new index's meta (``embed_text``): ``"chunk"``, the chunk's
#: text as stored, or ``"title + chunk"``, the document's title on a line before it (a contextual chunk header)
#: unless the chunk already starts with it; offsets and stored text are the chunk's own either way. "chunk" ships:
#: headers lowered dense nDCG@10 on SciFact train (docs/quality.md#baseline-rows-and-tuning-on-train).
#: Indexes made before this setting have no ``embed_text`` in their meta and embed the chunk alone.
EMBED_TEXT = "chunk"
EMBED_TEXTS = ("chunk", "title + chunk")
#: Whether a new index also embeds each document whole (``document_vectors`` in its meta;
# ``citeline.ingest.embed_step``,
#: the ``whole`` document signal). Off: on SciFact train its gain to the default fusion is within the noise, for
#: over half again the ingest CPU (docs/quality.md#choices-measured-in-the-code);
#: ``Index.create(document_vectors=True)`` or ``citeline ingest --document-vectors`` keeps them. Indexes made
#: before this setting have none.
DOCUMENT_VECTORS = False
#: Runs at least this long may be counted by an upper bound instead of the tokenizer, whose cost per character is
#: several times higher on long runs such as base64 (docs/performance.md#choices-measured-in-the-code).
LONG_RUN = 32
#: Runs from ``LONG_RUN`` to below this length are still tokenized when all of a document's long runs make at
#: most 1/``LONG_SHARE`` of its characters: in prose they are a few URLs, DOIs or chemical names, whose bound
#: (one token per character) wasted chunk fill, so counting them exactly fills chunks fuller
#: (docs/performance.md#choices-measured-in-the-code). Base64 or hex dumps are mostly long runs, so they keep the
#: cheap bound.
COUNTED_RUN = 256
LONG_SHARE = 10
#: Distinct runs kept in the token-count cache before it is emptied (about 100 bytes each).
CACHE_LIMIT = 500_000

# Whitespace as the BERT tokenizer splits on it: Python's whitespace minus the control characters
# (\v, \f, \x1c-\x1f, \x85), which BertNormalizer deletes instead of splitting on.
_NOT_SPLIT = r"\S\x0b\x0c\x1c-\x1f\x85"
_RUN = re.compile(rf"[{_NOT_SPLIT}]+")
_NON_SPACE = re.compile(r"\S")
_HEADING = re.compile(r"(?<=\S)\s*\n(?= {0,3}#{1,6}(?:[ \t]|$))", re.MULTILINE)
_PARAGRAPH = re.compile(r"(?<=\S)[^\S\n]*\n[^\S\n]*\n")
_LINE = re.compile(r"(?<=\S)[^\S\n]*\n")
# A sentence ends after . ! ? … (and closing quotes or brackets) before whitespace and a word that does not
# start in lower case ("e.g. the" is no sentence end), or right after a CJK full stop.
_SENTENCE = re.compile(rf"[.!?…。！？][\"'”’»)\]]*(?=[^{_NOT_SPLIT}]+(?![^{_NOT_SPLIT}]|[a-z]))|[。！？](?=\S)")
#: The shortest run (no whitespace) of base64 or hex letters taken for a blob: longer than any word, identifier
#: or hash people search for (a SHA-256 is 64 hex letters), shorter than a line of a MIME-wrapped attachment.
BLOB_RUN = 100
#: A run in which these are all the characters, bar quotes and brackets around it, is blob-like.
_BLOB_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]+")
#: A data URI's head: what follows it in its run is the encoded data, whatever its length.
_DATA_URI = re.compile(r"data:[\w.+-]*/?[\w.+-]*(?:;[\w.+=-]+)*;base64,", re.IGNORECASE)
#: A line of a wrapped attachment (MIME wraps base64 at 76 characters, PEM at 64): runs this long or longer that
#: follow one another across whitespace, at least :data:`BLOB_LINES` of them, are a blob too.
BLOB_LINE = 60
BLOB_LINES = 3
#: Runs of non-whitespace at least BLOB_LINE long: the candidates (one pass of the text, linear).
_LONG_RUN = re.compile(rf"\S{{{BLOB_LINE},}}")
#: Runs of non-whitespace that may continue a blob after whitespace (a MIME body's next line).
_ANY_RUN = re.compile(r"\S+")


def blob_spans(text: str) -> list[tuple[int, int]]:
    """The spans ``(start, end)`` of ``text`` that hold blobs (see the module docstring), in order, merged."""
    spans: list[tuple[int, int]] = []
    for found in _LONG_RUN.finditer(text):
        if spans and found.start() < spans[-1][1]:
            continue  # inside a blob already found
        start, end = _blob_in(found.group(), found.start())
        if start == end:
            continue
        # The runs that follow across whitespace and are blob-like too (MIME lines; the last one may be short).
        at, lines = end, 1
        while (following := _ANY_RUN.search(text, at)) is not None:
            run = following.group()
            if not _BLOB_TOKEN.fullmatch(run):
                break
            if len(run) < BLOB_LINE:  # the last line of a wrapped blob, or a word: the blob ends here
                if lines >= BLOB_LINES and (len(run) < 16 or any(c.isdigit() or c in "+/=" for c in run)):
                    end = following.end()
                break
            end = at = following.end()
            lines += 1
        if end - start >= BLOB_RUN and (lines >= BLOB_LINES or found.end() - found.start() >= BLOB_RUN):
            spans.append((start, end))
    return spans


def _blob_in(run: str, offset: int) -> tuple[int, int]:
    # The blob in one long run (as offsets into the text): after a data URI's head, or the run without the
    # quotes and brackets around it when the rest is base64/hex letters; (offset, offset) when it is none.
    head = _DATA_URI.search(run)
    if head is not None and len(run) - head.end() >= 16:
        tail = run[head.end() :].rstrip("\"')]>,;")
        return offset + head.end(), offset + head.end() + len(tail)
    core = run.strip("\"'()[]<>,;:.")
    if len(core) < BLOB_LINE or not _BLOB_TOKEN.fullmatch(core):
        return offset, offset
    if not any(c.isdigit() for c in core) or not any(c.isalpha() for c in core):
        return offset, offset  # a line of dashes, a word repeated: not an encoding
    start = offset + run.index(core)
    return start, start + len(core)


#: Characters past a candidate cut that the boundary patterns may need to look at.
_LOOKAHEAD = 64


@dataclass(frozen=True)
class ChunkSpan:
    """One chunk of a document: ``text == document_text[char_start:char_end]``."""

    ordinal: int
    char_start: int
    char_end: int
    text: str


@dataclass
class _Units:
    """A document as consecutive counted units: whole runs, or pieces of long runs.

    Machine integers (``array``), not lists of int objects: a text at the size limit made of one-letter words has
    two million units, which as lists of Python ints and span tuples held most of a run's peak memory
    (docs/reliability.md#hostile-files)."""

    start: Sequence[int]
    end: Sequence[int]
    cum: Sequence[int]  # cum[k] = tokens (or their upper bound) of units 0..k-1
    run_first: Sequence[int]  # index of the first unit of the run unit k belongs to
    counted: Sequence[int]  # 1 when the unit's count came from the tokenizer (cutting inside it is inexact)


def check_settings(max_tokens: int, overlap_tokens: int, model_max_tokens: int) -> None:
    """Refuse chunk settings the model cannot read: :class:`SettingsError` (a ``ValueError``) saying the range."""
    budget = model_max_tokens - SPECIAL_TOKENS
    if not 8 <= max_tokens <= budget:  # 8: IndexSettings' declared minimum (ingest.options.MIN_CHUNK_TOKENS, tested)
        raise SettingsError(
            f"max_tokens must be between 8 and {budget} (the model reads {model_max_tokens} tokens, "
            f"{SPECIAL_TOKENS} of them special); got {max_tokens}"
        )
    if not 0 <= overlap_tokens < max_tokens // 2:
        raise SettingsError(f"overlap_tokens must be between 0 and {max_tokens // 2 - 1}; got {overlap_tokens}")


#: Token overlap between the chunks of a new index, unless given.
DEFAULT_OVERLAP_TOKENS = 32


def resolve_settings(max_tokens: int | None, overlap_tokens: int | None, model_max_tokens: int) -> tuple[int, int]:
    """The chunk settings of a new index, checked before anything is written: the model's whole window and
    :data:`DEFAULT_OVERLAP_TOKENS` unless given."""
    max_tokens = model_max_tokens - SPECIAL_TOKENS if max_tokens is None else max_tokens
    overlap_tokens = DEFAULT_OVERLAP_TOKENS if overlap_tokens is None else overlap_tokens
    check_settings(max_tokens, overlap_tokens, model_max_tokens)
    return max_tokens, overlap_tokens


def new_settings(
    max_tokens: int | None, overlap_tokens: int | None, model_max_tokens: int, document_vectors: bool | None
) -> dict[str, Any]:
    """A new index's chunking settings as ``catalog.new_meta``'s keywords: :func:`resolve_settings`, this chunker's
    version and embedded text, and ``document_vectors`` (:data:`DOCUMENT_VECTORS` unless given)."""
    max_tokens, overlap_tokens = resolve_settings(max_tokens, overlap_tokens, model_max_tokens)
    whole = DOCUMENT_VECTORS if document_vectors is None else document_vectors
    settings = {"max_tokens": max_tokens, "overlap_tokens": overlap_tokens, "document_vectors": whole}
    return {**settings, "chunker_version": CHUNKER_VERSION, "embed_text": EMBED_TEXT}


def check_same_chunking(index_dir: object, meta: dict, max_tokens: int | None, overlap_tokens: int | None) -> None:
    """Refuse chunk settings other than those the existing index ``meta`` was built with (None: the index's own)."""
    have = {"max_tokens": meta["max_tokens"], "overlap_tokens": meta["overlap_tokens"]}
    wanted = {
        "max_tokens": have["max_tokens"] if max_tokens is None else max_tokens,
        "overlap_tokens": have["overlap_tokens"] if overlap_tokens is None else overlap_tokens,
    }
    if wanted != have:
        raise IndexMismatchError(
            f"{index_dir} was built with chunking {have}, not {wanted}; use those settings, or a new --index directory"
        )


class Chunker:
    """Split text into chunks of at most ``max_tokens`` model tokens with ``overlap_tokens`` of overlap."""

    def __init__(
        self,
        tokenizer_file: str,
        *,
        max_tokens: int,
        overlap_tokens: int,
        model_max_tokens: int,
        embed_text: str = EMBED_TEXT,
        document_vectors: bool = False,
    ):
        check_settings(max_tokens, overlap_tokens, model_max_tokens)
        if embed_text not in EMBED_TEXTS:
            raise SettingsError(f"embed_text must be one of {', '.join(EMBED_TEXTS)}; got {embed_text!r}")
        self.tokenizer_file = tokenizer_file
        self.embed_text = embed_text
        #: the index also embeds each document whole (``citeline.ingest.embed_step``,
        # ``Index.create(document_vectors=)``)
        self.document_vectors = document_vectors
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self._counts: dict[str, int] = {}
        # A piece of a long run weighs at most this much, so one always fits after the overlap.
        self._piece_weight = max(1, (max_tokens - overlap_tokens) // 2)

    @classmethod
    def of_index(cls, tokenizer_file: str, meta: dict[str, Any]) -> Chunker:
        """The chunker with an index's settings (from its meta)."""
        return cls(
            tokenizer_file,
            max_tokens=meta["max_tokens"],
            overlap_tokens=meta["overlap_tokens"],
            model_max_tokens=meta["model_max_tokens"],
            embed_text=meta.get("embed_text", "chunk"),  # indexes older than the setting embed chunks alone
            document_vectors=meta.get("document_vectors") is True,
        )

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer with truncation and padding off, so it counts every token."""
        tokenizer = Tokenizer.from_file(self.tokenizer_file)
        # The bundled tokenizer.json truncates at 128 tokens; counting through it would under-measure long
        # pieces and let oversized chunks through.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer

    @cached_property
    def _additive(self) -> bool:
        """True when token counts add up over whitespace-separated runs (BERT normaliser, pre-tokenizer, WordPiece)."""
        config = json.loads(self.tokenizer.to_str())
        normalizer = (config.get("normalizer") or {}).get("type", "BertNormalizer")
        pre_tokenizer = (config.get("pre_tokenizer") or {}).get("type")
        model = (config.get("model") or {}).get("type")
        return normalizer == "BertNormalizer" and pre_tokenizer == "BertPreTokenizer" and model == "WordPiece"

    def split(self, text: str, *, markdown: bool = False) -> list[ChunkSpan]:
        """Chunks of ``text`` in document order; Markdown headings are preferred breaks when ``markdown`` is true."""
        return self.split_many([(text, markdown)])[0]

    def split_many(self, texts: Sequence[tuple[str, bool]]) -> list[list[ChunkSpan]]:
        """``split`` for many ``(text, markdown)`` pairs, in order.

        The runs no earlier document had are tokenized in one batch (multi-threaded in Rust); the planning
        itself is pure Python and linear in the text. Blobs (:func:`blob_spans`) are left out: the text between
        them is chunked piece by piece, with offsets into the whole text and ordinals counted over it.
        """
        blobs = [blob_spans(text) for text, _ in texts]
        if not any(blobs):
            return self._split_pieces(texts)
        pieces: list[tuple[str, bool]] = []
        owners: list[tuple[int, int]] = []  # (document, offset of the piece in its text)
        for number, ((text, markdown), spans) in enumerate(zip(texts, blobs, strict=True)):
            at = 0
            for start, end in [*spans, (len(text), len(text))]:
                if text[at:start].strip():
                    pieces.append((text[at:start], markdown))
                    owners.append((number, at))
                at = end
        chunks: list[list[ChunkSpan]] = [[] for _ in texts]
        for (number, offset), planned in zip(owners, self._split_pieces(pieces), strict=True):
            own = chunks[number]
            own.extend(
                ChunkSpan(len(own) + ordinal, span.char_start + offset, span.char_end + offset, span.text)
                for ordinal, span in enumerate(planned)
            )
        return chunks

    def _split_pieces(self, texts: Sequence[tuple[str, bool]]) -> list[list[ChunkSpan]]:
        # split_many's planning of texts that hold no blob.
        runs = [_runs(text) for text, _ in texts]
        limits = [_exact_below(words, len(text)) for (text, _), (words, _, _) in zip(texts, runs, strict=True)]
        self._count_new_runs(
            word
            for (words, _, _), limit in zip(runs, limits, strict=True)
            for word in (words if limit == COUNTED_RUN else (word for word in words if len(word) < limit))
        )
        counts = self._counts  # read once: a concurrent split_many may replace the cache when it is full
        return [
            self._plan(text, markdown, self._units(doc_runs, counts, limit))
            for (text, markdown), doc_runs, limit in zip(texts, runs, limits, strict=True)
        ]

    def count_tokens(self, text: str) -> int:
        """Number of model tokens in ``text``, without the special tokens."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    @property
    def settings(self) -> dict[str, int | str]:
        """What must match between the chunker that built an index and one that extends it."""
        return {
            "max_tokens": self.max_tokens,
            "overlap_tokens": self.overlap_tokens,
            "chunker_version": CHUNKER_VERSION,
            "embed_text": self.embed_text,
        }

    # -- counting ------------------------------------------------------------------------------------------

    def _count_new_runs(self, runs: Iterable[str]) -> None:
        counts = self._counts
        new = [run for run in set(runs) if run not in counts and len(run) < COUNTED_RUN]
        new.sort()  # a deterministic batch order (set order varies between processes)
        if not new:
            return
        if len(counts) + len(new) > CACHE_LIMIT:
            counts = self._counts = {}
        encodings = self.tokenizer.encode_batch_fast(new, add_special_tokens=False)
        counts.update(zip(new, (len(encoding.ids) for encoding in encodings), strict=True))

    def _units(self, doc_runs: _Runs, counts: dict[str, int], limit: int) -> _Units:
        """The document's counted units; runs shorter than ``limit`` are tokenized, longer ones bounded."""
        words, starts, ends = doc_runs
        if not words or max(map(len, words)) < limit:  # the common case, without a loop in Python
            weights = list(map(counts.get, words))
            if None not in weights:  # else the cache was emptied by another call meanwhile
                cum = array("q", [0])
                cum.extend(accumulate(weights))  # type: ignore[arg-type]  # no None: checked above
                return _Units(starts, ends, cum, range(len(words)), b"\x01" * len(words))
        start, end, cum, run_first, counted = array("q"), array("q"), array("q", [0]), array("q"), bytearray()
        total = 0
        piece = self._piece_weight
        for run_start, run_end, run in zip(starts, ends, words, strict=True):
            first = len(start)
            if run_end - run_start < limit:
                count = counts.get(run)
                total += self.count_tokens(run) if count is None else count
                start.append(run_start)
                end.append(run_end)
                cum.append(total)
                run_first.append(first)
                counted.append(1)
                continue
            # A long run: WordPiece emits at most one token per character of the normalised text (lower case,
            # NFD), so that length bounds the tokens of any piece of the run, cut anywhere.
            ascii_run = run.isascii()
            step = piece if ascii_run else max(1, piece // 4)
            for offset in range(0, run_end - run_start, step):
                part = run[offset : offset + step]
                weight = len(part) if ascii_run else len(unicodedata.normalize("NFD", part.lower()))
                total += weight
                start.append(run_start + offset)
                end.append(run_start + offset + len(part))
                cum.append(total)
                run_first.append(first)
                counted.append(0)
        return _Units(start, end, cum, run_first, counted)

    # -- planning ------------------------------------------------------------------------------------------

    def _plan(self, text: str, markdown: bool, units: _Units) -> list[ChunkSpan]:
        spans: list[ChunkSpan] = []
        size = len(text)
        start = _skip_space(text, 0)
        low = start  # a cut must lie after the previous chunk's end, so every chunk advances
        while start < size:
            end, exact, level = self._cut(text, markdown, units, start, low, size)
            exact = exact and _is_exact_cut(units, start)
            chunk = text[start:end].rstrip()
            if not exact or not self._additive:
                chunk, end, level = self._fit(text, markdown, units, start, low, chunk, level)
            if not chunk:
                if start != _skip_space(text, low):  # the overlap left no room: this chunk starts without it
                    start = _skip_space(text, low)
                    continue
                chunk = text[start]  # unreachable in practice; one character always fits, and we must advance
            end = start + len(chunk)
            spans.append(ChunkSpan(len(spans), start, end, chunk))
            if _skip_space(text, end) >= size:
                break
            next_start = self._overlap_start(text, markdown, units, start, end, level)
            low = end
            start = next_start
        return spans

    def _limit(self, text: str, units: _Units, start: int, size: int) -> tuple[int, bool]:
        """The furthest end for a chunk from ``start`` within the budget, and whether it is exactly counted."""
        first = bisect.bisect_right(units.end, start)  # the first unit that ends after start
        if first == len(units.start):
            return size, True
        last = bisect.bisect_right(units.cum, units.cum[first] + self.max_tokens) - 1
        if last == len(units.start):
            return size, True
        if last > first:
            return units.start[last], True
        # Not even the first unit fits: a run with more tokens than the budget. Cut inside it on the tokenizer's
        # own offsets; such a piece is re-counted by ``_fit``.
        local = self.tokenizer.encode(text[start : units.end[first]], add_special_tokens=False).offsets
        if not local:
            return units.end[first], False
        return start + max(1, local[min(self.max_tokens, len(local) - 1)][0]), False

    def _cut(self, text: str, markdown: bool, units: _Units, start: int, low: int, size: int) -> tuple[int, bool, int]:
        """Where the chunk from ``start`` ends: the best boundary after ``low`` within the budget.

        Also returns whether the chunk is exactly counted, and the level it was cut at: an index into
        ``_levels(markdown)``, then ``len(levels)`` for a word boundary and ``len(levels) + 1`` for anything.
        """
        limit, exact = self._limit(text, units, start, size)
        levels = _levels(markdown)
        if limit >= size and low < size:
            return size, exact, len(levels) + 1  # the last chunk: no overlap follows, its level is moot
        for level, (pattern, use_end) in enumerate(levels):
            # The level is the highest one with a boundary in the budget, counted from ``start`` as version 1
            # did; when all its boundaries lie within the previous chunk, this chunk would only repeat it
            # (version 1 emitted it and dropped it): an empty cut makes ``_plan`` start after the previous one.
            found = _last_match(pattern, use_end, text, start, limit)
            if found is not None:
                if found <= low:
                    return start, True, level
                return found, exact and _is_exact_cut(units, found), level
        if exact:
            # Word boundary: the start of the run holding the first unit that does not fit.
            index = bisect.bisect_left(units.start, limit)
            if index < len(units.start) and units.start[index] == limit:
                word = units.start[units.run_first[index]]
                if word > low:
                    return word, True, len(levels)
        end = max(limit, low + 1)
        return end, exact and _is_exact_cut(units, end), len(levels) + 1

    def _fit(
        self, text: str, markdown: bool, units: _Units, start: int, low: int, chunk: str, level: int
    ) -> tuple[str, int, int]:
        """Shorten ``chunk`` (from ``start``, cut at ``level``) until the real tokenizer agrees it fits."""
        levels = _levels(markdown)
        while chunk:
            offsets = self.tokenizer.encode(chunk, add_special_tokens=False).offsets
            if len(offsets) <= self.max_tokens:
                break
            limit = start + offsets[self.max_tokens][0]
            if limit <= low:
                return "", start, level
            end, level = limit, len(levels) + 1
            for rank, (pattern, use_end) in enumerate(levels):
                found = _last_match(pattern, use_end, text, low, limit)
                if found is not None:
                    end, level = found, rank
                    break
            chunk = text[start:end].rstrip()
        return chunk, start + len(chunk), level

    def _overlap_start(self, text: str, markdown: bool, units: _Units, start: int, end: int, level: int) -> int:
        """Where the next chunk starts: the earliest boundary of the chunk's own level (or a higher one) after
        ``start`` that leaves at most ``overlap_tokens`` up to ``end``; right after ``end`` when there is none.

        This is how version 1 (semantic-text-splitter) overlapped: whole sections of the level the chunk was
        built from, so a chunk of paragraphs overlaps by whole paragraphs (usually not at all) and a chunk of
        sentences by whole sentences of at most ``overlap_tokens``. Falling back to a word-level overlap
        instead, as version 2 did, made more chunks on SciFact, each starting mid-sentence or in the previous
        paragraph (the title), and cost lexical nDCG@10 (docs/quality.md#choices-measured-in-the-code).
        """
        after = _skip_space(text, end)
        if not self.overlap_tokens:
            return after
        stop = bisect.bisect_left(units.start, end)  # units before stop are in the chunk
        first = bisect.bisect_left(units.cum, units.cum[stop] - self.overlap_tokens)
        if first >= stop:
            return after
        window = max(units.start[first], start + 1)
        levels = _levels(markdown)
        best = after
        # A boundary's match may begin in the run before the window (a sentence's final punctuation).
        scan = max(units.start[first - 1] if first else 0, start)
        for pattern, use_end in levels[: level + 1]:
            for match in pattern.finditer(text, scan, min(len(text), end + _LOOKAHEAD)):
                candidate = _skip_space(text, match.end() if use_end else match.start())
                if candidate >= min(best, end):
                    break
                if candidate >= window:
                    best = candidate
                    break
        if level >= len(levels):  # a chunk cut at a word (or anywhere) overlaps by words
            index = bisect.bisect_left(units.start, window)
            if index < stop and units.start[index] < best:
                best = units.start[index]
        return best if best < end else after


#: A text's runs, their starts and their ends (:func:`_runs`).
_Runs = tuple[list[str], "array[int]", "array[int]"]


def _runs(text: str) -> _Runs:
    """The whitespace-delimited runs of ``text``, their starts and their ends (a run's end is its start plus its
    length: the run is the match)."""
    words = _RUN.findall(text)
    starts = array("q", map(re.Match.start, _RUN.finditer(text)))
    return words, starts, array("q", map(operator.add, starts, map(len, words)))


def _exact_below(words: list[str], size: int) -> int:
    """Runs of a document of ``size`` characters shorter than this are tokenized (see ``COUNTED_RUN``)."""
    long_chars = sum(len(word) for word in words if len(word) >= LONG_RUN)
    return COUNTED_RUN if long_chars * LONG_SHARE <= size else LONG_RUN


def _skip_space(text: str, position: int) -> int:
    match = _NON_SPACE.search(text, position)
    return match.start() if match else len(text)


def _levels(markdown: bool) -> tuple[tuple[re.Pattern[str], bool], ...]:
    """Boundary patterns from the most to the least preferred, and whether the cut is at the match's end."""
    plain = ((_PARAGRAPH, False), (_LINE, False), (_SENTENCE, True))
    return ((_HEADING, False), *plain) if markdown else plain


def _last_match(pattern: re.Pattern[str], use_end: bool, text: str, low: int, limit: int) -> int | None:
    """The last cut position ``p`` of ``pattern`` with ``low < p <= limit``, scanning only that window."""
    found = None
    for match in pattern.finditer(text, max(low - 8, 0), min(len(text), limit + _LOOKAHEAD)):
        position = match.end() if use_end else match.start()
        if position > limit:
            break
        if position > low:
            found = position
    return found


def _is_exact_cut(units: _Units, position: int) -> bool:
    """Whether cutting at ``position`` keeps token counts additive (not inside a tokenizer-counted run)."""
    index = bisect.bisect_right(units.start, position) - 1
    return index < 0 or not (units.counted[index] and units.start[index] < position < units.end[index])


def embed_text(title: str, text: str) -> str:
    """What the model embeds for a chunk: its title on a line before it (see ``chunking.EMBED_TEXT``), unless the
    title is empty or the chunk already starts with it (the first chunk of a Markdown file under its heading)."""
    if not title or text.lstrip("# ").startswith(title):
        return text
    return f"{title}\n{text}"
