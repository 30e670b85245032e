"""Reliability trials longer than CI affords, one subcommand each (`--help` after a subcommand gives its options).

    python bench/reliability.py trials --trials 100   # kill trials, readers during writes, fault classes
    python bench/reliability.py hostile [KIND ...]     # peak memory of an ingest per hostile kind
    python bench/reliability.py soak --seconds 3600    # the model-based stateful test for a given time
    python bench/reliability.py stop [--signal TERM]   # seconds from a stop signal to the exit of citeline ingest

Run by hand; not part of CI. Figures are in docs/reliability.md and docs/runs.md with their commands.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _faults import fault_table, run_fault_trials
from _hostile import MEMORY_BOUND, Case, Outcome, cases, measured_ingest, neighbours
from _object_store import SeaweedServer
from _reliability import SEGMENT_STAGES, run_concurrent_readers, run_kill_trials
from _removal_trials import run_removal_kill_trials
from _stateful import FIGURES, KNOWN_BUGS, run_machine
from _web_server import MiB, Route, WebServer, endless, gzip_bomb

WORDS = ["river", "bridge", "mill", "soldier", "harbour", "letter", "winter", "garden", "market", "lamp"]


# --- trials ----------------------------------------------------------------------------------------------------------

TRIALS_DOC = """\
Crash and concurrency trials, longer than CI affords: SIGKILL an ingesting process at random points, and search
from reader processes while a writer commits generation after generation.

    python bench/reliability.py trials [--trials 100] [--segment-trials 20] [--removal-trials 12] [--generations 12]
                                [--readers 3] [--seed 7] [--fault-rounds 3]

Every kill is followed by checks (the index opens at a committed generation, FAISS and DuckDB hold the same chunk
ids and vectors, offsets are exact, search works, no orphan files) and a re-run that must give the same chunks as an
uninterrupted run; kills while publishing lexical and vector segments (``--segment-trials``, cycling through
their ten stages) and during a removal (``--removal-trials``, ``tests/_removal_trials.py``) get the same checks.
CI (``tests/system/test_crash_trials.py``) runs one kill a stage of each; this runs the full counts. Readers check
that every result list comes from exactly one committed generation. The harness is ``tests/_reliability.py``, the
same code the test suite runs with fewer trials. Then the fault classes of issue 14
(``tests/_faults.py``): an empty root, an unreadable subfolder, deleted lock files, duplicate rows, a full disk
(a real tmpfs; needs root) and damaged files, each injected ``--fault-rounds`` times into a run and followed by a
recovery run, with the documents lost counted (must be 0). Run by hand; not part of CI.
"""


def trials_main() -> None:
    """Run the trials and print their figures as JSON; exit 1 if any inconsistency was found."""
    parser = argparse.ArgumentParser(description=TRIALS_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100, help="SIGKILL trials during ingests")
    parser.add_argument("--segment-trials", type=int, default=20, help="SIGKILL trials while publishing segments")
    parser.add_argument("--removal-trials", type=int, default=12, help="SIGKILL trials during removals")
    parser.add_argument("--generations", type=int, default=12, help="generations committed while readers search")
    parser.add_argument("--readers", type=int, default=3, help="reader processes")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--fault-rounds", type=int, default=3, help="rounds of each fault class")
    parser.add_argument("--faults-only", action="store_true", help="only the fault classes (no kill or reader trials)")
    args = parser.parse_args()
    if args.faults_only:
        sys.exit(_faults(args.fault_rounds))
    with tempfile.TemporaryDirectory(prefix="citeline-reliability-") as directory:
        work = Path(directory)
        (work / "kills").mkdir()
        (work / "reads").mkdir()
        (work / "segments").mkdir()
        (work / "removals").mkdir()
        kills = run_kill_trials(work / "kills", args.trials, seed=args.seed)
        segments = run_kill_trials(work / "segments", args.segment_trials, seed=args.seed, stages=SEGMENT_STAGES)
        removals = run_removal_kill_trials(work / "removals", args.removal_trials)
        reads = run_concurrent_readers(work / "reads", generations=args.generations, readers=args.readers)
    figures = {"kill_trials": kills, "segment_kill_trials": segments, "removal_kill_trials": removals}
    print(json.dumps({**figures, "readers_during_writes": reads}, indent=2, default=str))
    bad = sum(len(trials["problems"]) for trials in figures.values()) + reads["inconsistencies"] + reads["errors"]
    print(
        f"\n{kills['killed']} of {kills['trials']} writers killed (in {kills['killed_in']}), "
        f"{kills['survived']} indexes intact and re-run to the uninterrupted result; "
        f"segments: {segments['survived']} of {segments['killed']} kills survived (in {segments['killed_in']}); "
        f"removals: {removals['survived']} of {removals['killed']} (states {dict(removals['states'])}); "
        f"{reads['queries']} queries by {reads['readers']} readers during {reads['generations']} generations, "
        f"{reads['errors']} errors; {bad} inconsistencies in all"
    )
    sys.exit(1 if bad or _faults(args.fault_rounds) else 0)


def _faults(rounds: int) -> int:
    """Run the fault classes and print their table; returns 1 if a document was lost or a run crashed."""
    with tempfile.TemporaryDirectory(prefix="citeline-faults-") as directory:
        results = run_fault_trials(Path(directory), rounds=rounds)
    print("\n" + fault_table(results))
    return 1 if any(r.lost or r.completed != r.runs for r in results) else 0


# --- hostile ---------------------------------------------------------------------------------------------------------

HOSTILE_DOC = """\
Peak memory of an ingest run per hostile kind: each kind of tests/_hostile.py alone beside two ordinary files,
against the same run without it (the real CLI in a child process, the HashEmbedder as its model).

    python bench/reliability.py hostile [KIND ...] [--root local|http|s3]

