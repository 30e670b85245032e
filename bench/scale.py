"""Scale benchmark: what ingestion, updates and search cost as an index grows from 10k to 1M+ chunks.

    python bench/scale.py --sizes 10k 100k [--skip STEP ...] [--vector-index KIND] [--workdir DIR]
    python bench/scale.py --sizes 1M --workdir DIR --steps update1 [--citeline CHECKOUT] [--edit-salt N]

The second form runs the named steps on an index already in ``DIR/<size>/index`` with its corpus in
``DIR/<size>/docs`` (copy them there; the steps edit and commit that copy and it is kept), with the children
importing citeline from ``CHECKOUT`` (default: this one), so two checkouts can be compared step by step on two
copies of one index: each step's edit depends only on (seed, size, ``--edit-salt``, step), never on the steps
run before it, and a salt of 1 or more gives texts no earlier run wrote.

For each size it writes a synthetic SciFact-like corpus (``bench/_synthetic.py``: SciFact's word frequencies and
sentence lengths, about 2.2 chunks a record, JSONL files of 1,000 records) and measures, each step in its own child
process with a timeout, using a model-free hashed bag-of-words embedder so that chunking, storage, commit and search
are what is measured:

  ingest      first ingest of the whole corpus
  rerun       the same corpus again, unchanged
  update1     one record's text edited (one file changes)
  delete1     one record removed (one file changes)
  update1pct  1% of the records edited, chosen at random (so most files change)
  cold        a cold search in a new process, twice: (a) a small Python script that imports the embedder,
              ``Index.open(path, embedder=...)`` and runs one default search (hybrid, collapse on: what
              ``citeline search`` does), since the ``citeline`` CLI cannot load this embedder; (b) the real
              ``citeline search --mode lexical --no-collapse`` CLI, which needs no model
  latency     in-process p50/p99 (wall and CPU ms) of 100 SciFact queries per mode (dense, lexical, hybrid with the
              default fusion and with DOCUMENT_BM25_FUSION), collapse on and off
  recall      recall@10 of dense search against exact brute-force numpy search over the stored vectors
  disk        size of the index directory

CPU seconds come from ``os.wait4`` (the child's own rusage, its threads and waited-for children included) and,
for the operation alone, from the child's ``getrusage`` around the call (so imports and opening are apart); peak RSS
is the child's ``ru_maxrss``. Results are printed and written to ``bench/results/scale-<size>.txt``.
``--vector-index`` is passed to ``Index.create`` only when given (for indexes that have vector index kinds).

``python bench/scale.py large-jsonl --mb 500``: one large JSONL file instead (see ``LARGE_JSONL_DOC``).
``python bench/scale.py codes-grid --index DIR/1M/index --queries 100``: an ivf base's code search over a grid of
its two knobs (see ``CODES_GRID_DOC``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

import _synthetic as synthetic  # noqa: E402

STEPS = ("ingest", "rerun", "update1", "delete1", "update1pct", "cold", "latency", "recall", "disk")
CHUNKS_PER_RECORD = 2.2  # what the generator is calibrated to (see bench/_synthetic.py)
COLD_QUERY = "Macrophages respond to hypoxia by changing gene expression in tumours"
QUERIES = synthetic.SCIFACT / "queries.jsonl"


# ---------------------------------------------------------------- sizes and labels


def parse_size(text: str) -> int:
    """``10000``, ``10k``, ``1M`` or ``2m`` as a number of chunks."""
    value = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(value[-1:], 1)
    try:
        number = float(value[:-1] if scale != 1 else value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 10000, 100k or 1M") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a size must be positive")
    return int(number * scale)


def size_label(chunks: int) -> str:
    """10000 -> 10k, 1000000 -> 1M."""
    if chunks >= 1_000_000 and chunks % 100_000 == 0:
        return f"{chunks / 1_000_000:g}M"
    if chunks >= 1_000 and chunks % 100 == 0:
        return f"{chunks / 1_000:g}k"
    return str(chunks)


# ---------------------------------------------------------------- children


#: The checkout whose citeline the children import (``--citeline``; default: this one).
CITELINE = REPO


def child_env() -> dict[str, str]:
    """The children import the chosen checkout's citeline first, never touch a model hub, and log quietly."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(CITELINE), str(BENCH), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run_child(command: Sequence[str], *, timeout: float, log: Path) -> dict[str, Any]:
    """Run one child to completion (or kill it at ``timeout``); its exit code, wall time and own rusage."""
    start = time.perf_counter()
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(command)}\n".encode())
        out.flush()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=child_env(), cwd=REPO)
        timed_out = False
        while True:
            # wait4 gives this child's own rusage (RUSAGE_CHILDREN would fold in every child reaped so far,
            # and its maxrss would be the largest of them).
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > timeout:
                timed_out = True
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.02)
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
    return {
        "exit": process.returncode,
        "timed_out": timed_out,
        "wall_s": time.perf_counter() - start,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_gb": usage.ru_maxrss * 1024 / 1e9,  # Linux reports KiB
    }


