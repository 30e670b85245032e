"""Sharded indexes: one index root holding a manifest (``shards.json``) and N shard directories, each a complete
citeline index (its own DuckDB, vectors, lexical segments, generations and writer lock).

- **Routing**: a document lives in shard ``blake2b-64(doc_id) mod N`` (:func:`shard_of`). The doc id is
  ``citeline.sources.parsers.doc_id_of``: a hash of the source root and the file (and the record, for JSONL), never of
  the content, so a changed document stays in its shard and a re-run commits only in the shards whose documents
  changed (the others find everything unchanged and commit no new generation).
- **Ingestion** (:meth:`ShardedIndex.ingest`): discovery and parsing once, here; each shard's documents then go
  through ``pipeline.run`` (plan, chunk, embed, commit) under that shard's own writer lock, the shards in
  parallel: worker processes (``parallel="processes"``), threads, or the workers of a Dask cluster
  (``dask_address`` or ``dask_workers``; shards on a filesystem every worker sees). The removal guard is decided
  once over all shards. The root's own writer lock serializes sharded runs.
- **Consistency**: every shard commits atomically (``store.generation``), so a crash or a killed worker leaves
  every shard at a committed generation; the manifest then records each shard's generation after the run (and
  the run), published crash-safely through ``store.files.publish``. A re-run redoes only the shards that did not
  commit. A query reads one committed generation per shard (:mod:`citeline.sharding.search`): while a run is
  committing, some shards may already show it and others not yet, each document whole at one version.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from citeline.errors import (
    CitelineError,
    IndexCorruptError,
    IndexLockedError,
    IndexMismatchError,
    IndexNotFoundError,
    IndexRepairedWarning,
    SettingsError,
)
from citeline.index import SHARDS_MANIFEST, Index, Layout, register_layout
from citeline.ingest import pipeline, stopping
from citeline.ingest.options import IngestOptions, Placement
from citeline.ingest.planning import ParsedBatch, Plan
from citeline.ingest.runs import RemovalSummary
from citeline.ingest.targets import PlannedRun
from citeline.model.embedding import Embedder, SentenceTransformerEmbedder
from citeline.query.results import SearchResult, answer_documents
from citeline.sharding.freshness import (
    RECOVERED,
    Freshness,
    merged_plan,
    skipping_is_safe,
    unchanged_files,
    with_fresh,
)
from citeline.sharding.remote import DaskShards, ShardWorkers, parse_shard_workers
from citeline.sharding.reports import ShardedStatus, each_shard, merged_report, merged_status, not_here
from citeline.sharding.runs import ShardJob, WorkerSteps, dask_client, execute, execute_on, idle_run
from citeline.sharding.search import ShardedSnapshot
from citeline.sharding.worker import shard_check, shard_status
from citeline.sources.discovery import Discovery
from citeline.sources.parsers import SourceFile
from citeline.store import catalog, files, ledger
from citeline.store.connection import MAX_ROWS, check_rows
from citeline.store.documents import DocumentDetail, DocumentInfo, FacetCounts, read_documents
from citeline.store.filters import Filters
from citeline.store.ledger import RunSummary
from citeline.store.locks import writer_lock
from citeline.store.verify import VerifyReport

MANIFEST_FORMAT = 1
ROUTING = "blake2b-64(doc_id) mod shards"
#: Runs the manifest keeps (each shard's own ledger keeps all of its runs).
RUNS_KEPT = 200
#: How a run's shard jobs are run: each job's summary, or the exception that stopped it, in order.
RunJobs = Callable[[list[ShardJob]], list[RunSummary | BaseException]]


def shard_of(doc_id: str, shards: int) -> int:
    """The shard a document lives in: its id's 64-bit BLAKE2b hash modulo the number of shards (stable across
    processes and machines, unlike Python's ``hash``)."""
    return int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "big") % shards


def shard_dir(root: Path, number: int) -> Path:
    """Where shard ``number`` of ``root`` lives."""
    return root / f"shard-{number:03d}"


