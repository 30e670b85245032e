"""The ingestion pipeline: discover ─► parse ─► plan ─► chunk ─► embed ─► commit, and the one :func:`run` that
strings the steps together.

:meth:`citeline.Index.ingest` calls :func:`run` with the default :class:`Steps` (everything in this process); the
Prefect flow (``orchestration/ingest.py``) calls the same :func:`run` with a :class:`Steps` subclass running each step
as a Prefect task and the parse and chunk/embed batches on its task runner (threads, or Dask workers). Steps take and
return plain data, so they can be tested, retried or shipped to a worker on their own. No SQL here: the catalog,
the ledger and the commit protocol live in ``citeline.store``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from citeline.errors import CommitRefusedError, PartialRunError, SourceError, SourceUnavailable
from citeline.ingest import freshness, removal, stopping

# The chunk and embed steps (re-exported: the flow and texts.py call them as pipeline.chunk_documents / embed).
from citeline.ingest.embed_step import (  # noqa: F401
    EMBED_PROGRESS_STEP,
    EmbedInterrupted,
    WrittenIndex,
    chunk_documents,
    completed,
    embed,
    embed_chunks,
)
from citeline.ingest.options import (  # noqa: F401  (the constants are re-exported: callers import them from here)
    CHUNKS_PER_BATCH,
    COMMIT_EVERY,
    DEFAULT_REMOVAL_THRESHOLD,
    FILES_PER_BATCH,
    IngestOptions,
)
from citeline.ingest.planning import (
    CHARS_PER_CHUNK,
    FileReport,
    ParsedBatch,
    Plan,
    Work,
    plan_changes,  # noqa: F401  (re-exported: tests and callers import it from here)
    refuse_removals,
    removal_problems,
    work_batches,
)
from citeline.ingest.progress import Reporter, announced_writer_lock, default_reporter
from citeline.ingest.runs import (  # noqa: F401  (dry_run_summary re-exported: texts.py calls it from here)
    close_interrupted,
    dry_run_row,
    dry_run_summary,
    record_failure,
    summarize,
)
from citeline.ingest.targets import IngestTarget, PlannedRun
from citeline.sources import remote
from citeline.sources.discovery import SKIPPED_LISTED, Discovery, resolve_roots, scan
from citeline.sources.encoding import read_as
from citeline.sources.parsers import (
    DEFAULT_MAX_FILE_BYTES,
    Document,
    Parsed,
    SourceFile,
    display_path,
    parse_source,
    reader_version,
    reading_ahead,
)
from citeline.sources.selection import Selection
from citeline.store import generation, ledger
from citeline.store.file_stats import FileStat
from citeline.store.ledger import RunSummary
from citeline.store.rows import ChunkRows, documents_table

#: Per-file failures written to the log one line each; the rest are counted (all of them are in the ledger).
LOGGED_FAILURES = 20


# ---------------------------------------------------------------- the steps


def parse_files(
    files: Sequence[SourceFile],
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    advance: Callable[[int], None] | None = None,
    hold_chars: int | None = None,
) -> ParsedBatch:
    """Parse each file; a file (or a JSONL record) that fails becomes a :class:`FileReport` and the rest go on.
    ``advance(1)`` is called after each file (progress).

    Documents keep their texts while the batch holds at most ``hold_chars`` characters of text (None: all);
    past that only their keys (:meth:`ParsedBatch.add`). A record file (JSONL) streams: its documents are added
    as its lines are read, so a file of any size is parsed in bounded memory."""
    with reading_ahead(files, max_file_bytes):  # remote objects fetched several at a time, bounded
        return _parse_each(files, max_file_bytes, advance, hold_chars)


def _parse_each(
    files: Sequence[SourceFile], max_file_bytes: int, advance: Callable[[int], None] | None, hold_chars: int | None
) -> ParsedBatch:
    batch = ParsedBatch()
    for source in files:
        mark = batch.mark()
        stats: list[FileStat] = []

        def add(document: Document, source: SourceFile = source, stats: list[FileStat] = stats) -> None:
            if not stats:  # every document of a file carries the stat it was read at
                stats.append(
                    FileStat(
                        source.root, source.source_id, document.size_bytes, document.mtime, source.stamp,
                        reader_version(source),
                    )
                )  # fmt: skip
            batch.add(document, hold_chars)

        def restart(mark: tuple[int, int, int] = mark, stats: list[FileStat] = stats) -> None:
            batch.drop_since(mark)  # the file changed while it streamed: it is read again from the start
            stats.clear()

        try:
            parsed = parse_source(source, max_file_bytes=max_file_bytes, on_document=add, restart=restart)
        except SourceUnavailable:  # a remote store stopped answering: the run stops (one line), it keeps everything
            raise
        except Exception as exc:  # a parser library's own failure must not stop the run
            parsed = Parsed(errors=[SourceError(source.path, f"{type(exc).__name__}: {exc}")], failed=True)
        if parsed.failed:  # what a streamed file yielded before it failed as a whole is not used
            batch.drop_since(mark)
            batch.errors.extend(FileReport(display_path(error.path), error.reason) for error in parsed.errors)
            batch.incomplete.append((source.root, source.source_id))
            if advance is not None:
                advance(1)
            continue
        if parsed.skipped is not None:
            batch.skipped.append(FileReport(display_path(source.path), parsed.skipped))
        if parsed.empty_records:
            batch.empty_records.append((display_path(source.path), parsed.empty_records, parsed.empty_lines))
        batch.errors.extend(FileReport(display_path(error.path), error.reason) for error in parsed.errors)
        batch.notes.extend(FileReport(display_path(note.path), note.reason) for note in parsed.notes)
        batch.kept_doc_ids.extend(parsed.kept_doc_ids)
        if not parsed.complete:
            batch.incomplete.append((source.root, source.source_id))
        elif stats and not parsed.errors:
            batch.read_files.extend(stats)
        if advance is not None:
            advance(1)
    return batch


def plan(index_dir: Path, roots: Sequence[str], discovery: Discovery, parsed: ParsedBatch) -> Plan:
    """Which parsed documents are new or changed, and which stored ones vanished from ``roots``.

    The caller holds the writer lock from plan to commit, so the index cannot change in between. Only the
    documents of files read again or vanished are loaded (``freshness.plan``: file-level planning).
    """
    return freshness.plan(index_dir, roots, discovery, parsed)


@dataclass
class CommitBatch:
    """What one commit of a run writes: stored documents to remove, and documents with their chunk rows."""

    remove_doc_ids: list[str]
    documents: list[Document]
    rows: ChunkRows
    #: files read whole this run, whose stat this commit records (a run's last commit: ``Plan.read_files``)
    files: list[FileStat] = field(default_factory=list)


def commit_batch(index_dir: Path, batch: CommitBatch, run: RunSummary) -> int:
    """Write ``batch`` as one new generation (``store.generation.commit``) with ``run``'s ledger row; returns
    the generation."""
    changes = generation.Changes(
        remove_doc_ids=batch.remove_doc_ids,
        documents=documents_table(batch.documents, run.run_id, run.started_at),
        chunks=batch.rows.to_arrow(run.run_id),
        files=batch.files,
    )
    return generation.commit(index_dir, changes, run)


def commit(index_dir: Path, plan: Plan, rows: ChunkRows, run: RunSummary) -> int:
    """Write a whole plan whose documents it holds (``plan.to_index``) as one new generation; returns it."""
    return commit_batch(index_dir, CommitBatch(plan.remove_doc_ids, plan.to_index, rows, plan.read_files), run)


def load_documents(work: Work, max_file_bytes: int, advance: Callable[[int], None] | None = None) -> Embedded:
    """The documents of a chunk/embed batch: those it holds, and the planned ones of its files, parsed again (of a
    record file, only the span of lines holding them, streamed). A planned document its file no longer yields (the
    file changed or broke during the run) is an error of the run; its stored version, if any, stays. Returns an
    :class:`Embedded` without rows yet."""
    with reading_ahead(work.files, max_file_bytes):  # remote objects fetched several at a time, bounded
        return _load_each(work, max_file_bytes, advance)


def _load_each(work: Work, max_file_bytes: int, advance: Callable[[int], None] | None) -> Embedded:
    documents = list(work.documents)
    errors: list[FileReport] = []
    for source in work.files:
        wanted = set(work.wanted[source.path])
        found: list[Document] = []

        def keep(document: Document, wanted: set[str] = wanted, found: list[Document] = found) -> None:
            if document.doc_id in wanted:  # its first line (a repeated id's later lines are not the one planned)
                wanted.discard(document.doc_id)
                found.append(document)

        def restart(wanted: set[str] = wanted, found: list[Document] = found, source: SourceFile = source) -> None:
            wanted.update(work.wanted[source.path])  # the file changed while it streamed: read it again
            found.clear()

        try:
            parsed = parse_source(
                source,
                max_file_bytes=max_file_bytes,
                on_document=keep,
                span=work.spans.get(source.path),
                restart=restart,
            )
        except SourceUnavailable:
            raise
        except Exception:  # reported when the file was parsed for the plan; its documents are missing now
            parsed = Parsed(failed=True)
        if not parsed.failed:
            documents.extend(found)
        missing = len(work.wanted[source.path]) - (0 if parsed.failed else len(found))
        if advance is not None:
            advance(1)
        if missing:
            errors.append(
                FileReport(
                    display_path(source.path),
                    f"{missing} documents planned from it were gone when it was parsed again (it changed during the "
                    "run); the next run indexes them",
                )
            )
    return Embedded(documents, ChunkRows.empty(), 0, 0, errors)


# ---------------------------------------------------------------- how the steps run


def batches(items: Sequence[Any], size: int) -> list[list[Any]]:
    """``items`` in consecutive batches of ``size``."""
    return [list(items[start : start + size]) for start in range(0, len(items), size)]


@dataclass
class Embedded:
    """What a chunk/embed batch produced: its documents, their chunk rows (vectors filled), the (embedded,
    reused) chunk counts, and the planned documents it could not find again."""

    documents: list[Document]
    rows: ChunkRows
    embedded: int
    reused: int
    errors: list[FileReport] = field(default_factory=list)


def embedded_whole(
    documents: Sequence[Document],
    rows: ChunkRows,
    stop: EmbedInterrupted,
    index: WrittenIndex,
    errors: list[FileReport],
) -> Embedded:
    """What a batch whose embedding was stopped (:class:`EmbedInterrupted`) keeps: the documents embedded whole."""
    kept, kept_rows, embedded = completed(documents, rows, stop, index.dimension)
    return Embedded(kept, kept_rows, embedded, len(kept_rows) - embedded, errors)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or a stop signal during a step that had finished part of its work: ``kept`` is that part (documents
    embedded whole), which :func:`run` commits before it stops; it then raises ``stop`` again (the exception that
    stopped the step, e.g. a host's own for SIGTERM, ``citeline.ingest.stopping``), or this exception."""

    def __init__(self, kept: list[Embedded], stop: BaseException | None = None):
        super().__init__()
        self.kept, self.stop = kept, stop


