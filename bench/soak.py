"""A long soak of the model-based stateful test (issue 40, ``tests/_stateful.py``): random sequences of file edits
(every format, hostile contents included), ingests, Ctrl-Cs mid-run, removals and rebuilds on a real index,
checked after every step against an in-memory model, for a given time.

    python bench/soak.py --seconds 600 [--examples 10] [--steps 20]
    python bench/soak.py --seed 1234 [--examples 10] [--steps 20]     # replay one round

Each round draws ``--examples`` sequences from one seed; a failing round prints its seed and the shrunk failing
sequence, and the soak goes on with the next seed. ``--seed`` replays that round (same code, same options). The
generators of the known bugs (``KNOWN_BUGS`` in tests/_stateful.py) stay off unless ``CITELINE_STATEFUL_HUNT``
names them (``all``: every one). Exits 1 if any round failed. Run by hand; CI runs a bounded count
(``tests/index/test_stateful.py``).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _stateful import FIGURES, KNOWN_BUGS, run_machine


def main() -> None:
    """Run rounds until ``--seconds`` have passed (or the one ``--seed``); print the figures and failing seeds."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
            print(f"seed {seed}: FAILED ({type(exc).__name__}); replay: python bench/soak.py --seed {seed} "
                  f"--examples {args.examples} --steps {args.steps}", flush=True)  # fmt: skip
    figures = ", ".join(f"{key}={value}" for key, value in sorted(FIGURES.items()))
    print(f"\n{rounds} rounds in {time.monotonic() - started:.0f} s: {figures}; failed seeds: {failed or 'none'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
