"""The ledger rows of an ingestion run (:func:`citeline.pipeline.run`): the row a run commits with, the row of a
dry run, of a run that failed or was refused, and the closing of runs a crash interrupted. The SQL is
``store.ledger``'s; this module decides what the rows say.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from citeline.errors import RemovalRefusedError
from citeline.planning import FileError, Plan
from citeline.store import catalog, generation, ledger
from citeline.store.ledger import RunSummary


def summarize(run_id: str, started_at: str, plan: Plan) -> RunSummary:
    """The ledger row for a run about to commit ``plan``."""
    return RunSummary(
        run_id=run_id,
        started_at=started_at,
        finished_at=None,
        status="partial" if plan.errors else "succeeded",
        roots=plan.roots,
        generation=None,
        added=plan.added,
        updated=plan.updated,
        unchanged=plan.unchanged,
        removed=plan.removed,
        failed=len(plan.errors),
        errors=[{"path": e.path, "reason": e.reason} for e in plan.errors],
    )


def close_interrupted(index_dir: Path) -> None:
    """Mark the ledger rows of runs that died between two of their commits as ``interrupted`` (the caller holds
    the writer lock, so no run of this index is going on)."""
    with contextlib.closing(catalog.connect(index_dir, read_only=False)) as connection:
        ledger.mark_interrupted(connection)


def record_failure(index_dir: Path, run_id: str, started_at: str, roots: list[str], error: BaseException) -> None:
    """Record a run that failed before committing (status ``refused`` for a :class:`RemovalRefusedError`, with
    one error per root); the index itself stays at its last generation."""
    errors = [{"path": "", "reason": f"{type(error).__name__}: {error}"}]
    if isinstance(error, RemovalRefusedError) and error.problems:
        errors = [{"path": path, "reason": reason} for path, reason in error.problems]
    run = RunSummary(
        run_id=run_id,
        started_at=started_at,
        finished_at=ledger.utc_now(),
        status="refused" if isinstance(error, RemovalRefusedError) else "failed",
        roots=roots,
        generation=None,
        errors=errors,
    )
    try:
        run.generation = int(generation.read_meta(index_dir)["generation"])
        generation.record(index_dir, run)
    except Exception:  # the original error matters more than the ledger row
        pass


def dry_run_summary(
    index_dir: Path, run_id: str, started_at: str, plan: Plan, objections: Sequence[FileError]
) -> RunSummary:
    """What a run of ``plan`` would record, without recording it (status ``dry-run``; the generation stays)."""
    summary = summarize(run_id, started_at, plan)
    summary.status = "dry-run"
    summary.generation = int(generation.read_meta(index_dir)["generation"])
    summary.errors += [
        {"path": problem.path, "reason": f"would be refused without --allow-removals: {problem.reason}"}
        for problem in objections
    ]
    return summary
