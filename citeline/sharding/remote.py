"""Searching a sharded index on a Dask cluster: each shard's part of a query (dense top k, the lexical statistics and
pruned top k, hybrid candidates' scores, passage rows, collapse lookups) runs as a task on the worker that holds
the shard (``citeline.sharding.worker``), and only the answers travel back; the merge is ``citeline.sharding.search``'s,
so a query ranks exactly as on the threads path and on one index.

**Placement** (:class:`Placement`): ``shard_workers`` pins shards to workers (``{0: "tcp://10.0.0.5:8786"}``, or
the text ``"0=tcp://...,1=worker-b"``; a worker's address or its name). A pinned shard's tasks run only on its
worker (``workers=[...]``, ``allow_other_workers=False``: its disk is there), and when that worker is gone the
query fails in one line naming the shard and the worker. An unpinned shard prefers worker ``n mod W`` of the sorted
workers, so its snapshot stays warm there, and runs on any worker when that one is busy or gone (the shards are
on a filesystem every worker sees). Ingestion places shard jobs the same way (``citeline.sharding.runs``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from citeline.errors import CitelineError, SettingsError
from citeline.query.readers import LexicalReader, LexicalShard, SnapshotReader, Statistics
from citeline.sharding.search import ShardedSnapshot
from citeline.sharding.worker import ShardMovedError, open_shard, shard_call
from citeline.store.snapshot import ReadSnapshot
from citeline.vectors.base import VectorReader

T = TypeVar("T")
#: How often a task's wait checks that a pinned shard's worker is still there (seconds).
CHECK_EVERY = 2.0

ShardWorkers = Mapping[int, str] | str | None


class ShardWorkerGoneError(CitelineError):
    """A shard is pinned to a worker that is not in the cluster."""


def parse_shard_workers(value: ShardWorkers, shards: int | None) -> dict[int, str]:
    """``{shard: worker}`` from a mapping or ``"0=ADDRESS,1=NAME"``; a bad entry (or a shard past ``shards``,
    when given) is one :class:`SettingsError`."""
    if not value:
        return {}
    items = list(value.items()) if isinstance(value, Mapping) else [
        tuple(part.split("=", 1)) if "=" in part else (part, "") for part in value.split(",") if part.strip()
    ]  # fmt: skip
    pinned: dict[int, str] = {}
    for shard, worker in items:
        try:
            number = int(str(shard).strip())
        except ValueError:
            number = -1
        if number < 0 or (shards is not None and number >= shards) or not str(worker).strip():
            last = "" if shards is None else f" from 0 to {shards - 1}"
            raise SettingsError(
                f"--shard-workers entry {shard}={worker} is not SHARD=WORKER with a shard{last} "
                "(e.g. --shard-workers 0=tcp://10.0.0.5:8786,1=worker-b)"
            )
        pinned[number] = str(worker).strip()
    return pinned


class Placement:
    """Where each shard's tasks run on ``client``'s cluster (see the module docstring)."""

    def __init__(self, client: Any, shards: int | None, shard_workers: ShardWorkers = None):
        self.client = client
        self.shards = shards
        self.pinned = parse_shard_workers(shard_workers, shards)
        self._known: tuple[float, dict[str, str]] | None = None

    def _workers(self, fresh: bool = False) -> dict[str, str]:
        # address -> name of every worker the scheduler knows, asked again after CHECK_EVERY seconds (each ask is a
        # round trip to the scheduler; a query sends a dozen tasks)
        now = time.monotonic()
        if fresh or self._known is None or now - self._known[0] > CHECK_EVERY:
            info = self.client.scheduler_info(n_workers=-1) if self._takes_n_workers() else self.client.scheduler_info()
            known = {address: str(worker.get("name", address)) for address, worker in info.get("workers", {}).items()}
            self._known = (now, known)
        return self._known[1]

    def _takes_n_workers(self) -> bool:
        import inspect

        return "n_workers" in inspect.signature(self.client.scheduler_info).parameters

    def worker_of(self, number: int, fresh: bool = False) -> str | None:
        """The address of the worker shard ``number`` is pinned to (None: not pinned); one line if it is gone."""
        wanted = self.pinned.get(number)
        if wanted is None:
            return None
        workers = self._workers(fresh)
        for address, name in workers.items():
            if wanted in (address, name):
                return address
        raise ShardWorkerGoneError(
            f"shard-{number:03d} is pinned to worker {wanted}, which is not in the Dask cluster (workers: "
            f"{', '.join(sorted(workers.values())) or 'none'}); start that worker again, or change --shard-workers"
        )

    def pinned_to(self, number: int) -> dict[str, Any]:
        """Placement arguments (``client.submit``'s, or ``dask.annotate``'s) that keep shard ``number``'s task on
        its pinned worker; ``{}`` for a shard that is not pinned."""
        pinned = self.worker_of(number)
        return {} if pinned is None else {"workers": [pinned], "allow_other_workers": False}

    def where(self, number: int) -> dict[str, Any]:
        """``client.submit``'s placement arguments for shard ``number``."""
        pinned = self.pinned_to(number)
        if pinned:
            return pinned
        workers = sorted(self._workers())
        if not workers:
            return {}
        return {"workers": [workers[number % len(workers)]], "allow_other_workers": True}

    def run(self, number: int, function: Callable[..., T], *args: Any, key: str | None = None) -> T:
        """``function(*args)`` as a task placed for shard ``number``; waits, checking a pinned worker is there."""
        placement = self.where(number)
        extra = {"key": key} if key else {}
        future = self.client.submit(function, *args, pure=False, **placement, **extra)
        while True:
            try:
                return future.result(timeout=CHECK_EVERY)
            except (FutureTimeout, TimeoutError):
                if not placement.get("allow_other_workers", True):
                    try:
                        self.worker_of(number, fresh=True)
                    except ShardWorkerGoneError:
                        future.cancel()
                        raise