class Steps:
    """How :func:`run` executes each step: here, in this process. Subclasses (the Prefect flow's) override the
    methods to run a step elsewhere; each method must return what the default returns. :func:`run` sets
    ``reporter`` before the first step; steps advance it as they go."""

    reporter: Reporter = Reporter()

    def roots(self, paths: Sequence[str | os.PathLike[str]]) -> list[str]:
        """The run's roots, as its ledger row names them: ``paths`` resolved (one that cannot be is one
        :class:`SourceError` line)."""
        return resolve_roots(paths)

    def discover(self, paths: Sequence[str | os.PathLike[str]], selection: Selection | None = None) -> Discovery:
        """Find the files under ``paths`` that ``selection`` takes, and what could not be read or was left out."""
        return scan(paths, selection)

    def parse(
        self, file_batches: list[list[SourceFile]], max_file_bytes: int, hold_chars: int | None = None
    ) -> Iterator[ParsedBatch]:
        """Parse every batch of files, yielding results in order as they come (here: file by file, each holding at
        most ``hold_chars`` characters of text, so no more than that waits before :func:`run` keeps or lets go of
        their texts, whatever a file's size)."""
        # remote objects fetched ahead across the files parsed one by one (bounded: remote.fetch_ahead)
        with reading_ahead([source for files in file_batches for source in files], max_file_bytes):
            for files in file_batches:
                for source in files:
                    yield parse_files(
                        [source], max_file_bytes=max_file_bytes, advance=self.reporter.advance, hold_chars=hold_chars
                    )

    def plan(self, index: WrittenIndex, roots: list[str], discovery: Discovery, parsed: ParsedBatch) -> Plan:
        """Decide what is new, changed, unchanged and vanished."""
        return plan(index.path, roots, discovery, parsed)

    def chunk_embed(self, index: WrittenIndex, work: list[Work], max_file_bytes: int) -> list[Embedded]:
        """Chunk and embed the batches of one commit (here: all at once, which lets chunking use every CPU and
        gives one progress bar per stage), parsing again the files whose documents the plan let go."""
        files = sum(len(item.files) for item in work)
        if files:
            self.reporter.stage("parse", files)
        loaded = [load_documents(item, max_file_bytes, self.reporter.advance) for item in work]
        documents = [document for item in loaded for document in item.documents]
        self.reporter.stage("chunk", len(documents))
        rows = chunk_documents(documents, index.chunker, advance=self.reporter.advance)
        errors = [error for item in loaded for error in item.errors]
        try:
            embedded, reused = embed(index, rows, reporter=self.reporter)
        except EmbedInterrupted as stop:  # Ctrl-C or SIGTERM: hand the documents embedded whole to the run to commit
            raise RunInterrupted([embedded_whole(documents, rows, stop, index, errors)], stop.stop) from None
        return [Embedded(documents, rows, embedded, reused, errors)]

    def commit(self, index: WrittenIndex, batch: CommitBatch, run: RunSummary) -> RunSummary:
        """Publish one new generation and the run's ledger row."""
        commit_batch(index.path, batch, run)
        return run


