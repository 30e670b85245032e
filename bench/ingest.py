"""What ingesting costs and how well it reads, one subcommand each (`--help` after a subcommand gives its options).

    python bench/ingest.py runs --backend onnx-int8     # first run, re-run, 1 % edits, fresh build; --parsing
    python bench/ingest.py commit --chunks 100000        # what a one-document commit costs on a large index
    python bench/ingest.py split CORPUS [real|null] [BACKEND]  # an ingest's CPU: the model against the rest
    python bench/ingest.py encodings [--compare]         # encoding detection: share decoded exactly, and its cost

Run by hand; not part of CI. Figures are in docs/performance.md and docs/sources.md with their commands.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from citeline import Index
from citeline.sources.parsers import SourceFile, parse_source
from citeline.store import catalog

REPO = Path(__file__).resolve().parent.parent
RUNS_SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"
sys.path.insert(0, str(REPO / "tests"))
from conftest import HashEmbedder  # noqa: E402

from citeline.sources.parsers import text_hash  # noqa: E402
from citeline.store import generation, ledger  # noqa: E402
from citeline.store.locks import writer_lock  # noqa: E402
from citeline.store.rows import ChunkRows  # noqa: E402
from citeline.util.ids import chunk_id_for  # noqa: E402

COMMIT_SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact" / "corpus.jsonl"
from _encodings import ENCODINGS, TEXTS, Sample, samples  # noqa: E402

from citeline.errors import SourceError  # noqa: E402
from citeline.sources.encoding import decode, guesses  # noqa: E402

SOURCE = SourceFile("/docs", "/docs/short.txt", "short.txt")
#: A decoder: bytes to (text, low confidence).
Decoder = Callable[[bytes], tuple[str, bool]]


# --- runs ------------------------------------------------------------------------------------------------------------

RUNS_DOC = """\
Incremental ingestion on SciFact: first run, unchanged re-run, 1% edited + 1% deleted, and a fresh build.

    python bench/ingest.py runs [--backend onnx-int8] [--limit N] [--corpus ../shared/benchmarks/scifact/corpus.jsonl]

Copies the corpus to a temporary folder, ingests it with the real model, re-runs it unchanged, then edits 1% of
the records and deletes another 1% and re-runs, printing each pass's wall time and its ratio to the first run
(targets: unchanged < 3%, 1% edits < 5%). Finally it builds a fresh index of the final file and checks that both
indexes hold the same chunk set and return the same top-10 for every query. Times are of ``Index.ingest`` in one
process (no Prefect: its fixed start-up is reported in PREFECT-NOTES.md, not part of the work). Run by hand.

