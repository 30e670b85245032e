"""One ``Index`` shared between threads: its searches are serialised by the index itself (``Index.reading``), so a
library user, the server and the retrievers get the answers one thread would, while commits land, with no lock
of their own."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import HashEmbedder

from citeline import Index

QUERIES = ["soldiers defect when pay stops", "levee failure", "river garrison", "harvest", "pay", "flood warning"]
MODES = ["hybrid", "dense", "lexical"]


def _answers(index: Index) -> dict[tuple[str, str], list[tuple[int, float]]]:
    return {(q, m): [(r.chunk_id, r.score) for r in index.search(q, 5, mode=m)] for q in QUERIES for m in MODES}


@pytest.mark.parametrize("shards", [None, 2])
def test_threads_sharing_an_index_get_the_one_thread_answers(tmp_path: Path, seeds_dir: Path, shards: int | None):
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder(), **({"shards": shards} if shards else {}))
    index.ingest([seeds_dir])
    shared = Index.open(tmp_path / "ix", embedder=HashEmbedder())  # fresh: its caches fill under the threads
    want = _answers(index)
    jobs = [(q, m) for q in QUERIES for m in MODES] * 6
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda job: [(r.chunk_id, r.score) for r in shared.search(job[0], 5, mode=job[1])], jobs))
    assert got == [want[job] for job in jobs]


def test_searches_from_threads_while_commits_land(tmp_path: Path, seeds_dir: Path) -> None:
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([seeds_dir])
    shared = Index.open(tmp_path / "ix", embedder=HashEmbedder())
    extra = tmp_path / "extra"
    extra.mkdir()
    stop, failures = threading.Event(), []

    def search_until_stopped() -> int:
        done = 0
        while not stop.is_set():
            try:
                for mode in MODES:
                    # min_score=0: every hit, whatever the relevance floor makes of the notes the commits add
                    results = shared.search("levee failure river", 5, mode=mode, min_score=0)
                    assert results, mode
                    for r in results:
                        assert shared.document_text(r.doc_id)[r.char_start : r.char_end] == r.text
                done += 1
            except Exception as exc:
                failures.append(exc)
                return done
        return done

    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(search_until_stopped) for _ in range(3)]
        try:
            for n in range(6):  # each commit replaces the generation the threads read
                (extra / f"note-{n}.md").write_text(f"# Note {n}\n\nThe levee by the river held in year {n}.\n")
                summary = index.ingest([seeds_dir, extra])
                assert summary.added == 1, summary
        finally:
            stop.set()
        counts = [f.result() for f in futures]
    assert not failures, failures[:3]
    assert all(count > 0 for count in counts)


def test_reading_waits_for_the_slot_then_times_out(tmp_path: Path, seeds_dir: Path) -> None:
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([seeds_dir])
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with index.reading():
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        with pytest.raises(TimeoutError, match=r"no search slot within 0\.05 s"), index.reading(timeout=0.05):
            pass
    finally:
        release.set()
        holder.join()
    with index.reading(timeout=1):  # re-entrant: a holder can search
        assert index.search("levee", 3)
