"""Crash and concurrency harness shared by tests/system/test_crash_trials.py, tests/index/test_reliability.py and
bench/reliability.py.

Run as a script it is one of two subprocesses:

``python tests/_reliability.py ingest INDEX DOCS PASSES``
    rewrites DOCS to states 0..PASSES-1 and ingests each one, printing a marker line at each step (``stage
    parse``, ``stage embed``, ``stage faiss-tmp`` ...) so the parent can SIGKILL it inside a chosen step. Steps
    are slowed a little (through wrappers installed here, not hooks in citeline) to widen the windows.

``python tests/_reliability.py read INDEX STOPFILE LOG``
    searches in a loop until STOPFILE exists, logging every result list with the generation it came from.

The parent-side functions (:func:`run_kill_trials`, :func:`run_concurrent_readers`) return figures as dicts.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from conftest import HashEmbedder  # noqa: E402

from citeline import Index  # noqa: E402
from citeline.query.plan import fetch_passages  # noqa: E402
from citeline.store import catalog, files, generation  # noqa: E402

FILES = 60
MAX_TOKENS, OVERLAP_TOKENS = 48, 8
#: The writer commits about this many chunks at a time (of about 1,000 characters; the harness's chunks are
#: ~250): the first pass makes about seven commits, later passes two, so kills land between two of a run's commits.
COMMIT_EVERY = 5
#: Where the parent may kill the writer: the pipeline's steps, and the commit protocol's points in between.
STAGES = (
    "parse",
    "plan",
    "chunk",
    "embed",
    "commit",
    "between-commits",
    "vectors-tmp",
    "vectors-written",
    "bm25-tmp",
    "bm25-written",
    "committed",
)
#: The lexical segments' publication: a commit's delta segment, a merge of segments of one size tier, a compaction
#: (every segment, once many of their chunks are deleted). With the writer's merge settings below, the three
#: passes publish a delta, then a compaction, then a merge, once each: these stages are killed at their first
#: occurrence.
SEGMENT_STAGES = (
    "delta-tmp",
    "delta-written",
    "merge-tmp",
    "merge-written",
    "compaction-tmp",
    "compaction-written",
    # The vector segments' (citeline.vectors.segments): a commit's delta is published as "vectors" (STAGES); with
    # WRITER_MAX_DELTAS, the first pass compacts (into the empty base) and the third merges the two deltas.
    "vector-merge-tmp",
    "vector-merge-written",
    "vector-compaction-tmp",
    "vector-compaction-written",
)
WRITER_MERGE_WIDTH, WRITER_COMPACT_DELETED = 2, 0.4
WRITER_MAX_DELTAS = 1
_WORDS = (
    "river",
    "bridge",
    "soldier",
    "letter",
    "harvest",
    "winter",
    "archive",
    "council",
    "merchant",
    "garrison",
    "famine",
    "treaty",
    "ledger",
    "monastery",
    "plague",
    "siege",
    "charter",
    "market",
    "bishop",
    "tax",
    "grain",
    "mill",
    "road",
    "court",
    "law",
    "guild",
    "ship",
    "port",
    "wool",
    "salt",
)
QUERIES = ("river bridge", "soldier letter winter", "grain mill tax", "bishop charter", "ship port salt wool")


# ---------------------------------------------------------------- documents


def doc_text(number: int, state: int) -> str | None:
    """The text of file ``number`` in docs state ``state``, or None when the file is absent in that state."""
    if state > 0 and number % 7 == state % 7:
        return None  # removed in this state (comes back in the next one)
    rng = random.Random(number)
    paragraphs = []
    for _ in range(rng.randint(1, 4)):
        sentences = [
            " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 14))).capitalize() + "."
            for _ in range(rng.randint(2, 5))
        ]
        paragraphs.append(" ".join(sentences))
    if number % 4 == state % 4:
        paragraphs.append(f"Revision {state} of record {number}: the {_WORDS[(number + state) % len(_WORDS)]} changed.")
    return f"# Record {number}\n\n" + "\n\n".join(paragraphs) + "\n"


def write_docs(docs: Path, state: int) -> None:
    """Make ``docs`` hold exactly the files of ``state`` (unchanged files are not rewritten)."""
    docs.mkdir(parents=True, exist_ok=True)
    for number in range(FILES):
        path = docs / f"record_{number:02d}.{'md' if number % 3 else 'txt'}"
        text = doc_text(number, state)
        if text is None:
            path.unlink(missing_ok=True)
        elif not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def create_index(path: Path) -> Index:
    """A new index with the harness's chunking settings and the fake embedder."""
    return Index.create(path, embedder=HashEmbedder(), max_tokens=MAX_TOKENS, overlap_tokens=OVERLAP_TOKENS)


