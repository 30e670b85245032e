"""Incremental ingestion on SciFact: first run, unchanged re-run, 1% edited + 1% deleted, and a fresh build.

    python bench/ingest.py [--backend onnx-int8] [--limit N] [--corpus ../shared/benchmarks/scifact/corpus.jsonl]

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

    python bench/ingest.py --parsing [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from citeline import Index
from citeline.sources.parsers import SourceFile, parse_source
from citeline.store import catalog

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"


def chunk_set(index: Index) -> set[tuple[str, int, int, int, str]]:
    """Every chunk as (doc, ordinal, start, end, text)."""
    connection = duckdb.connect(str(catalog.db_path(index.path)), read_only=True)
    try:
        return set(connection.execute("SELECT doc_id, ordinal, char_start, char_end, text FROM chunks").fetchall())
    finally:
        connection.close()


def timed(label: str, index: Index, corpus: Path, first: float | None, target: float | None) -> float:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=SCIFACT / "corpus.jsonl")
    parser.add_argument("--queries", type=Path, default=SCIFACT / "queries.jsonl")
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
        first = timed("first run", index, corpus, None, None)
        timed("unchanged re-run", index, corpus, first, 0.03)

        rng = random.Random(args.seed)
        count = max(1, len(records) // 100)
        chosen = rng.sample(range(len(records)), 2 * count)
        for i in chosen[:count]:
            records[i]["text"] = records[i]["text"] + " This sentence was added by the benchmark's edit pass."
        deleted = set(chosen[count:])
        records = [r for i, r in enumerate(records) if i not in deleted]
        corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        timed(f"{count} edited, {count} deleted", index, corpus, first, 0.05)

        fresh = Index.create(work / "fresh", backend=args.backend)
        timed("fresh build of final files", fresh, corpus, None, None)
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


if __name__ == "__main__":
    main()
