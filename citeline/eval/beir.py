"""Retrieval quality on a BEIR-format dataset: nDCG@10 and Recall@100, documents ranked by their best chunk.

A BEIR directory holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and
``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score`` with a header line). The corpus is ingested like any
JSONL file (each record becomes a document whose ``source_id`` is ``corpus.jsonl#<_id>``), every query is searched
deep enough to rank at least 100 documents, and each document takes the score and position of its best chunk.

The metrics follow trec_eval / pytrec_eval (and ranx, which the tests compare against): graded gains
``rel / log2(rank + 1)``, the ideal DCG from the query's judged documents, relevance > 0 counts as relevant,
queries without any relevant document are skipped (as BEIR does), and a query whose search returns nothing
scores 0.
"""

from __future__ import annotations

import csv
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from citeline.errors import CitelineError
from citeline.query.plan import DEFAULT_FUSION, MODES, Fusion, fusion_for

if TYPE_CHECKING:
    from citeline.index import Index

#: Documents each ranking must reach: Recall@100 needs the first 100.
DOCUMENT_DEPTH = 100
NDCG_CUTOFF = 10
RECALL_CUTOFF = 100

Qrels = dict[str, dict[str, int]]
Ranking = list[str]  #: document ids, best first


class DatasetError(CitelineError):
    """A BEIR directory is missing a file or holds a malformed line."""


@dataclass
class BeirDataset:
    """A BEIR dataset as read from its directory (the corpus is left on disk for ingestion)."""

    root: Path
    corpus: Path
    queries: dict[str, str]  #: query id -> text, only queries with at least one relevant document
    qrels: Qrels  #: query id -> {corpus id: relevance}
    split: str


def _read_jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}: line {number} is not JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise DatasetError(f"{path}: line {number} is not a JSON object")
            yield number, record


def load_beir(directory: str | os.PathLike[str], split: str = "test") -> BeirDataset:
    """Read a BEIR directory's queries and the qrels of ``split``; keep queries with a relevant document."""
    root = Path(directory)
    corpus, queries_file, qrels_file = root / "corpus.jsonl", root / "queries.jsonl", root / "qrels" / f"{split}.tsv"
    for path in (corpus, queries_file, qrels_file):
        if not path.is_file():
            raise DatasetError(
                f"{path} not found; a BEIR directory holds corpus.jsonl, queries.jsonl and qrels/{split}.tsv"
            )
    qrels: Qrels = {}
    with qrels_file.open(encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), 1):
            if not row or (number == 1 and not row[-1].strip().lstrip("-").isdigit()):
                continue  # blank line, or the header (query-id, corpus-id, score)
            if len(row) != 3 or not row[2].strip().lstrip("-").isdigit():
                raise DatasetError(f"{qrels_file}: line {number} is not 'query-id<TAB>corpus-id<TAB>score'")
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    texts = {}
    for number, record in _read_jsonl(queries_file):
        if "_id" not in record or not isinstance(record.get("text"), str):
            raise DatasetError(f"{queries_file}: line {number} has no _id or text")
        texts[str(record["_id"])] = record["text"]
    judged = {qid for qid, docs in qrels.items() if any(rel > 0 for rel in docs.values())}
    missing = sorted(judged - texts.keys())
    if missing:
        raise DatasetError(f"{qrels_file} judges queries missing from {queries_file}: {', '.join(missing[:5])}")
    queries = {qid: text for qid, text in texts.items() if qid in judged}
    return BeirDataset(root, corpus, queries, qrels, split)


# ---------------------------------------------------------------- metrics


def ndcg(ranking: Sequence[str], relevance: dict[str, int], k: int = NDCG_CUTOFF) -> float:
    """nDCG@k of one ranking: DCG with gains ``rel / log2(rank + 1)`` over the ideal DCG of the judgments."""
    dcg = sum(relevance.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranking[:k]))
    ideal_gains = sorted((rel for rel in relevance.values() if rel > 0), reverse=True)[:k]
    ideal = sum(rel / math.log2(rank + 2) for rank, rel in enumerate(ideal_gains))
    return dcg / ideal if ideal > 0 else 0.0


