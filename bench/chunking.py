"""Chunking cost: semantic-text-splitter (chunker version 1) against citeline's chunker, in one run.

    python bench/chunking.py [--corpus ../shared/benchmarks/scifact/corpus.jsonl] [--limit 1000]
                             [--max-tokens 254] [--overlap 32] [--old-timeout 60] [--skip-old]

Inputs: (a) SciFact abstracts stored as the pipeline stores them (title + "\\n\\n" + text), (b) long prose (the
same abstracts joined into 1 MB of plain text and of Markdown with headings), (c) pathological inputs generated
on the fly: 2 MB of base64 (76-character lines, and one line), a 160 KB Markdown list nested 400 levels deep,
a 300 KB one-line Markdown table, a 1 MB line without spaces, 1 MB of one repeated word.

For each input and chunker: chunks, CPU seconds, wall seconds, CPU ms per 1,000 chunks... printed as a table
(CPU-s per 1,000 chunks and CPU-s per MB). The old chunker runs in a child process killed after
``--old-timeout`` seconds (it does not finish some pathological inputs). Chunkers start cold (no token cache).
Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact" / "corpus.jsonl"


def cpu_seconds() -> float:
    """CPU seconds of this process and its threads (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def scifact(corpus: Path, limit: int) -> list[str]:
    """The first ``limit`` abstracts as the pipeline stores them."""
    texts = []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            texts.append(f"{record.get('title', '')}\n\n{record['text']}")
            if len(texts) >= limit:
                break
    return texts


def inputs(corpus: Path, limit: int) -> dict[str, tuple[list[str], bool]]:
    """Name -> (documents, markdown)."""
    rng = random.Random(7)
    abstracts = scifact(corpus, limit)
    prose = "\n\n".join(abstracts)
    while len(prose) < 1_000_000:
        prose += "\n\n" + prose
    prose = prose[:1_000_000]
    markdown = "\n\n".join(f"## Section {i}\n\n{text}" for i, text in enumerate(abstracts))[:1_000_000]
    noise = rng.randbytes(1_500_000)
    nested = "".join("  " * depth + f"- item {depth}\n" for depth in range(400))
    while len(nested) < 160_000:
        nested += nested
    table = "| " + " | ".join(f"cell {i}" for i in range(40_000)) + " |"
    return {
        "scifact abstracts": (abstracts, False),
        "1 MB prose (plain)": ([prose], False),
        "1 MB prose (markdown)": ([markdown], True),
        "2 MB base64, 76-char lines": ([base64.encodebytes(noise).decode()], False),
        "2 MB base64, one line": ([base64.b64encode(noise).decode()], False),
        "160 KB list nested 400 deep (md)": ([nested[:160_000]], True),
        "300 KB one-line table (md)": ([table[:300_000]], True),
        "1 MB line without spaces": (["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=1_000_000))], False),
        "1 MB of one repeated word": (["word " * 200_000], False),
    }


def make_chunker(kind: str, max_tokens: int, overlap: int):  # type: ignore[no-untyped-def]
    """The current chunker, or version 1 rebuilt from semantic-text-splitter exactly as it was configured."""
    from citeline.model.chunking import Chunker
    from citeline.model.embedding import resolve_model_path

    tokenizer = str(Path(resolve_model_path("all-MiniLM-L6-v2")) / "tokenizer.json")
    chunker = Chunker(tokenizer, max_tokens=max_tokens, overlap_tokens=overlap, model_max_tokens=256)
    if kind == "new":
        return lambda docs, md: chunker.split_many([(doc, md) for doc in docs])
    from semantic_text_splitter import MarkdownSplitter, TextSplitter

    splitters = {
        False: TextSplitter.from_huggingface_tokenizer(chunker.tokenizer, capacity=max_tokens, overlap=overlap),
        True: MarkdownSplitter.from_huggingface_tokenizer(chunker.tokenizer, capacity=max_tokens, overlap=overlap),
    }
    splitting: dict[bool, Any] = splitters  # the splitters' type stubs leave chunk_indices out
    return lambda docs, md: [list(splitting[md].chunk_indices(doc)) for doc in docs]


def measure(kind: str, name: str, args: argparse.Namespace, queue: multiprocessing.Queue) -> None:
    """Chunk one input in this (child) process and report (chunks, cpu, wall)."""
    docs, md = inputs(args.corpus, args.limit)[name]
    split = make_chunker(kind, args.max_tokens, args.overlap)
    split(["warm up the tokenizer."], False)
    cpu, wall = cpu_seconds(), time.perf_counter()
    chunks = sum(len(spans) for spans in split(docs, md))
    queue.put((chunks, cpu_seconds() - cpu, time.perf_counter() - wall))


def run(kind: str, name: str, args: argparse.Namespace, timeout: float) -> tuple[int, float, float] | None:
    """``measure`` in a child process, or None when it did not finish within ``timeout`` wall seconds."""
    queue: multiprocessing.Queue = multiprocessing.Queue()
    child = multiprocessing.Process(target=measure, args=(kind, name, args, queue))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return queue.get() if not queue.empty() else None


def main() -> None:
    """Print the comparison table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=SCIFACT)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--max-tokens", type=int, default=254)
    parser.add_argument("--overlap", type=int, default=32)
    parser.add_argument("--old-timeout", type=float, default=60.0)
    parser.add_argument("--skip-old", action="store_true")
    args = parser.parse_args()
    names = inputs(args.corpus, args.limit)
    print(f"max_tokens={args.max_tokens} overlap={args.overlap}; CPU = user+sys of the chunking process")
    header = f"{'input':34} {'MB':>5} | {'chunker':7} {'chunks':>7} {'CPU-s':>7} {'wall-s':>7} "
    header += f"{'CPU-s/1k':>8} {'CPU-s/MB':>8}"
    print(header)
    print("-" * len(header))
    for name, (docs, _) in names.items():
        megabytes = sum(len(doc.encode()) for doc in docs) / 1e6
        for kind in ("old", "new"):
            if kind == "old" and args.skip_old:
                continue
            result = run(kind, name, args, args.old_timeout if kind == "old" else 600.0)
            if result is None:
                print(f"{name:34} {megabytes:5.2f} | {kind:7} {'-':>7} {'>' + str(int(args.old_timeout)):>7} (killed)")
                continue
            chunks, cpu, wall = result
            print(
                f"{name:34} {megabytes:5.2f} | {kind:7} {chunks:7d} {cpu:7.2f} {wall:7.2f} "
                f"{cpu / max(chunks, 1) * 1000:8.3f} {cpu / megabytes:8.2f}"
            )


if __name__ == "__main__":
    main()