@dataclass
class Manifest:
    """``shards.json``: the number of shards, the routing rule, each shard's generation after the last run, and
    the last runs (each with the generation set it left)."""

    shards: int
    generations: list[int]
    runs: list[dict[str, Any]] = field(default_factory=list)
    routing: str = ROUTING
    format: int = MANIFEST_FORMAT

    @classmethod
    def read(cls, root: Path) -> Manifest:
        """Read ``root``'s manifest; a damaged one is one :class:`IndexCorruptError` line."""
        path = root / SHARDS_MANIFEST
        try:
            data = json.loads(path.read_text())
            manifest = cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
        except (OSError, ValueError, TypeError) as exc:
            raise IndexCorruptError(f"{path} cannot be read ({exc}); restore it from a backup") from exc
        if manifest.format != MANIFEST_FORMAT or manifest.routing != ROUTING or manifest.shards < 1:
            raise IndexMismatchError(f"{path} is a shard manifest this citeline does not read (format, routing)")
        return manifest

    def write(self, root: Path) -> None:
        """Publish the manifest crash-safely (a crash leaves the old one or the new one)."""
        text = json.dumps(asdict(self), indent=1)
        files.publish("shards-manifest", root / SHARDS_MANIFEST, lambda path: _write_text(path, text))


def _write_text(path: Path, text: str) -> None:
    path.write_text(text)


def route(parsed: ParsedBatch, shards: int) -> list[ParsedBatch]:
    """Each shard's part of the parsed documents. Errors and incomplete files go to every shard: they keep the
    stored documents of the files they name, wherever those live. So do the files read whole: each shard records
    their stat, and drops the rows of those it holds no document of (``file_stats.forget_orphans``). Given
    texts go to their shards as parsed documents do; a removal's selectors go to every shard (the plan narrows
    each to what it holds: ``sharding.freshness.merged_plan``)."""
    parts = [
        ParsedBatch(
            errors=list(parsed.errors),
            incomplete=list(parsed.incomplete),
            read_files=list(parsed.read_files),
            given=parsed.given,
            removing=list(parsed.removing),
        )
        for _ in range(shards)
    ]
    for document in parsed.documents:
        parts[shard_of(document.doc_id, shards)].documents.append(document)
    for key in parsed.keys:  # documents whose texts the run let go: the shard's run parses their files again
        parts[shard_of(key.doc_id, shards)].keys.append(key)
    for doc_id in parsed.kept_doc_ids:
        parts[shard_of(doc_id, shards)].kept_doc_ids.append(doc_id)
    return parts


def merge_runs(run_id: str, started_at: str, roots: list[str], plan: Plan, outcomes: Sequence[Any]) -> RunSummary:
    """The run's ledger row from every shard's (failed shards named in its errors)."""
    summary = pipeline.summarize(run_id, started_at, plan)
    summary.finished_at = ledger.utc_now()
    summary.roots = roots
    done = [outcome for outcome in outcomes if isinstance(outcome, RunSummary)]
    summary.chunks_embedded = sum(run.chunks_embedded for run in done)
    summary.chunks_reused = sum(run.chunks_reused for run in done)
    # What a shard's own run found beyond the plan's errors (which every shard's plan holds): documents its catalog
    # refused at commit (they fail alone: pipeline._commit_isolating), files that changed during the run.
    known = {(error["path"], error["reason"]) for error in summary.errors}
    for run in done:
        for error in run.errors:
            if (error["path"], error["reason"]) not in known:
                known.add((error["path"], error["reason"]))
                summary.errors.append(error)
    summary.failed = len(summary.errors)
    if summary.errors and summary.status == "succeeded":
        summary.status = "partial"
    failed = [(number, outcome) for number, outcome in enumerate(outcomes) if not isinstance(outcome, RunSummary)]
    if not failed:  # what the shards committed, the refused documents not counted
        summary.added, summary.updated = sum(run.added for run in done), sum(run.updated for run in done)
    summary.errors += [{"path": f"shard-{n:03d}", "reason": f"{type(e).__name__}: {e}"} for n, e in failed]
    if failed:
        summary.status = "failed"
    return summary


class ShardsFailedError(CitelineError):
    """Some shards of a run failed; the others' commits stand (one line naming each failed shard)."""

    def __init__(self, root: Path, failed: Sequence[tuple[int, BaseException]], shards: int):
        self.shards = [number for number, _ in failed]
        reasons = "; ".join(f"{shard_dir(root, n).name}: {type(e).__name__}: {_one_line(e)}" for n, e in failed)
        super().__init__(
            f"{len(failed)} of {shards} shards of {root} failed ({reasons}); the other shards' commits stand: run "
            "the same ingest again to finish"
        )


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or "no message"