``--parsing`` instead prices reading a source, per format: ``parse_source`` on generated files of each kind, the best
of ``--repeat`` runs, CPU and wall seconds: the same ~1 MB of English-like text as UTF-8 and as Windows-1252 (to
price charset-normalizer's detection against a plain UTF-8 decode), 200 Markdown files with and 200 without YAML
front matter (PyYAML), a ~100 KB reStructuredText file (docutils), a Word document of 500 paragraphs and a table
(python-docx), and a CSV of 10,000 rows. Imports are paid before timing (a first, untimed parse).

    python bench/ingest.py runs --parsing [--repeat 3]
"""


def chunk_set(index: Index) -> set[tuple[str, int, int, int, str]]:
    """Every chunk as (doc, ordinal, start, end, text)."""
    connection = duckdb.connect(str(catalog.db_path(index.path)), read_only=True)
    try:
        return set(connection.execute("SELECT doc_id, ordinal, char_start, char_end, text FROM chunks").fetchall())
    finally:
        connection.close()


def runs_timed(label: str, index: Index, corpus: Path, first: float | None, target: float | None) -> float:
    start = time.perf_counter()
    run = index.ingest([corpus])
    elapsed = time.perf_counter() - start
    ratio = f"  {elapsed / first:6.2%} of the first run" if first else ""
    verdict = ""
    if first and target:
        verdict = "  PASS" if elapsed / first < target else f"  FAIL (target < {target:.0%})"
    print(
        f"{label:<28} {elapsed:8.2f} s  +{run.added} ~{run.updated} ={run.unchanged} -{run.removed} "
        f"embedded {run.chunks_embedded} reused {run.chunks_reused}{ratio}{verdict}",
        flush=True,
    )
    return elapsed


WORDS = (
    "soldiers", "river", "crossing", "night", "families", "letters", "wages", "ledger", "ferry", "garrison",
    "winter", "café", "déjà", "naïve", "report", "quartermaster", "village", "bridge", "months", "rations",
    "coats", "boots", "orders", "captain",
)  # fmt: skip


def prose(rng: random.Random, words: int) -> str:
    """Sentences of random words, a paragraph break every 60 words."""
    out = []
    for i in range(words):
        out.append(rng.choice(WORDS) + ("." if i % 12 == 11 else ""))
        if i % 60 == 59:
            out.append("\n\n")
    return " ".join(out)


def timed_parse(label: str, files: list[Path], root: Path, repeat: int) -> None:
    """Parse ``files`` ``repeat`` times; print the best CPU and wall seconds and the characters parsed."""
    sources = [SourceFile(str(root), str(path), path.name) for path in files]
    parse_source(sources[0])  # imports the format's library outside the timing
    best: tuple[float, float] | None = None
    chars = 0
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        chars = 0
        for source in sources:
            parsed = parse_source(source)
            assert not parsed.errors, parsed.errors
            chars += sum(len(d.text) for d in parsed.documents)
        took = (time.process_time() - cpu, time.perf_counter() - wall)
        best = took if best is None or took[0] < best[0] else best
    assert best is not None
    print(f"{label:<38} {len(files):>4} files {chars:>10,} chars  {best[0]:7.3f} CPU-s  {best[1]:7.3f} wall-s")


def parsing(repeat: int) -> None:
    """What reading a source costs, per format (``--parsing``; see the module docstring)."""
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="citeline-sources-") as folder:
        root = Path(folder)
        text = prose(rng, 160_000)
        write: dict[str, Callable[[], list[Path]]] = {}

        def encoded(name: str, encoding: str) -> list[Path]:
            path = root / name
            path.write_bytes(text.encode(encoding))
            return [path]

        def markdown(front: bool) -> list[Path]:
            paths = []
            for i in range(200):
                path = root / f"{'front' if front else 'plain'}{i}.md"
                head = f"---\ntitle: Note {i}\nauthor: Mara Ilves\nyear: {2000 + i % 25}\ntags: [a, b]\n---\n"
                path.write_text((head if front else "") + f"# Note {i}\n\n" + prose(rng, 400), encoding="utf-8")
                paths.append(path)
            return paths

        def rst() -> list[Path]:
            path = root / "long.rst"
            sections = [f"Section {i}\n{'=' * (8 + len(str(i)))}\n\n{prose(rng, 300)}\n" for i in range(50)]
            path.write_text("=====\nTitle\n=====\n\n:author: Mara\n:year: 2021\n\n" + "\n".join(sections))
            return [path]

        def word() -> list[Path]:
            import docx

            document = docx.Document()
            for _ in range(500):
                document.add_paragraph(prose(rng, 30))
            table = document.add_table(rows=50, cols=4)
            for row in table.rows:
                for cell in row.cells:
                    cell.text = prose(rng, 4)
            path = root / "long.docx"
            document.save(str(path))
            return [path]

        def table() -> list[Path]:
            path = root / "rows.csv"
            rows = [f'{i},Row {i},"{prose(rng, 25)}",{2000 + i % 25}' for i in range(10_000)]
            path.write_text("id,title,text,year\n" + "\n".join(rows) + "\n", encoding="utf-8")
            return [path]

        write["txt, UTF-8 (1 MB)"] = lambda: encoded("utf8.txt", "utf-8")
        write["txt, Windows-1252 (detected)"] = lambda: encoded("cp1252.txt", "cp1252")
        write["md, no front matter"] = lambda: markdown(False)
        write["md, YAML front matter"] = lambda: markdown(True)
        write["rst (docutils)"] = rst
        write["docx (python-docx)"] = word
        write["csv, 10,000 rows"] = table
        for label, make in write.items():
            timed_parse(label, make(), root, repeat)


def runs_main() -> None:
    parser = argparse.ArgumentParser(description=RUNS_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=RUNS_SCIFACT / "corpus.jsonl")
    parser.add_argument("--queries", type=Path, default=RUNS_SCIFACT / "queries.jsonl")
    parser.add_argument("--backend", default="onnx-int8", choices=["torch", "onnx", "onnx-int8"])
    parser.add_argument("--limit", type=int, default=None, help="use only the first N records")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--parsing", action="store_true", help="price reading a source, per format, instead")
    parser.add_argument("--repeat", type=int, default=3, help="--parsing: runs per format (the best is shown)")
    args = parser.parse_args()
    if args.parsing:
        parsing(args.repeat)
        return

    records = [json.loads(line) for line in args.corpus.open(encoding="utf-8")][: args.limit]
    queries = [json.loads(line)["text"] for line in args.queries.open(encoding="utf-8")]
    work = Path(tempfile.mkdtemp(prefix="citeline-bench-ingest-"))
    try:
        corpus = work / "docs" / "corpus.jsonl"
        corpus.parent.mkdir()
        corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        print(f"{len(records)} records, backend {args.backend}")
        index = Index.create(work / "incremental", backend=args.backend)
        index.prepare_queries()  # the one-time ONNX export is not ingestion work
        first = runs_timed("first run", index, corpus, None, None)
        runs_timed("unchanged re-run", index, corpus, first, 0.03)

        rng = random.Random(args.seed)
        count = max(1, len(records) // 100)
        chosen = rng.sample(range(len(records)), 2 * count)
        for i in chosen[:count]:
            records[i]["text"] = records[i]["text"] + " This sentence was added by the benchmark's edit pass."
        deleted = set(chosen[count:])
        records = [r for i, r in enumerate(records) if i not in deleted]
        corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        runs_timed(f"{count} edited, {count} deleted", index, corpus, first, 0.05)

        fresh = Index.create(work / "fresh", backend=args.backend)
        runs_timed("fresh build of final files", fresh, corpus, None, None)
        same_chunks = chunk_set(index) == chunk_set(fresh)
        differing = sum(
            [r.chunk_id for r in index.search(q, k=10)] != [r.chunk_id for r in fresh.search(q, k=10)] for q in queries
        )
        print(f"same chunk set as a fresh build: {'PASS' if same_chunks else 'FAIL'}")
        print(
            f"same top-10 for all {len(queries)} queries: {'PASS' if differing == 0 else f'FAIL ({differing} differ)'}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- commit ----------------------------------------------------------------------------------------------------------

COMMIT_DOC = """\
What a one-document commit costs on a large index (incremental commits), with a near-free embedder.

    python bench/ingest.py commit --chunks 100000 [--dimension 384] [--batch 50000] [--vector-index auto]
    python bench/ingest.py commit --chunks 1000000 --workdir W --build-only   # build once ...
    python bench/ingest.py commit --workdir COPY --skip-build                  # ... and time copies with any code

Builds an index of N synthetic chunks (two chunks a document, words drawn from SciFact's corpus vocabulary when
it is there) by committing catalog rows in batches straight through ``store.generation.commit`` (no chunker: its
cost is not what this measures), then times ``Index.ingest`` of a separate one-file root three times: the
document added, changed, removed (with ``allow_removals``). The build draws words and vectors with numpy (the
one-document edits go through the embedder). Each line: CPU seconds (this process) and wall seconds. Peak RSS is the
process's maximum. Run one size per process, so peak RSS is that size's.
"""


class FastEmbedder(HashEmbedder):
    """Deterministic unit vectors seeded by the text's hash: about 10 µs a text."""

    model_name = "fast-random"
    fingerprint = "fast-random-v1"

    def __init__(self, dimension: int) -> None:
        super().__init__()
        self.dimension = dimension

    def encode(self, texts: Sequence[str], *, batch_size: int | None = 64) -> np.ndarray:
        rows = [np.random.default_rng(int(text_hash(t)[:15], 16)).standard_normal(self.dimension) for t in texts]
        vectors = np.array(rows, dtype=np.float32).reshape(-1, self.dimension)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-9)