def run_step(op: str, spec: dict[str, Any], *, timeout: float, work: Path) -> dict[str, Any]:
    """Run ``op`` of this script in a child process; its figures merged with the child's own report."""
    result_file = work / f"result-{op}.json"
    result_file.unlink(missing_ok=True)
    spec = {**spec, "result": str(result_file)}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", op, json.dumps(spec)]
    figures = run_child(command, timeout=timeout, log=work / "log.txt")
    if result_file.exists():
        figures.update(json.loads(result_file.read_text()))
    figures["ok"] = figures["exit"] == 0 and not figures["timed_out"] and result_file.exists()
    if not figures["ok"]:
        figures["error"] = last_line(work / "log.txt")
    return figures


def last_line(log: Path) -> str:
    """The last non-empty line of a child's log: its one-line error, or the end of its traceback."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _usage() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter(), own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _since(mark: tuple[float, float]) -> dict[str, float]:
    wall, cpu = _usage()
    return {"op_wall_s": wall - mark[0], "op_cpu_s": cpu - mark[1]}


def _open_index(spec: dict[str, Any], *, create: bool = False) -> Any:
    from citeline import Index

    embedder = synthetic.HashBowEmbedder()
    if not create:
        return Index.open(spec["index"], embedder=embedder)
    options: dict[str, Any] = {
        "embedder": embedder,
        "max_tokens": spec["max_tokens"],
        "overlap_tokens": spec["overlap_tokens"],
    }
    if spec.get("vector_index"):
        options["vector_index"] = spec["vector_index"]  # only when asked: today's Index.create has no such option
    return Index.create(spec["index"], **options)


def child_ingest(spec: dict[str, Any]) -> dict[str, Any]:
    """Create (first run) or open the index and ingest the corpus folder once."""
    index = _open_index(spec, create=spec.get("create", False))
    mark = _usage()
    run = index.ingest([spec["docs"]])
    figures: dict[str, Any] = dict(_since(mark))
    figures["run"] = {
        key: getattr(run, key)
        for key in ("added", "updated", "unchanged", "removed", "failed", "chunks_embedded", "chunks_reused")
    }
    status = index.status()
    figures.update(chunks=status.chunks, documents=status.documents, generation=status.generation)
    return figures


def load_queries(count: int) -> list[str]:
    """The first ``count`` SciFact claims (their words are the corpus's vocabulary)."""
    queries = []
    with QUERIES.open(encoding="utf-8") as lines:
        for line in lines:
            queries.append(json.loads(line)["text"])
            if len(queries) == count:
                break
    return queries


def _search_with(index: Any, fusion_name: str) -> Any:
    """``index.search`` for the latency table, hybrid with the named fusion (``DEFAULT_FUSION``,
    ``DOCUMENT_BM25_FUSION``): through ``SearchRequest.fusion`` (``Query.fusion`` before the rename) where the
    checkout has it, else (an older checkout) by its ``rank``'s default."""
    from dataclasses import fields, replace

    from citeline.query import plan

    fusion = getattr(plan, fusion_name)
    if fusion_name == "DEFAULT_FUSION":
        return index.search
    request_type: Any = getattr(plan, "SearchRequest", None) or getattr(plan, "Query")  # noqa: B009 (older checkouts)
    if any(f.name == "fusion" for f in fields(request_type)):

        def search(query: str, k: int, mode: str, collapse: bool) -> Any:
            request = replace(request_type.of(query, k, mode=mode, collapse=collapse), fusion=fusion)
            return plan.search(index.snapshot(), request, index.encode_query, index.meta["model"])

        return search

    def patched(query: str, k: int, mode: str, collapse: bool) -> Any:
        saved = plan.rank_chunks.__defaults__
        plan.rank_chunks.__defaults__ = (*saved[:-1], fusion)  # type: ignore[index]
        try:
            return index.search(query, k=k, mode=mode, collapse=collapse)
        finally:
            plan.rank_chunks.__defaults__ = saved

    return patched


#: The latency table's rows: (label, mode, the hybrid fusion's name in ``citeline.query.plan``).
LATENCY_MODES = (
    ("dense", "dense", "DEFAULT_FUSION"),
    ("lexical", "lexical", "DEFAULT_FUSION"),
    ("hybrid", "hybrid", "DEFAULT_FUSION"),
    ("hybrid DOCUMENT_BM25_FUSION", "hybrid", "DOCUMENT_BM25_FUSION"),
)


def child_latency(spec: dict[str, Any]) -> dict[str, Any]:
    """Open the index, time the first search, then p50/p99 per mode with collapse on and off: wall ms and CPU ms
    (``time.process_time``: every thread of the process, so the dense leg's thread counts), the default hybrid
    fusion and ``DOCUMENT_BM25_FUSION`` (the opt-in document BM25)."""
    mark = _usage()
    index = _open_index(spec)
    queries = load_queries(spec["queries"])
    index.search(queries[0], k=10, mode="hybrid")  # loads the snapshot: the reader's open cost
    figures: dict[str, Any] = {"open_and_first_search": _since(mark), "latency_ms": {}, "chunks": index.status().chunks}
    for label, mode, fusion_name in LATENCY_MODES:
        search = _search_with(index, fusion_name)
        for collapse in (True, False):
            times, cpu_times = [], []
            for query in queries:
                start, cpu = time.perf_counter(), time.process_time()
                search(query, k=10, mode=mode, collapse=collapse)
                cpu_times.append((time.process_time() - cpu) * 1000)
                times.append((time.perf_counter() - start) * 1000)
            figures["latency_ms"][f"{label} collapse={'on' if collapse else 'off'}"] = {
                "p50": float(np.percentile(times, 50)),
                "p99": float(np.percentile(times, 99)),
                "mean": float(np.mean(times)),
                "cpu_p50": float(np.percentile(cpu_times, 50)),
                "cpu_p99": float(np.percentile(cpu_times, 99)),
                "cpu_mean": float(np.mean(cpu_times)),
            }
    return figures


def _stored_vectors(index_dir: Path, embedder: Any, batch: int = 65_536) -> Any:
    """(chunk ids, vectors) batches from the catalog; re-embedded from the texts if vectors are not stored there."""
    import duckdb

    connection = duckdb.connect(str(index_dir / "meta.duckdb"), read_only=True)
    try:
        columns = {row[0] for row in connection.execute("DESCRIBE chunks").fetchall()}
        column = "vector" if "vector" in columns else "text"
        reader = connection.sql(f"SELECT chunk_id, {column} FROM chunks").fetch_arrow_reader(batch)
        for record_batch in reader:
            ids = record_batch.column(0).to_numpy()
            if column == "vector":
                values = record_batch.column(1).values.to_numpy(zero_copy_only=False)
                vectors = values.reshape(len(ids), -1).astype(np.float32, copy=False)
            else:  # the embedder is deterministic, so this gives the stored vectors back
                vectors = embedder.encode(record_batch.column(1).to_pylist())
            yield ids, vectors
    finally:
        connection.close()


def child_recall(spec: dict[str, Any]) -> dict[str, Any]:
    """Recall@10 of ``Index.rank(mode="dense")`` against exact inner-product search over every stored vector."""
    k = 10
    index = _open_index(spec)
    embedder = synthetic.HashBowEmbedder()
    queries = load_queries(spec["queries"])
    query_vectors = embedder.encode(queries)
    mark = _usage()
    found = [[chunk_id for chunk_id, _ in index.rank(query, k, mode="dense")] for query in queries]
    ranked = _since(mark)
    wanted = np.array(sorted({c for ids in found for c in ids}), dtype=np.int64)
    best_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    found_scores: dict[int, np.ndarray] = {}
    mark = _usage()
    for ids, vectors in _stored_vectors(Path(spec["index"]), embedder):
        scores = query_vectors @ vectors.T
        merged = np.concatenate([best_scores, scores], axis=1)
        best_scores = -np.sort(-merged, axis=1)[:, :k]
        hit = np.isin(ids, wanted)
        for position in np.flatnonzero(hit).tolist():
            found_scores[int(ids[position])] = scores[:, position]
    exact = _since(mark)
    # A returned chunk counts if its exact score reaches the exact 10th best, so ties cannot cost recall.
    recalls = []
    for row, ids in enumerate(found):
        threshold = best_scores[row, k - 1] - 1e-5
        recalls.append(sum(1 for c in ids if c in found_scores and found_scores[c][row] >= threshold) / k)
    return {
        "recall_at_10": float(np.mean(recalls)),
        "min_recall": float(np.min(recalls)),
        "rank_ms_mean": ranked["op_wall_s"] / len(queries) * 1000,
        "exact_scan_s": exact["op_wall_s"],
    }


CHILDREN = {"ingest": child_ingest, "latency": child_latency, "recall": child_recall}

COLD_SCRIPT = """
import json, resource, sys, time
start = time.perf_counter()
from _synthetic import HashBowEmbedder
from citeline import Index
index = Index.open(sys.argv[1], embedder=HashBowEmbedder())
hits = index.search(sys.argv[2], k=10)
usage = resource.getrusage(resource.RUSAGE_SELF)
with open(sys.argv[3], "w") as out:
    json.dump({"hits": len(hits), "in_process_wall_s": time.perf_counter() - start,
               "self_rss_gb": usage.ru_maxrss * 1024 / 1e9}, out)
"""


def cold_searches(index_dir: Path, *, repeats: int, timeout: float, work: Path) -> dict[str, Any]:
    """Median wall and CPU, max RSS of ``repeats`` cold searches of each kind, each in a new process."""
    cli = Path(sys.executable).parent / "citeline"
    cli_command = [str(cli)] if cli.exists() else [sys.executable, "-m", "citeline.cli.main"]
    result_file = work / "result-cold.json"
    kinds = {
        "python script: Index.open(embedder=HashBow) + search (hybrid, collapse)": [
            sys.executable,
            "-c",
            COLD_SCRIPT,
            str(index_dir),
            COLD_QUERY,
            str(result_file),
        ],
        "CLI: citeline search --mode lexical --no-collapse": [
            *cli_command,
            "search",
            "--index",
            str(index_dir),
            "--mode",
            "lexical",
            "--no-collapse",
            "-k",
            "10",
            COLD_QUERY,
        ],
    }
    figures: dict[str, Any] = {}
    for name, command in kinds.items():
        runs = [run_child(command, timeout=timeout, log=work / "log.txt") for _ in range(repeats)]
        ok = all(r["exit"] == 0 and not r["timed_out"] for r in runs)
        figures[name] = {
            "ok": ok,
            "wall_s": float(np.median([r["wall_s"] for r in runs])),
            "cpu_s": float(np.median([r["cpu_s"] for r in runs])),
            "rss_gb": max(r["rss_gb"] for r in runs),
            "repeats": repeats,
        }
        if result_file.exists():
            figures[name].update(json.loads(result_file.read_text()))
            result_file.unlink()
    return figures


def disk_usage(index_dir: Path) -> dict[str, Any]:
    """Bytes under the index directory, in total and per top-level entry."""
    entries: dict[str, int] = {}
    for entry in sorted(index_dir.iterdir()):
        paths = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
        entries[entry.name] = sum(p.stat().st_size for p in paths)
    return {"total_bytes": sum(entries.values()), "entries": entries}


# ---------------------------------------------------------------- corpus edits (in the parent, not timed)


def _corpus_files(docs: Path) -> list[Path]:
    return sorted(docs.glob("*.jsonl"))


def edit_records(docs: Path, generator: synthetic.Generator, picks: Sequence[tuple[int, int]], version: int) -> int:
    """Give the records at (file index, line) ``picks`` a new text; returns how many were edited."""
    files = _corpus_files(docs)
    by_file: dict[int, list[int]] = {}
    for file_index, line in picks:
        by_file.setdefault(file_index, []).append(line)
    for file_index, lines in by_file.items():
        records = synthetic.read_records(files[file_index])
        for line in lines:
            records[line]["text"] = generator.edited_text(records[line]["_id"], version)
        synthetic.write_records(files[file_index], records)
    return len(picks)


def delete_record(docs: Path, file_index: int, line: int) -> str:
    """Remove one record; returns its id."""
    path = _corpus_files(docs)[file_index]
    records = synthetic.read_records(path)
    removed = records.pop(line)
    synthetic.write_records(path, records)
    return removed["_id"]


def record_positions(docs: Path) -> list[tuple[int, int]]:
    """(file index, line) of every record."""
    positions: list[tuple[int, int]] = []
    for file_index, path in enumerate(_corpus_files(docs)):
        with path.open(encoding="utf-8") as lines:
            positions.extend((file_index, line) for line, text in enumerate(lines) if text.strip())
    return positions


# ---------------------------------------------------------------- one size


def prepare_corpus(root: Path, records: int, args: argparse.Namespace) -> Path:
    """The pristine corpus for this size, generated once and reused while its settings match."""
    pristine = root / "corpus"
    manifest = {
        "records": records,
        "seed": args.seed,
        "records_per_file": args.records_per_file,
        "length_scale": synthetic.LENGTH_SCALE,
        "generator": 1,
    }
    manifest_file = pristine / "manifest.json"
    if manifest_file.exists() and json.loads(manifest_file.read_text()) == manifest:
        return pristine
    shutil.rmtree(pristine, ignore_errors=True)
    start = time.perf_counter()
    synthetic.write_corpus(pristine / "docs", records, seed=args.seed, records_per_file=args.records_per_file)
    manifest_file.write_text(json.dumps(manifest))
    print(f"  generated {records:,} records in {time.perf_counter() - start:.1f} s", flush=True)
    return pristine


def bench_size(chunks: int, args: argparse.Namespace) -> dict[str, Any]:
    """Every step for one size; returns the figures (also written as the report)."""
    label = size_label(chunks)
    root = args.workdir / label
    root.mkdir(parents=True, exist_ok=True)
    records = max(1, round(chunks / CHUNKS_PER_RECORD))
    docs, index_dir = root / "docs", root / "index"
    skip = set(args.skip) | (set(STEPS) - set(args.steps) if args.steps else set())
    spec = {
        "index": str(index_dir),
        "docs": str(docs),
        "max_tokens": args.max_tokens,
        "overlap_tokens": args.overlap_tokens,
        "vector_index": args.vector_index,
        "queries": args.queries,
    }
    figures: dict[str, Any] = {"label": label, "target_chunks": chunks, "records": records, "steps": {}}
    print(f"== {label}: {records:,} records -> {root}", flush=True)
    steps = figures["steps"]
    if "ingest" not in skip:
        pristine = prepare_corpus(root, records, args)
        shutil.rmtree(docs, ignore_errors=True)
        shutil.rmtree(index_dir, ignore_errors=True)
        shutil.copytree(pristine / "docs", docs)
        steps["ingest"] = run_step("ingest", {**spec, "create": True}, timeout=args.timeout, work=root)
        report_step("first ingest", steps["ingest"])
        if not steps["ingest"]["ok"]:
            return figures
    elif not index_dir.exists():
        raise SystemExit(f"error: {index_dir} does not exist; run without --skip ingest first")
    generator = synthetic.Generator(args.seed)
    salt = args.edit_salt
    rng = np.random.default_rng([args.seed, chunks])
    version = 10 * salt  # salt 0: versions 1 and 2, as before
    edits: list[tuple[str, str, Any]] = [
        ("rerun", "unchanged re-run", None),
        ("update1", "one-document update", lambda: edit_records(docs, generator, [pick(rng, docs)], version + 1)),
        ("delete1", "one-document delete", lambda: delete_record(docs, *pick(rng, docs))),
        ("update1pct", "1% update", lambda: edit_records(docs, generator, pick_share(rng, docs, 0.01), version + 2)),
    ]
    for number, (step, title, edit) in enumerate(edits):
        if step in skip:
            continue
        if salt:  # each step's edit on its own: the same whichever steps ran before
            rng = np.random.default_rng([args.seed, chunks, salt, number])
        detail = edit() if edit else None
        steps[step] = run_step("ingest", spec, timeout=args.timeout, work=root)
        steps[step]["edit"] = detail
        report_step(title, steps[step])
    if "cold" not in skip:
        steps["cold"] = cold_searches(index_dir, repeats=args.cold_repeats, timeout=args.timeout, work=root)
        for name, cold in steps["cold"].items():
            print(
                f"  cold {name}: {cold['wall_s']:.2f} s wall, {cold['cpu_s']:.2f} CPU-s, {cold['rss_gb']:.2f} GB",
                flush=True,
            )
    for step in ("latency", "recall"):
        if step not in skip:
            steps[step] = run_step(step, spec, timeout=args.timeout, work=root)
            print(f"  {step}: {'ok' if steps[step]['ok'] else 'FAILED'} ({steps[step]['wall_s']:.1f} s)", flush=True)
    if "disk" not in skip:
        steps["disk"] = disk_usage(index_dir)
    return figures


def pick(rng: np.random.Generator, docs: Path) -> tuple[int, int]:
    """One record, at random."""
    positions = record_positions(docs)
    return positions[int(rng.integers(len(positions)))]


def pick_share(rng: np.random.Generator, docs: Path, share: float) -> list[tuple[int, int]]:
    """``share`` of the records, at random."""
    positions = record_positions(docs)
    chosen = rng.choice(len(positions), size=max(1, round(len(positions) * share)), replace=False)
    return [positions[i] for i in sorted(chosen.tolist())]


def report_step(title: str, step: dict[str, Any]) -> None:
    """One progress line."""
    if not step["ok"]:
        why = "timed out" if step["timed_out"] else f"exit {step['exit']}: {step.get('error', '')}"
        print(f"  {title}: FAILED ({why}; see log.txt)", flush=True)
        return
    print(
        f"  {title}: {step['op_cpu_s']:.1f} CPU-s, {step['op_wall_s']:.1f} s wall, {step['rss_gb']:.2f} GB peak, "
        f"{step['run']}",
        flush=True,
    )


# ---------------------------------------------------------------- the report


def git_revision(checkout: Path = REPO) -> str:
    """The checkout's commit, with ``+dirty`` when it has uncommitted changes to tracked files."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=checkout,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def render(figures: dict[str, Any], args: argparse.Namespace) -> str:
    """The human-readable report for one size."""
    steps = figures["steps"]
    ingest = steps.get("ingest", {})
    chunks = ingest.get("chunks") or steps.get("latency", {}).get("chunks")
    lines = [
        f"citeline scale benchmark: {figures['label']} chunks (bench/scale.py)",
        f"date {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {git_revision(CITELINE)}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        f"corpus: {figures['records']:,} synthetic SciFact-like records in files of {args.records_per_file:,}, "
        f"seed {args.seed}" + (f"; {chunks:,} chunks ({chunks / figures['records']:.2f} a record)" if chunks else ""),
        f"embedder: {synthetic.HashBowEmbedder.model_name} (hashed bag of words, no model); chunks of "
        f"{args.max_tokens} tokens, overlap {args.overlap_tokens}; vector index: "
        f"{args.vector_index or 'not given (the index default)'}",
        "",
        "CPU-s and wall-s of the operation (Index.ingest alone); 'process' = the whole child (imports, open);",
        "peak RSS = the child's ru_maxrss.",
        "",
        f"{'step':<24}{'op CPU-s':>10}{'op wall-s':>11}{'process CPU-s':>15}{'peak RSS GB':>13}  run",
    ]
    titles = {
        "ingest": "first ingest",
        "rerun": "unchanged re-run",
        "update1": "one-document update",
        "delete1": "one-document delete",
        "update1pct": "1% update",
    }
    for step, title in titles.items():
        if step not in steps:
            continue
        s = steps[step]
        if not s["ok"]:
            why = "timed out" if s["timed_out"] else f"exit {s['exit']}: {s.get('error', '')}"
            lines.append(f"{title:<24}FAILED ({why})")
            continue
        run = s["run"]
        summary = (
            f"+{run['added']} ~{run['updated']} ={run['unchanged']} -{run['removed']}, "
            f"embedded {run['chunks_embedded']}, reused {run['chunks_reused']}"
        )
        lines.append(
            f"{title:<24}{s['op_cpu_s']:>10.2f}{s['op_wall_s']:>11.2f}{s['cpu_s']:>15.2f}"
            f"{s['rss_gb']:>13.2f}  {summary}"
        )
    if "update1pct" in steps and steps["update1pct"]["ok"] and ingest.get("ok"):
        share = steps["update1pct"]["op_cpu_s"] / ingest["op_cpu_s"]
        lines.append(f"{'':<24}1% update = {share:.1%} of the first ingest's CPU (target <= 5%)")
    if "cold" in steps:
        lines += [
            "",
            f"cold search, a new process each (median of {args.cold_repeats}; RSS = max):",
            f"{'kind':<76}{'wall s':>8}{'CPU s':>8}{'RSS GB':>8}",
        ]
        for name, cold in steps["cold"].items():
            state = "" if cold["ok"] else "  FAILED"
            lines.append(f"{name:<76}{cold['wall_s']:>8.2f}{cold['cpu_s']:>8.2f}{cold['rss_gb']:>8.2f}{state}")
    if "latency" in steps:
        s = steps["latency"]
        lines += [
            "",
            f"in-process search, {args.queries} SciFact queries, k=10 (process peak RSS {s['rss_gb']:.2f} GB):",
        ]
        if s["ok"]:
            first = s["open_and_first_search"]
            lines.append(
                f"  import citeline + open + first search: {first['op_wall_s']:.2f} s wall, "
                f"{first['op_cpu_s']:.2f} CPU-s"
            )
            lines.append(
                f"  {'mode':<40}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}{'CPU p50':>9}{'CPU p99':>9}{'CPU mean':>9}"
            )
            for name, t in s["latency_ms"].items():
                keys = ("cpu_p50", "cpu_p99", "cpu_mean")
                cpu = "".join(f"{t[key]:>9.1f}" if key in t else " " * 9 for key in keys)
                lines.append(f"  {name:<40}{t['p50']:>9.1f}{t['p99']:>9.1f}{t['mean']:>9.1f}{cpu}")
        else:
            lines.append("  FAILED")
    if "recall" in steps:
        s = steps["recall"]
        if s["ok"]:
            lines.append(
                f"\nrecall@10, dense vs exact numpy search over the stored vectors: {s['recall_at_10']:.4f} "
                f"(worst query {s['min_recall']:.2f}; {args.queries} queries)"
            )
        else:
            lines.append("\nrecall@10: FAILED")
    if "disk" in steps:
        disk = steps["disk"]
        parts = ", ".join(f"{name} {size / 1e6:.1f}" for name, size in disk["entries"].items())
        lines.append(f"\ndisk: {disk['total_bytes'] / 1e9:.3f} GB ({parts}; MB)")
    lines += ["", "raw: " + json.dumps(figures, sort_keys=True)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- entry points


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes",
        "--chunks",
        dest="sizes",
        nargs="+",
        type=parse_size,
        default=[10_000, 100_000],
        metavar="N",
        help="index sizes in chunks: 10000, 100k, 1M ... [default: 10k 100k]",
    )
    parser.add_argument(
        "--skip",
        nargs="+",
        default=[],
        choices=STEPS,
        metavar="STEP",
        help=f"steps to leave out: {', '.join(STEPS)} (skipping ingest reuses an index left by --keep)",
    )
    parser.add_argument(
        "--steps",
        nargs="+",
        default=[],
        choices=STEPS,
        metavar="STEP",
        help="run only these steps (without ingest: on the index and corpus already in the workdir, kept afterwards)",
    )
    parser.add_argument(
        "--citeline",
        type=Path,
        default=REPO,
        help="the checkout whose citeline the children import [default: this one]",
    )
    parser.add_argument(
        "--edit-salt",
        type=int,
        default=0,
        help="0: the edits of a full run; N >= 1: edits fixed by (seed, size, N, step) alone, new texts per N",
    )
    parser.add_argument("--vector-index", default=None, help="passed to Index.create(vector_index=...) when given")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/citeline-scale"),
        help="corpora and indexes go here [default: /tmp/citeline-scale]",
    )
    parser.add_argument("--results", type=Path, default=BENCH / "results", help="where scale-<size>.txt goes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--records-per-file", type=int, default=synthetic.DEFAULT_RECORDS_PER_FILE)
    parser.add_argument("--max-tokens", type=int, default=254)
    parser.add_argument("--overlap-tokens", type=int, default=32)
    parser.add_argument("--queries", type=int, default=100, help="queries for latency and recall")
    parser.add_argument("--cold-repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds allowed to each child")
    parser.add_argument("--keep", action="store_true", help="keep the index and corpus copy afterwards")
    return parser.parse_args(argv)


def child_main(op: str, spec_text: str) -> None:
    """Entry point of a child: run one operation and write its figures as JSON."""
    spec = json.loads(spec_text)
    try:
        figures = CHILDREN[op](spec)
    except TypeError as exc:
        if "vector_index" in str(exc):
            raise SystemExit(
                "error: this citeline's Index.create has no vector_index option; drop --vector-index"
            ) from None
        raise
    except Exception as exc:  # a citeline error is one line; anything else keeps its traceback in log.txt
        from citeline import CitelineError

        if isinstance(exc, CitelineError):
            raise SystemExit(f"error: {exc}") from None
        raise
    usage = resource.getrusage(resource.RUSAGE_SELF)
    figures["self_rss_gb"] = usage.ru_maxrss * 1024 / 1e9
    Path(spec["result"]).write_text(json.dumps(figures))


def main(argv: Sequence[str] | None = None) -> None:
    """Benchmark each size and write its report."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        child_main(argv[1], argv[2])
        return
    global CITELINE
    args = parse_args(argv)
    CITELINE = args.citeline.resolve()
    args.results.mkdir(parents=True, exist_ok=True)
    for chunks in args.sizes:
        figures = bench_size(chunks, args)
        text = render(figures, args)
        target = args.results / f"scale-{size_label(chunks)}.txt"
        target.write_text(text)
        print("\n" + text.split("\nraw: ")[0] + f"\n(written to {target})\n", flush=True)
        if not args.keep and "ingest" in figures["steps"]:  # an index this run did not build is never removed
            root = args.workdir / size_label(chunks)
            shutil.rmtree(root / "index", ignore_errors=True)
            shutil.rmtree(root / "docs", ignore_errors=True)


# ---------------------------------------------------------------- one large JSONL file

LARGE_JSONL_DOC = """One large JSONL file (issue 30, part 5): peak memory, wall and CPU seconds of ingesting it, then of
the run after
one record of it changed (which must embed that record's chunks alone).

The file: BEIR ``corpus.jsonl``-like lines (``_id``, ``title``, ``text``) of about 750 bytes, words drawn from a
fixed vocabulary with a seeded generator, written to ``--work`` (default /tmp) and deleted afterwards unless
``--keep``. Each ingest runs in a child process; its peak RSS, user+system CPU and wall come from ``os.wait4`` (that
child's own rusage: ``RUSAGE_CHILDREN`` would fold in every child reaped so far). The second run changes one word
of one record in place (same length, new modification time).

    python bench/scale.py large-jsonl --mb 500                        # HashBowEmbedder (bench/_synthetic.py)
    python bench/scale.py large-jsonl --mb 20 --backend onnx-int8     # the real model, on a smaller file

Figures: docs/scale.md#large-jsonl-files.
"""

JSONL_WORDS = [
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


def generate_jsonl(path: Path, megabytes: float, seed: int = 0) -> int:
    """Write about ``megabytes`` MB of records to ``path``; returns the record count."""
    rng = random.Random(seed)
    target, written, number = megabytes * 1e6, 0, 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            title = " ".join(rng.choices(JSONL_WORDS, k=8)).capitalize()
            text = " ".join(rng.choices(JSONL_WORDS, k=88)).capitalize() + "."
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
        word = next(w.encode() for w in JSONL_WORDS if f" {w} ".encode() in line)
        line = line.replace(b" " + word + b" ", b" " + word[::-1] + b" ", 1)
        handle.seek(offset)
        handle.write(line)


def jsonl_child(index_dir: str, docs: str, backend: str, commit_every: int | None) -> None:
    """Ingest ``docs`` into ``index_dir`` (this process is the one measured); print the run's summary as JSON."""
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


def jsonl_measured(arguments: list[str]) -> dict[str, Any]:
    """Run this script as a child with ``arguments``; its summary with peak RSS, CPU and wall seconds."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, __file__, "large-jsonl", *arguments], stdout=subprocess.PIPE, text=True)
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


def large_jsonl_main(argv: list[str]) -> None:
    """``python bench/scale.py large-jsonl ...`` (see ``LARGE_JSONL_DOC``)."""
    parser = argparse.ArgumentParser(prog="scale.py large-jsonl", description=LARGE_JSONL_DOC)
    parser.add_argument("--mb", type=float, default=500.0, help="size of the JSONL file in MB")
    parser.add_argument("--backend", default="hash", help="hash (HashBowEmbedder), torch, onnx or onnx-int8")
    parser.add_argument("--commit-every", type=int, default=None, help="chunks a commit (default: the run's)")
    parser.add_argument("--work", default="/tmp", help="folder for the file and the index")
    parser.add_argument("--keep", action="store_true", help="keep the file and the index")
    parser.add_argument(
        "--child", nargs=4, metavar=("INDEX", "DOCS", "BACKEND", "COMMIT_EVERY"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        index_dir, docs, backend, commit_every = args.child
        jsonl_child(index_dir, docs, backend, int(commit_every) or None)
        return
    work = Path(args.work) / f"citeline-large-jsonl-{os.getpid()}"
    docs, index_dir = work / "docs", work / "index"
    docs.mkdir(parents=True)
    try:
        path = docs / "corpus.jsonl"
        started = time.perf_counter()
        records = generate_jsonl(path, args.mb)
        then = time.time() - 60  # settled before the first run (freshness trusts a file left alone)
        os.utime(path, (then, then))
        size = path.stat().st_size
        print(
            f"generated {records:,} records, {size / 1e6:.0f} MB in {time.perf_counter() - started:.0f} s", flush=True
        )
        child_args = ["--child", str(index_dir), str(docs), args.backend, str(args.commit_every or 0)]
        first = jsonl_measured(child_args)
        print("first run:", json.dumps(first), flush=True)
        change_one_record(path, records // 2)
        second = jsonl_measured(child_args)
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


CODES_GRID_DOC = """Recall@10 and CPU of an ivf base's fast-scan code search over a grid of lists scanned and candidates
re-ranked, on an index this script built (hash-bow vectors), against an exact scan of every stored vector.

    python bench/scale.py codes-grid --index /tmp/scale1m/1M/index --queries 100 [--factors 3 6] [--reranks 1000]

Chose ``codes.NPROBE_FACTOR`` and ``RERANK`` (their comment quotes the grid). Run by hand; not part of CI.
"""


def codes_grid_main(argv: list[str]) -> None:
    """Print one line per (lists scanned, re-rank) pair: recall@10, worst query, CPU-ms a dense rank."""
    import gc

    from citeline.vectors.ivf import IVFIndex, codes

    parser = argparse.ArgumentParser(
        prog="scale.py codes-grid", description=CODES_GRID_DOC, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--factors", type=int, nargs="+", default=[3, 6])
    parser.add_argument("--reranks", type=int, nargs="+", default=[1000, 2000, 3000, 5000])
    args = parser.parse_args(argv)
    k = 10
    index = _open_index({"index": str(args.index)})
    embedder = synthetic.HashBowEmbedder()
    queries = load_queries(args.queries)
    query_vectors = embedder.encode(queries)
    best = np.full((len(queries), k), -np.inf, dtype=np.float32)
    scores: dict[int, np.ndarray] = {}
    for ids, vectors in _stored_vectors(args.index, embedder):
        batch = query_vectors @ vectors.T
        best = -np.sort(-np.concatenate([best, batch], axis=1), axis=1)[:, :k]
        scores.update(zip(ids.tolist(), batch.T, strict=True))
    index.rank(queries[0], k, mode="dense")  # loads the vector index
    base = next(o for o in gc.get_objects() if isinstance(o, IVFIndex))
    print(f"nlist {base.nlist}, calibrated nprobe {int(base._ivf().nprobe)}, {len(base)} base vectors")
    for factor in args.factors:
        for rerank in args.reranks:
            codes.NPROBE_FACTOR, codes.RERANK = factor, rerank
            start = time.process_time()
            found = [[c for c, _ in index.rank(q, k, mode="dense")] for q in queries]
            cpu_ms = (time.process_time() - start) / len(queries) * 1000
            recalls = [sum(scores[c][r] >= best[r, k - 1] - 1e-5 for c in ids) / k for r, ids in enumerate(found)]
            print(f"factor {factor} re-rank {rerank}: recall {np.mean(recalls):.3f} (worst {min(recalls):.2f}), "
                  f"{cpu_ms:.1f} CPU-ms")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["large-jsonl"]:
        large_jsonl_main(sys.argv[2:])
    elif sys.argv[1:2] == ["codes-grid"]:
        codes_grid_main(sys.argv[2:])
    else:
        main()