class ShardedIndex(Index):
    """A sharded index root, with :class:`Index`'s vocabulary (see the module docstring); ``generation`` is the
    sum of the shards' generations, which grows whenever any shard commits. ``Index.create(path, shards=N)`` and
    ``Index.open(path)`` of a root holding ``shards.json`` return one (:func:`create_root`, :func:`open_root`), as
    do ``ShardedIndex.create`` and ``ShardedIndex.open``."""

    layout = SHARDS_MANIFEST

    def __init__(
        self,
        root: Path,
        manifest: Manifest,
        shards: list[Index],
        embedder: Embedder | None = None,
        dask: DaskShards | None = None,
    ):
        super().__init__(root, shards[0].meta if shards else dask.meta(shard_dir(root, 0)) if dask else {}, embedder)
        self.manifest = manifest
        self.shards = shards
        self.dask = dask  #: searches run as tasks on the Dask workers that hold the shards (``shard_remote``)
        self._sharded_snapshot: ShardedSnapshot | None = None

    def _local(self, command: str) -> list[Index]:
        """The shards opened here; one line when this client sees only the manifest (``shard_reports.not_here``)."""
        if not self.shards:
            raise not_here(self.path, command)
        return self.shards

    @property
    def shard_dirs(self) -> list[Path]:
        """The shards' directories, by number."""
        return [shard_dir(self.path, n) for n in range(self.manifest.shards)]

    # ---------------------------------------------------------------- writing

    def ingest(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        options: IngestOptions | None = None,
        parallel: str = "processes",
        dask_address: str | None = None,
        dask_workers: int | None = None,
        shard_workers: ShardWorkers = None,
        run_jobs: RunJobs | None = None,
        steps: pipeline.Steps | None = None,
        placement: Placement | None = None,
        **settings: Any,
    ) -> RunSummary:
        """:meth:`Index.ingest` over the shards, run in ``parallel`` (``"processes"``, ``"threads"`` or
        ``"serial"``), or on a Dask cluster (``dask_address``, or a local one of ``dask_workers`` processes), each
        shard's job on the worker ``shard_workers`` pins it to (``citeline.sharding.remote``), if any.

        The run is ``pipeline.run``'s, planned as a plain index's run is, then committed by :class:`ShardCommits`.
        On Dask the workers parse the files too (keys only come back: ``sharding.runs.WorkerSteps``), and each
        shard's run parses again the files of the documents it indexes, so no document's text passes through this
        process. ``run_jobs`` replaces how the shards' jobs run (the Prefect flow runs each as a task:
        ``citeline/orchestration/shards.py``);
        it returns each job's summary or the exception that stopped it, in order; ``steps`` replaces how discovery
        and parsing run (the flow's: its parse tasks on its task runner, keys only, as a plain flow run's).
        ``prepare_queries=False``: the caller prepares the query model itself (the flow does, in a task of its own).
        A shard that fails is named in
        the run's ledger row and in the :class:`ShardsFailedError` raised once the others' commits are recorded.
        ``settings`` are :class:`IngestOptions` fields, as :meth:`Index.ingest`'s keywords (with ``reporter`` and
        ``prepare_queries``). ``placement``: all of ``parallel``, ``dask_address``, ``dask_workers``,
        ``shard_workers`` and ``run_jobs`` at once, as :meth:`Index.ingest` takes it (given, it replaces them).
        """
        run_options = IngestOptions.of(options, **settings)  # checks every setting (Index.ingest's keywords)
        placement = placement or Placement(parallel, dask_address, dask_workers, shard_workers, run_jobs)
        parse_shard_workers(placement.shard_workers, self.manifest.shards)  # a bad entry: before any work
        with contextlib.ExitStack() as stack:
            # run_jobs runs the shards' jobs itself (the flow: on its own task runner, which is the Dask cluster's)
            client = None
            if placement.on_dask and not placement.run_jobs:
                client = stack.enter_context(dask_client(placement.dask_address, placement.dask_workers))
            steps = steps or (pipeline.Steps() if client is None else WorkerSteps(client))
            return self.run(paths, run_options, steps, committer=self.committer(steps, placement, client))

    @classmethod
    def unused_placement(cls, placement: Placement) -> list[str]:
        """Nothing: a root's shards run where ``placement`` says (:meth:`Index.unused_placement`)."""
        return []

    def committer(self, steps: pipeline.Steps, placement: Placement | None = None, client: Any = None) -> ShardCommits:
        """:class:`ShardCommits` with the shards' jobs where ``placement`` says (``client``: the Dask client
        :meth:`ingest` opened for it). Without one (``add_texts``, ``remove``): on threads of this process (one
        model for all of them, no worker processes to start for a batch of texts or a removal)."""
        self._local("ingest")  # one line when this client sees only the manifest
        placement = placement or Placement(parallel="threads")
        shard_workers = parse_shard_workers(placement.shard_workers, self.manifest.shards)  # before any work
        return ShardCommits(self, placement.parallel, client, shard_workers, placement.run_jobs,
                            on_dask=placement.on_dask)  # fmt: skip

    def remove(self, paths: Any = None, **selectors: Any) -> RemovalSummary:
        """:meth:`Index.remove`, the same run (one line when this client sees only the manifest)."""
        self._local("remove")
        return super().remove(paths, **selectors)

    @property
    def shared_embedder(self) -> Embedder | None:
        """The embedder this root was given (a test's, a caller's), which the shards' jobs share; None: the
        index's own model, which each worker process loads once."""
        return None if isinstance(self._embedder, SentenceTransformerEmbedder) else self._embedder

    def unchanged_files(self, found: Sequence[SourceFile]) -> Freshness:
        """The files no shard needs read (``citeline.sharding.freshness``), while the last run finished everywhere
        (else every file is read)."""
        self.manifest = Manifest.read(self.path)
        fresh = unchanged_files(self.shard_dirs, found)
        if skipping_is_safe(self.manifest.runs, self.manifest.generations, fresh.generations):
            return fresh
        return fresh.read_all()

    def record_interrupted(self, summary: RunSummary, idle: list[bool]) -> None:
        """Record in the manifest a run a stop interrupted: the shards' generations as they committed them, the
        run "interrupted" with what the shards' own rows of this run say they kept (the CLI's last line)."""
        kept = [run for part in self.shards for run in part.runs(1) if run.started_at >= summary.started_at]
        summary.added, summary.updated = sum(run.added for run in kept), sum(run.updated for run in kept)
        summary.finished_at = ledger.utc_now()
        before = [int(part.status().generation) for part in self.shards]
        summary.generation = self.record_run(summary, [None] * len(idle), [False] * len(idle), before)
        stopping.note_interrupted(summary, covers_earlier=True)

    def record_run(self, summary: RunSummary, outcomes: Sequence[Any], idle: list[bool], before: list[int]) -> int:
        """Write the manifest: each shard's committed generation now (an idle shard's is the one it had), and the
        run (a removal's without its list of documents); returns their sum."""
        now = zip(self.shards, idle, before, strict=True)
        generations = [was if nothing else int(part.status().generation) for part, nothing, was in now]
        self.manifest = Manifest.read(self.path)  # under the root's writer lock: the last writer's runs kept
        shard_runs = [
            outcome.run_id if isinstance(outcome, RunSummary) and outcome.run_id else None for outcome in outcomes
        ]
        self.manifest.generations = generations
        entry = {**summary.to_dict(), "generation": sum(generations), "generations": generations}
        entry.pop("documents", None)  # a removal's: the ledger keeps its counts and selectors, not the list
        self.manifest.runs = [*self.manifest.runs, {**entry, "shard_runs": shard_runs}][-RUNS_KEPT:]
        self.manifest.write(self.path)
        return sum(generations)

    def rebuild(self, *, wait: float | None = None) -> VerifyReport:
        """Rebuild every shard's derived files from its DuckDB (:meth:`Index.rebuild`), then verify."""
        with writer_lock(self.path, wait=wait):
            for part in self._local("rebuild"):
                part.rebuild(wait=wait)
            self.manifest = Manifest.read(self.path)
            self.manifest.generations = [int(part.status().generation) for part in self.shards]
            self.manifest.write(self.path)
        return self.verify()

    def verify(self) -> VerifyReport:
        """Every shard's invariants, and the root's own: every document in the shard its id routes to, and each
        shard at the generation the manifest recorded (a run stopped part way: run it again). Asked of the shards'
        Dask workers by a client that sees only the manifest (``shard_reports``)."""
        shards = self.manifest.shards

        def local(number: int, part: Index) -> tuple[VerifyReport, list[str]]:
            docs = [d.doc_id for d in part.documents()]
            return part.verify(), [doc_id for doc_id in docs if shard_of(doc_id, shards) != number]

        remote = functools.partial(shard_check, shards=shards, route=shard_of)
        live = self._recover_stopped_run()
        checked = each_shard(self.path, self.shards, self.dask, "verify", local, remote)
        self.manifest = Manifest.read(self.path)  # another process may have run since this one opened the root
        names = [directory.name for directory in self.shard_dirs]
        # While a run is going on its shards commit ahead of the manifest, which it writes when they are done.
        recorded = [report.generation for report, _ in checked] if live else self.manifest.generations
        return merged_report(self.path, names, checked, recorded)

    def _recover_stopped_run(self) -> bool:
        """A run killed between its shards' commits and its manifest (``kill -9``, a power cut) left every shard at
        a committed generation, some ahead of the manifest: nothing is lost, but ``verify`` said INCONSISTENT until
        the next complete run. With no run going on (the root's writer lock is free), record the shards'
        generations in the manifest with the stopped run, ``interrupted``, as a plain index's next writer marks
        its row, and warn; the next run reads every file again (``freshness.skipping_is_safe``), so a file
        committed in some shards and not in others is indexed whole. Returns True when a run is going on."""
        if not self.shards:  # only the manifest here: the shards' own hosts see them
            return False
        if [int(part.status().generation) for part in self.shards] == Manifest.read(self.path).generations:
            return False
        try:
            with writer_lock(self.path, wait=0):
                manifest = Manifest.read(self.path)
                now = [int(part.status().generation) for part in self.shards]
                if now == manifest.generations:
                    return False
                stopped = [run for part in self.shards for run in part.runs(1) if run.status == "running"]
                first = min(stopped, key=lambda run: run.started_at) if stopped else None
                reason = (
                    f"the run stopped part way (shard generations {now}, the manifest recorded "
                    f"{manifest.generations}); recorded by verify: run the same `citeline ingest` again to finish"
                )
                summary = RunSummary(
                    run_id=first.run_id if first else ledger.new_run_id(),
                    started_at=first.started_at if first else ledger.utc_now(),
                    finished_at=ledger.utc_now(),
                    status="interrupted",
                    roots=first.roots if first else [],
                    generation=sum(now),
                    added=sum(run.added for run in stopped),
                    updated=sum(run.updated for run in stopped),
                    errors=[{"path": "", "reason": reason}],
                )
                entry = {**summary.to_dict(), "generations": now, RECOVERED: True}
                manifest.generations, manifest.runs = now, [*manifest.runs, entry][-RUNS_KEPT:]
                manifest.write(self.path)
                self.manifest = manifest
        except IndexLockedError:
            return True
        warnings.warn(f"citeline: {self.path}: {reason}", IndexRepairedWarning, stacklevel=3)
        return False

    # ---------------------------------------------------------------- reading

    def snapshot(self, *, refresh: bool = True) -> ShardedSnapshot:
        """One committed generation of every shard, read as one snapshot (see ``citeline.sharding.search``);
        ``refresh`` as in :meth:`Index.snapshot`."""
        if self._sharded_snapshot is None or (refresh and not self._sharded_snapshot.is_current()):
            if self._sharded_snapshot is not None:
                self._sharded_snapshot.close()
            if self.dask is not None:
                self._sharded_snapshot = self.dask.snapshot(self.path, self.shard_dirs, self._recorded)
            else:
                self._sharded_snapshot = ShardedSnapshot(self.path, self.shard_dirs)
        return self._sharded_snapshot

    def _recorded(self) -> list[int]:
        # The generation set the manifest records: a Dask view is current while it stays the same.
        return Manifest.read(self.path).generations

    def generation(self) -> int:
        """The sum of the shards' current generations."""
        return sum(int(part.status().generation) for part in self._local("ingest"))

    def status(self) -> ShardedStatus:
        """The shards' counts added up, the model, the generations, and the last run of the root (asked of the
        shards' Dask workers by a client that sees only the manifest)."""
        statuses = each_shard(self.path, self.shards, self.dask, "status", lambda _, part: part.status(), shard_status)
        runs = self.runs(1)  # reads the manifest again
        return merged_status(self.path, statuses, runs[0] if runs else None, self.manifest.generations)

    def runs(self, limit: int = 20) -> list[RunSummary]:
        """The root's runs, newest first (each shard's own ledger has its part of every run)."""
        check_rows("limit", limit, 0)  # as a plain index's ledger does (a negative one sliced the oldest off)
        names = {f.name for f in fields(RunSummary)}
        self.manifest = Manifest.read(self.path)  # another process may have run since this one opened the root
        recent = list(reversed(self.manifest.runs))[:limit]
        return [RunSummary(**{key: value for key, value in run.items() if key in names}) for run in recent]

    def documents(
        self, filters: Filters | Mapping[str, Any] | None = None, limit: int | None = None, offset: int = 0
    ) -> list[DocumentInfo]:
        """:meth:`Index.documents` over every shard, in the same order (by source root, source id, doc id)."""
        if limit is not None:
            check_rows("limit", limit, 1)
        check_rows("offset", offset, 0)
        # Each shard's first offset + limit rows hold the merged page (a shard's rows come in the same order).
        depth = None if limit is None else min(offset + limit, MAX_ROWS)
        # Each shard's own rows (read_documents): a shard alone cannot tell why the filters select nothing.
        checked = Filters.from_value(filters)
        found = [record for part in self._local("documents") for record in read_documents(part.path, checked, depth)]
        found.sort(key=lambda r: (str(r.source_root), str(r.source_id), r.doc_id))
        if not found and not offset:
            self._explain_nothing(checked)
        return found[offset:] if limit is None else found[offset : offset + limit]

    def facet_counts(
        self, filters: Filters | Mapping[str, Any] | None = None, *, within: Iterable[SearchResult | str] | None = None
    ) -> FacetCounts:
        """:meth:`Index.facet_counts` over every shard: each shard's counts added up (a document lies in one shard);
        :meth:`Index.facets` ranks them."""
        counts: FacetCounts = {}
        doc_ids = None if within is None else answer_documents(within)  # each shard reads them once
        for part in self._local("documents"):
            for key, n in part.facet_counts(filters, within=doc_ids).items():
                counts[key] = counts.get(key, 0) + n
        return counts

    def document(self, doc_id: str, within: Filters | Mapping[str, Any] | None = None) -> DocumentDetail:
        """One document, read from the shard its id routes to; a name (:meth:`Index.document`) is looked for in every
        shard (``within``: among the documents those filters select only)."""
        parts = self._local("documents")
        routed = shard_of(doc_id, self.manifest.shards)
        for part in (parts[routed], *parts[:routed], *parts[routed + 1 :]):  # its own shard first, each once
            try:
                return part.document(doc_id, within)
            except IndexNotFoundError:
                continue
        raise IndexNotFoundError(
            f"no document {doc_id!r} in {self.path}; list the documents with `citeline documents` "
            "(give an id, a source file's path or a record's name, file#id)"
        )


