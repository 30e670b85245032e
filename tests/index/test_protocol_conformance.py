"""Every implementation of citeline's Protocols conforms at run time, on a real small index (HashEmbedder):

- readers (``citeline.query.readers``: ``SnapshotReader``, ``LexicalReader``, ``LexicalShard``; and
  ``citeline.vectors.base``: ``VectorReader``, ``VectorIndex``): one index's snapshot, the snapshot of an index
  written by citeline 0.1.0 (its BM25 folder behind ``LegacyLexical``), the threaded and the Dask shard merges and
  a shard read on a Dask worker (its tasks run here, through the worker's own functions), every vector kind;
- embedders (``citeline.model.embedding``: ``Embedder``, ``QueryEncoder``): the torch, ONNX and int8 backends of
  ``SentenceTransformerEmbedder``, the ONNX query encoder, the tests' ``HashEmbedder``;
- ingest targets (``citeline.ingest``: ``WrittenIndex``, ``Writer``): a plain ``Index`` and a ``ShardedIndex``; and the
  committers ``pipeline.run`` hands its plan to (``citeline.ingest.targets.IngestTarget``): ``LocalCommits`` of a
  plain index, ``ShardCommits`` of a sharded root.

Each object is an ``isinstance`` of its ``@runtime_checkable`` Protocol, has every member, and each declared method
has a compatible signature (the declared parameters, by name, kind and position, with a default where the
Protocol has one; any extra parameter has a default). Python 3.11's ``isinstance`` evaluates every property of the
object, so a real model's embedder is checked by its declaration only (``citeline.util.protocols``): loading a
model is not what is tested here. A completeness check finds every class in citeline/ that defines a Protocol's
methods and requires it to be listed here, so a new reader, embedder or target is checked from its first commit.
"""

from __future__ import annotations

import ast
import functools
import inspect
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import LEGACY, HashEmbedder

from citeline import Index
from citeline.errors import IndexMismatchError, SettingsError
from citeline.ingest.embed_step import WrittenIndex
from citeline.ingest.pipeline import LocalCommits, Steps
from citeline.ingest.removal import Writer
from citeline.ingest.targets import IngestTarget
from citeline.lexical.legacy import LegacyLexical
from citeline.model.embedding import Embedder, QueryEncoder, SentenceTransformerEmbedder
from citeline.model.onnx import OnnxEncoder
from citeline.query.readers import LexicalReader, LexicalShard, SnapshotReader
from citeline.server.service import IndexService, ServedIndex
from citeline.sharding.index import ShardCommits
from citeline.sharding.remote import DaskShardedSnapshot, RemoteShard
from citeline.sharding.search import MergedLexical, ShardedSnapshot, _Owners
from citeline.store.snapshot import ReadSnapshot
from citeline.util.protocols import missing_members, protocol_members
from citeline.vectors import KINDS
from citeline.vectors.base import VectorIndex, VectorReader
from citeline.vectors.segments import SegmentedVectors

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS: list[type] = [SnapshotReader, LexicalReader, LexicalShard, VectorReader, VectorIndex]
PROTOCOLS += [Embedder, QueryEncoder, WrittenIndex, Writer, IngestTarget, ServedIndex]

#: Every implementation of each Protocol, by class name (the completeness check below finds the classes of
#: citeline/ that define a Protocol's methods, and each must be here).
IMPLEMENTATIONS: dict[type, set[str]] = {
    SnapshotReader: {"ReadSnapshot", "ShardedSnapshot", "DaskShardedSnapshot", "RemoteShard"},
    LexicalReader: {"SegmentedIndex", "LegacyLexical", "MergedLexical", "RemoteLexical"},
    LexicalShard: {"SegmentedIndex", "RemoteLexical"},
    VectorReader: {"SegmentedVectors", "MergedVectors", "RemoteVectors", *(cls.__name__ for cls in KINDS.values())},
    VectorIndex: {cls.__name__ for cls in KINDS.values()},
    Embedder: {"SentenceTransformerEmbedder", "HashEmbedder"},
    QueryEncoder: {"OnnxEncoder", "SentenceTransformerEmbedder", "HashEmbedder"},
    WrittenIndex: {"Index", "ShardedIndex"},
    Writer: {"Index", "ShardedIndex"},
    IngestTarget: {"LocalCommits", "ShardCommits"},
    ServedIndex: {"IndexService"},
}
#: Classes of citeline/ that define a Protocol's methods without being one of its implementations, and why.
NOT_IMPLEMENTATIONS = {
    # a merge of shards has the shard's method names, but its reads do not take the corpus-wide statistics (it is
    # the corpus): its as_shard() answers None
    (LexicalShard, "MergedLexical"),
    # the approximate kinds' shared base: its subclasses (ivf, hnsw) are the kinds
    (VectorReader, "ApproximateIndex"),
    # an index embeds texts with its model; a search takes its query encoder from the embedder
    (QueryEncoder, "Index"),
    (QueryEncoder, "ShardedIndex"),
    # the indexes have the reads the server serves under the same names (without a request's deadline, outside its
    # search slot); IndexService serves one of them
    (ServedIndex, "Index"),
    (ServedIndex, "ShardedIndex"),
}


