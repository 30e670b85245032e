"""One run skeleton (``pipeline.run`` and the index's committer, ``citeline.ingest.targets``): files, texts and
removals plan and commit the same way on a plain index and on a sharded root, with the same lock, dry run, ledger
row and failure record; the caller never asks which kind of index it writes to."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import HashEmbedder

from citeline import Index, ShardedIndex
from citeline.errors import QueryError
from citeline.ingest.options import Placement
from citeline.sharding.index import Manifest, shard_of
from citeline.store import catalog
from citeline.store.ledger import RunSummary

TEXTS = [
    "The harbour master logged every ship that came in with salt.",
    "A letter from the siege describes the bread ration in detail.",
    "The guild charter names the port's wardens and their duties.",
    "Grain prices rose after the mill burned in the spring.",
    "The bishop's ledger lists the tithes of six parishes.",
    "Wool went out by cart to the fair at the river crossing.",
]


def _folder(docs: Path) -> Path:
    (docs / "sub").mkdir(parents=True)
    (docs / "alpha.txt").write_text("Alpha: the river bridge held through the winter flood.\n", encoding="utf-8")
    (docs / "beta.md").write_text("# Beta\n\nThe soldier wrote a letter about the siege.\n", encoding="utf-8")
    (docs / "sub" / "gamma.txt").write_text("Gamma: grain, the mill and the new tax.\n", encoding="utf-8")
    (docs / "sub" / "delta.txt").write_text("Delta: the guild charter of the port.\n", encoding="utf-8")
    return docs


def _create(path: Path, sharded: bool) -> Index:
    return Index.create(path, embedder=HashEmbedder(), shards=3 if sharded else None)


#: The shards' jobs on threads (a sharded root's processes would each load what the HashEmbedder spares a test).
THREADS = Placement(parallel="threads")


def _files(index: Index) -> list[bytes]:
    # What a dry run must leave as it was: every catalog (the root's shards too) and the manifest.
    paths = sorted(index.path.rglob("catalog.duckdb")) + sorted(index.path.glob("shards.json"))
    return [path.read_bytes() for path in paths]


@pytest.fixture(params=[False, True], ids=["plain", "sharded"])
def kind(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def test_add_texts_routes_each_text_to_its_shard_and_reruns_incrementally(tmp_path: Path) -> None:
    plain, sharded = _create(tmp_path / "plain", False), _create(tmp_path / "sharded", True)
    assert isinstance(sharded, ShardedIndex)
    ids = [f"t{n}" for n in range(len(TEXTS))]
    for index in (plain, sharded):
        run = index.add_texts(TEXTS, ids=ids, metadata={"kind": "note"})
        assert (run.status, run.added, run.updated, run.unchanged, run.removed) == ("succeeded", 6, 0, 0, 0)
        assert index.meta["generation"] == run.generation == index.status().generation
    for number, part in enumerate(sharded.shards):  # every text in the shard its id routes to
        assert all(shard_of(record.doc_id, 3) == number for record in part.documents())
    assert sum(1 for part in sharded.shards if part.documents()) >= 2
    assert sorted(d.doc_id for d in sharded.documents()) == sorted(d.doc_id for d in plain.documents())
    for query in ("salt ship harbour", "bread ration siege"):
        want = [(r.doc_id, r.char_start, r.char_end) for r in plain.search(query, k=3)]
        assert [(r.doc_id, r.char_start, r.char_end) for r in sharded.search(query, k=3)] == want
    # one text changed, one new, the rest as they were; nothing of the source is removed by being left out
    for index in (plain, sharded):
        run = index.add_texts([TEXTS[0] + " Edited.", "A new text about the toll bridge."], ids=["t0", "t9"])
        assert (run.added, run.updated, run.unchanged, run.removed) == (1, 1, 0, 0)
        assert len(index.documents()) == 7
        assert index.verify().ok
    assert Manifest.read(sharded.path).runs[-1]["roots"] == ["texts"]


def test_add_texts_dry_run_writes_nothing(tmp_path: Path, kind: bool) -> None:
    index = _create(tmp_path / "ix", kind)
    index.add_texts(TEXTS[:3], ids=["a", "b", "c"])
    before, runs = _files(index), len(index.runs())
    run = index.add_texts([TEXTS[0], TEXTS[4]], ids=["a", "e"], dry_run=True)
    assert (run.status, run.added, run.unchanged, run.generation) == ("dry-run", 1, 1, index.status().generation)
    assert _files(index) == before and len(index.runs()) == runs
    assert len(index.documents()) == 3


def test_remove_on_either_kind_is_a_run_with_its_documents(tmp_path: Path, kind: bool) -> None:
    docs = _folder(tmp_path / "docs")
    index = _create(tmp_path / "ix", kind)
    index.ingest([docs], placement=THREADS)  # a plain index has no parts: it ignores the placement
    index.add_texts(TEXTS[:2], ids=["a", "b"])
    before, runs = _files(index), len(index.runs())
    dry = index.remove([docs / "sub"], source="texts", dry_run=True)
    assert (dry.status, dry.removed) == ("dry-run", 4)
    assert [d["name"] for d in dry.documents] == [
        str(docs / "sub" / "delta.txt"), str(docs / "sub" / "gamma.txt"), "texts:a", "texts:b",
    ]  # fmt: skip
    assert _files(index) == before and len(index.runs()) == runs
    with pytest.raises(QueryError, match="--doc 0000000000000000"):  # all or nothing, over every shard
        index.remove([docs / "sub"], doc_ids=["0000000000000000"])
    assert _files(index) == before and len(index.runs()) == runs  # no run recorded either
    run = index.remove([docs / "sub"], source="texts")
    assert (run.status, run.removed) == ("succeeded", 4) and run.documents == dry.documents
    assert run.roots == [f"remove path {docs / 'sub'}", "remove source texts"]
    assert index.meta["generation"] == run.generation == index.status().generation
    assert sorted(d.source_id for d in index.documents()) == ["alpha.txt", "beta.md"]
    assert index.runs(1)[0].removed == 4 and index.verify().ok
    if isinstance(index, ShardedIndex):  # the manifest keeps the counts and selectors, not the list
        assert "documents" not in Manifest.read(index.path).runs[-1]


def test_files_texts_and_removals_leave_the_same_ledger_fields(tmp_path: Path, kind: bool) -> None:
    """Whatever the run's kind, the row it returns is the row the ledger (a root's manifest) recorded, every field
    of it, and the rows have the same fields filled the same way."""
    docs = _folder(tmp_path / "docs")
    index = _create(tmp_path / "ix", kind)
    ingest = index.ingest([docs], placement=THREADS)
    returned = [ingest, index.add_texts(TEXTS[:2], ids=["a", "b"]), index.remove([docs / "sub"])]
    recorded = list(reversed(index.runs(3)))
    names = [f.name for f in fields(RunSummary)]
    for got, row in zip(returned, recorded, strict=True):
        assert {name: getattr(got, name) for name in names} == row.to_dict()
        assert row.status == "succeeded" and row.finished_at and row.finished_at >= row.started_at
        assert isinstance(row.generation, int) and row.errors == [] and row.failed == 0
        assert json.loads(json.dumps(row.to_dict())) == row.to_dict()
    assert [row.generation for row in recorded] == sorted({row.generation for row in recorded})
    assert [(row.added, row.removed) for row in recorded] == [(4, 0), (2, 0), (0, 2)]
    assert [row.roots for row in recorded] == [[str(docs)], ["texts"], [f"remove path {docs / 'sub'}"]]


def test_a_run_that_fails_is_recorded_alike_for_texts_and_removals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure record is the skeleton's: a commit that raises leaves a ``failed`` row naming the error, the
    index at its last commit, for texts and removals as for files."""
    from citeline.store import generation

    index = _create(tmp_path / "ix", False)
    index.add_texts(TEXTS[:2], ids=["a", "b"])
    before = catalog.db_path(index.path).read_bytes()

    def broken(*args: object, **kwargs: object) -> int:
        raise OSError("disk full")

    monkeypatch.setattr(generation, "commit", broken)
    for attempt in (lambda: index.add_texts(["new"], ids=["c"]), lambda: index.remove(source="texts")):
        with pytest.raises(OSError, match="disk full"):
            attempt()
        last = index.runs(1)[0]
        assert last.status == "failed" and "disk full" in last.errors[0]["reason"]
    monkeypatch.undo()
    assert sorted(d.source_id for d in index.documents()) == ["a", "b"]
    assert catalog.db_path(index.path).read_bytes() != before  # the ledger rows, nothing else
    assert index.verify().ok