class ShardCommits:
    """The ingest target of a sharded root (``citeline.ingest.targets.IngestTarget``): ``pipeline.run`` plans the
    run once over every shard, and this commits it.

    - **Planning**: the files no shard needs read (``sharding.freshness.unchanged_files``, while the last run
      finished in every shard); the parsed documents (or their keys) routed to their shards (:func:`route`);
      the plan is every shard's plan added up (``sharding.freshness.merged_plan``), and a shard with nothing to
      index, remove or record is idle.
    - **Committing**: each busy shard's part is a :class:`~citeline.sharding.runs.ShardJob`, a plain
      ``pipeline.run`` of that shard (its own writer lock, plan, chunks, embeddings and commits), run in
      ``parallel`` (processes, threads, serial), on the Dask ``client``'s workers, or by ``run_jobs`` (``on_dask``:
      which run them on Dask workers, so this process's model is not shared with them); then the
      root's manifest records every shard's generation and the run. The removal guard was decided over all
      shards, so no shard's run second-guesses it on its share.
    """

    def __init__(
        self,
        root: ShardedIndex,
        parallel: str = "processes",
        client: Any = None,
        shard_workers: ShardWorkers = None,
        run_jobs: RunJobs | None = None,
        *,
        on_dask: bool = False,
    ):
        self.root, self.parallel, self.client = root, parallel, client
        self.shard_workers, self.run_jobs = shard_workers, run_jobs
        #: the jobs run in other processes than this one's model (Dask workers; also the flow's tasks on Dask)
        self.on_dask = on_dask or client is not None
        self.fresh: Freshness | None = None
        self.parts: list[ParsedBatch] = []
        self.idle: list[bool] = []

    @property
    def path(self) -> Path:
        """The root (its own writer lock serializes sharded runs)."""
        return self.root.path

    @property
    def where(self) -> str:
        """``, over N shards``."""
        return f", over {self.root.manifest.shards} shards"

    def unchanged_files(self, roots: list[str], files: Sequence[SourceFile]) -> tuple[ParsedBatch, list[SourceFile]]:
        """The files no shard needs read (all of them, unless the last run finished in every shard), standing for
        their documents in every shard."""
        self.fresh = self.root.unchanged_files(files)
        skipped = ParsedBatch(fresh_files=list(self.fresh.skipped), fresh_documents=sum(self.fresh.per_shard))
        return skipped, self.fresh.to_read

    def plan(self, roots: list[str], discovery: Discovery, parsed: ParsedBatch) -> Plan:
        """Every shard's plan added up; each shard's part of ``parsed`` kept for its job."""
        assert self.fresh is not None, "unchanged_files comes first"
        self.parts = route(parsed, self.root.manifest.shards)
        with_fresh(self.parts, self.fresh.skipped, self.fresh.per_shard)
        total, idle = merged_plan(self.root.shard_dirs, roots, discovery, self.parts)
        must_record = self.fresh.must_record(parsed)
        self.idle = [nothing and not record for nothing, record in zip(idle, must_record, strict=True)]
        return total

    def generation(self) -> int:
        """The sum of the shards' generations."""
        return self.root.generation()

    def commit(self, run: PlannedRun) -> RunSummary:
        """Run every busy shard's job, record the manifest, and return the run's row (one naming each failed
        shard); raises :class:`ShardsFailedError` after recording when a shard failed."""
        assert self.fresh is not None, "planned first"
        root, reporter = self.root, run.reporter
        reporter.stage("shards", len(self.parts))
        shard_options = replace(
            run.options, allow_removals=True, strict=False, reporter=None, progress=False, prepare_queries=False
        )
        if self.on_dask or self.run_jobs is not None:
            # Credentials never ride in a task's arguments (Dask pickles them to the scheduler, Prefect may record
            # them): a Dask worker or flow task reads its own, from its environment or the CITELINE_STORAGE_OPTIONS
            # file (citeline.sources.remote), as the workers that parse the files (WorkerSteps) do.
            shard_options = replace(shard_options, storage_options=None)
        shared = root.shared_embedder
        embeds = any(part.documents or part.keys for part in self.parts)  # a removal embeds nothing: no model
        if embeds and not self.on_dask and self.parallel != "processes":  # with run_jobs: the flow's on its threads
            shared = root.embedder  # one model for every shard of this process
        # absolute paths and resolved roots: a Dask worker may run in another directory
        jobs = [
            ShardJob(str(directory.absolute()), run.roots, run.discovery, part, shard_options, shared)
            for directory, part in zip(root.shard_dirs, self.parts, strict=True)
        ]
        self.parts = []  # the jobs hold them now
        # A shard with nothing to index or remove would commit nothing: its job is not started (a DuckDB open is not
        # free, and a shard's no-op run opened it five times).
        busy = [job for job, nothing in zip(jobs, self.idle, strict=True) if not nothing]
        try:
            if self.run_jobs is not None:
                done = iter(self.run_jobs(busy))
            elif self.client is not None:
                done = iter(execute_on(self.client, busy, self.shard_workers))
            else:
                done = iter(execute(busy, self.parallel))
        except BaseException as exc:  # Ctrl-C or SIGTERM: each shard committed what it embedded whole
            if stopping.is_stop(exc):
                stopped = RunSummary(run.run_id, run.started_at, None, "interrupted", run.roots, None)
                root.record_interrupted(stopped, self.idle)
            raise
        outcomes = [
            idle_run(run.run_id, generation) if nothing else next(done)
            for nothing, generation in zip(self.idle, self.fresh.generations, strict=True)
        ]
        reporter.advance(len(jobs))
        summary = pipeline.with_skipped(
            merge_runs(run.run_id, run.started_at, run.roots, run.plan, outcomes), run.discovery
        )
        summary.generation = root.record_run(summary, outcomes, self.idle, self.fresh.generations)
        run.committed.append(summary)
        reporter.info(f"shard generations {root.manifest.generations}: {summary.status}")
        failed = [(n, outcome) for n, outcome in enumerate(outcomes) if isinstance(outcome, BaseException)]
        if failed:
            raise ShardsFailedError(root.path, failed, len(jobs)) from failed[0][1]
        return summary

    def record_failure(
        self, run_id: str, started_at: str, roots: list[str], error: BaseException, committed: RunSummary | None
    ) -> RunSummary | None:
        """Nothing more: the root has no ledger of its own; a stop during the shards' jobs and failed shards are
        recorded in the manifest by :meth:`commit`, and a run that fails before them changed nothing."""
        return None

    def prepare_queries(self) -> None:
        """Export the query model (``Index.prepare_queries``)."""
        self.root.prepare_queries()