def chunk_table(index_dir: Path) -> dict[int, tuple[str, int, int, str]]:
    """``chunk_id -> (doc_id, char_start, char_end, text)`` of the committed generation."""
    connection = catalog.connect(index_dir, read_only=True)
    try:
        rows = connection.execute("SELECT chunk_id, doc_id, char_start, char_end, text FROM chunks").fetchall()
    finally:
        connection.close()
    return {row[0]: (row[1], row[2], row[3], row[4]) for row in rows}


def generation_state(index_dir: Path) -> tuple[int, dict[int, list[Any]], list[str]]:
    """The committed generation, its chunks as ``id -> [doc_id, start, end, text sha]``, and offset errors."""
    connection = catalog.connect(index_dir, read_only=True)
    try:
        number = int(catalog.read_meta(connection)["generation"])
        rows = connection.execute(
            "SELECT c.chunk_id, c.doc_id, c.char_start, c.char_end, c.text, d.text "
            "FROM chunks c JOIN documents d USING (doc_id)"
        ).fetchall()
    finally:
        connection.close()
    errors = [f"chunk {r[0]}: text is not document[{r[2]}:{r[3]}]" for r in rows if r[5][r[2] : r[3]] != r[4]]
    return number, {r[0]: [r[1], r[2], r[3], _sha(r[4])] for r in rows}, errors


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- subprocess: the writer that gets killed


def _marker(stage: str) -> None:
    print(f"stage {stage}", flush=True)


