"""Crash trials (the system tier): SIGKILL a writer at chosen points of an ingest, of publishing segments and of a
removal; every index opens at a committed generation, passes its checks, and a re-run gives what an uninterrupted run
gives. The harnesses are tests/_reliability.py and tests/_removal_trials.py; CI runs one trial a stage, and
``python bench/reliability.py trials`` runs the full counts and prints their figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _reliability import SEGMENT_STAGES, run_kill_trials

#: CI's kill trials: one in each of these stages (the pipeline's steps and the commit protocol's points), landing
#: inside it (a small spread). The full count, with kills reaching into the following step too, is
#: bench/reliability.py's (30 trials here, with the removal trials, took 222 s of every CI run; same checks).
KILL_STAGES = ("parse", "embed", "commit", "between-commits", "vectors-written", "bm25-tmp", "committed")
KILL_TRIALS = len(KILL_STAGES)


@pytest.mark.slow
def test_sigkill_at_random_points_never_loses_or_corrupts_the_index(tmp_path: Path, reliability_figures) -> None:
    figures = run_kill_trials(tmp_path, KILL_TRIALS, stages=KILL_STAGES, spread=0.2)
    reliability_figures["kill trials"] = figures
    assert figures["problems"] == [], json.dumps(figures["problems"], indent=1)
    assert figures["killed"] >= KILL_TRIALS
    # Every stage of the pipeline and of the commit protocol was hit at least once.
    assert set(figures["killed_in"]) >= {
        *("parse", "embed", "commit", "between-commits", "vectors-written", "bm25-tmp", "committed")
    }
    assert figures["survived"] == figures["killed"]


@pytest.mark.slow
def test_sigkill_while_publishing_segments_never_loses_or_corrupts_the_index(tmp_path: Path) -> None:
    # One a stage; bench/reliability.py trials --segment-trials runs more.
    figures = run_kill_trials(tmp_path, len(SEGMENT_STAGES), stages=SEGMENT_STAGES, spread=0.5)
    assert figures["problems"] == []
    killed_in = set(figures["killed_in"])
    assert killed_in >= {"delta-written", "merge-written", "compaction-written"}
    assert killed_in >= {"vector-merge-written", "vector-compaction-written"}
    assert figures["survived"] == figures["killed"] >= len(SEGMENT_STAGES)


@pytest.mark.slow
def test_sigkill_during_a_removal_leaves_it_undone_or_done(tmp_path: Path, reliability_figures) -> None:
    from _removal_trials import STAGES, run_removal_kill_trials

    figures = run_removal_kill_trials(tmp_path, len(STAGES))  # one a stage; bench/reliability.py runs more
    reliability_figures["removal kill trials"] = figures
    assert figures["problems"] == [], json.dumps(figures["problems"], indent=1)
    assert figures["killed"] >= len(STAGES) and figures["survived"] == figures["killed"]
    assert set(figures["killed_in"]) >= {"select", "vectors-written", "bm25-tmp", "committed"}
    assert set(figures["states"]) == {"before", "after"}  # killed before and after the commit point