def create_root(
    path: str | os.PathLike[str],
    *,
    shards: int | None = None,
    embedder: Embedder | None = None,
    **settings: Any,
) -> ShardedIndex:
    """Create a root of ``shards`` shards with :meth:`Index.create`'s ``settings``, or open an existing root
    (which must have that many shards, when given): ``Index.create(path, shards=N)`` and ``ShardedIndex.create``
    come here (the layout registered below)."""
    root = Path(path)
    if (root / SHARDS_MANIFEST).exists():
        manifest = Manifest.read(root)
        if shards is not None and shards != manifest.shards:
            raise IndexMismatchError(
                f"{root} has {manifest.shards} shards, not {shards}; leave out --shards (an index cannot be "
                "resharded: ingest into a new --index directory)"
            )
        parts = [Index.create(shard_dir(root, n), embedder=embedder, **settings) for n in range(manifest.shards)]
        return ShardedIndex(root, manifest, parts, embedder)
    if catalog.db_path(root).exists():
        raise IndexMismatchError(f"{root} is an unsharded index; leave out --shards, or use a new --index directory")
    if shards is None or shards < 1:
        raise SettingsError(f"shards must be at least 1, not {shards}")
    with writer_lock(root):
        first = Index.create(shard_dir(root, 0), embedder=embedder, **settings)
        embedder = first.embedder if embedder is None else embedder
        parts = [first] + [Index.create(shard_dir(root, n), embedder=embedder, **settings) for n in range(1, shards)]
        manifest = Manifest(shards, [int(part.meta["generation"]) for part in parts])
        manifest.write(root)  # last: a crash before it leaves shard folders that the next create reuses
    return ShardedIndex(root, manifest, parts, embedder)


