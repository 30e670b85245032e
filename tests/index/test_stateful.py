"""The model-based stateful test of issue 40 (tests/_stateful.py): random sequences of file edits (every format,
hostile contents included), ingests, Ctrl-Cs mid-run, removals and rebuilds on a real index, checked after every
step against a plain in-memory model.

CI runs :data:`EXAMPLES` sequences of up to :data:`STEPS` steps, derandomized; the slow tier runs
:data:`SLOW_EXAMPLES` more from a fixed seed, and ``CITELINE_STATEFUL_EXAMPLES=500`` a longer hunt
(``bench/reliability.py soak`` runs it for a given time and prints the seed of each failure).
``CITELINE_STATEFUL_HUNT=all`` switches on the generators of the known bugs (``_stateful.KNOWN_BUGS``).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from _common import examples
from _stateful import FIGURES, KNOWN_BUGS, run_machine, signal_trial

#: 20 derandomized sequences under CI's ci-slow profile (the gate docs/reliability.md describes), 10 in the default
#: tier (tests/_common.py's ``examples``): the 20 were the longest test of the default tier, minutes on 2 cores.
EXAMPLES = int(os.environ.get("CITELINE_STATEFUL_EXAMPLES", examples(20)))
STEPS = int(os.environ.get("CITELINE_STATEFUL_STEPS", "12"))
SLOW_EXAMPLES = 100
#: The slow tier's draw: fixed, so that CI gates on a sequence anyone can replay; the random hunt is
#: ``bench/reliability.py soak``'s (a random slow tier in CI found the two-language Windows-1252 file, then blocked a
#: landing on what it found: that is a hunt's job, not a gate's).
SLOW_SEED = 20261206
#: Real-signal trials per signal (a subprocess each).
TRIALS = int(os.environ.get("CITELINE_STATEFUL_SIGNAL_TRIALS", "2"))


def _record(figures: dict[str, dict[str, object]], name: str, before: dict[str, int]) -> None:
    figures[name] = {key: FIGURES[key] - before.get(key, 0) for key in sorted(FIGURES)}
    figures[name]["known bugs switched off"] = ",".join(sorted(KNOWN_BUGS)) or "none"


@pytest.mark.hypothesis  # a Hypothesis state machine, not a @given test: CI's ci-slow run repeats it at its full count
def test_random_sequences_of_edits_and_runs_match_the_model(reliability_figures) -> None:
    before = dict(FIGURES)
    run_machine(EXAMPLES, STEPS, derandomize=True)
    _record(reliability_figures, "stateful model", before)


@pytest.mark.slow
def test_more_random_sequences_match_the_model(reliability_figures) -> None:
    before = dict(FIGURES)
    run_machine(SLOW_EXAMPLES, 20, seed=SLOW_SEED)
    _record(reliability_figures, "stateful model (slow)", before)


@pytest.mark.parametrize(
    "signum",
    [
        signal.SIGINT,
        pytest.param(
            signal.SIGTERM,
            marks=pytest.mark.skipif("sigterm" in KNOWN_BUGS, reason="known bug 'sigterm': SIGTERM loses the run"),
        ),
    ],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_real_signal_mid_run_keeps_old_or_new_and_the_next_run_completes(
    tmp_path: Path, signum: int, reliability_figures
) -> None:
    trials = []
    for seed in range(TRIALS):
        trial = signal_trial(tmp_path / f"trial{seed}", signum, seed)
        assert not trial["problems"], (seed, trial)
        assert trial["exit"] == 128 + signum, trial
        trials.append(trial)
    reliability_figures[f"stateful {signal.Signals(signum).name} trials"] = {
        "trials": len(trials),
        "documents kept": [trial["kept"] for trial in trials],
    }