class GivenSteps(Steps):
    """The steps of a run whose discovery and parsing are given rather than done: texts that are not files
    (``citeline.ingest.texts``: ``parsed.given``), an explicit removal (``citeline.ingest.removal``:
    ``parsed.removing``), a sharded run's shard (``citeline.sharding.runs.PreparsedSteps``: the coordinator
    discovered and parsed once for every shard). The rest (plan, chunk, embed, commit) is every run's."""

    def __init__(self, discovery: Discovery, parsed: ParsedBatch):
        self.discovery = discovery
        self.parsed = parsed

    def roots(self, paths: Sequence[str | os.PathLike[str]]) -> list[str]:
        """The discovery's roots (resolved already, or names: a texts' source, a removal's selectors)."""
        return list(self.discovery.roots)

    def discover(self, paths: Sequence[str | os.PathLike[str]], selection: Selection | None = None) -> Discovery:
        """The given discovery."""
        return self.discovery

    def parse(
        self, file_batches: list[list[SourceFile]], max_file_bytes: int, hold_chars: int | None = None
    ) -> Iterator[ParsedBatch]:
        """The given batch."""
        yield self.parsed


#: The settings of one run (the CLI's and the flow's parameters of the same names): :class:`IngestOptions`.
Options = IngestOptions


def run(
    index: WrittenIndex,
    paths: Sequence[str | os.PathLike[str]],
    options: Options | None = None,
    steps: Steps | None = None,
    *,
    committer: IngestTarget | None = None,
) -> RunSummary:
    """Bring the index up to date with the files under ``paths``; returns the run's ledger row.

    Holds the index's writer lock from discovery to the last commit (``options.wait`` bounds the wait for another
    writer). Parsing keeps each document's key (id, hash, file) but at most ``options.commit_every`` chunks' worth
    of texts; the plan (and the removal guard) covers the whole run before anything is written; then the new and
    changed documents are parsed again where needed, chunked, embedded and committed about ``commit_every``
    chunks at a time, each commit a generation. The run's one ledger row reads ``running`` until the last commit
    (which also removes the vanished documents) records its outcome; a crash leaves the index at its last commit,
    consistent, and the next run (which marks the row ``interrupted``) embeds only what was not committed.

    A run that fails is recorded in the ledger as failed at the generation it reached. A run that would remove
    what :func:`removal_problems` objects to raises :class:`RemovalRefusedError` (recorded as ``refused``, with
    nothing changed) unless ``options.allow_removals``. With ``options.dry_run`` it stops after planning and
    returns what it would do (status ``dry-run``, the objections as errors), writing nothing.

    The run is planned here and committed by ``committer`` (``citeline.ingest.targets``: the ingest target), by
    default :class:`LocalCommits` of ``index`` (a plain index); a sharded root passes its own
    (``citeline.sharding.index.ShardCommits``), so plain and sharded runs share every step up to the plan.
    """
    options = options or Options()
    steps = steps or Steps()
    committer = committer or LocalCommits(index, steps)
    reporter = steps.reporter = options.reporter or default_reporter(options.progress, options.progress_every)
    stopping.clear_request()  # a stop asked of an earlier run of this process is not this run's
    # SIGTERM at its default action: commit what is embedded, then end; remote roots read with the run's credentials
    with stopping.deferred_sigterm(), remote.storage(options.storage_options):
        try:
            committed = _run_locked(committer, paths, options, steps, reporter)
            if options.prepare_queries and committed.status != "dry-run":
                reporter.stage("query model")  # outside the lock: readers need it, writers do not
                committer.prepare_queries()
        finally:
            reporter.finish()
    if options.strict and committed.status == "partial":
        raise PartialRunError(committed)
    return committed