def open_root(
    path: str | os.PathLike[str],
    *,
    embedder: Embedder | None = None,
    dask_address: str | None = None,
    shard_workers: ShardWorkers = None,
    **settings: Any,
) -> ShardedIndex:
    """Open a sharded root (``Index.open`` of a root holding ``shards.json``, and ``ShardedIndex.open``); every shard
    is opened (and checked, and repaired) as :meth:`Index.open` does.

    With ``dask_address``, searches run as tasks on that cluster's workers, each shard's part on the worker
    that holds it (``shard_workers`` pins shards to workers: ``citeline.sharding.remote``). A client that does not
    see the shards' folders (each on its worker's own disk) reads only the manifest and searches; the other
    commands run where the shards are."""
    root = Path(path)
    if not (root / SHARDS_MANIFEST).exists():
        raise SettingsError(f"{root} is not a sharded index: --dask-address and --shard-workers search shards")
    manifest = Manifest.read(root)
    dask = DaskShards(dask_address, manifest.shards, shard_workers) if dask_address else None
    if dask is not None and not all(catalog.db_path(shard_dir(root, n)).exists() for n in range(manifest.shards)):
        return ShardedIndex(root, manifest, [], embedder, dask)
    parts = [Index.open(shard_dir(root, n), embedder=embedder, **settings) for n in range(manifest.shards)]
    return ShardedIndex(root, manifest, parts, embedder, dask)


register_layout(SHARDS_MANIFEST, Layout(create=create_root, open=open_root, front=ShardedIndex))