def recall(ranking: Sequence[str], relevance: dict[str, int], k: int = RECALL_CUTOFF) -> float:
    """Recall@k of one ranking: the share of the relevant (rel > 0) documents in its first k."""
    relevant = {doc for doc, rel in relevance.items() if rel > 0}
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def documents_by_best_chunk(hits: Iterable[tuple[int, float]], record_of: dict[int, str]) -> Ranking:
    """Collapse a chunk ranking into a document ranking: each document at the position of its best chunk.

    Chunks outside the dataset's corpus (``record_of`` has no entry for them) are skipped.
    """
    ranking: dict[str, None] = {}
    for chunk_id, _ in hits:
        record = record_of.get(chunk_id)
        if record is not None:
            ranking.setdefault(record, None)
    return list(ranking)


@dataclass
class ModeResult:
    """Scores of one search mode over the evaluated queries (per-query values kept for subsets and tests)."""

    mode: str
    ndcg_at_10: float
    recall_at_100: float
    queries: int
    seconds: float
    per_query: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)

    def subset(self, query_ids: Iterable[str]) -> tuple[float, float]:
        """Mean nDCG@10 and Recall@100 over some of the queries."""
        rows = [self.per_query[qid] for qid in query_ids]
        return (float(np.mean([r["ndcg_at_10"] for r in rows])), float(np.mean([r["recall_at_100"] for r in rows])))

    def to_dict(self) -> dict[str, Any]:
        """Summary as JSON-ready data (per-query values left out)."""
        data = asdict(self)
        data.pop("per_query")
        return data


def score_rankings(mode: str, rankings: dict[str, Ranking], qrels: Qrels, seconds: float = 0.0) -> ModeResult:
    """nDCG@10 and Recall@100 of document rankings, per query and averaged over the queries."""
    per_query = {
        qid: {"ndcg_at_10": ndcg(ranking, qrels[qid]), "recall_at_100": recall(ranking, qrels[qid])}
        for qid, ranking in rankings.items()
    }
    n = len(per_query)
    return ModeResult(
        mode=mode,
        ndcg_at_10=sum(r["ndcg_at_10"] for r in per_query.values()) / n if n else 0.0,
        recall_at_100=sum(r["recall_at_100"] for r in per_query.values()) / n if n else 0.0,
        queries=n,
        seconds=seconds,
        per_query=per_query,
    )


# ---------------------------------------------------------------- running


class CorpusChunks:
    """Which chunks of an index belong to a dataset's corpus, and the corpus id of each."""

    def __init__(self, index: Index, corpus: Path):
        root = str(corpus.expanduser().resolve())
        prefix = corpus.name + "#"
        snapshot = index.snapshot()
        rows = snapshot.root_chunks(root)
        self.record_of = {chunk_id: source_id.removeprefix(prefix) for chunk_id, source_id in rows}
        total = len(snapshot.vectors)
        #: None when the index holds nothing else, else the corpus's chunk ids (searches are restricted to them)
        self.allowed = None if total == len(rows) else np.array([row[0] for row in rows], dtype=np.int64)
        self.chunks = len(rows)
        self.documents = len(set(self.record_of.values()))


def rank_corpus_documents(
    index: Index,
    query: str,
    mode: str,
    chunks: CorpusChunks,
    *,
    documents: int = DOCUMENT_DEPTH,
    fusion: Fusion = DEFAULT_FUSION,
) -> Ranking:
    """The corpus documents ranked for ``query`` by their best chunk, at least ``documents`` deep if possible.

    Searches 3 chunks per wanted document first and goes deeper while chunks of the same documents crowd out
    the ranking.
    """
    k = min(chunks.chunks, 3 * documents)
    while True:
        hits = index.rank(query, max(k, 1), mode=mode, allowed=chunks.allowed, fusion=fusion)
        ranking = documents_by_best_chunk(hits, chunks.record_of)
        if len(ranking) >= documents or len(hits) < k or k >= chunks.chunks:
            return ranking
        k = min(chunks.chunks, 2 * k)