def _run_locked(
    committer: IngestTarget,
    paths: Sequence[str | os.PathLike[str]],
    options: Options,
    steps: Steps,
    reporter: Reporter,
) -> RunSummary:
    # The planning phase, the same for every ingest target; then the committer commits the plan.
    run_id, started_at = ledger.new_run_id(), ledger.utc_now()
    roots = steps.roots(paths)  # a root that cannot be resolved is one SourceError line
    committed: list[RunSummary] = []  # the run's committed ledger rows (the committer appends them)
    with announced_writer_lock(committer.path, options.wait, reporter):
        try:
            reporter.stage("discover")
            discovery = steps.discover(paths, Selection.of(options))
            files = discovery.files = read_as(discovery.files, options.encoding)
            reporter.info(f"discovered {len(files)} files under {', '.join(roots)}")
            reporter.discovered(len(files))
            report_skipped(reporter, discovery)
            for problem in discovery.errors[:LOGGED_FAILURES]:
                kept = " (its documents are kept)" if problem.kept else ""
                reporter.info(f"could not read {problem.path}: {problem.reason}{kept}")
            # Files of the same size and time are not read again, and their documents never leave the catalog.
            parsed, to_read = committer.unchanged_files(roots, files)
            reporter.stage("parse", len(to_read))
            hold_chars = options.commit_every * CHARS_PER_CHUNK
            for batch in steps.parse(batches(to_read, options.files_per_batch), options.max_file_bytes, hold_chars):
                parsed.absorb(batch, hold_chars=hold_chars)
            report_parsed(reporter, len(files), parsed)
            reporter.stage("plan")
            planned = committer.plan(roots, discovery, parsed)
            del parsed  # the plan (and the committer) hold what is still needed
            if planned.unmatched:  # a removal's selector that matches nothing: all or nothing, so nothing
                raise removal.nothing_matches(committer.path, planned.unmatched)
            reporter.info(
                f"plan: {planned.added} added, {planned.updated} updated, {planned.unchanged} unchanged, "
                f"{planned.removed} removed (documents){committer.where}"
            )
            objections = [] if options.allow_removals else removal_problems(planned, options.removal_threshold)
            if options.dry_run:
                summary = dry_run_row(committer.generation(), run_id, started_at, planned, objections)
                return with_skipped(summary, discovery)
            if objections:
                raise refuse_removals(objections)
            summary = with_skipped(summarize(run_id, started_at, planned), discovery)
            run = PlannedRun(run_id, started_at, roots, discovery, planned, summary, options, reporter, committed)
            return committer.commit(run)
        except BaseException as exc:
            if isinstance(exc, removal.NothingMatchesError):  # the user's typo, not a run: nothing to record
                raise
            recorded = committer.record_failure(run_id, started_at, roots, exc, committed[-1] if committed else None)
            if recorded is not None and recorded.status == "interrupted":
                stopping.note_interrupted(recorded)
            raise


