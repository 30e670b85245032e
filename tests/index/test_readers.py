"""The read interfaces (citeline.query.readers) and the ranking stages (citeline.query.stages): a contract test over
the three readers, the local one, the threaded-shard merge and the Dask shard (its tasks run in this process, through
the worker's own functions), each reading the same shard and giving the same answers to every declared read; and
every registered stage keeps its candidates' shape.

mypy checks the same conformance statically (``citeline.sharding.remote._readers_conform``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.query import plan
from citeline.query.readers import LexicalReader, SnapshotReader
from citeline.query.stages import STAGES, Candidates, Reads, StageQuery
from citeline.sharding.remote import RemoteShard
from citeline.sharding.search import MergedLexical, ShardedSnapshot
from citeline.store.filters import Filters
from citeline.store.snapshot import ReadSnapshot

TEXTS = [
    "The tide gauge at the harbour recorded the highest flood in forty years.",
    "Storm surge and spring tides flooded the lower town; the harbour wall held.",
    "Cells divide by mitosis; the spindle pulls the chromosomes apart.",
    "The river burst its banks after a week of rain upstream of the town.",
    "A quiet paper on soil bacteria and the nitrogen they fix in fields.",
    "The tide gauge at the harbour recorded the highest flood in forty years.",  # a copy in another document
]


class _InProcess:
    """A ``Placement`` that runs a shard's task here, with the worker's functions (no cluster)."""

    def run(self, number: int, function: Callable[..., Any], *args: Any, key: str | None = None) -> Any:
        return function(*args)


@pytest.fixture(scope="module")
def readers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One shard of a two-shard index read three ways."""
    tmp = tmp_path_factory.mktemp("readers")
    docs = tmp / "docs"
    docs.mkdir()
    for n, text in enumerate(TEXTS * 3):
        (docs / f"d{n}.md").write_text(f"# Note {n}\n\n{text} Entry {n}.\n")
    index = Index.create(tmp / "root", embedder=HashEmbedder(), shards=2)
    index.ingest([docs], parallel="threads")
    shards = sorted(path for path in (tmp / "root").iterdir() if path.is_dir() and path.name.startswith("shard"))

    def answers_the_tests(shard: Path) -> bool:
        # A document's shard follows its id, which names its root's path: the temporary folder decides which shard
        # holds the documents the tests' query matches and their filter keeps (one folder, pytest-250/popen-gw1,
        # put none of them in the first shard). The tests read a shard that holds some of each.
        snapshot = ReadSnapshot(shard)
        kept = np.asarray(snapshot.allowed_chunk_ids(Filters.from_value({"path_glob": ["*d1*.md"]})))
        return bool(snapshot.lexical.search("harbour flood tide", 5)) and kept.size > 0

    shard = next(shard for shard in shards if answers_the_tests(shard))
    return {
        "local": ReadSnapshot(shard),
        "threaded": ShardedSnapshot(tmp / "root", [shard]),
        "remote": RemoteShard(_InProcess(), 0, str(shard)),  # type: ignore[arg-type]
        "root": str(docs),
    }


def _declared(protocol: type) -> list[str]:
    return sorted(name for name in vars(protocol) if not name.startswith("_") or name == "__len__")


@pytest.mark.parametrize("name", ["local", "threaded", "remote"])
def test_every_reader_implements_the_read_interfaces(readers: dict[str, Any], name: str) -> None:
    reader = readers[name]
    assert isinstance(reader, SnapshotReader)
    assert isinstance(reader.lexical, LexicalReader)
    for protocol, implementation in ((SnapshotReader, reader), (LexicalReader, reader.lexical)):
        for member in _declared(protocol):
            declared = getattr(protocol, member)
            if inspect.isfunction(declared):  # the implementation takes at least the declared parameters
                wanted = list(inspect.signature(declared).parameters)[1:]
                given = inspect.signature(getattr(implementation, member)).parameters
                assert set(wanted) <= set(given), (name, member)


