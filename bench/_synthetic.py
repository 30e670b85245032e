"""A synthetic SciFact-like corpus and a model-free embedder, for ``bench/scale.py``.

The corpus: records with a title and an abstract, written as JSONL files of ``records_per_file`` records each (so a
one-record edit touches one file). Words are drawn from SciFact's own vocabulary with its observed frequencies (a
Zipf-like law: "the" 4.4%, "of" 4.2%, ... 47k surface forms over 1.06M tokens), plus a Zipf tail of made-up rare terms
so that the vocabulary keeps growing with the corpus as real ones do (Heaps' law) instead of saturating at 47k.
Sentence lengths and sentences per record are resampled from SciFact's (median 21 words, 8 sentences), shortened by
``LENGTH_SCALE`` so that a record makes about 2.2 chunks of 254 tokens with 32 of overlap (SciFact itself makes 2.5).
Everything is deterministic from ``(seed, file number)``, so any file can be regenerated alone.

The embedder: a hashed, signed bag of words in 384 dimensions, L2-normalised, vectorised with numpy, so that an
ingest measures chunking, storage, commit and search rather than a model.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"
DEFAULT_RECORDS_PER_FILE = 1000

#: Sentence lengths are SciFact's times this. Calibrated with ``calibrate()`` (500 records, seed 0): SciFact's own
#: lengths give 2.52 chunks a record; 0.86 gives 2.20.
LENGTH_SCALE = 0.86
#: Share of words drawn from the made-up rare tail, and the tail's Zipf exponent. With these, 100k chunks (45k
#: records) have about 0.3M distinct words against SciFact's 47k for 5k records.
RARE_SHARE = 0.03
RARE_EXPONENT = 1.3
COMMA_SHARE = 0.06  # SciFact has about one comma every 16 words

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-']*|\d+(?:\.\d+)?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Statistics:
    """What the generator resamples from SciFact."""

    words: list[str]
    cumulative: np.ndarray  # cumulative word probabilities, for inverse-CDF sampling
    sentence_lengths: np.ndarray
    sentences_per_record: np.ndarray
    title_lengths: np.ndarray


@cache
def scifact_statistics(corpus: Path = SCIFACT / "corpus.jsonl") -> Statistics:
    """Word frequencies (surface forms, so acronyms keep their case) and length distributions of SciFact."""
    counts: Counter[str] = Counter()
    sentence_lengths: list[int] = []
    sentences_per_record: list[int] = []
    title_lengths: list[int] = []
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            sentences = [s for s in _SENTENCE.split(record["text"].strip()) if s]
            sentences_per_record.append(max(1, len(sentences)))
            sentence_lengths.extend(max(1, len(s.split())) for s in sentences)
            title_lengths.append(max(1, len(record.get("title", "").split())))
            counts.update(_WORD.findall(record["text"]))
    words = [word for word, _ in counts.most_common()]
    frequencies = np.array([counts[word] for word in words], dtype=np.float64)
    return Statistics(
        words=words,
        cumulative=np.cumsum(frequencies / frequencies.sum()),
        sentence_lengths=np.array(sentence_lengths, dtype=np.int64),
        sentences_per_record=np.array(sentences_per_record, dtype=np.int64),
        title_lengths=np.array(title_lengths, dtype=np.int64),
    )


def _rare_word(rank: int, words: Sequence[str]) -> str:
    # A made-up term such as "cytokinase-17": two vocabulary stems and the rank, so distinct ranks are distinct words.
    first = words[(rank * 7919) % len(words)].lower()
    second = words[(rank * 104729 + 13) % len(words)].lower()
    return f"{first[:6]}{second[-4:]}-{rank}"


class Generator:
    """Deterministic SciFact-like records: ``records(file_number, count)`` is the same for the same seed."""

    def __init__(self, seed: int = 0, *, length_scale: float = LENGTH_SCALE):
        self.seed = seed
        self.length_scale = length_scale
        self.stats = scifact_statistics()

    def _words(self, rng: np.random.Generator, count: int) -> list[str]:
        words = self.stats.words
        picks = np.searchsorted(self.stats.cumulative, rng.random(count), side="right")
        picks = np.minimum(picks, len(words) - 1)
        chosen = [words[i] for i in picks.tolist()]
        rare = np.flatnonzero(rng.random(count) < RARE_SHARE)
        ranks = rng.zipf(RARE_EXPONENT, size=len(rare))
        for position, rank in zip(rare.tolist(), ranks.tolist(), strict=True):
            chosen[position] = _rare_word(int(rank), words)
        return chosen

    def _sentences(self, rng: np.random.Generator, lengths: np.ndarray) -> list[str]:
        words = self._words(rng, int(lengths.sum()))
        commas = rng.random(len(words)) < COMMA_SHARE
        sentences = []
        start = 0
        for length in lengths.tolist():
            piece = words[start : start + length]
            flags = commas[start : start + length]
            start += length
            text = " ".join(
                w + "," if f and i < length - 1 else w for i, (w, f) in enumerate(zip(piece, flags, strict=True))
            )
            sentences.append(text[:1].upper() + text[1:] + ".")
        return sentences

    def text(self, rng: np.random.Generator) -> str:
        """One abstract."""
        stats = self.stats
        count = int(rng.choice(stats.sentences_per_record))
        lengths = rng.choice(stats.sentence_lengths, size=count)
        lengths = np.maximum(1, np.rint(lengths * self.length_scale)).astype(np.int64)
        return " ".join(self._sentences(rng, lengths))

    def title(self, rng: np.random.Generator) -> str:
        """One title (no final period, as SciFact's mostly are)."""
        length = int(rng.choice(self.stats.title_lengths))
        return self._sentences(rng, np.array([length]))[0].rstrip(".")

    def records(self, file_number: int, count: int, *, first_id: int) -> list[dict[str, str]]:
        """``count`` records for one file; ids run from ``first_id``."""
        rng = np.random.default_rng([self.seed, file_number])
        return [{"_id": str(first_id + i), "title": self.title(rng), "text": self.text(rng)} for i in range(count)]

    def edited_text(self, record_id: str, version: int) -> str:
        """A new abstract for a record, for update passes (deterministic from the id and the edit's number)."""
        return self.text(np.random.default_rng([self.seed, 1_000_003, int(record_id), version]))


def file_name(file_number: int) -> str:
    """Name of one corpus file."""
    return f"part-{file_number:05d}.jsonl"


def write_corpus(
    directory: Path, records: int, *, seed: int = 0, records_per_file: int = DEFAULT_RECORDS_PER_FILE
) -> list[Path]:
    """Write ``records`` records into ``directory`` as JSONL files of ``records_per_file`` each; return the files."""
    directory.mkdir(parents=True, exist_ok=True)
    generator = Generator(seed)
    paths = []
    for number, start in enumerate(range(0, records, records_per_file)):
        count = min(records_per_file, records - start)
        path = directory / file_name(number)
        lines = (json.dumps(r, ensure_ascii=False) for r in generator.records(number, count, first_id=start))
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def read_records(path: Path) -> list[dict[str, str]]:
    """The records of one corpus file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_records(path: Path, records: Sequence[dict[str, str]]) -> None:
    """Rewrite one corpus file (via a temporary name, so an ingest never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    tmp.replace(path)


def iter_texts(directory: Path) -> Iterator[str]:
    """Every record's text as the JSONL parser stores it (title, blank line, abstract)."""
    for path in sorted(directory.glob("*.jsonl")):
        for record in read_records(path):
            yield f"{record['title']}\n\n{record['text']}"


# ---------------------------------------------------------------- embedder

_TOKEN = re.compile(r"\w+")
_CACHE_LIMIT = 200_000  # bounds the word -> bucket cache (SciFact's vocabulary is 47k), so RSS does not grow with N


def _tokenizer_file() -> str:
    from citeline.model.embedding import resolve_model_path

    return str(Path(resolve_model_path("all-MiniLM-L6-v2")) / "tokenizer.json")


class HashBowEmbedder:
    """A deterministic model-free embedder: signed hashed bag of words in 384 dimensions, unit length.

    It satisfies ``citeline.index.Embedder``. Chunk sizes stay real because it hands the real model's tokenizer to
    the chunker. Texts that share words get similar vectors; random chunks have a mean cosine of about 0.3 (the
    frequent words are shared), so it is a harder case for approximate search than an even spread would be.
    Measured cost: 40 microseconds of CPU per chunk (2,193 chunks of 254 tokens, warm cache), against about
    2,200 for chunking them.
    """

    model_name = "hash-bow-384"
    backend = "numpy"
    fingerprint = "hash-bow-384-v1"
    dimension = 384
    max_seq_length = 256
    model_path = None  #: no model files

    def __init__(self) -> None:
        self.tokenizer_file = _tokenizer_file()
        self._codes: dict[str, int] = {}

    @property
    def query_encoder(self) -> HashBowEmbedder:
        """Itself: queries are embedded as documents are."""
        return self

    def prepare_query_encoder(self) -> None:
        """Nothing to prepare."""

    def _code(self, word: str) -> int:
        code = zlib.crc32(word.encode())
        if len(self._codes) < _CACHE_LIMIT:
            self._codes[word] = code
        return code

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """Unit-length float32 vectors, one row per text (``batch_size`` is accepted and ignored)."""
        tokens = [_TOKEN.findall(text.lower()) for text in texts]
        lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        flat = list(chain.from_iterable(tokens))
        codes_cache = self._codes
        codes = np.fromiter(
            (codes_cache[w] if w in codes_cache else self._code(w) for w in flat), dtype=np.int64, count=len(flat)
        )
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
        buckets = codes % self.dimension
        signs = np.where((codes >> 16) & 1, 1.0, -1.0)
        vectors = np.bincount(
            rows * self.dimension + buckets, weights=signs, minlength=len(texts) * self.dimension
        ).reshape(len(texts), self.dimension)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        empty = norms[:, 0] == 0
        vectors[empty] = 1.0
        norms[empty] = np.sqrt(self.dimension)
        return (vectors / norms).astype(np.float32)


def open_index(path: Path, hash_bow: bool = False) -> Any:
    """``Index.open(path)``, with :class:`HashBowEmbedder` for bench/scale.py's model-free indexes (``hash_bow``)."""
    from citeline import Index

    return Index.open(path, embedder=HashBowEmbedder()) if hash_bow else Index.open(path)