prints one row per kind: the child's peak RSS, how far above the run without the file, seconds, exit status and
what the run said about the file. ``--root http`` serves each kind's files as web URLs (a local server in this
process, tests/_web_server.py) and adds the web's own attacks (a HEAD lying about the size before an endless chunked
body, a gzip bomb, a redirect to an endless body); ``--root s3`` puts them in a SeaweedFS server it starts
(tests/_object_store.py). The figures are in docs/reliability.md ("Hostile files", "Remote roots").
"""


def said(outcome: Outcome, names: list[str]) -> str:
    """The first line of the run's output naming one of ``names``, shortened ("" if none)."""
    for line in outcome.output.splitlines():
        for name in names:
            if f"/{name}: " in line:
                return line.split(f"/{name}: ", 1)[1][:90]
    return ""


#: The web's own hostile answers (``--root http``): kind -> how to serve it.
WEB_KINDS = ("web-lying-head", "web-gzip-bomb", "web-redirect-to-endless")


def _web_attack(web: WebServer, kind: str) -> str:
    # Serve one of WEB_KINDS; the path it is served at.
    text = {"Content-Type": "text/plain"}
    if kind == "web-lying-head":
        web.routes["/attack.txt"] = Route(200, text, head={"Content-Length": "100"}, body=endless())
    elif kind == "web-gzip-bomb":
        web.routes["/attack.txt"] = Route(200, {**text, "Content-Encoding": "gzip"}, body=gzip_bomb(1024 * MiB))
    else:
        web.routes["/attack.txt"] = Route(302, {"Location": "/endless.txt"}, body=b"")
        web.routes["/endless.txt"] = Route(200, text, head={"Content-Length": "10"}, body=endless())
    return "/attack.txt"


class _Roots:
    """Where a folder's files are read from: the folder itself, web URLs, or objects of a SeaweedFS server."""

    def __init__(self, kind: str, work: Path) -> None:
        self.kind = kind
        self.web = WebServer() if kind == "http" else None
        self.store = SeaweedServer(work / "seaweedfs") if kind == "s3" else None

    def of(self, folder: Path) -> list[str]:
        """The roots (and storage options) that read ``folder``'s files."""
        if self.web is not None:
            self.web.routes.clear()
            return self.web.serve_folder(folder)
        if self.store is not None:
            prefix = folder.name
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    self.store.upload(f"{prefix}/{path.relative_to(folder).as_posix()}", path)
            return [f"s3://{self.store.bucket}/{prefix}", *self.store.option_pairs()]
        return [str(folder)]

    def close(self) -> None:
        """Stop the servers."""
        if self.web is not None:
            self.web.stop()
        if self.store is not None:
            self.store.stop()


