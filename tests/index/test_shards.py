"""Sharded indexes (citeline.sharding.index): routing, the manifest, every command on a root, and the central promise:
a sharded index ranks exactly as one index over the same documents, in every mode, with filters and collapse."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from _common import abstracts_file, same_ranking, shard_queries

from citeline import Index, ShardedIndex
from citeline.errors import IndexMismatchError, IndexNotFoundError
from citeline.ingest.options import IngestOptions
from citeline.ingest.progress import Reporter
from citeline.sharding.index import Manifest, shard_dir, shard_of

MODES = ("dense", "lexical", "hybrid")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, Index]:
    """A plain index and a 4-shard one over the same corpus (threads: no model to load in other processes)."""
    from conftest import HashEmbedder

    tmp_path = tmp_path_factory.mktemp("shards")
    corpus = abstracts_file(tmp_path / "corpus")
    embedder = HashEmbedder()
    plain = Index.create(tmp_path / "plain", embedder=embedder, max_tokens=64, overlap_tokens=8)
    plain.ingest([corpus])
    sharded = Index.create(tmp_path / "sharded", embedder=embedder, max_tokens=64, overlap_tokens=8, shards=4)
    assert isinstance(sharded, ShardedIndex)
    sharded.ingest([corpus], parallel="threads")
    return plain, sharded


def test_routing_is_stable_and_spreads_documents() -> None:
    ids = [f"{n:016x}" for n in range(4000)]
    # Pinned: a document's shard is part of the on-disk format (a root written by one release is read by the next),
    # so these numbers must never change.
    assert [shard_of(doc_id, 4) for doc_id in ids[:8]] == [3, 1, 0, 2, 0, 2, 1, 2]
    assert [shard_of(doc_id, 3) for doc_id in ids[:8]] == [1, 2, 2, 0, 1, 1, 1, 1]
    counts = np.bincount([shard_of(doc_id, 4) for doc_id in ids], minlength=4)
    assert counts.min() > 900  # about 1000 each


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("collapse", [False, True])
def test_sharded_ranks_exactly_like_one_index(pair: tuple[Index, Index], mode: str, collapse: bool) -> None:
    plain, sharded = pair
    assert sharded.status().chunks == plain.status().chunks > 200
    for query in shard_queries():
        want = plain.search(query, k=10, mode=mode, collapse=collapse)
        got = sharded.search(query, k=10, mode=mode, collapse=collapse)
        same_ranking([(r.chunk_id, r.score) for r in got], [(r.chunk_id, r.score) for r in want])
        passages = {r.chunk_id: (r.doc_id, r.char_start, r.char_end, r.source_path, r.text) for r in want}
        for result in got:
            if result.chunk_id in passages:
                assert (result.doc_id, result.char_start, result.char_end, result.source_path, result.text) == (
                    passages[result.chunk_id]
                )
        assert sorted(len(r.sources) for r in got) == sorted(len(r.sources) for r in want)


@pytest.mark.parametrize("mode", MODES)
def test_filters_and_allowed_ids_rank_the_same(pair: tuple[Index, Index], mode: str) -> None:
    plain, sharded = pair
    chunk_ids = np.sort(plain.snapshot().vectors.ids())
    allowed = chunk_ids[::3]
    for query in shard_queries(6):
        same_ranking(
            sharded.rank(query, 10, mode=mode, allowed=allowed), plain.rank(query, 10, mode=mode, allowed=allowed)
        )
        filters = {"path_glob": ["*abstracts*"]}
        want = [(r.chunk_id, r.score) for r in plain.search(query, k=5, mode=mode, filters=filters, collapse=False)]
        got = [(r.chunk_id, r.score) for r in sharded.search(query, k=5, mode=mode, filters=filters, collapse=False)]
        same_ranking(got, want)


def test_every_document_lives_in_its_shard_and_commands_work(pair: tuple[Index, Index]) -> None:
    plain, sharded = pair
    assert isinstance(sharded, ShardedIndex)
    for number, part in enumerate(sharded.shards):
        assert part.status().documents > 20
        assert {shard_of(d.doc_id, 4) for d in part.documents()} == {number}
    assert [d.doc_id for d in sharded.documents()] == [d.doc_id for d in plain.documents()]
    some = plain.documents(limit=1)[0].doc_id
    assert sharded.document(some).text == plain.document(some).text
    # by name: looked for in every shard, the routed one first, each once
    for info in plain.documents(limit=8)[::3]:
        assert sharded.document(info.source_id).doc_id == info.doc_id == plain.document(info.source_id).doc_id
    with pytest.raises(IndexNotFoundError, match=re.escape("no document 'no/such/name.md'")):
        sharded.document("no/such/name.md")
    report = sharded.verify()
    assert report.ok, report.problems
    assert report.chunks == plain.verify().chunks
    run = sharded.runs(1)[0]
    assert run.status == "succeeded" and run.added == plain.runs(1)[0].added
    status = sharded.status()
    assert status.shards == 4 and status.shard_generations == status.manifest_generations == [1, 1, 1, 1]
    reopened = Index.open(sharded.path, embedder=sharded.embedder)
    assert isinstance(reopened, ShardedIndex)
    assert reopened.search("cells", k=3, mode="lexical") == sharded.search("cells", k=3, mode="lexical")


def test_a_rerun_commits_only_in_the_shards_whose_documents_changed(tmp_path: Path, fake_embedder) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for n in range(12):
        (corpus / f"d{n}.txt").write_text(f"Document {n} talks about topic {n % 3} and river {n}.\n")
    index = Index.create(tmp_path / "idx", embedder=fake_embedder, shards=3)
    assert isinstance(index, ShardedIndex)
    index.ingest([corpus], parallel="serial")
    before = [part.status().generation for part in index.shards]
    (corpus / "d5.txt").write_text("Document five was rewritten entirely.\n")
    run = index.ingest([corpus], parallel="serial")
    assert (run.added, run.updated, run.unchanged) == (0, 1, 11)
    after = [part.status().generation for part in index.shards]
    # (a shard the 12 documents all missed was never started, so its ledger may be empty: ids hash the path)
    changed = [n for n, part in enumerate(index.shards) if any(run.updated for run in part.runs(1))]
    doc_id = next(d.doc_id for d in index.documents() if d.source_id == "d5.txt")
    assert changed == [shard_of(doc_id, 3)]
    assert after == [b + (n in changed) for n, b in enumerate(before)]  # the other shards did not commit
    assert Manifest.read(index.path).generations == after
    assert index.verify().ok


def test_settings_mismatches_are_one_line_errors(tmp_path: Path, fake_embedder) -> None:
    Index.create(tmp_path / "plain", embedder=fake_embedder)
    with pytest.raises(IndexMismatchError, match="unsharded"):
        Index.create(tmp_path / "plain", embedder=fake_embedder, shards=2)
    Index.create(tmp_path / "two", embedder=fake_embedder, shards=2)
    with pytest.raises(IndexMismatchError, match="has 2 shards, not 3"):
        Index.create(tmp_path / "two", embedder=fake_embedder, shards=3)
    assert isinstance(Index.create(tmp_path / "two", embedder=fake_embedder), ShardedIndex)


def test_a_failed_shard_leaves_every_shard_committed_and_a_rerun_completes(tmp_path: Path, fake_embedder) -> None:
    """A shard whose run dies (here: its directory's lock cannot be had) is reported; the others commit; the
    manifest records the generations that are committed; the same run again gives the uninterrupted index."""
    corpus = abstracts_file(tmp_path / "corpus", 60)
    whole = Index.create(tmp_path / "whole", embedder=fake_embedder, shards=3)
    whole.ingest([corpus], parallel="serial")
    index = Index.create(tmp_path / "idx", embedder=fake_embedder, shards=3)
    assert isinstance(index, ShardedIndex)
    from citeline.store.locks import writer_lock

    with writer_lock(shard_dir(index.path, 1)), pytest.raises(Exception, match="another process is writing"):
        index.ingest([corpus], parallel="threads", wait=0.2)
    run = index.runs(1)[0]
    assert run.status == "failed" and "shard-001" in run.errors[-1]["path"]
    assert Manifest.read(index.path).generations == [1, 0, 1]
    assert index.verify().ok  # every shard at a committed generation (shard 1 at its empty one)
    index.ingest([corpus], parallel="serial")
    assert index.verify().ok
    for mode in MODES:
        for query in shard_queries(4):
            same_ranking(index.rank(query, 10, mode=mode), whole.rank(query, 10, mode=mode))


def test_processes_and_a_dask_local_cluster_build_the_same_index(tmp_path: Path, fake_embedder) -> None:
    distributed = pytest.importorskip("distributed")
    corpus = abstracts_file(tmp_path / "corpus", 80)
    built = {}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster:
        for name, settings in (
            ("serial", {"parallel": "serial"}),
            ("processes", {"parallel": "processes"}),
            ("dask", {"dask_address": cluster.scheduler_address}),
        ):
            index = Index.create(tmp_path / name, embedder=fake_embedder, shards=2)
            assert isinstance(index, ShardedIndex)
            run = index.ingest([corpus], **settings)
            assert run.status == "succeeded"
            built[name] = index
    ids = {name: np.sort(index.snapshot().vectors.ids()).tolist() for name, index in built.items()}
    assert ids["serial"] == ids["processes"] == ids["dask"]
    query = shard_queries(1)[0]
    hits = {name: [(r.chunk_id, r.score, r.text) for r in index.search(query, k=10)] for name, index in built.items()}
    assert hits["dask"] == hits["serial"] == hits["processes"]


def test_cli_shards_flag_is_checked(tmp_path: Path, seeds_dir: Path) -> None:
    from click.testing import CliRunner

    from citeline.cli.main import cli

    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(seeds_dir), "--index", str(tmp_path / "bad"), "--shards", "0"])
    assert result.exit_code == 2 and "--shards" in result.output
    result = runner.invoke(
        cli, ["schedule", str(seeds_dir), "--cron", "0 * * * *", "--index", str(tmp_path / "y"), "--shards", "0"]
    )
    assert result.exit_code == 2 and "--shards" in result.output


FLAT = ("--flat", "--min-score", "0")


@pytest.mark.slow
def test_cli_ingest_seeds_with_two_shards_gives_the_plain_top_5(tmp_path: Path, seeds_dir: Path) -> None:
    """`citeline ingest seeds --shards 2` and a plain index: the same top 5 in every mode (the real model), and
    status, runs, verify, rebuild and search on the root."""
    from click.testing import CliRunner

    from citeline.cli.main import cli

    runner = CliRunner()
    plain, sharded = str(tmp_path / "plain"), str(tmp_path / "sharded")
    for args in (["--index", plain], ["--index", sharded, "--shards", "2"]):
        result = runner.invoke(cli, ["ingest", str(seeds_dir), *args, "--no-progress"])
        assert result.exit_code == 0, result.output
    for mode in MODES:
        hits = {}
        for index in (plain, sharded):
            result = runner.invoke(
                cli,
                # --flat --min-score 0: five passages each (the CLI groups by document, and seeds has four)
                ["search", "why did soldiers defect", "--index", index, "-k", "5", "--mode", mode, "--json", *FLAT],
            )
            assert result.exit_code == 0, result.output
            hits[index] = [(r["chunk_id"], round(r["score"], 5)) for r in map(json.loads, result.output.splitlines())]
        assert hits[sharded] == hits[plain] and len(hits[plain]) == 5
    status = json.loads(runner.invoke(cli, ["status", "--index", sharded, "--json"]).output)
    assert status["shards"] == 2 and status["documents"] == 4
    assert json.loads(runner.invoke(cli, ["runs", "--index", sharded, "--json"]).output.splitlines()[0])["added"] == 4
    for command in ("verify", "rebuild"):
        result = runner.invoke(cli, [command, "--index", sharded])
        assert result.exit_code == 0 and "consistent" in result.output, result.output


_KILLED_WRITER = """
import sys, time
sys.path.insert(0, {tests!r})
from conftest import HashEmbedder
from citeline import Index
from citeline.store import files

def announce(name):
    original = getattr(files, name)
    def wrapped(artifact, *args, **kwargs):
        result = original(artifact, *args, **kwargs)
        print(f"stage {{artifact}}-{{'tmp' if name == 'write_staged' else 'written'}}", flush=True)
        time.sleep(0.3)
        return result
    setattr(files, name, wrapped)

index = Index.create({root!r}, embedder=HashEmbedder(), shards=3)
announce("write_staged"), announce("swap_in")
print("stage ingest", flush=True)
index.ingest([{corpus!r}], parallel="serial")
print("stage done", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stage", "occurrence"), [("vector-compaction-written", 2), ("bm25-tmp", 3), ("shards-manifest-tmp", 1)]
)
def test_a_writer_killed_mid_run_leaves_every_shard_committed(
    tmp_path: Path, fake_embedder, stage: str, occurrence: int
) -> None:
    """The kill trial of a sharded run (shards run one after another in the killed process): SIGKILL at the
    ``occurrence``-th ``stage`` of publishing (the second shard's vectors renamed into place; the third shard's
    BM25 folder staged; the manifest staged), then every shard is at a committed generation, and the same run
    again gives the same index as an uninterrupted run."""
    import subprocess
    import sys

    corpus = abstracts_file(tmp_path / "corpus", 60)
    whole = Index.create(tmp_path / "whole", embedder=fake_embedder, shards=3)
    whole.ingest([corpus], parallel="serial")
    root = tmp_path / "killed"
    code = _KILLED_WRITER.format(tests=str(Path(__file__).resolve().parents[1]), root=str(root), corpus=str(corpus))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    seen, started = 0, False
    assert child.stdout is not None
    for line in child.stdout:
        started = started or line.strip() == "stage ingest"
        if started and line.strip() == f"stage {stage}":
            seen += 1
            if seen == occurrence:
                child.kill()
                break
    child.wait()
    assert seen == occurrence, f"the writer never reached {stage} #{occurrence}"
    index = Index.open(root, embedder=fake_embedder)
    assert isinstance(index, ShardedIndex)
    for part in index.shards:
        assert part.verify().ok  # each shard at a committed generation, its artifacts complete
    assert index.verify().ok  # the root too: a stopped run is recorded, not reported INCONSISTENT (issue 50)
    index.ingest([corpus], parallel="serial")
    assert index.verify().ok
    assert sorted(index.snapshot().vectors.ids().tolist()) == sorted(whole.snapshot().vectors.ids().tolist())
    for mode in MODES:
        for query in shard_queries(4):
            same_ranking(index.rank(query, 10, mode=mode), whole.rank(query, 10, mode=mode))


def test_the_removal_guard_and_dry_run_decide_over_all_shards(tmp_path: Path, fake_embedder) -> None:
    from citeline.errors import RemovalRefusedError

    corpus = tmp_path / "docs"
    corpus.mkdir()
    for n in range(12):
        (corpus / f"d{n}.txt").write_text(f"Document {n} about the harbour and the {n}th mill.\n")
    index = Index.create(tmp_path / "idx", embedder=fake_embedder, shards=3)
    index.ingest([corpus], parallel="serial")
    generations = Manifest.read(index.path).generations
    for n in range(8):
        (corpus / f"d{n}.txt").unlink()
    plan = index.ingest([corpus], dry_run=True)
    assert (plan.status, plan.removed, plan.unchanged) == ("dry-run", 8, 4)
    with pytest.raises(RemovalRefusedError, match="8 of the 12 documents"):
        index.ingest([corpus], parallel="serial")
    assert Manifest.read(index.path).generations == generations and index.status().documents == 12
    run = index.ingest([corpus], parallel="serial", allow_removals=True)
    assert run.removed == 8 and index.status().documents == 4 and index.verify().ok


def test_an_unchanged_rerun_reads_no_file_and_a_changed_file_is_read_alone(
    tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The root decides file freshness over every shard's catalog before parsing (citeline.sharding.freshness): an
    unchanged re-run parses nothing; a rewritten JSONL file, whose records live in several shards, is read alone."""
    import os
    import time

    from citeline.ingest import pipeline

    corpus = tmp_path / "docs"
    corpus.mkdir()
    for n in range(6):
        records = [{"id": f"{n}-{r}", "text": f"File {n} record {r} about topic {r % 3}."} for r in range(8)]
        (corpus / f"f{n}.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    old = time.time() - 60  # settled: freshness trusts a file's time only once it was left alone for a while
    for path in corpus.iterdir():
        os.utime(path, (old, old))
    index = Index.create(tmp_path / "idx", embedder=fake_embedder, shards=3)
    index.ingest([corpus], parallel="serial")
    read: list[str] = []
    real = pipeline.parse_source

    def counted(source, **options):  # type: ignore[no-untyped-def]
        read.append(source.source_id)
        return real(source, **options)

    monkeypatch.setattr(pipeline, "parse_source", counted)
    run = index.ingest([corpus], parallel="serial")
    assert read == [] and (run.added, run.updated, run.unchanged, run.removed) == (0, 0, 48, 0)
    (corpus / "f2.jsonl").write_text('{"id": "2-0", "text": "File 2 record 0 was rewritten."}\n')
    run = index.ingest([corpus], parallel="serial", allow_removals=True)
    assert read == ["f2.jsonl"]
    assert (run.added, run.updated, run.unchanged, run.removed) == (0, 1, 40, 7)
    assert len(index.documents()) == 41 and index.verify().ok
    # A file edited in one record: the shards holding its other records are idle, but still record its new stat,
    # so the next run reads nothing (it used to read the file on every run: citeline.store.file_stats).
    records = [{"id": f"4-{r}", "text": f"File 4 record {r} about topic {r % 3}."} for r in range(8)]
    records[3]["text"] = "File 4 record 3 was edited."
    (corpus / "f4.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    for name in ("f2.jsonl", "f4.jsonl"):  # f2, written a moment ago, was too new to be trusted: settle it too
        os.utime(corpus / name, (old + 10, old + 10))
    read.clear()
    run = index.ingest([corpus], parallel="serial")
    assert sorted(read) == ["f2.jsonl", "f4.jsonl"] and (run.updated, run.unchanged) == (1, 40)
    read.clear()
    run = index.ingest([corpus], parallel="serial")
    assert read == [] and (run.updated, run.unchanged) == (0, 41)
    assert index.verify().ok


def test_a_sharded_run_logs_the_parse_counts_as_one_index_does(tmp_path: Path, fake_embedder, caplog) -> None:
    """The root's parse line counts the documents of unchanged files too, and names records without text."""
    import os
    import time

    corpus = tmp_path / "docs"
    corpus.mkdir()
    records = [{"id": "a", "text": "Ferries cross."}, {"id": "b", "text": " "}, {"id": "c", "text": "Levees hold."}]
    (corpus / "f.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    (corpus / "g.txt").write_text("A plain file about rivers.\n")
    old = time.time() - 60  # settled, so that the re-run reads neither file
    for path in corpus.iterdir():
        os.utime(path, (old, old))
    index = Index.create(tmp_path / "idx", embedder=fake_embedder, shards=2)
    with caplog.at_level("INFO", logger="citeline.ingest"):
        index.ingest([corpus], parallel="serial")
    assert "parsed 2 files: 3 documents, 0 failed, 1 record with no text left out" in caplog.text
    assert f"left out 1 record of {corpus / 'f.jsonl'} with no text (line 2)" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="citeline.ingest"):
        run = index.ingest([corpus], parallel="serial")
    assert run.unchanged == 3 and "parsed 2 files: 3 documents, 0 failed\n" in caplog.text


class _Lines(Reporter):
    """A reporter keeping every line a run logs."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, level: int, message: str) -> None:
        self.lines.append(message)


def _planning_lines(lines: list[str]) -> list[str]:
    # The planning phase's lines (up to the plan's), without the sharded run's ", over N shards" and the stages'
    # seconds.
    planned = lines[: next(n for n, line in enumerate(lines) if line.startswith("plan:")) + 1]
    return [re.sub(r": [0-9.]+ s$", ": _ s", line.replace(", over 3 shards", "")) for line in planned]


def test_a_sharded_run_plans_as_one_index_does(tmp_path: Path, fake_embedder) -> None:
    """One planning phase for plain and sharded runs (``pipeline.run``, then the run's ingest target): the same log
    lines up to the plan (a name that is not UTF-8, a file of no known type, an empty file), the same ledger row,
    the same dry run with the removal guard's objections, and a run whose texts were let go while parsing
    (``commit_every``: keys only, each shard's run parses their files again) builds the same documents."""
    import os

    corpus = tmp_path / "docs"
    corpus.mkdir()
    for n in range(12):
        (corpus / f"d{n}.md").write_text(f"# Note {n}\n\nThe mill at weir {n} ground {n * 7} sacks of barley.\n" * 3)
    (corpus / "notes.xyz").write_text("no parser for this\n")
    (corpus / "empty.txt").write_text("")
    os.close(os.open(os.fsencode(corpus) + b"/bad-\xff-name.txt", os.O_CREAT | os.O_WRONLY))
    plain = Index.create(tmp_path / "plain", embedder=fake_embedder)
    sharded = Index.create(tmp_path / "root", embedder=fake_embedder, shards=3)
    runs, lines = {}, {}
    for name, index, extra in (("plain", plain, {}), ("sharded", sharded, {"parallel": "serial"})):
        reporter = _Lines()
        runs[name] = index.ingest([corpus], options=IngestOptions(reporter=reporter, commit_every=2), **extra)
        lines[name] = _planning_lines(reporter.lines)
    assert lines["sharded"] == lines["plain"] and any("not valid UTF-8" in line for line in lines["plain"]), lines
    fields = ("status", "added", "updated", "unchanged", "removed", "failed", "unsupported", "excluded", "errors")
    assert [getattr(runs["sharded"], f) for f in fields] == [getattr(runs["plain"], f) for f in fields]
    assert runs["plain"].added == 12
    stored = {name: sorted((d.doc_id, d.content_hash, d.chunks) for d in index.documents()) for name, index in
              (("plain", plain), ("sharded", sharded))}  # fmt: skip
    assert stored["sharded"] == stored["plain"] and sharded.verify().ok
    for n in range(9):
        (corpus / f"d{n}.md").unlink()
    dry = {name: index.ingest([corpus], dry_run=True) for name, index in (("plain", plain), ("sharded", sharded))}
    assert dry["plain"].errors and [getattr(dry["sharded"], f) for f in fields] == [
        getattr(dry["plain"], f) for f in fields
    ]


def test_verify_records_a_run_that_stopped_between_its_shards_and_the_manifest(tmp_path: Path, fake_embedder) -> None:
    """After kill -9 of a sharded run, some shards committed past the generations the manifest records (nothing
    lost): verify said INCONSISTENT until the next complete run. Now it records the shards' generations and the
    stopped run (interrupted) with a warning, says consistent, and the next run reads every file again."""
    import warnings

    from citeline.errors import IndexRepairedWarning

    corpus = abstracts_file(tmp_path / "corpus", 30)
    index = Index.create(tmp_path / "idx", embedder=fake_embedder, shards=2)
    assert isinstance(index, ShardedIndex)
    index.ingest([corpus], parallel="serial")
    recorded = Manifest.read(index.path).generations
    # The state a kill leaves: one shard committed (a document of it removed), the manifest not yet written.
    shard = Index.open(shard_dir(index.path, 0), embedder=fake_embedder)
    shard.remove(doc_ids=[shard.documents()[0].doc_id])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = index.verify()
    assert report.ok, report.problems
    assert any(issubclass(w.category, IndexRepairedWarning) and "stopped part way" in str(w.message) for w in caught)
    assert Manifest.read(index.path).generations == [recorded[0] + 1, recorded[1]]
    assert index.runs(1)[0].status == "interrupted"
    assert index.verify().ok  # once recorded, quiet
    run = index.ingest([corpus], parallel="serial")  # every file read again: the removed document comes back
    assert (run.added, run.status) == (1, "succeeded") and index.verify().ok
