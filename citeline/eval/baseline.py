"""Baseline rows for ``citeline eval``: what plain tools do with the same model on whole documents.

- ``dense-doc``: each document's ``title + " " + text`` encoded whole by the index's model (truncated at the
  model's 256 tokens, as BEIR, MTEB and txtai do), ranked by cosine.
- ``lexical-doc``: bm25s over whole documents (title + text) with its default scoring (lucene, k1=1.5, b=0.75)
  and citeline's analyzer (English stopwords, Snowball stemmer: "bm25s stemmed"; its SciFact
  figure: docs/quality.md#todays-figures).
- ``baseline``: reciprocal rank fusion, ``sum 1 / (60 + rank)``, of those two rankings' top 100 each.

Hybrid's gain over the ``baseline`` row is the figure a user can check on their own collection. Whole-document
vectors take minutes to encode, so they are cached under ``<cache>/baseline/`` by a fingerprint of the corpus
file's bytes and the model.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from citeline.model.embedding import cache_root
from citeline.util.arrays import load_npy

if TYPE_CHECKING:
    from citeline.model.embedding import Embedder

#: RRF's constant in the baseline (the usual 60 of Cormack et al. 2009, as most RRF implementations default to).
BASELINE_RRF_K = 60
#: Each ranking's depth fused by the baseline (enough for Recall@100).
BASELINE_DEPTH = 100
BASELINE_MODES = ("dense-doc", "lexical-doc", "baseline")


def document_texts(corpus: Path) -> tuple[list[str], list[str]]:
    """Corpus ids and ``title + " " + text`` of each record of a BEIR ``corpus.jsonl``."""
    ids, texts = [], []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            ids.append(str(record["_id"]))
            texts.append(f"{record.get('title') or ''} {record.get('text') or ''}".strip())
    return ids, texts


def corpus_fingerprint(corpus: Path, embedder: Embedder) -> str:
    """Names the cached whole-document vectors: the corpus file's bytes and the model's fingerprint."""
    digest = hashlib.sha256()
    with corpus.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    digest.update(embedder.fingerprint.encode())
    return digest.hexdigest()[:32]


def document_vectors(corpus: Path, texts: Sequence[str], embedder: Embedder, cache: Path | None = None) -> np.ndarray:
    """Whole-document vectors of ``texts`` (read from the cache when this corpus and model were encoded before)."""
    folder = (cache or cache_root()) / "baseline"
    path = folder / f"{corpus_fingerprint(corpus, embedder)}.npy"
    if path.is_file():
        vectors = load_npy(path)
        if vectors.shape[0] == len(texts):
            return vectors
    # Truncation at the model's limit is the point of this row: it is what plain whole-document encoding does.
    vectors = np.ascontiguousarray(embedder.encode(list(texts)), dtype=np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    staged = path.with_suffix(".tmp.npy")
    np.save(staged, vectors, allow_pickle=False)
    staged.replace(path)  # a cache file, not an index file: a torn write is just encoded again
    return vectors


def rrf(rankings: Sequence[Sequence[str]], k: float = BASELINE_RRF_K) -> list[str]:
    """Reciprocal rank fusion of document rankings (rank from 1; ties by first appearance)."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, 1):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=lambda doc: -fused[doc])


def baseline_rankings(
    corpus: Path,
    queries: dict[str, str],
    query_ids: Sequence[str],
    embedder: Embedder,
    *,
    cache: Path | None = None,
    depth: int = BASELINE_DEPTH,
) -> dict[str, tuple[dict[str, list[str]], float]]:
    """Per baseline mode: each query's document ranking, and the seconds the mode's searches took (scored by
    ``citeline.eval.beir.baseline_results``)."""
    from citeline.lexical.analyzer import LexicalIndex

    ids, texts = document_texts(corpus)
    vectors = document_vectors(corpus, texts, embedder, cache)
    lexical = LexicalIndex.build(np.arange(len(ids), dtype=np.int64), texts, method="lucene", k1=1.5, b=0.75)
    query_vectors = embedder.encode([queries[qid] for qid in query_ids])
    out: dict[str, tuple[dict[str, list[str]], float]] = {}
    start = time.perf_counter()
    dense: dict[str, list[str]] = {}
    for qid, vector in zip(query_ids, query_vectors, strict=True):
        scores = vectors @ vector
        top = np.argsort(-scores, kind="stable")[:depth]
        dense[qid] = [ids[i] for i in top]
    out["dense-doc"] = (dense, time.perf_counter() - start)
    start = time.perf_counter()
    lexical_rankings = {qid: [ids[c] for c, _ in lexical.search(queries[qid], depth)] for qid in query_ids}
    out["lexical-doc"] = (lexical_rankings, time.perf_counter() - start)
    start = time.perf_counter()
    fused = {qid: rrf([dense[qid], lexical_rankings[qid]])[:depth] for qid in query_ids}
    out["baseline"] = (fused, time.perf_counter() - start)
    return out


def describe() -> dict[str, Any]:
    """How the baseline rows are made (for reports)."""
    return {"rrf_k": BASELINE_RRF_K, "depth": BASELINE_DEPTH, "bm25": "lucene k1=1.5 b=0.75, stemmed"}