def evaluate_index(
    index: Index,
    dataset: BeirDataset,
    modes: Sequence[str] = ("hybrid",),
    *,
    fusion: Fusion = DEFAULT_FUSION,
    query_ids: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[ModeResult]:
    """Search every query of ``dataset`` (or ``query_ids``) in an index that holds its corpus; score each mode."""
    chunks = CorpusChunks(index, dataset.corpus)
    if not chunks.chunks:
        raise DatasetError(f"{index.path} holds no documents of {dataset.corpus}; ingest it first")
    wanted = list(dataset.queries) if query_ids is None else list(query_ids)
    results = []
    for mode in modes:
        start = time.perf_counter()
        rankings = {
            qid: rank_corpus_documents(index, dataset.queries[qid], mode, chunks, fusion=fusion) for qid in wanted
        }
        results.append(score_rankings(mode, rankings, dataset.qrels, time.perf_counter() - start))
        if progress:
            progress(f"{mode}: nDCG@10 {results[-1].ndcg_at_10:.4f}")
    return results


def baseline_results(
    dataset: BeirDataset, query_ids: Sequence[str], embedder: Any, *, cache: Path | None = None
) -> list[ModeResult]:
    """The rows of :mod:`citeline.eval.baseline` (plain tools on whole documents, same model), scored like the modes."""
    from citeline.eval.baseline import baseline_rankings

    rows = baseline_rankings(dataset.corpus, dataset.queries, query_ids, embedder, cache=cache)
    return [score_rankings(mode, rankings, dataset.qrels, seconds) for mode, (rankings, seconds) in rows.items()]


@dataclass
class BeirReport:
    """What ``citeline eval --beir`` prints."""

    dataset: str
    split: str
    index: str
    documents: int
    chunks: int
    queries: int
    ingest: dict[str, Any]
    results: list[ModeResult]
    #: the hybrid fusion setting the modes ran with (``Fusion.describe``: weights, depth, document signals)
    fusion: dict[str, Any] = field(default_factory=DEFAULT_FUSION.describe)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            **{k: v for k, v in asdict(self).items() if k != "results"},
            "results": [r.to_dict() for r in self.results],
        }


def expand_modes(mode: str) -> list[str]:
    """``all`` means every search mode, dense and lexical first."""
    if mode == "all":
        return ["dense", "lexical", "hybrid"]
    if mode not in MODES:
        raise CitelineError(f"mode must be one of {', '.join(MODES)} or all; got {mode!r}")
    return [mode]


def evaluate_beir(
    directory: str | os.PathLike[str],
    *,
    index_path: str | os.PathLike[str] | None = None,
    mode: str = "hybrid",
    split: str = "test",
    backend: str | None = None,
    progress: bool = False,
    embedder: Any = None,
    baseline: bool = True,
    fusion: Fusion = DEFAULT_FUSION,
) -> BeirReport:
    """Ingest a BEIR dataset's corpus into ``index_path`` (a temporary index if None) and score ``mode``.

    A given index is reused: ingestion is incremental, so a second run embeds nothing. ``mode`` is a search
    mode or ``all``; ``backend`` and ``embedder`` are passed to :meth:`Index.create`. With ``baseline``, the
    rows of :mod:`citeline.eval.baseline` follow (plain tools on whole documents with the index's model: the
    whole-document dense row, bm25s, and their plain RRF), so the gain of citeline's modes over them shows.
    ``fusion`` is hybrid's setting (reported with the results).
    """
    from citeline.index import Index

    modes = expand_modes(mode)
    dataset = load_beir(directory, split)
    with tempfile.TemporaryDirectory(prefix="citeline-eval-") as tmp:
        path = Path(index_path) if index_path is not None else Path(tmp) / "index"
        index = Index.create(path, backend=backend, embedder=embedder)
        run = index.ingest([dataset.corpus], progress=progress)
        if run.failed:
            raise DatasetError(f"{dataset.corpus} could not be ingested: {run.errors[0]['reason']}")
        chunks = CorpusChunks(index, dataset.corpus)
        results = evaluate_index(index, dataset, modes, fusion=fusion)
        if baseline:
            results += baseline_results(dataset, list(dataset.queries), index.embedder)
        return BeirReport(
            dataset=str(dataset.root),
            split=split,
            index=str(path) if index_path is not None else "(temporary)",
            documents=chunks.documents,
            chunks=chunks.chunks,
            queries=len(dataset.queries),
            ingest={
                "run_id": run.run_id,
                "added": run.added,
                "updated": run.updated,
                "unchanged": run.unchanged,
                "chunks_embedded": run.chunks_embedded,
            },
            results=results,
            fusion=fusion_for(fusion, index.meta).describe(),  # what hybrid ran with on this index
        )