def test_every_reader_gives_the_same_answers(readers: dict[str, Any]) -> None:
    local, others = readers["local"], [readers["threaded"], readers["remote"]]
    ids = local.lexical.chunk_ids.tolist()
    query = "harbour flood tide"
    vector = HashEmbedder().encode([query])[0]
    filters = Filters.from_value({"path_glob": ["*d1*.md"]})

    def answers(reader: Any) -> list[Any]:
        ranked, score = reader.lexical.ranked(query, 5)
        return [
            reader.meta["model"],
            reader.generation,  # a merge of one shard: the sum of one generation
            reader.passage_rows(ids),
            reader.doc_ids(ids),
            reader.chunk_documents(ids),
            reader.chunk_lengths(ids),
            sorted(reader.document_vectors(ids)),
            reader.document_count(),
            np.asarray(reader.allowed_chunk_ids(filters)).tolist(),
            reader.allowed_chunk_ids(Filters()),
            reader.root_chunks(readers["root"]),
            reader.is_current(),
            len(reader.lexical),
            reader.lexical.chunk_ids.tolist(),
            reader.lexical.search(query, 5),
            ranked,
            score(np.asarray(ids, dtype=np.int64)).tolist(),
            reader.lexical.scores_of(query, np.asarray(ids, dtype=np.int64)).tolist(),
            reader.lexical.sharing_rare_terms([TEXTS[0]], 3, min_share=0.5),
            len(reader.vectors),
            reader.vectors.dimension,
            reader.vectors.ids().tolist(),
            reader.vectors.search(vector, 5),
            reader.vectors.vectors(ids).tolist(),
        ]

    expected = answers(local)
    assert expected[14] and expected[8]  # the query matches, the filter keeps some chunks
    for reader in others:
        assert answers(reader) == expected


@pytest.mark.parametrize("mode", plan.MODES)
def test_the_plan_ranks_alike_on_every_reader(readers: dict[str, Any], mode: str) -> None:
    vector = HashEmbedder().encode(["harbour flood tide"])[0]
    found = [plan.rank_chunks(readers[name], "harbour flood tide", vector, 5, mode) for name in ("local", "threaded")]
    assert found[0] and found[0] == found[1]


@pytest.mark.parametrize("name", sorted(STAGES))
def test_every_stage_keeps_its_candidates_shape(readers: dict[str, Any], name: str) -> None:
    # Each registered stage, with the plan's settings, over hybrid's candidates: one score per candidate id.
    reader = readers["local"]
    vector = HashEmbedder().encode(["harbour flood tide"])[0]
    reads = Reads.of(reader)
    candidates = plan.hybrid_candidates(reads, "harbour flood tide", vector, 10, None)
    every = plan.Fusion(weight=0.4, feedback=0.25, documents=(("lexical", 0.3), ("dense", 0.1)))
    stages = {type(step): step for step in plan.stages_for("hybrid", every)}
    stages.update({type(step): step for step in plan.stages_for("hybrid", plan.Fusion(method="rrf"))})
    stages.update({type(step): step for step in plan.stages_for("dense", plan.DEFAULT_FUSION)})
    step = stages[STAGES[name]]
    query = StageQuery("harbour flood tide", 5, reads)
    if name not in ("convex", "rrf", "dense_document"):  # they run after the convex fusion
        candidates = stages[STAGES["convex"]].rerank(query, candidates)
    out = step.rerank(query, candidates)
    assert isinstance(out, Candidates) and len(out.ids) == len(out.values) > 0
    assert set(out.ids.tolist()) == set(candidates.ids.tolist())
    assert np.isfinite(out.values).all()


def test_a_merged_lexical_reader_is_a_lexical_reader(readers: dict[str, Any]) -> None:
    assert isinstance(readers["threaded"].lexical, MergedLexical)
    assert isinstance(readers["threaded"].lexical, LexicalReader)
    assert not isinstance(Path("."), SnapshotReader)