class LocalCommits:
    """The ingest target of a plain index (``citeline.ingest.targets.IngestTarget``): it plans against the index's
    catalog and commits the plan in groups of about ``commit_every`` chunks, each group chunked, embedded and
    committed as a generation through the run's :class:`Steps` (here, or the flow's tasks)."""

    where = ""

    def __init__(self, index: WrittenIndex, steps: Steps):
        self.index, self.steps = index, steps

    @property
    def path(self) -> Path:
        """The index directory."""
        return self.index.path

    def unchanged_files(self, roots: list[str], files: Sequence[SourceFile]) -> tuple[ParsedBatch, list[SourceFile]]:
        """The files whose size and time are what was indexed (``freshness.unchanged_files``), and the others."""
        return freshness.unchanged_files(self.index.path, roots, files)

    def plan(self, roots: list[str], discovery: Discovery, parsed: ParsedBatch) -> Plan:
        """The run's plan (the steps' plan step: here, or a flow's task)."""
        return self.steps.plan(self.index, roots, discovery, parsed)

    def generation(self) -> int:
        """The index's committed generation."""
        return int(generation.read_meta(self.index.path)["generation"])

    def commit(self, run: PlannedRun) -> RunSummary:
        """Chunk, embed and commit the plan in groups (:func:`_commit_in_batches`)."""
        return _commit_in_batches(self.index, run.options, self.steps, run.reporter, run.plan, run.discovery.files,
                                  run.summary, run.committed)  # fmt: skip

    def record_failure(
        self, run_id: str, started_at: str, roots: list[str], error: BaseException, committed: RunSummary | None
    ) -> RunSummary | None:
        """The run's ledger row, failed, refused or interrupted (``runs.record_failure``)."""
        return record_failure(self.index.path, run_id, started_at, roots, error, committed)

    def prepare_queries(self) -> None:
        """Export the query model (``Index.prepare_queries``)."""
        self.index.prepare_queries()