def _install_slow_steps(pause: float) -> None:
    """Wrap the pipeline's steps and the commit protocol's publish step to print a marker and take a little time,
    so random kills land inside each: one wrapper per pipeline step, and one per stage of publishing an artifact
    (staged under its temporary name; renamed into place), whatever the artifact."""
    import citeline.lexical.segments
    import citeline.vectors.segments
    from citeline.ingest import pipeline

    citeline.lexical.segments.MERGE_WIDTH = WRITER_MERGE_WIDTH
    citeline.lexical.segments.COMPACT_DELETED = WRITER_COMPACT_DELETED
    citeline.vectors.segments.MAX_DELTAS = WRITER_MAX_DELTAS

    def announce(owner: Any, name: str, stage: str | None, *, before: float = 0.0, after: float = 0.0) -> None:
        original = getattr(owner, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if stage is not None:
                _marker(stage)
            time.sleep(before)
            result = original(*args, **kwargs)
            if stage is None:  # a publish step: its first argument names the artifact ("vectors", "delta", ...)
                _marker(f"{args[0]}-{'tmp' if name == 'write_staged' else 'written'}")
            time.sleep(after)
            return result

        setattr(owner, name, wrapped)

    parse = pipeline.parse_source

    def slow_parse(*args: Any, **kwargs: Any) -> Any:
        time.sleep(pause / 20)
        return parse(*args, **kwargs)

    pipeline.parse_source = slow_parse
    # parse and embed pause a little after their marker: a parse of one file or an embed of a few chunks takes a
    # millisecond or two, shorter than the parent's reaction, so a kill aimed at them landed in the next step.
    announce(pipeline, "parse_files", "parse", before=pause / 2)
    announce(pipeline, "plan", "plan")
    announce(pipeline, "chunk_documents", "chunk", after=pause)
    announce(pipeline, "embed", "embed", before=pause / 2)
    announce(pipeline, "commit_batch", "commit")
    commit_batch = pipeline.commit_batch

    def marked_commit_batch(index_dir: Any, batch: Any, run: Any) -> Any:
        committed = commit_batch(index_dir, batch, run)
        if run.status == "running":  # a commit of the run that is not its last: the next batch follows
            _marker("between-commits")
            time.sleep(2 * pause)  # longer than the parent's random delay (at most 1.5 pause): the kill lands here
        return committed

    pipeline.commit_batch = marked_commit_batch
    announce(files, "write_staged", None, after=pause)  # staged: written and fsynced, not yet renamed
    announce(files, "swap_in", None, after=pause)  # renamed into place; DuckDB has not committed yet
    announce(generation, "remove_orphans", "committed", before=pause)  # committed; old files still there


class SlowHashEmbedder(HashEmbedder):
    """The fake embedder, taking about a millisecond per text like a (very fast) real model."""

    def encode(self, texts: Any, *, batch_size: int | None = 64) -> Any:
        time.sleep(0.001 * len(texts))
        return super().encode(texts, batch_size=batch_size)


def worker_ingest(index_dir: Path, docs: Path, passes: int, pause: float, commit_every: int) -> None:
    """Ingest docs states 0..passes-1, committing about ``commit_every`` chunks at a time."""
    _install_slow_steps(pause)
    index = Index.open(index_dir, embedder=SlowHashEmbedder())
    for state in range(passes):
        _marker("docs")
        write_docs(docs, state)
        index.ingest([docs], commit_every=commit_every)
        print(f"done {state}", flush=True)


# ---------------------------------------------------------------- subprocess: a reader


def worker_read(index_dir: Path, stopfile: Path, log: Path) -> None:
    """Search in a loop until ``stopfile`` exists; log each result list with its generation, or the error."""
    rng = random.Random(os.getpid())
    lock_waits = 0
    import duckdb  # the module store.connection connects through (it imports it where it connects)

    connect = duckdb.connect

    def counting_connect(*args: Any, **kwargs: Any) -> Any:
        nonlocal lock_waits
        try:
            return connect(*args, **kwargs)
        except duckdb.IOException as exc:
            lock_waits += "lock" in str(exc).lower()  # store.connect retries these
            raise

    duckdb.connect = counting_connect
    index = Index.open(index_dir, embedder=HashEmbedder())
    with log.open("w") as out:
        queries = 0
        while not stopfile.exists():
            query = rng.choice(QUERIES)
            try:
                if queries % 25 == 24:  # now and then a fresh open and a status (new read-only connections)
                    index = Index.open(index_dir, embedder=HashEmbedder())
                    index.status()
                # Index.search, unrolled so that the generation the results come from is known.
                snapshot = index.snapshot()
                hits = snapshot.vectors.search(index.encode_query(query), rng.choice((1, 5, 50, 10_000)))
                results = fetch_passages(snapshot, hits, index.meta["model"])
                record: dict[str, Any] = {
                    "gen": snapshot.generation,
                    "hits": len(hits),
                    "results": [[r.chunk_id, r.doc_id, r.char_start, r.char_end, _sha(r.text)] for r in results],
                }
            except Exception as exc:
                record = {"error": f"{type(exc).__name__}: {exc}"}
            out.write(json.dumps(record) + "\n")
            queries += 1
        out.write(json.dumps({"lock_waits": lock_waits}) + "\n")


# ---------------------------------------------------------------- parent side


def _python() -> list[str]:
    return [sys.executable, str(Path(__file__).resolve())]


def _stage_counts(index_dir: Path, docs: Path, passes: int, pause: float, commit_every: int) -> Counter[str]:
    """The ``stage`` markers of one uninterrupted writer run, counted (the documents are written back as they were
    when the run ends, as the trials' re-runs do)."""
    create_index(index_dir)
    output = subprocess.run(
        [*_python(), "ingest", str(index_dir), str(docs), str(passes), str(pause), str(commit_every)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    write_docs(docs, passes - 1)
    return Counter(line.split()[1] for line in output.splitlines() if line.startswith("stage "))


def _read_lines(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line.strip())
    lines.put(None)


def check_index(index_dir: Path, reference: dict[int, str] | None = None) -> list[str]:
    """Everything that must hold for an index after a crash; returns the problems found."""
    problems: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        index = Index.open(index_dir, embedder=HashEmbedder())
    problems += [f"open had to repair: {w.message}" for w in caught if "rebuilt" in str(w.message)]
    report = index.verify()
    problems += report.problems
    if report.orphans:
        problems.append(f"orphans left after open: {report.orphans}")
    # A run killed between two of its commits left its row "running" (the next writer marks it "interrupted").
    runs = index.runs(limit=1000)
    committed = {run.generation for run in runs if run.status in ("succeeded", "partial", "running", "interrupted")}
    if report.generation != 0 and report.generation not in committed:
        problems.append(f"generation {report.generation} has no committed run")
    if reference is not None and any(run.status == "running" for run in runs):
        problems.append("a run is still marked running after the next run finished")
    results = index.search("river bridge soldier", k=20)
    if report.chunks and not results:
        problems.append("search returned nothing from a non-empty index")
    for result in results:
        if index.document_text(result.doc_id)[result.char_start : result.char_end] != result.text:
            problems.append(f"result {result.chunk_id} does not match its document's text")
    if reference is not None:
        chunks = {chunk_id: row[3] for chunk_id, row in chunk_table(index_dir).items()}
        if chunks != reference:
            problems.append(
                f"after the re-run: {len(set(chunks) ^ set(reference))} chunk ids differ from an uninterrupted run"
            )
    return problems


def run_kill_trials(
    workdir: Path,
    trials: int,
    *,
    passes: int = 3,
    pause: float = 0.02,
    seed: int = 7,
    stages: tuple[str, ...] = STAGES,
    commit_every: int | None = None,
    spread: float = 1.5,
) -> dict[str, Any]:
    """SIGKILL an ingesting subprocess at ``trials`` random points (cycling through ``stages``), then check and
    re-run the index each time. The writer commits ``commit_every`` chunks at a time [default: :data:`COMMIT_EVERY`
    when ``stages`` include ``between-commits``, else one commit a pass, which the segment stages' sequence of a
    delta, a compaction and a merge is designed for]. Each kill lands a random delay of up to ``spread`` pauses
    after its stage's marker: the default reaches into the next step too; a small spread kills inside the stage
    aimed at, so that a few trials (CI's) hit every stage they aim at."""
    if commit_every is None:
        commit_every = COMMIT_EVERY if "between-commits" in stages else 1_000_000
    rng = random.Random(seed)
    docs = workdir / "docs"
    write_docs(docs, passes - 1)
    reference_index = create_index(workdir / "reference")
    reference_index.ingest([docs])
    reference = {chunk_id: row[3] for chunk_id, row in chunk_table(reference_index.path).items()}
    figures: dict[str, Any] = {
        "trials": trials,
        "killed": 0,
        "finished_before_kill": 0,
        "survived": 0,
        "inconsistencies": 0,
        "killed_in": Counter(),
        "problems": [],
    }
    started = time.monotonic()
    # How often each stage occurs in an uninterrupted run: a kill aimed at an occurrence the run never reaches
    # would let the run finish (4 of 30 trials did, when the occurrence was drawn from the number of passes).
    occurrences = _stage_counts(workdir / "count", docs, passes, pause, commit_every)
    figures["stage_occurrences"] = {stage: occurrences[stage] for stage in stages}
    for trial in range(trials):
        index_dir = workdir / f"trial{trial}"
        create_index(index_dir)
        target = stages[trial % len(stages)]
        occurrence = 0 if target in SEGMENT_STAGES else rng.randrange(max(1, occurrences[target]))
        delay = rng.uniform(0, pause * spread)
        process = subprocess.Popen(
            [*_python(), "ingest", str(index_dir), str(docs), str(passes), str(pause), str(commit_every)],
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True).start()
        seen: Counter[str] = Counter()
        last = "start"
        killed = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=deadline - time.monotonic())
            except queue.Empty:
                break
            if line is None:
                break
            if line.startswith("stage "):
                last = line.split()[1]
                seen[last] += 1
                if last == target and seen[last] == occurrence + 1:
                    time.sleep(delay)
                    process.send_signal(signal.SIGKILL)
                    killed = True
                    # The step running when the signal landed: the last marker printed before the process died.
                    while (more := lines.get(timeout=10)) is not None:
                        if more.startswith("stage "):
                            last = more.split()[1]
                    break
        process.wait(timeout=30)
        if killed and process.returncode == -signal.SIGKILL:
            figures["killed"] += 1
            figures["killed_in"][last] += 1
        else:
            figures["finished_before_kill"] += 1
        problems = check_index(index_dir)
        # The re-run of the last state must give what an uninterrupted run gave.
        write_docs(docs, passes - 1)
        Index.open(index_dir, embedder=HashEmbedder()).ingest([docs])
        problems += check_index(index_dir, reference)
        if problems:
            figures["inconsistencies"] += len(problems)
            figures["problems"].append({"trial": trial, "target": target, "killed_in": last, "problems": problems})
        elif killed:
            figures["survived"] += 1
    figures["killed_in"] = dict(figures["killed_in"])
    figures["seconds"] = round(time.monotonic() - started, 1)
    return figures


def run_concurrent_readers(
    workdir: Path, *, generations: int = 6, readers: int = 1, pause_between: float = 0.05
) -> dict[str, Any]:
    """Readers search in subprocesses while this process ingests ``generations`` generations; check every result."""
    docs = workdir / "docs"
    write_docs(docs, 0)
    index = create_index(workdir / "ix")
    index.ingest([docs])
    states: dict[int, dict[int, list[Any]]] = {}
    offset_errors: list[str] = []
    number, chunks, errors = generation_state(index.path)
    states[number] = chunks
    offset_errors += errors
    stop = workdir / "stop"
    logs = [workdir / f"reader{n}.jsonl" for n in range(readers)]
    processes = [subprocess.Popen([*_python(), "read", str(index.path), str(stop), str(log)]) for log in logs]
    started = time.monotonic()
    try:
        time.sleep(1.0)  # let the readers start and search the first generation
        for state in range(1, generations + 1):
            write_docs(docs, state)
            index.ingest([docs])
            number, chunks, errors = generation_state(index.path)
            states[number] = chunks
            offset_errors += errors
            time.sleep(pause_between)
        time.sleep(0.3)
    finally:
        stop.touch()
        for process in processes:
            process.wait(timeout=60)
    write_seconds = time.monotonic() - started
    figures: dict[str, Any] = {
        "readers": readers,
        "generations": len(states),
        "queries": 0,
        "errors": 0,
        "inconsistencies": 0,
        "generations_seen": set(),
        "reader_lock_waits": 0,
        "problems": offset_errors[:5],
    }
    figures["inconsistencies"] += len(offset_errors)
    for log in logs:
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if "lock_waits" in record:
                figures["reader_lock_waits"] += record["lock_waits"]
                continue
            figures["queries"] += 1
            if "error" in record:
                figures["errors"] += 1
                figures["problems"].append(record["error"])
                continue
            seen = states.get(record["gen"])
            figures["generations_seen"].add(record["gen"])
            bad = (
                seen is None
                or len(record["results"]) != record["hits"]
                or any(
                    seen.get(chunk_id) != [doc_id, start, end, sha]
                    for chunk_id, doc_id, start, end, sha in record["results"]
                )
            )
            if bad:
                figures["inconsistencies"] += 1
                figures["problems"].append(f"generation {record['gen']}: results {record['results'][:2]} ...")
    figures["generations_seen"] = len(figures["generations_seen"])
    figures["processes_ok"] = all(process.returncode == 0 for process in processes)
    figures["queries_per_second"] = round(figures["queries"] / write_seconds, 1)
    figures["problems"] = figures["problems"][:10]
    return figures


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    if command == "ingest":
        worker_ingest(Path(arguments[0]), Path(arguments[1]), int(arguments[2]), float(arguments[3]), int(arguments[4]))
    elif command == "read":
        worker_read(Path(arguments[0]), Path(arguments[1]), Path(arguments[2]))
    else:
        raise SystemExit(f"unknown command {command!r}")