def vocabulary() -> list[str]:
    if COMMIT_SCIFACT.exists():
        words: list[str] = []
        with COMMIT_SCIFACT.open() as handle:
            for line in handle:
                words.extend(json.loads(line)["text"].split())
                if len(words) > 400_000:
                    break
        return words  # repeated words keep their corpus frequencies
    return [f"w{n}" for n in range(30_000)]


def batch_changes(start: int, count: int, words: list[str], embedder: FastEmbedder, run_id: str) -> generation.Changes:
    rng = random.Random(start)
    picks = np.random.default_rng(start)
    vocabulary_array = np.asarray(words, dtype=object)
    now = ledger.utc_now()
    docs: dict[str, list] = {name: [] for name in ("doc_id", "source_id", "title", "text", "content_hash")}
    chunks: dict[str, list] = {
        name: [] for name in ("chunk_id", "doc_id", "ordinal", "char_start", "char_end", "text", "text_hash")
    }
    for number in range(start, start + count):
        parts = [" ".join(vocabulary_array[picks.integers(0, len(words), rng.randint(60, 140))]) for _ in range(2)]
        text = parts[0] + " " + parts[1]
        doc_id = hashlib.sha256(f"synthetic\0{number}".encode()).hexdigest()[:32]
        content_hash = text_hash(text)
        docs["doc_id"].append(doc_id)
        docs["source_id"].append(f"record-{number}")
        docs["title"].append(f"Record {number}")
        docs["text"].append(text)
        docs["content_hash"].append(content_hash)
        offset = 0
        for ordinal, part in enumerate(parts):
            chunks["chunk_id"].append(chunk_id_for(doc_id, content_hash, ordinal))
            chunks["doc_id"].append(doc_id)
            chunks["ordinal"].append(ordinal)
            chunks["char_start"].append(offset)
            chunks["char_end"].append(offset + len(part))
            chunks["text"].append(part)
            chunks["text_hash"].append(text_hash(part))
            offset += len(part) + 1
    n = len(docs["doc_id"])
    documents = pa.table(
        {
            "doc_id": docs["doc_id"],
            "source_root": ["/synthetic"] * n,
            "source_id": docs["source_id"],
            "source_file": ["corpus.jsonl"] * n,
            "path": ["/synthetic/corpus.jsonl"] * n,
            "title": docs["title"],
            "format": ["jsonl"] * n,
            "content_hash": docs["content_hash"],
            "text": docs["text"],
            "metadata": ["{}"] * n,
            "size_bytes": pa.array([0] * n, pa.int64()),
            "mtime": pa.array([0.0] * n, pa.float64()),
            "run_id": [run_id] * n,
            "ingested_at": pa.array([datetime.fromisoformat(now)] * n, type=pa.timestamp("ms", tz="UTC")),
        }
    )
    rows = ChunkRows(
        chunks["chunk_id"],
        chunks["doc_id"],
        chunks["ordinal"],
        chunks["char_start"],
        chunks["char_end"],
        chunks["text"],
        chunks["text_hash"],
        [None] * len(chunks["text"]),
        _unit(picks.standard_normal((len(chunks["text"]), embedder.dimension), dtype=np.float32)),
    )
    return generation.Changes([], documents, rows.to_arrow(run_id))


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-9)


