"""No capability probe in citeline/: what a reader, an embedder or an ingest target can do is declared on its Protocol
(``citeline.query.readers``, ``citeline.vectors.base``, ``citeline.model.embedding``, ``citeline.ingest``), with an
explicit answer where an implementation cannot (a method returning None, a documented no-op), and checked by
tests/index/test_protocol_conformance.py. ``hasattr(obj, "name")`` or ``getattr(obj, "name", default)`` on one of our
own objects hides a missing declaration from mypy: a reader that lacked a read searched on, silently, without it.

A probe is ``hasattr(...)`` or a ``getattr`` of a literal name. A ``getattr`` of a computed name is reflection over
names a declaration lists (dataclass fields, ``IngestOptions``' fields, the arrays a segment saves) and is not one.
The probes left are on objects citeline does not define, each listed below with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: (file, call) -> why the probe is legitimate: each is on an object citeline does not define.
ALLOWED = {
    # click: only some ClickExceptions carry the command's context (UsageError does, FileError does not)
    ("citeline/cli/common.py", "getattr(exc, 'ctx', None)"): "third-party exception",
    # any file-like object a caller passes as the output stream (io.StringIO in tests, a pipe, a terminal)
    ("citeline/cli/render.py", "getattr(stream, 'isatty', None)"): "caller's stream",
    # a threading.local: each thread's own stemmer, made on the thread's first use
    ("citeline/lexical/analyzer.py", "getattr(_local, 'stemmer', None)"): "thread-local",
    # state kept on the Dask worker object (distributed's), made on the worker's first shard task
    ("citeline/sharding/worker.py", "getattr(worker, '_citeline_shards', None)"): "Dask worker",
    # codecs.CodecInfo: the flag is set only on the binary-to-binary codecs (base64, zlib...)
    ("citeline/sources/encoding.py", "getattr(info, '_is_text_encoding', True)"): "stdlib codec",
    # PyYAML built without libyaml has no C loader
    ("citeline/sources/formats/markdown.py", "getattr(yaml, 'CSafeLoader', yaml.SafeLoader)"): "PyYAML build",
    # yaml.MarkedYAMLError carries where and what; other YAMLErrors do not
    ("citeline/sources/formats/markdown.py", "getattr(exc, 'problem_mark', None)"): "third-party exception",
    ("citeline/sources/formats/markdown.py", "getattr(exc, 'problem', None)"): "third-party exception",
    # a parser registered by a user may be any callable (a functools.partial has no __name__)
    ("citeline/sources/registry.py", "getattr(read_records, '__name__', 'parse_whole')"): "user's callable",
    # FastAPI's route keeps the app as an untyped dependency_overrides_provider (or None), and reads its overrides
    # with this same getattr in solve_dependencies
    ("citeline/server/shortcut.py", "getattr(self.dependency_overrides_provider, 'dependency_overrides', None)"): (
        "FastAPI's provider"
    ),
    # re.error carries msg; pathspec's own pattern errors do not
    ("citeline/sources/selection.py", "getattr(exc, 'msg', None)"): "third-party exception",
    # Prefect's TerminationSignal carries the signal it stands for; KeyboardInterrupt and citeline's stops do not
    ("citeline/ingest/stopping.py", "getattr(error, 'signal', None)"): "third-party exception",
    # the stdlib ProcessPoolExecutor's worker processes (not public): a stop is passed on to each
    ("citeline/sharding/runs.py", "getattr(executor, '_processes', None)"): "stdlib executor",
    # s3fs's paged ListObjectsV2 (not public API): listing a page at a time holds one page's keys, not the bucket's;
    # an s3fs without the members it calls (s3.PRIVATE_MEMBERS) is listed with fsspec's find, and req_kw
    # (requester-pays and the like) is passed if set
    ("citeline/sources/s3.py", "hasattr(fs, name)"): "s3fs internals",
    ("citeline/sources/s3.py", "getattr(fs, 'req_kw', {})"): "s3fs internals",
    # an OSError carries errno; the other exceptions a failed commit may raise do not
    ("citeline/store/generation.py", "getattr(exc, 'errno', None)"): "exception",
    # a FAISS index read from a file: whether it is an IndexIDMap2 is the file's content, checked before use
    ("citeline/vectors/flat.py", "hasattr(index, 'id_map')"): "file's FAISS structure",
    ("citeline/vectors/hnsw.py", "hasattr(index, 'id_map')"): "file's FAISS structure",
}


def probes(path: Path) -> list[str]:
    """The ``hasattr`` calls and ``getattr`` calls of a literal name in ``path``, as source text."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        literal = len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
        if node.func.id == "hasattr" or (node.func.id == "getattr" and literal):
            found.append(ast.unparse(node))
    return found


def test_no_capability_probe_is_left_in_citeline() -> None:
    found = {
        (path.relative_to(ROOT).as_posix(), call)
        for path in sorted((ROOT / "citeline").rglob("*.py"))
        for call in probes(path)
    }
    assert found - ALLOWED.keys() == set(), "declare the capability on the Protocol (see the module docstring)"
    assert ALLOWED.keys() - found == set(), "an allowed probe is gone: remove it from ALLOWED"


def test_the_lint_finds_probes(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "a = hasattr(x, 'term_frequencies')\n"
        "b = getattr(x, 'query_encoder', x)\n"
        "c = getattr(x, name)  # reflection over declared names: not a probe\n"
    )
    assert probes(source) == ["hasattr(x, 'term_frequencies')", "getattr(x, 'query_encoder', x)"]