class _InProcess:
    """A ``Placement`` that runs a shard's task here, with the worker's functions (no cluster)."""

    def run(self, number: int, function: Callable[..., Any], *args: Any, key: str | None = None) -> Any:
        return function(*args)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A plain index, a two-shard root and a copy of the 0.1.0 index, all small and real."""
    tmp = tmp_path_factory.mktemp("conformance")
    docs = tmp / "docs"
    docs.mkdir()
    for n in range(12):
        (docs / f"d{n}.md").write_text(f"# Note {n}\n\nThe tide gauge at harbour {n} recorded a flood. Entry {n}.\n")
    plain = Index.create(tmp / "plain", embedder=HashEmbedder())
    plain.ingest([docs])
    sharded = Index.create(tmp / "root", embedder=HashEmbedder(), shards=2)
    sharded.ingest([docs], parallel="threads")
    shutil.copytree(LEGACY, tmp / "legacy")
    shards = sorted(path for path in (tmp / "root").iterdir() if path.is_dir() and path.name.startswith("shard"))
    return {"plain": plain, "sharded": sharded, "shards": shards, "root": tmp / "root", "legacy": tmp / "legacy"}


def _objects(built: dict[str, Any]) -> list[tuple[type, str, Any]]:
    """``(protocol, label, implementation)`` for every implementation, instantiated on the built indexes."""
    plain = ReadSnapshot(built["plain"].path)
    legacy = ReadSnapshot(built["legacy"])
    threaded = ShardedSnapshot(built["root"], built["shards"])
    generations = [ReadSnapshot(shard).generation for shard in built["shards"]]
    dask = DaskShardedSnapshot(built["root"], built["shards"], _InProcess(), lambda: generations)  # type: ignore[arg-type]
    remote = RemoteShard(_InProcess(), 0, str(built["shards"][0]))  # type: ignore[arg-type]
    found: list[tuple[type, str, Any]] = []
    for label, reader in (("plain", plain), ("legacy", legacy), ("threaded", threaded), ("dask", dask)):
        found += [(SnapshotReader, label, reader), (LexicalReader, label, reader.lexical)]
        found += [(VectorReader, label, reader.vectors)]
    found += [(SnapshotReader, "remote", remote), (LexicalReader, "remote", remote.lexical)]
    found += [(VectorReader, "remote", remote.vectors), (LexicalShard, "remote", remote.lexical)]
    found += [(LexicalShard, "plain", plain.lexical)]
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((40, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for name, kind in sorted(KINDS.items()):
        index = kind.build(np.arange(40, dtype=np.int64) * 3, vectors, 8)
        found += [(VectorIndex, name, index), (VectorReader, name, index)]
        found += [(VectorReader, f"{name} segmented", SegmentedVectors(index))]
    hashed = HashEmbedder()
    found += [(Embedder, "hash", hashed), (QueryEncoder, "hash", hashed)]
    for backend in ("torch", "onnx", "onnx-int8"):
        real = SentenceTransformerEmbedder(backend=backend)  # nothing is loaded until used
        found += [(Embedder, backend, real), (QueryEncoder, backend, real)]
    for label, index in (("plain", built["plain"]), ("sharded", built["sharded"])):
        found += [(WrittenIndex, label, index), (Writer, label, index)]
    found += [(IngestTarget, "plain", LocalCommits(built["plain"], Steps()))]
    found += [(IngestTarget, "sharded", ShardCommits(built["sharded"], "threads"))]
    for label, index in (("plain", built["plain"]), ("sharded", built["sharded"])):
        found += [(ServedIndex, label, IndexService(index, 30.0))]
    return found


def _kind(raw: object) -> str:
    if raw is None or isinstance(raw, property):
        return "data"
    if not callable(raw) and not isinstance(raw, classmethod | staticmethod):
        return "data"
    return "method"


def _parameters(raw: object) -> list[inspect.Parameter]:
    """A method's parameters after ``self``/``cls``, from its raw class attribute."""
    function = raw.__func__ if isinstance(raw, classmethod | staticmethod) else raw
    parameters = list(inspect.signature(function).parameters.values())  # type: ignore[arg-type]
    return parameters if isinstance(raw, staticmethod) else parameters[1:]


