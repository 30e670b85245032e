"""Peak memory of an ingest run per hostile kind: each kind of tests/_hostile.py alone beside two ordinary files,
against the same run without it (the real CLI in a child process, the HashEmbedder as its model).

    python bench/hostile.py [KIND ...]

prints one row per kind: the child's peak RSS, how far above the run without the file, seconds, exit status and
what the run said about the file. The figures are in docs/reliability.md ("Hostile files").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _hostile import MEMORY_BOUND, Outcome, cases, measured_ingest, neighbours


def said(outcome: Outcome, names: list[str]) -> str:
    """The first line of the run's output naming one of ``names``, shortened ("" if none)."""
    for line in outcome.output.splitlines():
        for name in names:
            if f"/{name}: " in line:
                return line.split(f"/{name}: ", 1)[1][:90]
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kinds", nargs="*", help="kinds to run [default: all]")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a run may take")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        neighbours(work / "baseline")
        baseline = measured_ingest(work / "baseline-index", work / "baseline")
        print(f"baseline (two ordinary files): peak {baseline.peak >> 20} MiB, {baseline.seconds:.1f} s")
        print("| kind | peak RSS | above baseline | seconds | exit | what the run said |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        worst = 0
        for case in cases(bench=True):
            if args.kinds and case.name not in args.kinds:
                continue
            folder = work / case.name
            neighbours(folder)
            names = case.build(folder)
            try:
                run = measured_ingest(work / f"{case.name}-index", folder, timeout=args.timeout)
            except AssertionError:
                print(f"| {case.name} | | | > {args.timeout:g} | killed | (timed out) |", flush=True)
                continue
            above = run.peak - baseline.peak
            worst = max(worst, above)
            print(
                f"| {case.name} | {run.peak >> 20} MiB | {above >> 20} MiB | {run.seconds:.1f} | {run.status} | "
                f"{said(run, names) or '(indexed or skipped)'} |",
                flush=True,
            )
        print(f"largest: {worst >> 20} MiB above the baseline (bound: {MEMORY_BOUND >> 20} MiB)")


if __name__ == "__main__":
    main()
