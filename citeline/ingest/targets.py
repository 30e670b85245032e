"""The seam between planning a run and committing it: the ingest target.

:func:`citeline.ingest.pipeline.run` plans once, the same for every kind of index: the writer lock, discovery, the
files left out, the files not read again, parsing, the counts, the plan, the removal guard, the dry run. Then it
hands the plan (:class:`PlannedRun`) to the run's :class:`IngestTarget`, the committer, which writes it:

- ``pipeline.LocalCommits``: a plain index; the plan is chunked, embedded and committed about ``commit_every``
  chunks at a time, each commit a generation (through the run's ``Steps``: here, or as Prefect tasks);
- ``citeline.sharding.index.ShardCommits``: a sharded root; the parsed documents (or their keys) are routed to
  their shards, and each shard's part runs as a plain run of its own, the shards in parallel (processes, threads,
  Dask workers or Prefect tasks); then the root's manifest records the shards' generations.

A committer also answers what planning asks of the index (which files need not be read, the plan over its
catalogs, its generation for a dry run) and records a run that fails. How to add one: docs/architecture.md,
"The ingest target".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from citeline.ingest.options import IngestOptions
from citeline.ingest.planning import ParsedBatch, Plan
from citeline.ingest.progress import Reporter
from citeline.sources.discovery import Discovery
from citeline.sources.parsers import SourceFile
from citeline.store.ledger import RunSummary


@dataclass
class PlannedRun:
    """What the planning phase hands the committer: the run's identity, what it found, its plan and the ledger row
    it commits with (the counts of the plan and of the files left out)."""

    run_id: str
    started_at: str
    roots: list[str]
    discovery: Discovery
    plan: Plan
    summary: RunSummary
    options: IngestOptions
    reporter: Reporter
    #: the ledger rows committed so far, in order (the committer appends each): a run that fails is recorded at
    #: its last commit, with that commit's counts
    committed: list[RunSummary] = field(default_factory=list)


@runtime_checkable
class IngestTarget(Protocol):
    """What :func:`citeline.ingest.pipeline.run` plans against and commits through (one object per run: it may keep
    what its planning found for its commit). tests/index/test_protocol_conformance.py checks each at run time."""

    @property
    def path(self) -> Path:
        """The directory whose writer lock the run holds (the index, or a sharded root)."""
        ...

    @property
    def where(self) -> str:
        """What the plan's log line adds after its counts (``, over 4 shards``), or nothing."""
        ...

    def unchanged_files(self, roots: list[str], files: Sequence[SourceFile]) -> tuple[ParsedBatch, list[SourceFile]]:
        """A batch standing for the files that need not be read again (``fresh_files``, ``fresh_documents``: what
        the index holds of them) and the files that must be read (``citeline.ingest.freshness``)."""
        ...

    def plan(self, roots: list[str], discovery: Discovery, parsed: ParsedBatch) -> Plan:
        """The whole run's plan over the index (read-only; the run holds the writer lock)."""
        ...

    def generation(self) -> int:
        """The committed generation (a dry run reports it)."""
        ...

    def commit(self, run: PlannedRun) -> RunSummary:
        """Write ``run.plan`` and return the run's final ledger row (appending each row it commits to
        ``run.committed``). A stop (Ctrl-C, SIGTERM) commits what was embedded whole, then raises again."""
        ...

    def record_failure(
        self, run_id: str, started_at: str, roots: list[str], error: BaseException, committed: RunSummary | None
    ) -> RunSummary | None:
        """Record a run that raised ``error`` (``committed``: its last committed row); the row recorded, if any."""
        ...

    def prepare_queries(self) -> None:
        """Make later searches start fast (after the run, outside the writer lock)."""
        ...