def commit_timed(label: str, action) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    cpu, wall = time.process_time(), time.perf_counter()
    action()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{label:<34} {cpu:8.2f} CPU-s {wall:8.2f} wall-s", flush=True)
    return cpu, wall


def commit_main() -> None:
    parser = argparse.ArgumentParser(description=COMMIT_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--batch", type=int, default=50_000, help="chunks per build commit")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--vector-index", default="auto", help="the kind of a new index")
    parser.add_argument("--build-only", action="store_true", help="build the index and stop")
    parser.add_argument("--skip-build", action="store_true", help="time the edits on the index in --workdir")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="citeline-incremental-"))
    embedder = FastEmbedder(args.dimension)
    if args.skip_build:
        index = Index.open(workdir / "ix", embedder=embedder)
        time_edits(index, workdir)
        return
    index = Index.create(workdir / "ix", embedder=embedder, vector_index=args.vector_index)
    words = vocabulary()

    def build() -> None:
        for start in range(0, args.chunks // 2, args.batch // 2):
            run = ledger.RunSummary(ledger.new_run_id(), ledger.utc_now(), None, "succeeded", ["/synthetic"], None)
            changes = batch_changes(start, min(args.batch, args.chunks - 2 * start) // 2, words, embedder, run.run_id)
            with writer_lock(index.path):
                generation.commit(index.path, changes, run)

    print(f"{args.chunks:,} chunks, dimension {args.dimension}, index at {index.path}", flush=True)
    commit_timed(f"build ({args.batch:,} chunks a commit)", build)
    if args.build_only:
        return
    time_edits(index, workdir)


def time_edits(index: Index, workdir: Path) -> None:
    """Time a one-document add, change and removal, and verify; print peak RSS."""
    print(f"{len(index.snapshot().vectors):,} vectors at {index.path}", flush=True)
    root = workdir / "one"
    root.mkdir(exist_ok=True)
    note = root / "note.md"
    note.write_text("# A note\n\nThe garrison left the river bridge at dawn.\n")
    commit_timed("one document added", lambda: index.ingest([root]))
    note.write_text("# A note\n\nThe garrison left the river bridge at dusk, and the harvest failed.\n")
    commit_timed("one document changed", lambda: index.ingest([root]))
    note.unlink()
    commit_timed("one document removed", lambda: index.ingest([root], allow_removals=True))
    commit_timed("verify", lambda: index.verify())
    segments = sorted(p.name for p in index.path.glob("seg.*")) + sorted(p.name for p in index.path.glob("v*.*"))
    print(f"segments {segments}; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")


# --- encodings -------------------------------------------------------------------------------------------------------

ENCODINGS_DOC = """\
Encoding detection measured: the short texts of ``tests/_encodings.py`` (twelve languages, one to three
sentences) in every encoding that can hold them, decoded as citeline decodes a text file, and compared with the
sentence itself (the decoded text, not the codec's name).

    python bench/ingest.py encodings [--compare] [--json]

Prints the share decoded exactly per encoding and per language, how many readings were flagged low confidence
(named in a run's log), every wrong reading, and the CPU cost of decoding: per short file, and per 1 MB file
(mostly ASCII with accented words, as a long document is). ``--compare`` also measures the detectors tried before
(docs/decisions/encoding-detection.md): charset-normalizer with Windows-1252 winning exact ties (citeline's rule
until then) and chardet alone, each behind the same byte-order-mark and UTF-8 steps. CI asserts the 99 % floor
(``tests/unit/test_encoding_accuracy.py``); this prints the table that docs/sources.md quotes. Run by hand.
"""


def citeline_decoder(data: bytes) -> tuple[str, bool]:
    """citeline's own decoding (``citeline.sources.encoding.decode``)."""
    with guesses() as noted:
        try:
            text = decode(SOURCE, data).text
        except SourceError as exc:
            return f"<{exc.reason}>", True
    return text, bool(noted)


def _unicode_first(data: bytes) -> str | None:
    # The steps every decoder shares: a byte-order mark, then UTF-8.
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def charset_normalizer_decoder(data: bytes) -> tuple[str, bool]:
    """charset-normalizer's best match, Windows-1252 winning exact ties (citeline's rule before this measure)."""
    import charset_normalizer

    text = _unicode_first(data)
    if text is not None:
        return text, False
    matches = charset_normalizer.from_bytes(data, cp_exclusion=["utf_16", "utf_16_be", "utf_16_le", "utf_7"])
    best = matches.best()
    if best is None:
        return "<none>", True
    tied = [m for m in matches if (m.chaos, m.coherence) == (best.chaos, best.coherence)]
    preferred = next((m for m in tied if "cp1252" in m.could_be_from_charset), None)
    return str(preferred or best), False


def chardet_decoder(data: bytes) -> tuple[str, bool]:
    """chardet 7's answer alone."""
    import chardet

    text = _unicode_first(data)
    if text is not None:
        return text, False
    result = chardet.detect(data, prefer_superset=True, compat_names=False)
    return (data.decode(result["encoding"]) if result["encoding"] else "<none>"), False


def measure(decoder: Decoder, items: list[Sample]) -> dict[str, object]:
    """Exact decodings per encoding and per language, low-confidence counts, the wrong readings, CPU per file."""
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    low: Counter[str] = Counter()
    wrong = []
    started = time.process_time()
    for sample in items:
        text, guessed = decoder(sample.data)
        for key in ("all", f"encoding {sample.encoding}", f"language {sample.language}"):
            total[key] += 1
            right[key] += text == sample.text
            low[key] += guessed
        if text != sample.text:
            wrong.append({"encoding": sample.encoding, "text": sample.text, "read": text, "low": guessed})
    cpu = time.process_time() - started
    return {
        "rows": {key: {"right": right[key], "total": total[key], "low": low[key]} for key in total},
        "wrong": wrong,
        "cpu_ms_per_file": 1000 * cpu / len(items),
    }


def large_file_cost(decoder: Decoder, encoding: str, repeat: int = 3) -> float:
    """CPU ms to decode a 1 MB file of English prose with a few accented words per line, in ``encoding``."""
    line = "The committee met on Tuesday and agreed the budget for the café and the crèche; nothing else changed.\n"
    data = (line * (1_000_000 // len(line))).encode(encoding)
    started = time.process_time()
    for _ in range(repeat):
        decoder(data)
    return 1000 * (time.process_time() - started) / repeat


def encodings_main() -> None:
    """Print the accuracy table (or JSON) of citeline's decoding, and of the earlier detectors with --compare."""
    parser = argparse.ArgumentParser(description=ENCODINGS_DOC.split("\n\n")[0])
    parser.add_argument("--compare", action="store_true", help="also measure charset-normalizer and chardet alone")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    items = list(samples())
    decoders: dict[str, Decoder] = {"citeline": citeline_decoder}
    if args.compare:
        decoders |= {"charset-normalizer (before)": charset_normalizer_decoder, "chardet alone": chardet_decoder}
    results = {}
    for name, decoder in decoders.items():
        result = measure(decoder, items)
        result["cpu_ms_1mb"] = {enc: large_file_cost(decoder, enc) for enc in ("utf-8", "cp1252")}
        results[name] = result
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=1))
        return
    texts = sum(len(t) for t in TEXTS.values())
    print(f"{texts} texts in {len(TEXTS)} languages, {len(items)} files ({', '.join(ENCODINGS)})\n")
    names = list(results)
    print("| | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    keys = ["all"] + [f"encoding {e}" for e in ENCODINGS] + [f"language {language}" for language in TEXTS]
    for key in keys:
        cells = []
        for name in names:
            row = results[name]["rows"][key]  # type: ignore[index]
            cells.append(f"{row['right']}/{row['total']} ({100 * row['right'] / row['total']:.1f} %)")
        print(f"| {key} | " + " | ".join(cells) + " |")
    for name in names:
        result = results[name]
        flagged = result["rows"]["all"]["low"]  # type: ignore[index]
        print(
            f"\n{name}: {flagged} flagged low confidence; CPU {result['cpu_ms_per_file']:.2f} ms per short file, "
            f"{result['cpu_ms_1mb']['utf-8']:.1f} ms per 1 MB UTF-8 file, "  # type: ignore[index]
            f"{result['cpu_ms_1mb']['cp1252']:.1f} ms per 1 MB Windows-1252 file"  # type: ignore[index]
        )
        for miss in result["wrong"]:  # type: ignore[attr-defined]
            flag = "low" if miss["low"] else "confident"
            print(f"  wrong ({miss['encoding']}, {flag}): {miss['text']!r} -> {miss['read']!r}")


# --- split ---------------------------------------------------------------------------------------------------------

SPLIT_DOC = """\
Where an ingest's CPU goes: the model's encode calls against everything else (parsing, chunking, DuckDB, BM25
segments, vectors, commits), issue 33.

    python bench/ingest.py split CORPUS [real|null] [BACKEND] [PROFILE_OUT]

Ingests CORPUS (a file or folder) into a new temporary index with BACKEND's embedder (default: the default
backend), its model loaded before the clock starts, and prints one JSON line: the process's CPU-s (user + sys,
getrusage) and wall s of ``Index.create`` + ``Index.ingest``, the CPU-s and wall s spent inside the embedder's
``encode`` calls, and the rest. ``null`` replaces the model by random unit vectors (what the rest costs without the
model, on the same chunks). With PROFILE_OUT, cProfile on a CPU clock (``time.process_time``) writes its stats
there. Run by hand, also on older trees (``PYTHONPATH=TREE``); not part of CI.
"""


def split_cpu() -> float:
    """This process's CPU seconds (user + sys)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def split_main() -> None:
    """Print one JSON line: an ingest's CPU and wall seconds, inside the model's encode calls and the rest."""
    from citeline.model.embedding import SentenceTransformerEmbedder, default_backend

    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(SPLIT_DOC)
        raise SystemExit(0 if sys.argv[1:2] else 2)
    corpus = Path(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "real"
    backend = sys.argv[3] if len(sys.argv) > 3 else default_backend()
    profile_out = sys.argv[4] if len(sys.argv) > 4 else None
    embedder = SentenceTransformerEmbedder(backend=backend)
    embedder.encode(["warm up"])
    spent = {"cpu": 0.0, "wall": 0.0, "texts": 0}
    model_encode = embedder.encode

    def encode(texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        before, wall = split_cpu(), time.perf_counter()
        if mode == "real":
            vectors = model_encode(texts, batch_size=batch_size)
        else:
            vectors = np.random.default_rng(len(texts)).standard_normal((len(texts), embedder.dimension))
            vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
        spent["cpu"] += split_cpu() - before
        spent["wall"] += time.perf_counter() - wall
        spent["texts"] += len(texts)
        return vectors

    embedder.encode = encode  # type: ignore[method-assign]
    folder = Path(tempfile.mkdtemp())
    try:
        profile = None
        if profile_out:
            import cProfile

            profile = cProfile.Profile(time.process_time)
            profile.enable()
        before, wall = split_cpu(), time.perf_counter()
        run = Index.create(folder / "index", embedder=embedder).ingest([corpus])
        total, wall = split_cpu() - before, time.perf_counter() - wall
        if profile is not None and profile_out:
            profile.disable()
            profile.dump_stats(profile_out)
    finally:
        shutil.rmtree(folder)
    print(
        json.dumps(
            {
                "mode": mode,
                "backend": backend,
                "chunks": run.chunks_embedded,
                "cpu_s": round(total, 2),
                "wall_s": round(wall, 2),
                "encode_cpu_s": round(spent["cpu"], 2),
                "encode_wall_s": round(spent["wall"], 2),
                "rest_cpu_s": round(total - spent["cpu"], 2),
            }
        )
    )


COMMANDS = {
    "runs": runs_main,
    "commit": commit_main,
    "encodings": encodings_main,
    "split": split_main,
}


if __name__ == "__main__":
    import _subcommands  # bench/ is on sys.path when this file runs as a script

    _subcommands.run(__doc__, COMMANDS)