def hostile_main() -> None:
    parser = argparse.ArgumentParser(description=HOSTILE_DOC.splitlines()[0])
    parser.add_argument("kinds", nargs="*", help="kinds to run [default: all]")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a run may take")
    parser.add_argument(
        "--root", choices=("local", "http", "s3"), default="local", help="where the files are read from"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        roots = _Roots(args.root, work)
        try:
            _run(args, work, roots)
        finally:
            roots.close()


def _run(args: argparse.Namespace, work: Path, roots: _Roots) -> None:
    neighbours(work / "baseline")
    baseline = measured_ingest(work / "baseline-index", *roots.of(work / "baseline"))  # type: ignore[arg-type]
    print(f"baseline (two ordinary files, {args.root}): peak {baseline.peak >> 20} MiB, {baseline.seconds:.1f} s")
    print("| kind | peak RSS | above baseline | seconds | exit | what the run said |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    worst = 0
    kinds: list[tuple[str, Case | None]] = [
        (case.name, case) for case in cases(bench=True, remote=args.root != "local")
    ]
    if roots.web is not None:
        kinds += [(kind, None) for kind in WEB_KINDS]
    for name, case in kinds:
        if args.kinds and name not in args.kinds:
            continue
        folder = work / name
        neighbours(folder)
        names = case.build(folder) if case is not None else []
        where = roots.of(folder)
        if case is None and roots.web is not None:
            path = _web_attack(roots.web, name)
            where.append(roots.web.base + path)
            names = [path.lstrip("/")]
        try:
            run = measured_ingest(work / f"{name}-index", *where, timeout=args.timeout)  # type: ignore[arg-type]
        except AssertionError:
            print(f"| {name} | | | > {args.timeout:g} | killed | (timed out) |", flush=True)
            continue
        above = run.peak - baseline.peak
        worst = max(worst, above)
        print(
            f"| {name} | {run.peak >> 20} MiB | {above >> 20} MiB | {run.seconds:.1f} | {run.status} | "
            f"{said(run, names) or '(indexed or skipped)'} |",
            flush=True,
        )
    print(f"largest: {worst >> 20} MiB above the baseline (bound: {MEMORY_BOUND >> 20} MiB)")


# --- soak ------------------------------------------------------------------------------------------------------------

SOAK_DOC = """\
A long soak of the model-based stateful test (issue 40, ``tests/_stateful.py``): random sequences of file edits
(every format, hostile contents included), ingests, Ctrl-Cs mid-run, removals and rebuilds on a real index,
checked after every step against an in-memory model, for a given time.

    python bench/reliability.py soak --seconds 600 [--examples 10] [--steps 20]
    python bench/reliability.py soak --seed 1234 [--examples 10] [--steps 20]     # replay one round

Each round draws ``--examples`` sequences from one seed; a failing round prints its seed and the shrunk failing
sequence, and the soak goes on with the next seed. ``--seed`` replays that round (same code, same options). The
generators of the known bugs (``KNOWN_BUGS`` in tests/_stateful.py) stay off unless ``CITELINE_STATEFUL_HUNT``
names them (``all``: every one). Exits 1 if any round failed. Run by hand; CI runs a bounded count
(``tests/index/test_stateful.py``).
"""


def soak_main() -> None:
    """Run rounds until ``--seconds`` have passed (or the one ``--seed``); print the figures and failing seeds."""
    parser = argparse.ArgumentParser(description=SOAK_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=600, help="how long to soak")
    parser.add_argument("--seed", type=int, help="replay the round of this seed only")
    parser.add_argument("--examples", type=int, default=10, help="sequences a round")
    parser.add_argument("--steps", type=int, default=20, help="steps a sequence, at most")
    args = parser.parse_args()
    print(f"known bugs switched off: {', '.join(sorted(KNOWN_BUGS)) or 'none'}", flush=True)
    failed: list[int] = []
    started = time.monotonic()
    rounds = 0
    while rounds == 0 or (args.seed is None and time.monotonic() - started < args.seconds):
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
        rounds += 1
        try:
            run_machine(args.examples, args.steps, seed=seed)
            print(f"seed {seed}: passed", flush=True)
        except Exception as exc:
            failed.append(seed)
            traceback.print_exception(exc, limit=-3)
            print(f"seed {seed}: FAILED ({type(exc).__name__}); replay: python bench/reliability.py soak --seed {seed} "
                  f"--examples {args.examples} --steps {args.steps}", flush=True)  # fmt: skip
    figures = ", ".join(f"{key}={value}" for key, value in sorted(FIGURES.items()))
    print(f"\n{rounds} rounds in {time.monotonic() - started:.0f} s: {figures}; failed seeds: {failed or 'none'}")
    sys.exit(1 if failed else 0)


# --- stop ------------------------------------------------------------------------------------------------------------

STOP_DOC = """\
Seconds from a stop signal to the exit of the real ``citeline ingest`` (the real model), while parsing and while
embedding a first ingest: they must be well inside docker's default 10 s grace before SIGKILL (docs/runs.md).

    python bench/reliability.py stop [--signal TERM|INT] [--embed-after 110] [--parse-after 1]

Writes two folders in a temporary directory: 6,000 notes of 30 words (parsing takes a few seconds after discovery)
and 300 documents of 400 words (about 2,100 chunks: the first embed window of 1,024 texts is done after about 100 s
on 2 loaded cores). Each run is ``citeline ingest FOLDER --index IX -v``; the signal is sent ``--parse-after``
seconds after its ``discovered`` log line, or ``--embed-after`` seconds after its ``plan:`` line. Prints the exit
status, the seconds from the signal to the exit, the last line and the documents kept.
"""


def folders(root: Path) -> tuple[Path, Path]:
    """The many-notes folder (for parsing) and the long-documents folder (for embedding)."""
    rng = random.Random(3)
    many, long = root / "many", root / "long"
    many.mkdir()
    long.mkdir()
    for number in range(6000):
        (many / f"n{number:05d}.md").write_text(f"# Note {number}\n\n" + " ".join(rng.choices(WORDS, k=30)))
    for number in range(300):
        words = " ".join(f"{rng.choice(WORDS)}{rng.randrange(1000)}" for _ in range(400))
        (long / f"d{number:03d}.md").write_text(f"# Doc {number}\n\n{words}")
    return many, long


def stop(folder: Path, index: Path, signum: int, marker: str, delay: float) -> dict[str, object]:
    """Run a first ingest of ``folder``; ``delay`` seconds after its log line containing ``marker``, send ``signum``."""
    started = time.monotonic()
    process = subprocess.Popen(
        ["citeline", "ingest", str(folder), "--index", str(index), "-v"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if marker in line:
            break
    time.sleep(delay)
    process.send_signal(signum)
    sent = time.monotonic()
    _, rest = process.communicate(timeout=120)
    seconds = time.monotonic() - sent
    status = subprocess.run(
        ["citeline", "status", "--index", str(index), "--json"], capture_output=True, text=True, check=True
    )
    return {
        "signal": signal.Signals(signum).name,
        "while": "parsing" if marker == "discovered" else "embedding",
        "into_run": round(sent - started, 1),
        "exit": process.returncode,
        "seconds": round(seconds, 2),
        "documents_kept": json.loads(status.stdout)["documents"],
        "last_line": (rest.strip().splitlines() or [""])[-1],
    }


def stop_main() -> None:
    """Measure both stages for the signal asked for; print one JSON line each."""
    parser = argparse.ArgumentParser(description=STOP_DOC.split("\n\n")[0])
    parser.add_argument("--signal", default="TERM", choices=["TERM", "INT"])
    parser.add_argument("--embed-after", type=float, default=110.0)
    parser.add_argument("--parse-after", type=float, default=1.0)
    args = parser.parse_args()
    signum = getattr(signal, f"SIG{args.signal}")
    with tempfile.TemporaryDirectory() as work:
        many, long = folders(Path(work))
        for folder, marker, delay, name in (
            (many, "discovered", args.parse_after, "p"),
            (long, "plan:", args.embed_after, "e"),
        ):
            print(json.dumps(stop(folder, Path(work) / f"ix-{name}", signum, marker, delay)), flush=True)


COMMANDS = {
    "trials": trials_main,
    "hostile": hostile_main,
    "soak": soak_main,
    "stop": stop_main,
}


if __name__ == "__main__":
    import _subcommands  # bench/ is on sys.path when this file runs as a script

    _subcommands.run(__doc__, COMMANDS)