def signature_problems(protocol: type, implementation: type) -> list[str]:
    """Why ``implementation``'s members do not match ``protocol``'s declarations (empty: they do)."""
    problems = []
    for name in protocol_members(protocol):
        declared = inspect.getattr_static(protocol, name, None)
        given = inspect.getattr_static(implementation, name, None)
        if declared is None or _kind(declared) == "data":
            if given is not None and _kind(given) == "method" and not isinstance(given, property):
                problems.append(f"{name} is declared data, implemented as a method")
            continue
        if given is None or _kind(given) != "method":
            problems.append(f"{name} is declared a method, implemented as {'nothing' if given is None else 'data'}")
            continue
        if isinstance(declared, classmethod) != isinstance(given, classmethod):
            problems.append(f"{name}: classmethod declared, not implemented as one (or the reverse)")
        wanted, have = _parameters(declared), _parameters(given)
        by_name = {parameter.name: parameter for parameter in have}
        positional = [p.name for p in have if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for position, parameter in enumerate(wanted):
            match = by_name.get(parameter.name)
            if match is None:
                problems.append(f"{name}: no parameter {parameter.name}")
            elif parameter.kind == parameter.POSITIONAL_OR_KEYWORD and (
                position >= len(positional) or positional[position] != parameter.name
            ):
                problems.append(f"{name}: {parameter.name} is not positional at {position}")
            elif parameter.kind == parameter.KEYWORD_ONLY and match.kind not in (
                match.KEYWORD_ONLY,
                match.POSITIONAL_OR_KEYWORD,
            ):
                problems.append(f"{name}: {parameter.name} cannot be passed by keyword")
            elif parameter.default is not parameter.empty and match.default is match.empty:
                problems.append(f"{name}: {parameter.name} has a default in the Protocol, none here")
        extra = [p for p in have if p.name not in {w.name for w in wanted}]
        for parameter in extra:
            if parameter.default is parameter.empty and parameter.kind not in (
                parameter.VAR_POSITIONAL,
                parameter.VAR_KEYWORD,
            ):
                problems.append(f"{name}: extra parameter {parameter.name} without a default")
    return problems


def test_every_implementation_conforms(built: dict[str, Any]) -> None:
    problems = []
    checked: dict[type, set[str]] = {protocol: set() for protocol in PROTOCOLS}
    for protocol, label, obj in _objects(built):
        checked[protocol].add(type(obj).__name__)
        where = f"{type(obj).__name__} ({label}) as {protocol.__name__}"
        if missing_members(obj, protocol):
            problems.append(f"{where} lacks {missing_members(obj, protocol)}")
        elif not isinstance(obj, SentenceTransformerEmbedder) and not isinstance(obj, protocol):
            problems.append(f"{where} is not an isinstance")  # (a real model's: isinstance would load it)
        problems += [f"{where}: {problem}" for problem in signature_problems(protocol, type(obj))]
    # the ONNX query encoder needs an exported model to instantiate: its class is checked
    problems += [f"OnnxEncoder as QueryEncoder: {p}" for p in signature_problems(QueryEncoder, OnnxEncoder)]
    checked[QueryEncoder].add("OnnxEncoder")
    assert problems == []
    assert checked == IMPLEMENTATIONS


def test_the_checker_catches_what_breaks_a_protocol() -> None:
    class Missing:
        chunk_ids = np.zeros(0, np.int64)

        def search(self, query: str, k: int) -> list[tuple[int, float]]:  # no `allowed`
            return []

        def ranked(self, k: int, query: str, allowed: np.ndarray | None = None) -> Any:  # swapped
            return [], None

        def scores_of(self, query: str, ids: np.ndarray, extra: int) -> np.ndarray:  # extra, no default
            return ids

    problems = signature_problems(LexicalReader, Missing)
    assert any("search: no parameter allowed" in p for p in problems)
    assert any("ranked: query is not positional" in p for p in problems)
    assert any("extra parameter extra" in p for p in problems)
    assert any("statistics is declared a method, implemented as nothing" in p for p in problems)
    assert "as_shard" in missing_members(Missing(), LexicalReader)


def test_a_reader_that_cannot_answer_says_so(built: dict[str, Any]) -> None:
    """The explicit answers instead of probes: a 0.1.0 BM25 folder keeps no term statistics, and cannot be a shard."""
    legacy = ReadSnapshot(built["legacy"]).lexical
    assert isinstance(legacy, LegacyLexical)
    ids = np.asarray(legacy.chunk_ids[:3])
    assert legacy.statistics("soldiers") is None and legacy.term_frequencies("soldiers", ids) is None
    assert legacy.as_shard() is None
    assert legacy.search("soldiers defect", 3)  # what it can answer, it answers
    with pytest.raises(IndexMismatchError, match="predates segments"):
        MergedLexical([legacy], _Owners([legacy.chunk_ids]), lambda function, items: [function(i) for i in items])
    plain = ReadSnapshot(built["plain"].path).lexical
    assert plain.as_shard() is plain and plain.statistics("tide") is not None


def test_an_index_refuses_an_embedder_that_is_not_one(tmp_path: Path) -> None:
    class Partial:
        model_name, backend, fingerprint, dimension, max_seq_length = "x", "y", "z", 8, 16

        def encode(self, texts: Any, *, batch_size: int | None = None) -> np.ndarray:
            return np.zeros((len(texts), 8), np.float32)

    with pytest.raises(SettingsError, match=r"Partial does not implement .*Embedder: it lacks model_path, "):
        Index.create(tmp_path / "index", embedder=Partial())  # type: ignore[arg-type]
    assert not (tmp_path / "index").exists()


# ---------------------------------------------------------------- completeness


SELF = ("self",)


@functools.cache  # parsed once for every Protocol's test: read, never changed
def _classes() -> dict[str, tuple[set[str], list[str]]]:
    """Every class of citeline/ (and the tests' HashEmbedder): the member names its body defines (methods,
    attributes, ``self.x =`` in its methods) and its bases' names."""
    found: dict[str, tuple[set[str], list[str]]] = {}
    for path in [*(ROOT / "citeline").rglob("*.py"), ROOT / "tests" / "conftest.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            names: set[str] = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    for target in item.targets:
                        elements = target.elts if isinstance(target, ast.Tuple) else [target]
                        names |= {element.id for element in elements if isinstance(element, ast.Name)}
            names |= {
                sub.attr
                for sub in ast.walk(node)
                if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) and ast.unparse(sub.value) in SELF
            }
            bases = [base.id if isinstance(base, ast.Name) else ast.unparse(base) for base in node.bases]
            found[node.name] = (names, bases)
    return found


def _members(name: str, classes: dict[str, tuple[set[str], list[str]]]) -> set[str]:
    names, bases = classes.get(name, (set(), []))
    return names.union(*(_members(base, classes) for base in bases if base in classes and base != name))


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda protocol: protocol.__name__)
def test_every_class_that_implements_a_protocol_is_checked(protocol: type) -> None:
    classes = _classes()
    declared = protocol_members(protocol)
    methods = {name for name in declared if _kind(inspect.getattr_static(protocol, name, None)) == "method"}
    protocols = {p.__name__ for p in PROTOCOLS}
    implementing = {
        name
        for name in classes
        if name not in protocols and methods <= _members(name, classes) and (protocol, name) not in NOT_IMPLEMENTATIONS
    }
    assert implementing <= IMPLEMENTATIONS[protocol], implementing - IMPLEMENTATIONS[protocol]


def test_a_shard_whose_worker_lost_its_generation_is_not_current(built: dict[str, Any]) -> None:
    """``RemoteShard.is_current`` declares what the Dask view once probed for (its ``moved`` flag)."""
    generations = [ReadSnapshot(shard).generation for shard in built["shards"]]
    dask = DaskShardedSnapshot(built["root"], built["shards"], _InProcess(), lambda: generations)  # type: ignore[arg-type]
    assert dask.is_current()
    moved = dask.parts[1]
    assert isinstance(moved, RemoteShard)
    moved.moved = True
    assert not moved.is_current() and not dask.is_current()