class RemoteShard:
    """One shard held by a Dask worker: a ``citeline.query.readers.SnapshotReader`` whose reads run on that worker."""

    def __init__(self, placement: Placement, number: int, shard_dir: str):
        self.placement, self.number, self.shard_dir = placement, number, shard_dir
        self.moved = False  #: the worker lost this generation: the next query opens the shard again
        self._documents: int | None = None
        info = placement.run(number, open_shard, shard_dir)
        self.meta: dict[str, Any] = info["meta"]
        self.generation: int = info["generation"]
        self.vectors = RemoteVectors(self, info["vectors"], info["dimension"], info["kind"])
        self.lexical = RemoteLexical(self, np.asarray(info["chunk_ids"], dtype=np.int64))

    def call(self, operation: str, *args: Any) -> Any:
        """Run ``operation`` (``citeline.sharding.worker.OPERATIONS``) on the shard's worker at this generation."""
        try:
            return self.placement.run(self.number, shard_call, self.shard_dir, self.generation, operation, *args)
        except ShardMovedError:
            self.moved = True
            raise

    def passage_rows(self, chunk_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Rows of the chunk ids this shard holds."""
        return self.call("passage_rows", list(chunk_ids))

    def doc_ids(self, chunk_ids: Sequence[int]) -> list[str]:
        """The document id of each chunk id, in order."""
        return self.call("doc_ids", list(chunk_ids))

    def chunk_documents(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str, str, int]]:
        """``(doc_id, content_hash, ordinal)`` of the chunk ids this shard holds (document-level signals)."""
        return self.call("chunk_documents", list(chunk_ids))

    def chunk_lengths(self, chunk_ids: Sequence[int]) -> dict[int, int]:
        """The length in characters of the chunk ids this shard holds (dense mode's document centroids)."""
        return self.call("chunk_lengths", list(chunk_ids))

    def document_count(self) -> int | None:
        """Documents the shard holds at this generation (the document BM25's corpus mean length), asked once: a
        generation's rows do not change."""
        if self._documents is None:
            self._documents = self.call("document_count")
        return self._documents

    def document_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Whole-document vectors stored on the chunk ids this shard holds (``document_vectors`` indexes)."""
        return self.call("document_vectors", list(chunk_ids))

    def allowed_chunk_ids(self, filters: Any) -> np.ndarray | None:
        """The shard's chunk ids ``filters`` lets through (None: all; no filters: no task)."""
        return self.call("allowed", filters) if filters else None

    def root_chunks(self, root: str) -> list[tuple[int, str]]:
        """``(chunk_id, source_id)`` of the shard's chunks from ``root``."""
        return self.call("root_chunks", root)

    def is_current(self) -> bool:
        """False once the worker lost this generation (:attr:`moved`); otherwise whether to reopen is the sharded
        snapshot's decision (the manifest's generation set: :meth:`DaskShardedSnapshot.is_current`)."""
        return not self.moved

    def close(self) -> None:
        """Nothing here: the worker keeps its snapshots for the next client."""


class RemoteVectors:
    """A remote shard's vector index (a ``VectorReader`` for :class:`citeline.sharding.search.MergedVectors`)."""

    def __init__(self, shard: RemoteShard, count: int, dimension: int, kind: str):
        self.shard, self.count, self.dimension, self.kind = shard, count, dimension, kind

    def __len__(self) -> int:
        return self.count

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The shard's top k (on its worker)."""
        return self.shard.call("dense", query, k, allowed)

    def ids(self) -> np.ndarray:
        """Every id held, ascending: the shard's chunk ids (its vectors and BM25 index hold the same chunks)."""
        return self.shard.lexical.chunk_ids

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored vectors of ``ids``."""
        return self.shard.call("vectors", np.asarray(ids, dtype=np.int64))


class RemoteLexical:
    """A remote shard's BM25 index: a ``LexicalShard`` (what :class:`citeline.sharding.search.MergedLexical` reads of
    a part) and a ``LexicalReader`` under the shard's own statistics. A shard whose folder predates segments is
    refused on its worker (``citeline.sharding.worker``)."""

    def __init__(self, shard: RemoteShard, chunk_ids: np.ndarray):
        self.shard, self.chunk_ids = shard, chunk_ids

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def statistics(self, query: str) -> Statistics:
        """The shard's share of the corpus-wide statistics of ``query``."""
        return self.shard.call("statistics", query)

    def as_shard(self) -> RemoteLexical:
        """Itself: every read of a part takes the corpus-wide statistics."""
        return self

    def search(
        self, query: str, k: int, allowed: np.ndarray | None = None, statistics: Statistics | None = None
    ) -> list[tuple[int, float]]:
        """The shard's pruned top k under the corpus-wide ``statistics`` (None: the shard's own)."""
        return self.shard.call("lexical", query, k, allowed, statistics)

    def ranked(
        self, query: str, k: int, allowed: np.ndarray | None = None
    ) -> tuple[list[tuple[int, float]], Callable[[np.ndarray], np.ndarray]]:
        """The shard's top k and a function scoring any of its chunk ids, under the shard's own statistics."""
        return self.search(query, k, allowed), lambda ids: self.scores_of(query, ids)

    def scores(self, query: str, statistics: Statistics | None = None) -> np.ndarray:
        """Every chunk's score (chunk_ids order)."""
        return self.shard.call("scores", query, statistics)

    def scores_of(self, query: str, ids: np.ndarray, statistics: Statistics | None = None) -> np.ndarray:
        """The scores of ``ids`` (hybrid candidates; ``statistics`` None: the shard's own)."""
        return self.shard.call("scores_of", query, np.asarray(ids, dtype=np.int64), statistics)

    def term_frequencies(self, query: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The query terms' frequencies and the lengths of ``ids`` (document-level BM25)."""
        return self.shard.call("term_frequencies", query, np.asarray(ids, dtype=np.int64))

    def sharing_rare_terms(
        self, texts: Sequence[str], k: int, *, terms: int = 8, min_share: float = 0.5, allowed: np.ndarray | None = None
    ) -> list[list[int]]:
        """Collapse's lookup of copies, in this shard."""
        return self.shard.call("rare_terms", list(texts), k, terms, min_share, allowed)


class DaskShardedSnapshot(ShardedSnapshot):
    """:class:`ShardedSnapshot` whose shards are read by the Dask workers that hold them; current while the
    root's manifest records the generation set it recorded when this view was opened."""

    def __init__(self, root: Path, shard_dirs: Sequence[Path], placement: Placement, recorded: Callable[[], list[int]]):
        self.placement = placement
        self.read_recorded = recorded
        self.recorded = recorded()
        names = {str(directory.absolute()): number for number, directory in enumerate(shard_dirs)}
        super().__init__(
            root, [Path(name) for name in names], lambda path: RemoteShard(placement, names[str(path)], str(path))
        )

    def is_current(self) -> bool:
        """False once a run has recorded a new generation set in the manifest (or a worker lost a generation)."""
        return super().is_current() and self.read_recorded() == self.recorded


def _readers_conform(
    local: ReadSnapshot, threaded: ShardedSnapshot, dask: DaskShardedSnapshot, remote: RemoteShard
) -> tuple[list[SnapshotReader], list[LexicalReader], list[LexicalShard], list[VectorReader]]:
    """Never called: mypy checks here that the readers implement the read interfaces (``citeline.query.readers``),
    so a read declared there names every reader that must write it (tests/index/test_protocol_conformance.py checks
    them at run time too)."""
    return (
        [local, threaded, dask, remote],
        [local.lexical, threaded.lexical, remote.lexical],
        [remote.lexical],
        [local.vectors, threaded.vectors, remote.vectors],
    )


class DaskShards:
    """A connection to the Dask cluster at ``address`` and the placement of a root's shards on it."""

    def __init__(self, address: str, shards: int, shard_workers: ShardWorkers = None):
        from distributed import Client

        self.client = Client(address, set_as_default=False)
        self.placement = Placement(self.client, shards, shard_workers)

    def snapshot(
        self, root: Path, shard_dirs: Sequence[Path], recorded: Callable[[], list[int]]
    ) -> DaskShardedSnapshot:
        """A view of the root's shards, each read on its worker; ``recorded`` reads the manifest's generations."""
        return DaskShardedSnapshot(root, shard_dirs, self.placement, recorded)

    def meta(self, shard_dir: Path) -> dict[str, Any]:
        """Shard 0's meta, read on its worker (a client that does not see the shards' disks)."""
        return self.placement.run(0, open_shard, str(shard_dir.absolute()))["meta"]

    def close(self) -> None:
        """Let go of the cluster (the workers keep their snapshots)."""
        self.client.close()
