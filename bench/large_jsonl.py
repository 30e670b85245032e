"""One large JSONL file (issue 30, part 5): peak memory, wall and CPU seconds of ingesting it, then of the run after
one record of it changed (which must embed that record's chunks alone).

The file: BEIR ``corpus.jsonl``-like lines (``_id``, ``title``, ``text``) of about 750 bytes, words drawn from a
fixed vocabulary with a seeded generator, written to ``--work`` (default /tmp) and deleted afterwards unless
``--keep``. Each ingest runs in a child process; its peak RSS, user+system CPU and wall come from ``os.wait4`` (that
child's own rusage: ``RUSAGE_CHILDREN`` would fold in every child reaped so far). The second run changes one word
of one record in place (same length, new modification time).

    python bench/large_jsonl.py --mb 500                        # HashBowEmbedder (bench/_synthetic.py)
    python bench/large_jsonl.py --mb 20 --backend onnx-int8     # the real model, on a smaller file

Figures: docs/scale.md#large-jsonl-files.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WORDS = [
    "cell",
    "protein",
    "gene",
    "expression",
    "tumor",
    "patients",
    "study",
    "effect",
    "risk",
    "increased",
    "mice",
    "treatment",
    "response",
    "analysis",
    "clinical",
    "receptor",
    "pathway",
    "levels",
    "role",
    "associated",
    "human",
    "disease",
    "signaling",
    "induced",
    "function",
    "binding",
    "factor",
    "model",
    "results",
    "data",
    "activity",
    "cancer",
    "growth",
    "immune",
    "infection",
    "blood",
    "brain",
    "heart",
    "liver",
    "mutation",
    "therapy",
    "dose",
    "trial",
    "cohort",
    "outcome",
    "mortality",
    "acute",
    "chronic",
    "inhibitor",
    "kinase",
    "membrane",
    "mitochondrial",
    "stem",
    "transcription",
    "regulation",
    "sequence",
    "variant",
    "population",
    "sample",
    "significant",
    "reduced",
    "higher",
    "lower",
    "compared",
    "control",
    "group",
]


def generate(path: Path, megabytes: float, seed: int = 0) -> int:
    """Write about ``megabytes`` MB of records to ``path``; returns the record count."""
    rng = random.Random(seed)
    target, written, number = megabytes * 1e6, 0, 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            title = " ".join(rng.choices(WORDS, k=8)).capitalize()
            text = " ".join(rng.choices(WORDS, k=88)).capitalize() + "."
            line = json.dumps({"_id": f"doc{number}", "title": title, "text": text}) + "\n"
            out.write(line)
            written += len(line)
            number += 1
    return number


def change_one_record(path: Path, record: int) -> None:
    """Change one word of record ``record`` in place (written backwards: same length, a new modification time)."""
    with path.open("r+b") as handle:
        offset = 0
        for _ in range(record):
            offset += len(handle.readline())
        handle.seek(offset)
        line = handle.readline()
        word = next(w.encode() for w in WORDS if f" {w} ".encode() in line)
        line = line.replace(b" " + word + b" ", b" " + word[::-1] + b" ", 1)
        handle.seek(offset)
        handle.write(line)


def child(index_dir: str, docs: str, backend: str, commit_every: int | None) -> None:
    """Ingest ``docs`` into ``index_dir`` (this process is the one measured); print the run's summary as JSON."""
    sys.path.insert(0, str(REPO / "bench"))
    from citeline import Index

    if backend == "hash":
        from _synthetic import HashBowEmbedder

        index = Index.create(index_dir, embedder=HashBowEmbedder())
    else:
        index = Index.create(index_dir, backend=backend)
    settings: dict[str, Any] = {"progress": False}
    if commit_every:
        settings["commit_every"] = commit_every
    run = index.ingest([docs], **settings)
    fields = ("status", "added", "updated", "unchanged", "removed", "chunks_embedded", "chunks_reused", "generation")
    print(json.dumps({name: getattr(run, name) for name in fields}))


def measured(arguments: list[str]) -> dict[str, Any]:
    """Run this script as a child with ``arguments``; its summary with peak RSS, CPU and wall seconds."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, __file__, *arguments], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"child failed ({status}): {output}")
    summary = json.loads(output.strip().splitlines()[-1])
    summary.update(
        peak_rss_gb=round(usage.ru_maxrss / 2**20, 2),
        cpu_s=round(usage.ru_utime + usage.ru_stime, 1),
        wall_s=round(wall, 1),
    )
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500.0, help="size of the JSONL file in MB")
    parser.add_argument("--backend", default="hash", help="hash (HashBowEmbedder), torch, onnx or onnx-int8")
    parser.add_argument("--commit-every", type=int, default=None, help="chunks a commit (default: the run's)")
    parser.add_argument("--work", default="/tmp", help="folder for the file and the index")
    parser.add_argument("--keep", action="store_true", help="keep the file and the index")
    parser.add_argument(
        "--child", nargs=4, metavar=("INDEX", "DOCS", "BACKEND", "COMMIT_EVERY"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        index_dir, docs, backend, commit_every = args.child
        child(index_dir, docs, backend, int(commit_every) or None)
        return
    work = Path(args.work) / f"citeline-large-jsonl-{os.getpid()}"
    docs, index_dir = work / "docs", work / "index"
    docs.mkdir(parents=True)
    try:
        path = docs / "corpus.jsonl"
        started = time.perf_counter()
        records = generate(path, args.mb)
        then = time.time() - 60  # settled before the first run (freshness trusts a file left alone)
        os.utime(path, (then, then))
        size = path.stat().st_size
        print(
            f"generated {records:,} records, {size / 1e6:.0f} MB in {time.perf_counter() - started:.0f} s", flush=True
        )
        child_args = ["--child", str(index_dir), str(docs), args.backend, str(args.commit_every or 0)]
        first = measured(child_args)
        print("first run:", json.dumps(first), flush=True)
        change_one_record(path, records // 2)
        second = measured(child_args)
        print("after one record changed:", json.dumps(second), flush=True)
        ok = second["updated"] == 1 and second["added"] == 0 and second["chunks_embedded"] <= 2
        print(
            f"{records:,} records, {size / 1e6:.0f} MB, backend {args.backend}: first run peak RSS "
            f"{first['peak_rss_gb']} GB, {first['wall_s']} s wall, {first['cpu_s']} CPU-s, {first['generation']} "
            f"commits; one record changed: {second['chunks_embedded']} chunks embedded, peak RSS "
            f"{second['peak_rss_gb']} GB, {second['wall_s']} s wall, {second['cpu_s']} CPU-s"
            + ("" if ok else "  << NOT ONE RECORD")
        )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
