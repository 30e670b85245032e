"""A sharded index ranks exactly as one index: every query of a BEIR collection's splits, in every mode.

    python bench/shard_equality.py --beir ../shared/benchmarks/scifact --out /tmp/shard-equality [--shards 4]
        [--splits test train] [--dump results.jsonl]

``--dump`` writes every result list of both indexes (per query, mode and index: chunk ids, doc ids, scores as
``repr`` of the float, texts), one JSON line each, so two builds (before and after a change to ingestion or search)
compare byte for byte: ``cmp before.jsonl after.jsonl``.

Ingests the collection's ``corpus.jsonl`` into a plain index and a ``--shards`` root (flat vectors, shard runs in
threads) with the tests' 64-dimension hashing embedder (``tests/conftest.py``): its cosines take few distinct values, so
ties, the hard case for equality, are everywhere (at the 200th dense place among them). Then searches every query
of each split in each mode on both, k = 10, and counts the pairs whose scores differ by more than 1e-6 at any
place (the ids of exactly tied chunks may come in either order). ``tests/system/test_shard_cluster.py`` checks the test
split in CI; this adds the train split and names each differing query. An existing ``--out`` is reused. Run by
hand: about a minute on 2 cores for SciFact.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from citeline import Index, SearchResult

REPO = Path(__file__).resolve().parent.parent
MODES = ("dense", "lexical", "hybrid")
TOLERANCE = 1e-6


def build(beir: Path, out: Path, shards: int) -> tuple[Index, Index]:
    """The plain index and the sharded root over ``beir``'s ``corpus.jsonl`` (ingested as it is), built in ``out``
    unless already there."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import HashEmbedder

    from citeline import Index
    from citeline.sharding.index import ShardedIndex

    if not (out / "sharded").exists():
        corpus = beir / "corpus.jsonl"
        Index.create(out / "plain", embedder=HashEmbedder(), vector_index="flat").ingest([corpus])
        sharded = Index.create(out / "sharded", embedder=HashEmbedder(), vector_index="flat", shards=shards)
        assert isinstance(sharded, ShardedIndex)
        sharded.ingest([corpus], parallel="threads")  # threads: the embedder is the tests' (not importable there)
    return Index.open(out / "plain", embedder=HashEmbedder()), Index.open(out / "sharded", embedder=HashEmbedder())


def _listed(result: SearchResult) -> list[Any]:
    # Everything of a result but the run's id and time (two builds differ in those alone).
    sources = [(source.doc_id, source.chunk_id, source.char_start, source.char_end) for source in result.sources]
    return [
        result.chunk_id, result.doc_id, repr(result.score), repr(result.relevance), result.char_start,
        result.char_end, result.text, sources, repr(result.highlights),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--splits", nargs="+", default=["test", "train"])
    parser.add_argument("--dump", type=Path, help="write every result list here (JSON lines), for a byte-wise diff")
    args = parser.parse_args()
    from citeline.eval.beir import load_beir

    started = time.perf_counter()
    plain, sharded = build(args.beir, args.out, args.shards)
    print(f"built or opened in {time.perf_counter() - started:.1f} s")
    total = differing = 0
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    for split in args.splits:
        queries = list(load_beir(args.beir, split).queries.values())
        for mode in MODES:
            bad = 0
            for query in queries:
                plain_hits, sharded_hits = plain.search(query, k=10, mode=mode), sharded.search(query, k=10, mode=mode)
                if dump is not None:
                    for name, hits in (("plain", plain_hits), ("sharded", sharded_hits)):
                        listed = [_listed(r) for r in hits]
                        dump.write(json.dumps([split, mode, name, query, listed]) + "\n")
                want = [r.score for r in plain_hits]
                got = [r.score for r in sharded_hits]
                gap = max((abs(a - b) for a, b in zip(got, want, strict=False)), default=0.0)
                if len(got) != len(want) or gap > TOLERANCE:
                    bad += 1
                    print(f"  differs: {split} {mode} (by {gap:.6f}): {query[:90]!r}")
            print(f"{split:6} {mode:8} {bad} of {len(queries)} queries differ")
            total += len(queries)
            differing += bad
    if dump is not None:
        dump.close()
    print(f"all: {differing} of {total} query-mode pairs differ; {time.perf_counter() - started:.1f} s in all")


if __name__ == "__main__":
    main()
