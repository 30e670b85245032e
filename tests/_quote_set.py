"""Quote-level collapse's evaluation set (tests/data/quotes): loading it, and scoring collapse on it.

Shared by tests/unit/test_quotes.py (the precision and recall targets) and bench/collapse.py eval (which prints the
figures and times collapse on SciFact hits).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import numpy as np

from citeline.query.collapse import collapse, word_spans
from citeline.query.highlight import highlight
from citeline.query.plan import SearchResult

_QUOTED = re.compile(r"(?:^|(?<=\s))[\"“'‘«]([^\"”'’»]{20,})")


def load(path: Path) -> list[list[str]]:
    """The blocks of a pairs file: each a list of its parts (passage A, passage B[, quote A, quote B])."""
    text = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#"))
    blocks = []
    for block in text.strip().split("\n===\n"):
        parts = block.strip().split("\n---\n")
        blocks.append(parts[:2] + (parts[2].splitlines() if len(parts) > 2 else []))
    return blocks


def hit(doc_id: str, text: str, chunk_id: int, score: float) -> SearchResult:
    """A search hit whose chunk is the whole of a one-passage document."""
    result = SearchResult(
        text=text,
        score=score,
        doc_id=doc_id,
        source_path=doc_id,
        source_id=doc_id,
        title=doc_id,
        ordinal=0,
        char_start=0,
        char_end=len(text),
        content_hash="",
        run_id="",
        ingested_at="",
        model="",
        chunk_id=chunk_id,
    )
    return result


def query_of(passage: str) -> str:
    """What a reader would search for: the passage's first quote, or its first sentence."""
    quoted = _QUOTED.search(passage)
    return quoted.group(1) if quoted else passage.split(". ")[0]


def mangled(text: str) -> str:
    """The same text as another outlet's system might store it: NFD, no-break spaces, curly quotes."""
    text = re.sub(r'"([^"]*)"', "“\\1”", text)
    return unicodedata.normalize("NFD", text).replace(" ", "\u00a0", 3)


def collapsed_pair(a: str, b: str) -> SearchResult | None:
    """Collapse hits ``a`` and ``b`` (searched for A's quote); the merged result if they became one."""
    hits = highlight([hit("a", a, 1, 1.0), hit("b", b, 2, 0.9)], query_of(a))
    # Orthogonal chunk vectors: only the quote rule can merge them (the cosine rule is the existing one).
    vectors = np.eye(2, dtype=np.float32)
    results = collapse(hits, vectors, query_vector=vectors[0], encode=lambda t: np.zeros((len(t), 2), np.float32))
    return results[0] if len(results) == 1 else None


def coverage(passage: str, start: int, end: int, quote: str) -> float:
    """Share of the labelled quote's words that the span ``start:end`` of ``passage`` covers."""
    at = passage.index(quote)
    quote_words = word_spans(quote)
    inside = sum(start <= at + s and at + e <= end for s, e in quote_words)
    return inside / len(quote_words)


def evaluate(data: Path) -> dict[str, float]:
    """Precision, recall and span coverage of quote-level collapse on the evaluation set in ``data``."""
    positives, negatives = load(data / "shared.txt"), load(data / "topic.txt")
    found = false = mangled_found = 0
    covered: list[float] = []
    for a, b, quote_a, quote_b in positives:
        merged = collapsed_pair(a, b)
        if merged is not None:
            found += 1
            first, second = merged.sources
            covered.append(coverage(a, first.shared_start or 0, first.shared_end or 0, quote_a))
            covered.append(coverage(b, second.shared_start or 0, second.shared_end or 0, quote_b))
        mangled_found += collapsed_pair(a, mangled(b)) is not None
    for a, b in negatives:
        false += collapsed_pair(a, b) is not None
    return {
        "positives": len(positives),
        "negatives": len(negatives),
        "recall": found / len(positives),
        "precision": found / max(found + false, 1),
        "false_pairs": false,
        "recall_unicode_variant": mangled_found / len(positives),
        "quote_coverage_mean": float(np.mean(covered)) if covered else 0.0,
        "quote_coverage_min": float(np.min(covered)) if covered else 0.0,
    }
