"""Cold ``citeline search`` cost, CPU seconds (user + sys of the whole process, from ``wait4``), of source trees side by
side: runs interleaved, so the shared machine's noise falls on every tree alike.

    python bench/cold_search.py --index DIR [--tree PATH ...] [--runs 15] [--query "levee"]

Each ``--tree`` is a checkout put first on ``PYTHONPATH`` (default: this one), e.g. ``git archive HEAD~3 | tar -x -C
/tmp/base`` for a before/after. Prints the median and min CPU-s and wall s of each. Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True)
    parser.add_argument("--tree", action="append", type=Path)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--query", default="levee")
    args = parser.parse_args()
    trees = args.tree or [REPO]
    cpu: dict[Path, list[float]] = {tree: [] for tree in trees}
    wall: dict[Path, list[float]] = {tree: [] for tree in trees}
    for _ in range(args.runs):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
            command = [sys.executable, "-m", "citeline.cli.main", "search", args.query, "--index", args.index]
            start = time.perf_counter()
            process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            err = process.stderr.read()  # type: ignore[union-attr]
            _, status, usage = os.wait4(process.pid, 0)
            wall[tree].append(time.perf_counter() - start)
            if status:
                raise SystemExit(f"{tree}: exit status {status}: {err.decode()[-500:]}")
            cpu[tree].append(usage.ru_utime + usage.ru_stime)
    for tree in trees:
        print(
            f"{tree}: CPU-s median {statistics.median(cpu[tree]):.3f} min {min(cpu[tree]):.3f}; "
            f"wall s median {statistics.median(wall[tree]):.3f} ({args.runs} runs)"
        )


if __name__ == "__main__":
    main()
