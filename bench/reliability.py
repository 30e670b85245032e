"""Crash and concurrency trials, longer than CI affords: SIGKILL an ingesting process at random points, and search
from reader processes while a writer commits generation after generation.

    python bench/reliability.py [--trials 100] [--segment-trials 20] [--removal-trials 12] [--generations 12]
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

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _faults import fault_table, run_fault_trials
from _reliability import SEGMENT_STAGES, run_concurrent_readers, run_kill_trials
from _removal_trials import run_removal_kill_trials


def main() -> None:
    """Run the trials and print their figures as JSON; exit 1 if any inconsistency was found."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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


if __name__ == "__main__":
    main()