def _commit_in_batches(
    index: WrittenIndex,
    options: Options,
    steps: Steps,
    reporter: Reporter,
    planned: Plan,
    files: Sequence[SourceFile],
    summary: RunSummary,
    committed: list[RunSummary],
) -> RunSummary:
    # Each group of about commit_every chunks is chunked, embedded and committed as a generation; the ledger row
    # says "running" (with the counts so far) until the last commit, which removes what vanished.
    groups = work_batches(planned, files, options.commit_every, options.chunks_per_batch) or [[]]
    reporter.planned([round(sum(work.chars for work in group) / CHARS_PER_CHUNK) for group in groups])
    close_interrupted(index.path)
    summary.added = summary.updated = summary.chunks_embedded = summary.chunks_reused = 0
    refused: set[tuple[str, str]] = set()  # the files of documents the catalog refused: their stats not recorded
    for number, group in enumerate(groups, 1):
        last = number == len(groups)
        reporter.part(number, len(groups))
        try:
            outputs = steps.chunk_embed(index, group, options.max_file_bytes) if group else []
        except RunInterrupted as stop:  # Ctrl-C or SIGTERM: commit the documents embedded whole, then stop
            _commit_interrupted(index, steps, reporter, planned, summary, committed, stop.kept)
            raise stop.stop or stop from None
        documents = [document for output in outputs for document in output.documents]
        rows = ChunkRows.concat([output.rows for output in outputs], index.dimension)
        replaced = [document.doc_id for document in documents if document.doc_id in planned.replaced]
        summary.errors += [{"path": e.path, "reason": e.reason} for output in outputs for e in output.errors]
        summary.updated += len(replaced)
        summary.added += len(documents) - len(replaced)
        embedded, reused = sum(output.embedded for output in outputs), sum(output.reused for output in outputs)
        summary.chunks_embedded += embedded
        summary.chunks_reused += reused
        summary.failed = len(summary.errors)
        summary.status = ("partial" if summary.errors else "succeeded") if last else "running"
        reporter.info(
            f"chunks: {len(rows)} made from {len(documents)} documents, {embedded} embedded, {reused} reused"
            + (f" (commit {number} of {len(groups)})" if len(groups) > 1 else "")
        )
        reporter.stage("commit")
        removals = replaced + (planned.vanished_doc_ids if last else [])
        row = summary if last else replace(summary, removed=0, errors=list(summary.errors))
        read_files = planned.read_files if last else []
        batch = CommitBatch(removals, documents, rows, read_files)
        done = _commit_isolating(index, steps, reporter, batch, row, planned.replaced, refused)
        if done is not summary:  # the documents refused are the run's failures from now on
            summary.errors, summary.failed = list(done.errors), done.failed
            summary.added, summary.updated = done.added, done.updated
        committed.append(replace(done))
        del outputs, documents, rows  # before the next group's are made
    reporter.info(
        f"committed generation {committed[-1].generation}: run {committed[-1].run_id} "
        f"{committed[-1].status}, {planned.removed} documents removed"
    )
    return committed[-1]


