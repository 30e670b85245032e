"""Sharded indexes on a Dask LocalCluster of worker processes (issue 13's acceptance tests):

- a 4-shard index of 1,600 synthetic abstracts, ingested on 2 workers, returns the same top-10 (ids and order,
  flat vectors) as an unsharded one for every test query in each mode;
- a worker SIGKILLed while it runs a shard: the run names the shard, every shard is at a committed generation,
  and the same run again gives the index an uninterrupted run gives (documents, chunk ids, vectors, rankings).

The vectors are the HashEmbedder's (tests/conftest.py): equality does not depend on the model, and the real one
would load in every worker process.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _common import reading_only_on_workers, same_ranking, synthetic_abstracts
from conftest import HashEmbedder

from citeline import Index, ShardedIndex
from citeline.sharding.index import Manifest, ShardsFailedError

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow

MODES = ("dense", "lexical", "hybrid")
#: The corpus: this many synthetic abstracts with SciFact's shape (tests/_common.py) and 100 queries, the same on
#: every machine (it no longer switches to SciFact where ../shared holds it).
SYNTHETIC_DOCUMENTS = 1_600


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two worker processes of one thread each; a worker that dies fails its task at once (allowed-failures 0,
    so the kill test sees the failure; by default Dask would run the shard again on another worker)."""
    import dask

    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local,
    ):
        yield local


def test_a_4_shard_index_on_dask_ranks_every_test_query_like_one_index(cluster: Any, tmp_path: Path) -> None:
    records, queries = synthetic_abstracts(SYNTHETIC_DOCUMENTS)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(record) + "\n" for record in records))
    started, cpu = time.perf_counter(), time.process_time()
    plain = Index.create(tmp_path / "plain", embedder=HashEmbedder(), vector_index="flat")
    plain.ingest([corpus])
    sharded = Index.create(tmp_path / "sharded", embedder=HashEmbedder(), vector_index="flat", shards=4)
    assert isinstance(sharded, ShardedIndex)
    run = sharded.ingest([corpus], dask_address=cluster.scheduler_address)
    built = time.perf_counter() - started
    assert run.status == "succeeded" and run.added == plain.status().documents == len(records)
    assert [part.status().documents for part in sharded.shards] == [
        len(part.documents()) for part in sharded.shards
    ] and min(part.status().documents for part in sharded.shards) > len(records) // 5
    assert sharded.status().chunks == plain.status().chunks
    assert sharded.verify().ok
    assert len(queries) == 100
    for mode in MODES:
        for query in queries:
            # min_score=0: every hit, so that each answer holds 10 (the relevance rule is the same on both)
            want = plain.search(query, k=10, mode=mode, min_score=0)
            got = sharded.search(query, k=10, mode=mode, min_score=0)
            same_ranking([(r.chunk_id, r.score) for r in got], [(r.chunk_id, r.score) for r in want])
            assert len(got) == len(want) == 10
    print(
        f"{len(records)} abstracts, plain + 4 shards on 2 Dask workers: built in {built:.1f} s; {len(queries)} queries "
        f"x 3 modes x 2 indexes in "
        f"{time.perf_counter() - started - built:.1f} s; {time.process_time() - cpu:.1f} CPU-s in this process"
    )


class SlowEmbedder(HashEmbedder):
    """The HashEmbedder, slowed down, noting each call in ``notes/<pid>``: the test kills a worker mid-shard."""

    def __init__(self, notes: str):
        super().__init__()
        self.notes = notes

    def encode(self, texts: Sequence[str], *, batch_size: int | None = 64) -> np.ndarray:
        with open(os.path.join(self.notes, str(os.getpid())), "a") as handle:
            handle.write(f"{len(texts)}\n")
        time.sleep(0.4)
        return super().encode(texts, batch_size=batch_size)


def _corpus(tmp_path: Path, documents: int) -> tuple[Path, list[str]]:
    folder = tmp_path / "corpus"
    folder.mkdir()
    records, queries = synthetic_abstracts(documents)
    # Files of 8 records: a file's documents are committed together (planning.work_batches), so a shard needs
    # several files to commit part of its work before its worker is killed.
    for start in range(0, len(records), 8):
        lines_of = "".join(json.dumps(record) + "\n" for record in records[start : start + 8])
        (folder / f"abstracts-{start // 8:03d}.jsonl").write_text(lines_of)
    return folder, queries


def _contents(index: Index) -> dict[str, Any]:
    snapshot = index.snapshot()
    ids = np.sort(snapshot.vectors.ids())
    documents = [(d.doc_id, d.content_hash, d.chunks) for d in index.documents()]
    return {"documents": documents, "ids": ids.tolist(), "vectors": snapshot.vectors.vectors(ids)}


