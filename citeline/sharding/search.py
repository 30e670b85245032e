"""Searching a sharded index: one :class:`ReadSnapshot` per shard, fanned out on threads and merged, behind the
interface of one snapshot, so the query plan (``citeline.query.plan``: filters, ranking, passages, highlights,
collapse) runs on a sharded index unchanged and ranks exactly as on one index over the same chunks.

- **Dense**: every shard returns its own top k (restricted to its allowed ids); the merge keeps the k best by
  score, ties by chunk id, as one index orders them (``arrays.top_k``). Cosines compare across shards as they are.
  Dense mode's document stage (``dense_stage.DenseDocument``) runs over the merged views: its candidates are the merged
  top, and each document's chunks, vectors and lengths are read from the one shard that holds the document.
- **Lexical**: BM25's idf and average length are corpus-wide, so each query costs two rounds: every shard counts
  its live documents, their length and the query terms' document frequencies
  (``LexicalShard.statistics``), and then scores its own chunks with the sums (``scores(query, statistics)``).
  Lexical search and hybrid fusion merge each shard's top k (:meth:`MergedLexical.ranked`); hybrid reads its
  candidates' scores from the shards that hold them, never a concatenation of every shard's scores.
- **Hybrid**: the fusion stages (``citeline.query.stages``) run over the merged views (:class:`MergedVectors`,
  :class:`MergedLexical`): its candidates, reference depth and rescaling see the corpus-wide rankings, never one
  shard's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from citeline.errors import IndexMismatchError
from citeline.query.readers import LexicalReader, LexicalShard, SnapshotReader, Statistics
from citeline.store.snapshot import ReadSnapshot
from citeline.store.works import META_KEY
from citeline.util.arrays import top_k
from citeline.vectors.base import VectorReader

T = TypeVar("T")


class _Owners:
    """Which shard holds each chunk id: the shards' sorted ids, and one sorted global array with its owners."""

    def __init__(self, shard_ids: Sequence[np.ndarray]):
        self.shard_ids = [np.sort(np.asarray(ids, dtype=np.int64)) for ids in shard_ids]
        everything = np.concatenate(self.shard_ids) if self.shard_ids else np.zeros(0, np.int64)
        owner = np.concatenate(
            [np.full(len(ids), n, np.int32) for n, ids in enumerate(self.shard_ids)] or [np.zeros(0, np.int32)]
        )
        self.order = np.argsort(everything, kind="stable")
        self.ids = everything[self.order]
        self.owner = owner.astype(np.int32)[self.order]

    def split(self, wanted: np.ndarray | Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per shard: the positions in ``wanted`` it holds and those ids (ids held by no shard are left out)."""
        values = np.asarray(wanted, dtype=np.int64)
        where = np.searchsorted(self.ids, values)
        inside = where < len(self.ids)
        inside[inside] = self.ids[where[inside]] == values[inside]
        owners = np.full(len(values), -1, np.int32)
        owners[inside] = self.owner[where[inside]]
        return [(np.flatnonzero(owners == n), values[owners == n]) for n in range(len(self.shard_ids))]

    def restrict(self, allowed: np.ndarray | None, shard: int) -> np.ndarray | None:
        """The part of a sorted ``allowed`` array that ``shard`` holds (None stays None: everything)."""
        if allowed is None:
            return None
        return np.intersect1d(allowed, self.shard_ids[shard], assume_unique=True)


class MergedVectors:
    """The shards' vector indexes as one (the ``VectorReader`` that searching reads)."""

    def __init__(self, parts: Sequence[VectorReader], owners: _Owners, fan_out: Callable[..., list[Any]]):
        self.parts = list(parts)
        self.owners = owners
        self.fan_out = fan_out
        self.kind = parts[0].kind if parts else "flat"

    @property
    def dimension(self) -> int:
        """Vector length."""
        return self.parts[0].dimension

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts)

    def ids(self) -> np.ndarray:
        """Every chunk id, ascending."""
        return self.owners.ids

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k best of every shard's top k, by score then chunk id."""
        hits = self.fan_out(
            lambda n: self.parts[n].search(query, k, self.owners.restrict(allowed, n)), range(len(self.parts))
        )
        merged = [hit for part in hits for hit in part]
        if not merged:
            return []
        ids = np.array([chunk_id for chunk_id, _ in merged], dtype=np.int64)
        scores = np.array([score for _, score in merged], dtype=np.float64)
        return top_k(scores, ids, k)

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored vectors of ``ids`` (from the shards that hold them), in the order given."""
        wanted = np.asarray(ids, dtype=np.int64)
        out = np.zeros((len(wanted), self.dimension), dtype=np.float32)
        found = 0
        for number, (positions, shard_ids) in enumerate(self.owners.split(wanted)):
            if len(shard_ids):
                out[positions] = self.parts[number].vectors(shard_ids)
                found += len(positions)
        if found != len(wanted):
            missing = sorted(set(wanted.tolist()) - set(self.owners.ids[np.isin(self.owners.ids, wanted)].tolist()))
            raise KeyError(f"ids not in the vector index: {missing[:5]}")
        return out


class MergedLexical:
    """The shards' BM25 indexes as one, scored with corpus-wide statistics (see the module docstring): a
    ``LexicalReader`` over each shard's ``LexicalShard``."""

    def __init__(self, parts: Sequence[LexicalReader], owners: _Owners, fan_out: Callable[..., list[Any]]):
        self.chunk_ids = owners.ids
        self.parts: list[LexicalShard] = []
        for part in parts:
            shard = part.as_shard()
            if shard is None:  # a 0.1.0 bm25s folder: its scores cannot take the corpus-wide statistics
                raise IndexMismatchError(
                    "a shard's BM25 folder predates segments; run `citeline rebuild` on the index to rewrite it"
                )
            self.parts.append(shard)
        self.owners = owners
        self.fan_out = fan_out

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def as_shard(self) -> None:
        """None: a merge of shards is not itself a shard of a larger corpus."""
        return None

    def search(self, query: str, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k best chunks overall, as :meth:`ranked` finds them."""
        return self.ranked(query, k, allowed)[0]

    def statistics(self, query: str) -> Statistics:
        """The corpus-wide statistics of ``query``: the sum of every shard's."""
        shares = self.fan_out(lambda part: part.statistics(query), self.parts)
        total = shares[0]
        for share in shares[1:]:
            total = total + share
        return total

    def shard_scores(self, query: str) -> list[np.ndarray]:
        """Every shard's scores (its ``chunk_ids`` order) with the corpus-wide statistics."""
        statistics = self.statistics(query)
        return self.fan_out(lambda part: part.scores(query, statistics), self.parts)

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every chunk (ascending chunk ids, as one index's)."""
        if not self.parts:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate(self.shard_scores(query))[self.owners.order]

    def ranked(
        self, query: str, k: int, allowed: np.ndarray | None = None
    ) -> tuple[list[tuple[int, float]], Callable[[np.ndarray], np.ndarray]]:
        """The k best of every shard's k best, each shard scored with the corpus-wide statistics, and the score
        of any chunk ids read from the shards that hold them (what lexical search and hybrid fusion read).

        Exact: with the corpus-wide statistics a shard's scores are the unsharded index's, so the k best overall
        are among the shards' k best; ties go by chunk id, as one index's positions order them. Only each shard's
        k best (and, for hybrid, its candidates' scores) cross to the merge: no shard's whole score array is
        concatenated or reordered (``bench/shards.py throughput --latency``;
        docs/sharding.md#100m-chunks-over-16-machines-on-paper)."""
        if not self.parts:
            return [], lambda ids: np.zeros(len(ids), dtype=np.float32)
        statistics = self.statistics(query)

        def in_shard(number: int) -> list[tuple[int, float]]:
            # The shard's own pruned top k (citeline.lexical.scoring), exact under the corpus-wide statistics.
            return self.parts[number].search(query, k, self.owners.restrict(allowed, number), statistics)

        answers = self.fan_out(in_shard, range(len(self.parts)))
        ids = np.array([chunk_id for answer in answers for chunk_id, _ in answer], dtype=np.int64)
        values = np.array([score for answer in answers for _, score in answer], dtype=np.float64)
        best = top_k(values, ids, k)
        return best, lambda wanted: self._scores_of(query, wanted, statistics)

    def scores_of(self, query: str, ids: np.ndarray) -> np.ndarray:
        """The BM25 scores of chunk ``ids`` (0 for an id not held), each read from the shard that holds it."""
        if not self.parts:
            return np.zeros(len(ids), dtype=np.float32)
        return self._scores_of(query, ids, self.statistics(query))

    def _scores_of(self, query: str, ids: np.ndarray, statistics: Statistics) -> np.ndarray:
        wanted = np.asarray(ids, dtype=np.int64)
        out = np.zeros(len(wanted), dtype=np.float32)
        split = self.owners.split(wanted)

        def in_shard(number: int) -> np.ndarray:
            return self.parts[number].scores_of(query, split[number][1], statistics)

        for number, scores in enumerate(self.fan_out(in_shard, range(len(self.parts)))):
            out[split[number][0]] = scores
        return out

    def term_frequencies(self, query: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``LexicalShard.term_frequencies``, each id read from the shard that holds it."""
        wanted = np.asarray(ids, dtype=np.int64)
        split = self.owners.split(wanted)

        def in_shard(number: int) -> tuple[np.ndarray, np.ndarray]:
            return self.parts[number].term_frequencies(query, split[number][1])

        answers = self.fan_out(in_shard, range(len(self.parts)))
        columns = max((tfs.shape[1] for tfs, _ in answers), default=0)
        tfs, lengths = np.zeros((len(wanted), columns)), np.zeros(len(wanted))
        for number, (part_tfs, part_lengths) in enumerate(answers):
            tfs[split[number][0]] = part_tfs
            lengths[split[number][0]] = part_lengths
        return tfs, lengths

    def sharing_rare_terms(
        self, texts: Sequence[str], k: int, *, terms: int = 8, min_share: float = 0.5, allowed: np.ndarray | None = None
    ) -> list[list[int]]:
        """``LexicalShard.sharing_rare_terms`` in every shard (each with its own term rarities: a lookup of
        copies, not a ranking), the shards' lists interleaved and cut to k."""

        def in_shard(number: int) -> list[list[int]]:
            restricted = self.owners.restrict(allowed, number)
            return self.parts[number].sharing_rare_terms(texts, k, terms=terms, min_share=min_share, allowed=restricted)

        per_shard = self.fan_out(in_shard, range(len(self.parts)))
        found = []
        for text in range(len(texts)):
            lists = itertools.zip_longest(*(shard[text] for shard in per_shard))
            found.append([chunk_id for group in lists for chunk_id in group if chunk_id is not None][:k])
        return found


class ShardedSnapshot:
    """One committed generation of every shard, read as one snapshot: a ``citeline.query.readers.SnapshotReader``
    over shards that are themselves snapshot readers (what ``citeline.query.plan`` reads)."""

    def __init__(
        self, root: Path, shard_dirs: Sequence[Path], open_shard: Callable[[Path], SnapshotReader] = ReadSnapshot
    ):  # no DuckDB of its own
        """``open_shard`` opens one shard's view: a local :class:`ReadSnapshot`, or a shard read by the Dask
        worker that holds it (``citeline.sharding.remote``); the merge is the same."""
        self.index_dir = root
        self._pool = ThreadPoolExecutor(max_workers=max(len(shard_dirs), 1), thread_name_prefix="citeline-shard")
        self.parts = self._fan_out(open_shard, list(shard_dirs))
        # Works are recognised within each shard (store/works.py): the shards' maps, read as one.
        found = [part.meta.get(META_KEY) for part in self.parts]
        merged = {doc: work for each in found if isinstance(each, dict) for doc, work in each.items()}
        self.meta = {**self.parts[0].meta, META_KEY: merged}
        #: each shard's generation (the set this view reads)
        self.generations = [part.generation for part in self.parts]
        self.generation = sum(self.generations)
        owners = _Owners([part.lexical.chunk_ids for part in self.parts])
        self.vectors = MergedVectors([part.vectors for part in self.parts], owners, self._fan_out)
        self.lexical = MergedLexical([part.lexical for part in self.parts], owners, self._fan_out)
        self.owners = owners

    def _fan_out(self, function: Callable[[Any], T], items: Sequence[Any] | range) -> list[T]:
        """``function`` over ``items`` on the shard threads, results in order (one item: in this thread)."""
        if len(items) <= 1:
            return [function(item) for item in items]
        return list(self._pool.map(function, items))

    def _from_holders(
        self, chunk_ids: Sequence[int], read: Callable[[SnapshotReader, list[int]], dict[int, T]]
    ) -> dict[int, T]:
        # ``read`` each shard's share of ``chunk_ids`` from that shard, the answers merged by chunk id.
        shares = [(number, ids.tolist()) for number, (_, ids) in enumerate(self.owners.split(chunk_ids)) if len(ids)]
        found: dict[int, T] = {}
        for answer in self._fan_out(lambda share: read(self.parts[share[0]], share[1]), shares):
            found.update(answer)
        return found

    def passage_rows(self, chunk_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Each chunk's row joined with its document's, from the shard that holds it."""
        return self._from_holders(chunk_ids, lambda part, ids: part.passage_rows(ids))

    def doc_ids(self, chunk_ids: Sequence[int]) -> list[str]:
        """The document id of each chunk id (all held by some shard), in order."""
        found = self._from_holders(chunk_ids, lambda part, ids: dict(zip(ids, part.doc_ids(ids), strict=True)))
        return [found[int(chunk_id)] for chunk_id in chunk_ids]

    def chunk_documents(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str, str, int]]:
        """``(doc_id, content_hash, ordinal)`` of each chunk id, from the shard that holds it."""
        return self._from_holders(chunk_ids, lambda part, ids: part.chunk_documents(ids))

    def chunk_lengths(self, chunk_ids: Sequence[int]) -> dict[int, int]:
        """Each chunk id's length in characters, from the shard that holds it (local or remote)."""
        return self._from_holders(chunk_ids, lambda part, ids: part.chunk_lengths(ids))

    def document_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Whole-document vectors stored on these chunk ids, from the shards that hold them (local or remote)."""
        return self._from_holders(chunk_ids, lambda part, ids: part.document_vectors(ids))

    def document_count(self) -> int | None:
        """Documents of every shard (each shard's count at its generation, asked of its worker if remote)."""
        counts: list[int | None] = self._fan_out(lambda part: part.document_count(), self.parts)
        known = [count for count in counts if count is not None]
        return sum(known) if len(known) == len(counts) else None

    def allowed_chunk_ids(self, filters: Any) -> np.ndarray | None:
        """The sorted chunk ids ``filters`` lets through in any shard, or None when it restricts nothing."""
        found = self._fan_out(lambda part: part.allowed_chunk_ids(filters), self.parts)
        if all(ids is None for ids in found):
            return None
        shares = [self.owners.shard_ids[n] if ids is None else np.asarray(ids) for n, ids in enumerate(found)]
        return np.sort(np.concatenate(shares).astype(np.int64))

    def root_chunks(self, root: str) -> list[tuple[int, str]]:
        """``(chunk_id, source_id)`` of every chunk ingested from ``root``, in any shard, by chunk id."""
        return sorted(row for part in self.parts for row in part.root_chunks(root))

    def is_current(self) -> bool:
        """False once any shard has committed since this view was taken."""
        return all(part.is_current() for part in self.parts)

    def close(self) -> None:
        """Free every shard's copy and the threads."""
        for part in self.parts:
            part.close()
        self._pool.shutdown(wait=False)