def test_the_class_says_what_of_a_placement_it_leaves_unused(tmp_path: Path) -> None:
    """A caller never asks which kind of index a path holds (tests/unit/test_layout.py checks the callers' code):
    it asks the front class ``Index.create`` or ``Index.open`` would return what of its placement goes unused, before
    anything is created, and hands its placement to whatever index it opened."""
    on_dask = Placement(dask_address="tcp://127.0.0.1:8786", shard_workers="0=a")
    assert Index.front_class(tmp_path / "new") is Index
    assert Index.front_class(tmp_path / "new", shards=2) is ShardedIndex
    assert not (tmp_path / "new").exists()  # nothing created by asking
    assert Index.unused_placement(on_dask) == ["dask_address", "shard_workers"]
    assert Index.unused_placement(Placement(dask_workers=2)) == ["dask_workers"]
    assert Index.unused_placement(THREADS) == [] and ShardedIndex.unused_placement(on_dask) == []
    root, plain = _create(tmp_path / "root", True), _create(tmp_path / "plain", False)
    assert Index.front_class(root.path) is ShardedIndex and Index.front_class(plain.path) is Index
    assert ShardedIndex.front_class(tmp_path / "other") is ShardedIndex  # a subclass creates its own layout


def test_the_cli_refuses_a_placement_the_index_would_not_use_and_creates_nothing(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from citeline.cli.main import cli

    docs = _folder(tmp_path / "docs")
    for option, said in (
        (["--dask-workers", "2"], "--dask-address and --dask-workers run the Prefect flow or a sharded index: add"),
        (["--shard-workers", "0=a"], "--shard-workers pins a sharded index's shards to Dask workers: this index has"),
    ):
        result = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(tmp_path / "ix"), *option])
        assert result.exit_code == 2 and said in result.output, result.output
        assert not (tmp_path / "ix").exists()