def test_a_worker_killed_mid_shard_then_a_rerun_gives_the_uninterrupted_index(cluster: Any, tmp_path: Path) -> None:
    # 200 synthetic abstracts (as many chunks as 120 SciFact ones), so that each shard commits
    # several times before its worker is killed.
    corpus, queries = _corpus(tmp_path, 200)
    settings = {"vector_index": "flat", "max_tokens": 64, "overlap_tokens": 8}
    whole = Index.create(tmp_path / "whole", embedder=HashEmbedder(), shards=4, **settings)
    whole.ingest([corpus], parallel="serial", commit_every=20)
    notes = tmp_path / "notes"
    notes.mkdir()
    root = tmp_path / "killed"
    index = Index.create(root, embedder=SlowEmbedder(str(notes)), shards=4, **settings)
    assert isinstance(index, ShardedIndex)
    killed: list[int] = []
    client = distributed.Client(cluster, set_as_default=False)
    pids = client.run(os.getpid)  # worker address -> pid

    def executing(dask_worker: Any) -> list[str]:
        return [str(task.key) for task in dask_worker.state.executing]

    def kill_a_worker_mid_shard() -> None:
        # SIGKILL a worker once it has made 6 encode calls in the shard it is running (each commit of about 20
        # chunks makes 2: the model warm-up and one batch; so at least 2 commits are behind it).
        started: dict[str, tuple[str, int]] = {}  # worker -> (the shard task it runs, its embed calls before it)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            for address, keys in client.run(executing).items():
                note = notes / str(pids[address])
                calls = len(note.read_text().splitlines()) if note.exists() else 0
                if not keys:
                    started.pop(address, None)
                elif started.get(address, ("", 0))[0] != keys[0]:
                    started[address] = (keys[0], calls)
                elif calls - started[address][1] >= 6:
                    os.kill(pids[address], signal.SIGKILL)
                    killed.append(pids[address])
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_a_worker_mid_shard)
    killer.start()
    with pytest.raises(ShardsFailedError, match=r"shards of .* failed \(shard-00\d: KilledWorker") as failure:
        index.ingest([corpus], dask_address=cluster.scheduler_address, commit_every=20)
    killer.join()
    client.close()
    assert killed, "no worker was killed"
    assert "\n" not in str(failure.value)
    run = index.runs(1)[0]
    assert run.status == "failed" and {e["path"] for e in run.errors} == {
        f"shard-{n:03d}" for n in failure.value.shards
    }
    # Every shard at a committed generation (the killed one part way through its documents), as recorded.
    reopened = Index.open(root, embedder=HashEmbedder())
    assert isinstance(reopened, ShardedIndex)
    for part in reopened.shards:
        assert part.verify().ok
    assert reopened.verify().ok and Manifest.read(root).generations == reopened.status().shard_generations
    for number in failure.value.shards:
        assert len(reopened.shards[number].documents()) < len(whole.shards[number].documents())
    assert any(reopened.shards[n].status().generation >= 1 for n in failure.value.shards)
    # The same run again (the nanny has restarted the worker) finishes the killed shards only.
    again = reopened.ingest([corpus], dask_address=cluster.scheduler_address, commit_every=20)
    assert again.status == "succeeded" and reopened.verify().ok
    got, want = _contents(reopened), _contents(whole)
    assert got["documents"] == want["documents"] and got["ids"] == want["ids"]
    np.testing.assert_array_equal(got["vectors"], want["vectors"])
    for mode in MODES:
        for query in queries[:20]:
            same_ranking(reopened.rank(query, 10, mode=mode), whole.rank(query, 10, mode=mode))


def test_on_dask_the_workers_parse_and_no_text_passes_through_the_coordinator(
    cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43's Dask ingest that reads from the source: the files are parsed on the workers (parsing in this
    process fails here), only the documents' keys come back, and the shards' jobs carry keys, never texts (each
    shard's run parses its documents' files again on its worker); the index is the one a plain run builds."""
    corpus, _ = _corpus(tmp_path, 64)
    plain = Index.create(tmp_path / "plain", embedder=HashEmbedder(), vector_index="flat")
    plain.ingest([corpus])
    jobs = reading_only_on_workers(monkeypatch)
    sharded = Index.create(tmp_path / "sharded", embedder=HashEmbedder(), vector_index="flat", shards=2)
    assert isinstance(sharded, ShardedIndex)
    run = sharded.ingest([corpus], dask_address=cluster.scheduler_address)
    assert run.status == "succeeded" and run.added == 64, run
    assert len(jobs) == 2 and all(not job.parsed.documents for job in jobs)
    assert sum(len(job.parsed.keys) for job in jobs) == 64
    stored = {
        name: sorted((d.doc_id, d.content_hash, d.chunks) for d in index.documents())
        for name, index in (("plain", plain), ("sharded", sharded))
    }
    assert stored["sharded"] == stored["plain"] and sharded.verify().ok
