"""Searching a sharded index as Dask tasks on the workers that hold the shards (citeline.sharding.remote,
citeline.sharding.worker), on a LocalCluster of 2 worker processes: the same results as the threads path in every
mode, with filters and collapse; a new run is seen (the manifest's generation set changed); shards pinned to
workers run there, and a pinned worker that is gone is one line naming the shard and the worker.

The vectors are the HashEmbedder's (tests/conftest.py): queries are encoded in this process, and the workers only
read the shards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _common import shard_queries, synthetic_abstracts
from conftest import HashEmbedder

from citeline import Index, ShardedIndex
from citeline.errors import IndexNotFoundError, SettingsError
from citeline.sharding.index import Manifest, ShardsFailedError
from citeline.sharding.remote import DaskShards, ShardWorkerGoneError, parse_shard_workers
from citeline.sharding.worker import snapshot

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow
MODES = ("dense", "lexical", "hybrid")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two worker processes of one thread each (LocalCluster names them 0 and 1)."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        yield local


def _corpus(folder: Path, documents: int = 240) -> Path:
    # Synthetic abstracts (tests/_common.py) in two JSONL files, so a path filter keeps part of each shard.
    folder.mkdir(parents=True)
    records, _ = synthetic_abstracts(documents)
    half = len(records) // 2
    for name, part in (("first.jsonl", records[:half]), ("second.jsonl", records[half:])):
        (folder / name).write_text("".join(json.dumps(record) + "\n" for record in part))
    return folder


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("dask-search")
    corpus = _corpus(tmp / "corpus")
    index = Index.create(tmp / "sharded", embedder=HashEmbedder(), max_tokens=64, overlap_tokens=8, shards=4)
    index.ingest([corpus], parallel="threads")
    return tmp / "sharded"


def _results(index: Index, query: str, **options: Any) -> list[tuple[Any, ...]]:
    found = index.search(query, k=10, **options)
    return [(r.chunk_id, r.score, r.doc_id, r.char_start, r.char_end, r.text, len(r.sources)) for r in found]


def test_dask_search_gives_the_threads_results_in_every_mode_with_filters_and_collapse(cluster: Any, root: Path):
    local = Index.open(root, embedder=HashEmbedder())
    remote = Index.open(root, embedder=HashEmbedder(), dask_address=cluster.scheduler_address)
    assert isinstance(remote, ShardedIndex) and remote.dask is not None
    assert type(remote.snapshot()).__name__ == "DaskShardedSnapshot"
    for mode in MODES:
        for query in shard_queries(8):
            for options in ({"collapse": True}, {"collapse": False}, {"filters": {"path_glob": ["*first.jsonl"]}}):
                want = _results(local, query, mode=mode, **options)
                assert _results(remote, query, mode=mode, **options) == want
                assert want  # the filter keeps half of every shard
    # The document-level signals read term counts and chunk rows on the workers: the same fused scores.
    from citeline.query.plan import DOCUMENT_FUSION

    for query in shard_queries(8):
        want_ranked = local.rank(query, 10, mode="hybrid", fusion=DOCUMENT_FUSION)
        got_ranked = remote.rank(query, 10, mode="hybrid", fusion=DOCUMENT_FUSION)
        assert [c for c, _ in got_ranked] == [c for c, _ in want_ranked]
        assert [s for _, s in got_ranked] == pytest.approx([s for _, s in want_ranked])
    # A client that does not see the shards' folders (each on its worker's disk) reads the meta from a worker too.
    blind = ShardedIndex(root, Manifest.read(root), [], HashEmbedder(), DaskShards(cluster.scheduler_address, 4))
    assert blind.meta["model"] == local.meta["model"]
    assert _results(blind, shard_queries(1)[0], mode="hybrid") == _results(local, shard_queries(1)[0], mode="hybrid")
    # The workers hold the shards' snapshots between queries: one per shard, on the worker it prefers.
    held = remote.dask.client.run(lambda dask_worker: sorted(getattr(dask_worker, "_citeline_shards", {})))
    assert sorted(name for names in held.values() for name in names) == [str(d.absolute()) for d in remote.shard_dirs]


def test_a_client_without_the_shard_folders_asks_the_workers_for_status_and_verify(cluster: Any, root: Path) -> None:
    local = Index.open(root, embedder=HashEmbedder())
    blind = ShardedIndex(root, Manifest.read(root), [], HashEmbedder(), DaskShards(cluster.scheduler_address, 4))
    try:
        assert blind.status() == local.status()
        report, expected = blind.verify(), local.verify()
        assert report.ok and report == expected
        # What needs the folders themselves is one line saying where to run it.
        for command, call in (("rebuild", blind.rebuild), ("documents", blind.documents)):
            with pytest.raises(IndexNotFoundError, match=rf"only its shards.json here.*`citeline {command}`"):
                call()
    finally:
        blind.dask.close()
    # Without a Dask connection too: one line, not an IndexError.
    alone = ShardedIndex(root, Manifest.read(root), [], HashEmbedder())
    for call in (alone.status, alone.verify):
        with pytest.raises(IndexNotFoundError, match=r"run `citeline (status|verify)` on the machine that holds them"):
            call()


def test_a_new_run_is_seen_and_pinned_shards_run_on_their_worker(cluster: Any, root: Path, tmp_path: Path) -> None:
    workers = sorted(cluster.scheduler_info["workers"])
    names = {address: str(info["name"]) for address, info in cluster.scheduler_info["workers"].items()}
    pins = {n: workers[(n + 1) % 2] for n in range(4)}  # not where an unpinned shard would go
    by_name = {n: names[address] if n % 2 else address for n, address in pins.items()}  # addresses or names
    remote = Index.open(root, embedder=HashEmbedder(), dask_address=cluster.scheduler_address, shard_workers=by_name)
    local = Index.open(root, embedder=HashEmbedder())
    query = shard_queries(1)[0]
    assert _results(remote, query, mode="hybrid") == _results(local, query, mode="hybrid")
    held = remote.dask.client.run(lambda dask_worker: sorted(getattr(dask_worker, "_citeline_shards", {})))
    for number, directory in enumerate(remote.shard_dirs):
        assert str(directory.absolute()) in held[pins[number]]
    before = remote.snapshot()
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "new.txt").write_text("Zyxwvut quorble is a word no abstract has.\n")
    local.ingest([extra])
    assert not before.is_current()
    found = remote.search("zyxwvut quorble", k=3, mode="lexical")
    assert found and found[0].source_path.endswith("new.txt")
    # Ingestion places each shard's job the same way: a pinned worker that is gone fails that shard in one line.
    (extra / "later.txt").write_text("Plimsoll vantablack is another word no abstract has.\n")
    nowhere = dict.fromkeys(range(4), "tcp://127.0.0.1:9")
    with pytest.raises(ShardsFailedError, match=r"shard-00\d: ShardWorkerGoneError: shard-00\d is pinned to worker"):
        local.ingest([extra], dask_address=cluster.scheduler_address, shard_workers=nowhere)
    run = local.ingest([extra], dask_address=cluster.scheduler_address, shard_workers=pins)
    assert (run.status, run.added, run.unchanged) == ("succeeded", 1, 1)
    assert remote.search("plimsoll vantablack", k=1, mode="lexical")[0].source_path.endswith("later.txt")
    gone = Index.open(
        root, embedder=HashEmbedder(), dask_address=cluster.scheduler_address, shard_workers="0=tcp://127.0.0.1:9,1=1"
    )
    with pytest.raises(ShardWorkerGoneError, match=r"shard-000 is pinned to worker tcp://127.0.0.1:9, which is not"):
        gone.search(query, k=3)


def test_shard_workers_are_checked_and_a_plain_index_refuses_dask(tmp_path: Path) -> None:
    assert parse_shard_workers("0=tcp://a:1, 2=w2", 4) == {0: "tcp://a:1", 2: "w2"}
    assert parse_shard_workers({1: "w1"}, 2) == {1: "w1"}
    for bad in ("5=w", "x=w", "0="):
        with pytest.raises(SettingsError, match="SHARD=WORKER"):
            parse_shard_workers(bad, 4)
    plain = Index.create(tmp_path / "plain", embedder=HashEmbedder())
    with pytest.raises(SettingsError, match="not a sharded index"):
        Index.open(plain.path, embedder=HashEmbedder(), dask_address="tcp://127.0.0.1:9")
    assert snapshot  # the worker side is importable without a cluster


def test_a_worker_answers_at_the_generation_asked_or_says_the_shard_moved(tmp_path: Path) -> None:
    from citeline.sharding import worker

    index = Index.create(tmp_path / "idx", embedder=HashEmbedder(), shards=2)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Alpha river cells.\n")
    index.ingest([docs], parallel="serial")
    shard = str(next(d for d in index.shard_dirs if Index.open(d, embedder=HashEmbedder()).status().documents))
    first = worker.open_shard(shard)["generation"]
    (docs / "a.txt").write_text("Alpha river cells, rewritten.\n")
    index.ingest([docs], parallel="serial")
    # the generation a query was planned on stays readable while the worker keeps it ...
    assert worker.shard_call(shard, first, "root_chunks", str(docs.resolve()))
    assert worker.open_shard(shard)["generation"] == first + 1
    # ... and once it is let go (a worker restarted), the query fails in one line
    for kept in worker._cache_outside_dask.pop(shard):
        kept.close()
    with pytest.raises(worker.ShardMovedError, match=rf"generation {first + 1} on this process.*search again"):
        worker.shard_call(shard, first, "dense", np.zeros(HashEmbedder().dimension, np.float32), 3, None)
