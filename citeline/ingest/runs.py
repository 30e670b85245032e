"""The ledger rows of an ingestion run (:func:`citeline.ingest.pipeline.run`): the row a run commits with, the row of a
dry run, of a run that failed or was refused, and the closing of runs a crash interrupted. The SQL is
``store.ledger``'s; this module decides what the rows say.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from citeline.errors import RemovalRefusedError
from citeline.ingest import stopping
from citeline.ingest.planning import FileReport, Plan
from citeline.store import catalog, generation, ledger
from citeline.store.ledger import RunSummary


@dataclass
class RemovalSummary(RunSummary):
    """A removal's ledger row, and the documents it removed (or, in a dry run, would remove): ``doc_id``,
    ``source_path``, ``name`` (the path, ``path#record_id`` for one record of a file) and ``title`` each. The
    ledger keeps the counts and the selectors, not this list."""

    documents: list[dict[str, str]] = field(default_factory=list)


def summarize(run_id: str, started_at: str, plan: Plan) -> RunSummary:
    """The ledger row for a run about to commit ``plan`` (a :class:`RemovalSummary` for an explicit removal's)."""
    row = RunSummary(
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
    if plan.removing:
        return RemovalSummary(**vars(row), documents=list(plan.removing))
    return row


def close_interrupted(index_dir: Path) -> None:
    """Mark the ledger rows of runs that died between two of their commits as ``interrupted`` (the caller holds
    the writer lock, so no run of this index is going on)."""
    with contextlib.closing(catalog.connect(index_dir, read_only=False)) as connection:
        ledger.mark_interrupted(connection)


def record_failure(
    index_dir: Path,
    run_id: str,
    started_at: str,
    roots: list[str],
    error: BaseException,
    committed: RunSummary | None = None,
) -> RunSummary | None:
    """Record a run that failed (status ``refused`` for a :class:`RemovalRefusedError`, with one error per root;
    ``interrupted`` for a Ctrl-C or stop signal (``stopping.is_stop``), saying what was kept); the index stays at
    the run's last commit, whose row (``committed``, if any) keeps its counts. Returns the row recorded (None if
    it could not be)."""
    errors = [{"path": "", "reason": f"{type(error).__name__}: {error}"}]
    status = "failed"
    if isinstance(error, RemovalRefusedError):
        status = "refused"
        errors = [{"path": path, "reason": reason} for path, reason in error.problems] or errors
    elif stopping.is_stop(error):
        status = "interrupted"
        kept = "nothing was committed"
        if committed is not None:
            kept = f"kept what it committed: {committed.added} added and {committed.updated} updated documents"
        errors = [{"path": "", "reason": f"interrupted ({stopping.describe(error)}); {kept}; run again to finish"}]
    run = RunSummary(run_id=run_id, started_at=started_at, finished_at=None, status="", roots=roots, generation=None)
    if committed is not None:
        run = replace(committed, errors=committed.errors + errors)
    else:
        run.errors = errors
    run.finished_at = ledger.utc_now()
    run.status = status
    run.failed = len(run.errors) - (status == "interrupted") if committed is not None else 0
    try:
        run.generation = int(generation.read_meta(index_dir)["generation"])
        generation.record(index_dir, run)
    except Exception:  # the original error matters more than the ledger row
        return None
    return run


def dry_run_summary(
    index_dir: Path, run_id: str, started_at: str, plan: Plan, objections: Sequence[FileReport]
) -> RunSummary:
    """What a run of ``plan`` would record, without recording it (status ``dry-run``; the generation stays)."""
    return dry_run_row(int(generation.read_meta(index_dir)["generation"]), run_id, started_at, plan, objections)


def dry_run_row(
    at_generation: int, run_id: str, started_at: str, plan: Plan, objections: Sequence[FileReport]
) -> RunSummary:
    """:func:`dry_run_summary` of an index (or sharded root) whose committed generation is ``at_generation``."""
    summary = summarize(run_id, started_at, plan)
    summary.status = "dry-run"
    summary.generation = at_generation
    summary.errors += [
        {"path": problem.path, "reason": f"would be refused without --allow-removals: {problem.reason}"}
        for problem in objections
    ]
    return summary
