"""A shard's part of a query, run as a Dask task on the worker that holds the shard (``citeline.sharding.remote`` sends
them): the worker keeps its opened shard snapshots between queries, and only answers (hits, scores, rows) travel
back to the client.

Each worker keeps, per shard directory, the last :data:`KEPT` generations it opened (:class:`ReadSnapshot`: memory
maps of one committed generation, so a snapshot stays readable after a writer commits the next one). A client
opens a shard once (:func:`open_shard`: the generation the worker has, its meta and chunk ids) and then asks every
part of its queries at that generation (:func:`shard_call`), so a query reads one committed generation per shard
even while a run commits; it opens again when the manifest's generation set changes. A worker that no longer holds
the generation asked for (it restarted, and the shard has moved on) answers :class:`ShardMovedError`: that query
fails in one line ("search again"), and the client's next query opens the shards again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from citeline.errors import CitelineError, IndexMismatchError, IndexNotFoundError
from citeline.query.readers import LexicalShard
from citeline.store import catalog
from citeline.store.catalog import IndexStatus
from citeline.store.snapshot import ReadSnapshot
from citeline.store.verify import VerifyReport, verify

#: Generations of one shard a worker keeps open (the current one, and the one queries in flight may still read).
KEPT = 2

_lock = threading.Lock()
_cache_outside_dask: dict[str, list[ReadSnapshot]] = {}


class ShardMovedError(CitelineError):
    """The worker no longer holds the generation a query was planned on."""


def _cache() -> dict[str, list[ReadSnapshot]]:
    # One cache per worker (a worker attribute lives as long as the worker); outside a worker, one per process.
    try:
        from distributed import get_worker

        worker: Any = get_worker()
    except (ImportError, ValueError):
        return _cache_outside_dask
    cache = getattr(worker, "_citeline_shards", None)
    if cache is None:
        cache = worker._citeline_shards = {}
    return cache


def _where() -> str:
    try:
        from distributed import get_worker

        return f"worker {get_worker().address}"
    except (ImportError, ValueError):
        return "this process"


def snapshot(shard_dir: str, generation: int | None = None) -> ReadSnapshot:
    """The worker's snapshot of ``shard_dir`` at ``generation`` (None: the committed one, opened if need be)."""
    with _lock:
        held = _cache().setdefault(shard_dir, [])
        for kept in held:
            if generation is not None and kept.generation == generation:
                return kept
        if not held or not held[-1].is_current():
            if not catalog.db_path(Path(shard_dir)).exists():
                raise IndexNotFoundError(
                    f"{shard_dir} is not on {_where()}: run the shard's work where its disk is (--shard-workers), "
                    "or put the shards on a filesystem every worker sees"
                )
            held.append(ReadSnapshot(Path(shard_dir)))
            while len(held) > KEPT:
                held.pop(0).close()
        current = held[-1]
        if generation is not None and current.generation != generation:
            raise ShardMovedError(
                f"{shard_dir} is at generation {current.generation} on {_where()}, the query was planned on "
                f"{generation} (a worker restarted while the index changed): search again"
            )
        return current


def open_shard(shard_dir: str) -> dict[str, Any]:
    """What a client needs of a shard to plan queries: its generation, meta, chunk ids and vector index shape."""
    view = snapshot(shard_dir)
    return {
        "generation": view.generation,
        "meta": view.meta,
        "chunk_ids": view.lexical.chunk_ids,
        "vectors": len(view.vectors),
        "dimension": view.vectors.dimension,
        "kind": view.vectors.kind,
    }


def _shard(view: ReadSnapshot) -> LexicalShard:
    # The shard's BM25 index as a part of the corpus; a 0.1.0 bm25s folder cannot be one (as on the threads path).
    shard = view.lexical.as_shard()
    if shard is None:
        raise IndexMismatchError(
            f"{view.index_dir}'s BM25 folder predates segments; run `citeline rebuild` on the index to rewrite it"
        )
    return shard


#: A shard's parts of a query: each reads the worker's snapshot and returns only its answer.
OPERATIONS: dict[str, Callable[..., Any]] = {
    "dense": lambda view, query, k, allowed: view.vectors.search(query, k, allowed),
    "vectors": lambda view, ids: view.vectors.vectors(ids),
    "statistics": lambda view, query: _shard(view).statistics(query),
    "lexical": lambda view, query, k, allowed, statistics: _shard(view).search(query, k, allowed, statistics),
    "scores": lambda view, query, statistics: _shard(view).scores(query, statistics),
    "scores_of": lambda view, query, ids, statistics: _shard(view).scores_of(query, ids, statistics),
    "rare_terms": lambda view, texts, k, terms, min_share, allowed: view.lexical.sharing_rare_terms(
        texts, k, terms=terms, min_share=min_share, allowed=allowed
    ),
    "term_frequencies": lambda view, query, ids: _shard(view).term_frequencies(query, ids),
    "chunk_documents": lambda view, ids: view.chunk_documents(ids),
    "chunk_lengths": lambda view, ids: view.chunk_lengths(ids),
    "document_count": lambda view: view.document_count(),
    "document_vectors": lambda view, ids: view.document_vectors(ids),
    "passage_rows": lambda view, ids: view.passage_rows(ids),
    "doc_ids": lambda view, ids: view.doc_ids(ids),
    "allowed": lambda view, filters: view.allowed_chunk_ids(filters),
    "root_chunks": lambda view, root: view.root_chunks(root),
}


def shard_call(shard_dir: str, generation: int, operation: str, *args: Any) -> Any:
    """Run one of :data:`OPERATIONS` on the worker's snapshot of ``shard_dir`` at ``generation``."""
    return OPERATIONS[operation](snapshot(shard_dir, generation), *args)


def shard_status(shard_dir: str, number: int) -> IndexStatus:
    """``citeline status`` of one shard, read on the worker that holds it (``shard_reports``)."""
    return catalog.status(Path(shard_dir))


def shard_check(
    shard_dir: str, number: int, *, shards: int, route: Callable[[str, int], int]
) -> tuple[VerifyReport, list[str]]:
    """``verify`` of one shard on the worker that holds it, and its documents that ``route`` sends to other shards
    than ``number`` of ``shards``."""
    path = Path(shard_dir)
    with catalog.connect(path, read_only=True) as connection:
        doc_ids = [row[0] for row in catalog.select_documents(connection, "TRUE", [])]
    return verify(path), [doc_id for doc_id in doc_ids if route(doc_id, shards) != number]
