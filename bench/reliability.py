"""Crash and concurrency trials, longer than CI affords: SIGKILL an ingesting process at random points, and search
from reader processes while a writer commits generation after generation.

    python bench/reliability.py [--trials 100] [--generations 12] [--readers 3] [--seed 7]

Every kill is followed by checks (the index opens at a committed generation, FAISS and DuckDB hold the same chunk
ids and vectors, offsets are exact, search works, no orphan files) and a re-run that must give the same chunks as an
uninterrupted run. Readers check that every result list comes from exactly one committed generation. The harness is
``tests/_reliability.py``, the same code the test suite runs with fewer trials. Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _reliability import run_concurrent_readers, run_kill_trials


def main() -> None:
    """Run the trials and print their figures as JSON; exit 1 if any inconsistency was found."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100, help="SIGKILL trials")
    parser.add_argument("--generations", type=int, default=12, help="generations committed while readers search")
    parser.add_argument("--readers", type=int, default=3, help="reader processes")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="citeline-reliability-") as directory:
        work = Path(directory)
        (work / "kills").mkdir()
        (work / "reads").mkdir()
        kills = run_kill_trials(work / "kills", args.trials, seed=args.seed)
        reads = run_concurrent_readers(work / "reads", generations=args.generations, readers=args.readers)
    print(json.dumps({"kill_trials": kills, "readers_during_writes": reads}, indent=2))
    bad = kills["inconsistencies"] + reads["inconsistencies"] + reads["errors"]
    print(
        f"\n{kills['killed']} of {kills['trials']} writers killed (in {kills['killed_in']}), "
        f"{kills['survived']} indexes intact and re-run to the uninterrupted result; "
        f"{reads['queries']} queries by {reads['readers']} readers during {reads['generations']} generations, "
        f"{reads['errors']} errors; {bad} inconsistencies in all"
    )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