def _commit_isolating(
    index: WrittenIndex,
    steps: Steps,
    reporter: Reporter,
    batch: CommitBatch,
    row: RunSummary,
    replaced: set[str] | frozenset[str] | Sequence[str],
    refused: set[tuple[str, str]],
) -> RunSummary:
    # Commit the batch; if the catalog refuses it (CommitRefusedError: a value it cannot hold, a document whose
    # rows pass its memory limit), find the documents it refuses by committing the batch in halves, each part that
    # passes a generation of its own, and commit the rest (removals, file stats, the run's row) without them. A
    # refused document fails alone, with DuckDB's first error; its stored version stays and its file is read again
    # by the next run; the documents committed are not embedded again. Before this, one such file failed every run.
    try:
        return steps.commit(index, replace(batch, files=_files_without(batch.files, refused)), row)
    except CommitRefusedError as exc:
        if not batch.documents:
            raise
        first = exc
    reporter.warning(f"the catalog refused a commit ({first}); committing its documents in parts to find which")
    removals = set(batch.remove_doc_ids)
    running = replace(row, removed=0, errors=list(row.errors), status="running")
    failures: list[tuple[Document, str]] = []
    done: set[str] = set()
    documents = list(batch.documents)
    parts = [documents[len(documents) // 2 :], documents[: len(documents) // 2]] if len(documents) > 1 else []
    if len(documents) == 1:
        failures.append((documents[0], first.reason))
    while parts:
        part = parts.pop()
        if not part:
            continue
        ids = {document.doc_id for document in part}
        try:
            steps.commit(index, CommitBatch(sorted(ids & removals), part, batch.rows.of_documents(ids)), running)
            done |= ids
        except CommitRefusedError as exc:
            if len(part) == 1:
                failures.append((part[0], exc.reason))
            else:
                parts += [part[len(part) // 2 :], part[: len(part) // 2]]
    failed_ids = {document.doc_id for document, _ in failures}
    refused.update((document.source_root, document.source_file or document.source_id) for document, _ in failures)
    row.errors = row.errors + [
        {
            "path": display_path(document.path),
            "reason": (f"record {document.record_id!r}: " if document.record_id else "")
            + f"the catalog refused it at commit ({reason}); left out, its stored version kept",
        }
        for document, reason in failures
    ]
    row.failed = len(row.errors)
    updated = sum(1 for document, _ in failures if document.doc_id in replaced)
    row.updated -= updated
    row.added -= len(failures) - updated
    if row.status == "succeeded":
        row.status = "partial"
    for document, reason in failures:
        reporter.warning(f"failed {display_path(document.path)}: {reason}")
    rest = [doc_id for doc_id in batch.remove_doc_ids if doc_id not in done and doc_id not in failed_ids]
    empty = ChunkRows.empty(batch.rows.vectors.shape[1] if batch.rows.vectors.ndim == 2 else 0)
    return steps.commit(index, CommitBatch(rest, [], empty, _files_without(batch.files, refused)), row)


def _files_without(files: list[FileStat], refused: set[tuple[str, str]]) -> list[FileStat]:
    # The stats of files none of whose documents the catalog refused (a refused one's file is read again).
    return [stat for stat in files if (stat.source_root, stat.source_file) not in refused] if refused else files


def _commit_interrupted(
    index: WrittenIndex,
    steps: Steps,
    reporter: Reporter,
    planned: Plan,
    summary: RunSummary,
    committed: list[RunSummary],
    kept: list[Embedded],
) -> None:
    # What a Ctrl-C left embedded whole becomes one more commit, its row "interrupted" (the run's failure record
    # then adds why); the vanished documents stay: the run did not finish, so it removes nothing it had not yet.
    documents = [document for output in kept for document in output.documents]
    if not documents:
        return
    rows = ChunkRows.concat([output.rows for output in kept], index.dimension)
    replaced = [document.doc_id for document in documents if document.doc_id in planned.replaced]
    row = replace(summary, removed=0, errors=list(summary.errors), status="interrupted")
    row.updated += len(replaced)
    row.added += len(documents) - len(replaced)
    row.chunks_embedded += sum(output.embedded for output in kept)
    row.chunks_reused += sum(output.reused for output in kept)
    reporter.stage("commit")
    committed.append(replace(steps.commit(index, CommitBatch(replaced, documents, rows, []), row)))
    reporter.info(f"interrupted: committed the {len(documents)} documents embedded so far ({len(rows)} chunks)")


def with_skipped(summary: RunSummary, discovery: Discovery) -> RunSummary:
    """``summary`` with the counts of files discovery left out (unsupported suffix, excluded by the rules) and of
    the symbolic links it did not follow."""
    summary.unsupported, summary.excluded = discovery.unsupported, discovery.excluded
    summary.links_skipped = len(discovery.skipped)
    return summary


def report_skipped(reporter: Reporter, discovery: Discovery) -> None:
    """One line with the counts of files left out, then (the log at INFO: ``-v``) one line per file or folder,
    and one per symbolic link not followed, with why."""
    for link in discovery.skipped[:SKIPPED_LISTED]:
        reporter.info(f"skipped {link.path}: {link.reason}")
    if len(discovery.skipped) > SKIPPED_LISTED:
        reporter.info(f"... and {len(discovery.skipped) - SKIPPED_LISTED} more symbolic links not followed")
    if not (discovery.unsupported or discovery.excluded):
        return
    reporter.info(
        f"skipped {discovery.unsupported} files with no parser for their type and {discovery.excluded} files or "
        "folders excluded (include/exclude, .citelineignore, defaults)"
        + ("; what was indexed from excluded paths before is kept" if discovery.excluded else "")
    )
    for path in discovery.unsupported_paths:
        reporter.info(f"skipped {path}: unsupported file type")
    for path in discovery.excluded_paths:
        reporter.info(f"skipped {path}: excluded")
    listed = len(discovery.unsupported_paths) + len(discovery.excluded_paths)
    if discovery.unsupported + discovery.excluded > listed:
        reporter.info(f"... and {discovery.unsupported + discovery.excluded - listed} more skipped")


def report_parsed(reporter: Reporter, files: int, parsed: ParsedBatch, unchanged_documents: int = 0) -> None:
    """The parse stage's log: one line for the counts, one per skipped file, record file with records without text
    and failed file (up to :data:`LOGGED_FAILURES` each; the ledger has every failure). ``unchanged_documents``: the
    documents of files not read that ``parsed`` does not count (a sharded run's, counted per shard)."""
    reporter.info(parsed_counts(files, parsed, unchanged_documents))
    for empty in parsed.skipped[:LOGGED_FAILURES]:
        reporter.info(f"skipped {empty.path}: {empty.reason}")
    for path, count, lines in parsed.empty_records[:LOGGED_FAILURES]:
        shown = ", ".join(map(str, lines)) + (", ..." if count > len(lines) else "")
        label = "line" if count == 1 else "lines"
        reporter.info(f"left out {_records(count)} of {path} with no text ({label} {shown})")
    for note in parsed.notes[:LOGGED_FAILURES]:  # a warning: shown on the console without -v
        reporter.warning(f"{note.path}: {note.reason}")
    if len(parsed.notes) > LOGGED_FAILURES:
        reporter.warning(f"... and {len(parsed.notes) - LOGGED_FAILURES} more files whose encoding was guessed")
    for error in parsed.errors[:LOGGED_FAILURES]:
        reporter.info(f"failed {error.path}: {error.reason}")
    if len(parsed.errors) > LOGGED_FAILURES:
        reporter.info(f"... and {len(parsed.errors) - LOGGED_FAILURES} more failed files (see `citeline runs`)")


def _records(count: int) -> str:
    return f"{count} record" if count == 1 else f"{count} records"


def parsed_counts(files: int, parsed: ParsedBatch, unchanged_documents: int = 0) -> str:
    """The parse stage's count line (:func:`report_parsed`'s first, the Prefect parse task's):
    ``parsed 5 files: 9 documents, 0 failed, 1 skipped (empty), 2 records with no text left out``."""
    line = f"parsed {files} files: {parsed.document_count + unchanged_documents} documents, {len(parsed.errors)} failed"
    if parsed.skipped:
        line += f", {len(parsed.skipped)} skipped (empty)"
    empty = sum(count for _, count, _ in parsed.empty_records)
    return line + (f", {_records(empty)} with no text left out" if empty else "")
