"""The ``citeline`` command: a thin wrapper over :class:`citeline.Index` (flags mirror parameter names)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import warnings
from typing import TYPE_CHECKING, Any

import click

from citeline.cli import documents, serve, tokens
from citeline.cli.common import (
    RUN_FIELDS,
    RUN_TABLE_COLUMNS,
    SEARCH_FIELDS,
    OneLineErrors,
    PathType,
    columns_option,
    emit_record,
    emit_records,
    emit_search,
    filter_options,
    filters_from,
    format_option,
    headers_option,
    index_option,
    ingest_options,
    json_option,
    log_lines,
    no_passages,
    picked_columns,
    request_options,
    resolve_format,
    run_seconds,
    say,
    search_dask_option,
    setting_option,
    shard_workers_option,
    show_warning,
    stop_signals,
    storage_block_option,
    storage_option_option,
    storage_options_file_option,
    storage_options_from,
    user_errors,
    wait_option,
    watch_options,
)
from citeline.ingest.options import DEFAULT_DEBOUNCE, MAX_GROUP_SECONDS, IndexSettings, IngestOptions, Placement
from citeline.query.plan import DEFAULT_MODE, MODES, SearchRequest
from citeline.store.connection import MAX_ROWS
from citeline.util.output import PrintableFormatter

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from citeline.store.ledger import RunSummary


@click.group(cls=OneLineErrors, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="citeline")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Build a semantic index from documents and search it; every passage comes with its provenance."""
    if ctx.invoked_subcommand is None:  # bare `citeline`: its help, as `citeline --help` prints it
        click.echo(ctx.get_help())


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=PathType())
@index_option
@ingest_options
@shard_workers_option
@click.option("--progress/--no-progress", default=None, help="Progress bar [default: when stderr is a terminal].")
@click.option(
    "--prefect",
    is_flag=True,
    help="Run through the Prefect flow (citeline.orchestration.ingest) instead of in-process.",
)
@click.option("-v", "--verbose", is_flag=True, help="Log each stage's counts and seconds (and Prefect's lines).")
@click.option("--source", default=None, help="With PATH -: the source name of the texts [default: texts].")
@storage_options_file_option
@storage_option_option
@storage_block_option
@json_option
@stop_signals
@user_errors
def ingest(
    paths: tuple[str, ...],
    index_path: str,
    progress: bool | None,
    prefect: bool,
    dask_address: str | None,
    dask_workers: int | None,
    shard_workers: str | None,
    verbose: bool,
    source: str | None,
    storage_options_file: str | None,
    storage_option_pairs: tuple[str, ...],
    storage_block: str | None,
    as_json: bool,
    **settings: Any,
) -> None:
    """Add, update and remove the documents under PATHS (folders or files) in the index.

    A PATH may be a URL: s3://bucket/prefix, gs://..., az://..., https://host/file.pdf, any fsspec URL. Objects
    are listed, and only new or changed ones (by ETag, version, or size and time) are fetched; credentials come
    from the environment, the store's profiles, or --storage-options/--storage-option.

    PATH - reads texts as JSON lines from stdin ({"id": ..., "text": ..., "title": ..., "metadata": {...}}):
    added or replaced by id, never removed (see `citeline remove`).

    Files are selected by --include/--exclude, the root's .citelineignore and defaults (hidden entries,
    node_modules, __pycache__, virtualenvs); the summary counts the files skipped (-v lists them).

    Exit status: 0 the run succeeded (or was partial, without --strict: some files failed, the rest indexed);
    1 it failed or was refused, nothing of it committed past its last commit (the index stays consistent);
    2 a usage error; 3 --strict and the run was partial (what it indexed is committed); 130 interrupted by
    Ctrl-C, 143 by SIGTERM (docker stop, systemd, Kubernetes): what was embedded whole is committed, the ledger
    says interrupted, and one line says what was kept."""
    from citeline.errors import PartialRunError
    from citeline.index import Index
    from citeline.sources.discovery import resolve_roots
    from citeline.sources.selection import Selection

    create, run = IndexSettings.pick(settings), IngestOptions.pick(settings)  # the declared settings (.options)
    dry_run = run["dry_run"]
    show_progress = sys.stderr.isatty() if progress is None else progress
    placement = Placement(dask_address=dask_address, dask_workers=dask_workers, shard_workers=shard_workers)
    if storage_block is not None and not prefect:
        raise click.UsageError("--storage-block names a Prefect block, which the Prefect flow loads: add --prefect")
    if not prefect:  # the Prefect flow runs on Dask whatever the index; in this process, only a root's parts do
        _refuse_unused(Index.front_class(index_path, shards=create["shards"]).unused_placement(placement))
    _log_to_console(verbose, prefect)
    if "-" in paths or source is not None:
        if "-" not in paths:
            raise click.UsageError("--source names the texts read from stdin: give PATH - (`citeline ingest -`)")
        where = {"prefect": prefect, "dask_address": dask_address, "dask_workers": dask_workers}
        where["progress"] = show_progress
        summary = documents.ingest_stdin(paths, index_path, source, {**create, **run, **where})
    else:
        from citeline.sources import remote

        resolve_roots(paths)  # a missing or unusable PATH is one line before any index is created
        Selection(tuple(run["include"]), tuple(run["exclude"]))  # so is a bad --include or --exclude glob
        with (
            remote.storage(storage_options_from(storage_option_pairs, storage_options_file)),
            _for_dask_workers(paths, storage_options_file, storage_option_pairs, bool(dask_address or dask_workers)),
        ):
            summary = _run_ingest(paths, index_path, run, show_progress, prefect, create, storage_block, placement)
    if as_json:
        click.echo(json.dumps(summary, ensure_ascii=False))
    elif dry_run:
        say(
            f"dry run, nothing written: would add {summary['added']}, update {summary['updated']}, remove "
            f"{summary['removed']}, keep {summary['unchanged']} unchanged; {summary['failed']} failed; "
            f"{index_path} stays at generation {summary['generation']}"
        )
        for error in summary["errors"]:
            say(f"  {error['path']}: {error['reason']}", err=True)
    else:
        _print_run(summary, index_path, verbose)
    if summary["status"] == "partial" and run["strict"]:
        sys.exit(PartialRunError.exit_code)


def _refuse_unused(unused: list[str]) -> None:
    # A placement the index would not use is the user's mistake, said before anything is created.
    if "dask_address" in unused or "dask_workers" in unused:
        raise click.UsageError(
            "--dask-address and --dask-workers run the Prefect flow or a sharded index: add --prefect"
        )
    if unused:
        raise click.UsageError("--shard-workers pins a sharded index's shards to Dask workers: this index has none")


def _print_run(summary: dict[str, Any], index_path: str, verbose: bool) -> None:
    # The run's one line, the skipped files' counts, and each failed file on stderr.
    say(
        f"run {summary['run_id']} {summary['status']}: {summary['added']} added, {summary['updated']} updated, "
        f"{summary['unchanged']} unchanged, {summary['removed']} removed, {summary['failed']} failed; "
        f"{summary['chunks_embedded']} chunks embedded, {summary['chunks_reused']} reused; "
        f"generation {summary['generation']} in {index_path}"
    )
    if summary.get("unsupported", 0) + summary.get("excluded", 0) + summary.get("links_skipped", 0):
        say(
            f"  {summary['unsupported']} files skipped as unsupported, {summary['excluded']} excluded, "
            f"{summary.get('links_skipped', 0)} symbolic links not followed" + ("" if verbose else " (-v lists them)")
        )
    for error in summary["errors"]:
        say(f"  skipped {error['path']}: {error['reason']}", err=True)


@contextlib.contextmanager
def _for_dask_workers(paths: Sequence[str], file: str | None, pairs: Sequence[str], on_dask: bool) -> Iterator[None]:
    # Dask workers read the remote objects themselves, with the storage options of their own environment (never a
    # task's arguments): a local cluster's workers are this process's children and inherit the file's path; the
    # pairs, held in this process's memory only, cannot reach them.
    from citeline.sources import remote

    if not on_dask or not any(remote.is_remote(path) for path in paths):
        yield
        return
    if pairs:
        raise click.UsageError(
            "--storage-option does not reach Dask workers, which fetch the objects themselves: give --storage-options "
            "FILE (or set CITELINE_STORAGE_OPTIONS in the workers' environment)"
        )
    if file is None:
        yield
        return
    before = os.environ.get(remote.OPTIONS_ENV)
    os.environ[remote.OPTIONS_ENV] = os.path.abspath(file)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(remote.OPTIONS_ENV, None)
        else:
            os.environ[remote.OPTIONS_ENV] = before


def _run_ingest(
    paths: tuple[str, ...],
    index_path: str,
    run: dict[str, Any],
    progress: bool,
    prefect: bool,
    create: dict[str, Any],
    storage_block: str | None,
    placement: Placement,
) -> dict[str, Any]:
    # One ingest of folders and files, in-process or through the Prefect flow (whose run then ends Failed when
    # strict and partial); a strict run that ended partial returns its summary, which the command prints before
    # it exits with status 3.
    from citeline.errors import PartialRunError

    try:
        if prefect:
            from citeline.orchestration.ingest import run_from_cli

            parameters = {**create, **run, "include": list(run["include"]), "exclude": list(run["exclude"])}
            return run_from_cli(
                progress=progress, paths=list(paths), index_path=index_path, dask_address=placement.dask_address,
                dask_workers=placement.dask_workers, shard_workers=placement.shard_workers,
                storage_block=storage_block, **parameters,
            )  # fmt: skip
        from citeline.index import index_for_run

        with index_for_run(index_path, dry_run=run["dry_run"], **create) as index:
            lines = log_lines(progress, run["progress_every"])  # no bar and no terminal: progress lines on stderr
            options = IngestOptions.of(reporter=lines) if lines is not None else None
            return index.ingest(paths, progress=progress, options=options, placement=placement, **run).to_dict()
    except PartialRunError as partial:
        return dict(partial.run.to_dict())


def _log_to_console(verbose: bool, prefect: bool) -> None:
    # Quiet unless -v: the run's stage lines (logger citeline.ingest), or with --prefect Prefect's console lines
    # (which carry the same lines; Prefect still sends them to its API). Must run before Prefect is imported.
    if prefect:
        if not verbose:
            os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    elif verbose:
        console = logging.StreamHandler()
        console.setFormatter(PrintableFormatter("%(message)s"))  # file names and keys reach the terminal escaped
        logging.basicConfig(level=logging.WARNING, handlers=[console])
        logging.getLogger("citeline").setLevel(logging.INFO)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=PathType())
@click.option("--cron", required=True, help='Cron schedule, e.g. "0 * * * *" (hourly).')
@click.option("--timezone", default=None, help="Time zone of the cron schedule [default: UTC].")
@click.option("--name", default="scheduled", show_default=True, help="Deployment name (citeline-ingest/NAME).")
@click.option("--run-now", is_flag=True, help="Start one run at once, then follow the schedule.")
@index_option
@ingest_options
@storage_options_file_option
@storage_block_option
@user_errors
def schedule(paths: tuple[str, ...], cron: str, storage_options_file: str | None, **options: Any) -> None:
    """Serve the ingestion of PATHS on a cron schedule against the Prefect server at PREFECT_API_URL.

    Refuses at once if PREFECT_API_URL is unset or the server does not answer. Registers the deployment
    citeline-ingest/NAME (one run at a time: a run due while another runs is cancelled) and runs its scheduled
    and manually triggered runs until stopped with Ctrl-C. Same as `python -m flows.serve`.

    PATHS may be remote URLs (s3://bucket/prefix, ...): their credentials come from this process's environment,
    --storage-options FILE (the file is read by each run; it is never a parameter of the deployment), or the Prefect
    Secret block --storage-block names.
    """
    from citeline.orchestration.serve import serve
    from citeline.sources import remote

    if storage_options_file is not None:
        remote.load_options(storage_options_file)  # a bad file is one line now, not at the first run
        os.environ[remote.OPTIONS_ENV] = os.path.abspath(storage_options_file)  # the runs' subprocesses inherit it
    serve(list(paths), cron=cron, **options)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=PathType())
@index_option
@watch_options
@click.option(
    "--debounce",
    type=click.FloatRange(0, 3600, min_open=True),
    default=DEFAULT_DEBOUNCE,
    show_default=True,
    help="Seconds of quiet after the last change before a run starts (changes keep coming: a run at least every "
    f"{MAX_GROUP_SECONDS:g} s).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log each run's stages and the changes that started it.")
@json_option
@stop_signals
@user_errors
def watch(
    paths: tuple[str, ...], index_path: str, debounce: float, verbose: bool, as_json: bool, **settings: Any
) -> None:
    """Keep the index current as the files under PATHS change, until Ctrl-C or SIGTERM.

    Ingests PATHS once, then again each time files under them change (grouped until they are quiet for --debounce
    seconds: an editor's save or a git checkout is one run): each run is `citeline ingest PATHS` with these
    options (include/exclude, .citelineignore, --encoding, the removal guard, the writer lock, a ledger row), and
    prints its line. A file that fails is one line, a run refused or failed is one line; the watch goes on.

    Exit status: 130 after Ctrl-C, 143 after SIGTERM (docker stop, systemd): a run in progress commits what it
    embedded whole and is recorded as interrupted; 1 if PATHS or the index cannot be used at the start; 2 a
    usage error."""
    from citeline.errors import PartialRunError
    from citeline.index import index_for_run
    from citeline.ingest import stopping, watching
    from citeline.sources.discovery import resolve_roots
    from citeline.sources.selection import Selection

    create, run = IndexSettings.pick(settings), IngestOptions.pick(settings)
    roots = resolve_roots(paths)  # a missing or unusable PATH is one line before any index is created
    selection = Selection(tuple(run["include"]), tuple(run["exclude"]))  # so is a bad --include or --exclude glob
    _log_to_console(verbose, prefect=False)
    with index_for_run(index_path, dry_run=False, **create) as index:

        def ingest_once() -> RunSummary:
            lines = log_lines(False, run["progress_every"])  # a long run in a log: its progress lines
            try:
                return index.ingest(roots, options=IngestOptions.of(reporter=lines), **run)
            except PartialRunError as partial:  # --strict: reported as the run it was; the watch goes on
                return partial.run

        def on_run(summary: RunSummary) -> None:
            if as_json:
                click.echo(json.dumps(summary.to_dict(), ensure_ascii=False))
            else:
                _print_run(summary.to_dict(), index_path, verbose)
            sys.stdout.flush()  # a log (a pipe) shows each run as it ends

        def on_ready() -> None:
            say(f"watching {', '.join(roots)} (Ctrl-C or SIGTERM to stop)", err=True)

        try:
            watching.watch(
                ingest_once, roots, index_dir=index.path, selection=selection, debounce=debounce, on_run=on_run,
                on_error=lambda line: say(f"Error: {line}", err=True), on_ready=on_ready,
            )  # fmt: skip
        except KeyboardInterrupt:
            if stopping.interrupted_runs():  # a run was stopped: the ingest's line says what it kept
                raise
            signum = stopping.received_signal() or signal.SIGINT
            say(f"stopped watching by {signal.Signals(signum).name}: no run was in progress", err=True)
            sys.exit(128 + signum)


@cli.command()
@click.argument("query")
@index_option
@request_options
@filter_options
@click.option("--full", is_flag=True, help="Print each passage's whole chunk, not only its highlighted sentences.")
@search_dask_option
@shard_workers_option
@format_option
@columns_option
@headers_option
@json_option
@user_errors
def search(
    query: str,
    index_path: str,
    source: tuple[str, ...],
    path_glob: tuple[str, ...],
    where: tuple[str, ...],
    ingested_after: str | None,
    ingested_before: str | None,
    full: bool,
    dask_address: str | None,
    shard_workers: str | None,
    fmt: str | None,
    columns: str | None,
    headers: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Print the passages most relevant to QUERY, with source, offsets and relevance (0-1)."""
    from citeline.index import Index

    output = resolve_format(fmt, as_json)
    picked_columns(columns, SEARCH_FIELDS)  # an unknown field fails before the search, with hits or without
    filters = filters_from(source, path_glob, where, ingested_after, ingested_before)
    request = SearchRequest.of(query, filters=filters, **options)
    results = Index.open(index_path, dask_address=dask_address, shard_workers=shard_workers).search(request)
    if not results and output in (None, "table"):  # for people: say so (csv, tsv, json: an empty answer)
        say(no_passages(filtered=bool(filters)))
        return
    if output:
        emit_search(results, output, columns=columns, headers=headers)
        return
    from citeline.cli import render

    click.echo(render.human(results, full=full), nl=False)  # escaped inside, around its colours


@cli.command()
@index_option
@format_option
@json_option
@user_errors
def status(index_path: str, fmt: str | None, as_json: bool) -> None:
    """Documents, chunks, model, generation and the last run of the index."""
    from citeline.index import Index

    info = Index.open(index_path).status().to_dict()
    output = resolve_format(fmt, as_json)
    if output:
        emit_record(info, output)
        return
    last = info.pop("last_run")
    for key, value in info.items():
        say(f"{key:>18}: {value}")
    if last:
        say(
            f"{'last run':>18}: {last['run_id']} {last['status']} at {last['finished_at']} "
            f"(+{last['added']} ~{last['updated']} ={last['unchanged']} -{last['removed']} !{last['failed']})"
        )


@cli.command()
@index_option
@click.option(
    "--limit", type=click.IntRange(0, MAX_ROWS), default=20, show_default=True, help="How many runs, newest first."
)
@format_option
@columns_option
@headers_option
@json_option
@user_errors
def runs(index_path: str, limit: int, fmt: str | None, columns: str | None, headers: bool, as_json: bool) -> None:
    """The run ledger: one line per ingestion run (start, duration, roots, counts), with per-file errors."""
    from citeline.index import Index

    output = resolve_format(fmt, as_json)
    picked_columns(columns, RUN_FIELDS)
    ledger = Index.open(index_path).runs(limit=limit)
    if output:
        records = [run.to_dict() for run in ledger]
        if output not in ("json", "jsonl"):
            records = [{**record, "duration": run_seconds(record)} for record in records]
        emit_records(records, output, RUN_TABLE_COLUMNS, columns=columns, headers=headers, known=RUN_FIELDS)
        return
    for run in ledger:
        row = run.to_dict()
        seconds = run_seconds(row)
        took = f"{seconds:.1f} s" if seconds is not None else "unfinished"
        say(
            f"{row['run_id']}  {row['status']:<9} started {row['started_at']}, {took}, gen {row['generation']}: "
            f"added {row['added']}  updated {row['updated']}  unchanged {row['unchanged']}  removed "
            f"{row['removed']}  failed {row['failed']}  embedded {row['chunks_embedded']}  reused "
            f"{row['chunks_reused']}"
        )
        say(f"    roots: {', '.join(row['roots']) or '(none)'}")
        for error in row["errors"]:
            say(f"    {error['path']}: {error['reason']}")


@cli.command()
@index_option
@json_option
@user_errors
@click.pass_context
def verify(ctx: click.Context, index_path: str, as_json: bool) -> None:
    """Check that the FAISS file and BM25 folder match DuckDB (ids, vectors, counts, checksums); exit 1 if not."""
    from citeline.index import Index

    report = Index.open(index_path, repair=False).verify()
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        say(
            f"generation {report.generation}: {report.chunks} chunks in DuckDB, "
            f"{report.faiss_ntotal if report.faiss_present else 'no'} vectors in {report.faiss_file}, "
            f"BM25 folder {report.bm25_dir}/ {'present' if report.bm25_present else 'missing'}"
        )
        for problem in report.problems:
            say(f"  problem: {problem}")
        if report.orphans:
            say(f"  orphan files (removed on the next open or run): {', '.join(report.orphans)}")
        say("consistent" if report.ok else f"INCONSISTENT; run `citeline rebuild --index {index_path}`")
    if not report.ok:
        ctx.exit(1)


@cli.command()
@index_option
@wait_option
@json_option
@user_errors
@click.pass_context
def rebuild(ctx: click.Context, index_path: str, wait: float | None, as_json: bool) -> None:
    """Rewrite the FAISS file and BM25 folder from DuckDB (no re-embedding) and remove orphan files."""
    from citeline.index import Index

    report = Index.open(index_path, repair=False).rebuild(wait=wait)
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        say(
            f"rebuilt {report.faiss_file} and {report.bm25_dir}/ from {report.chunks} chunks in DuckDB; "
            + ("consistent" if report.ok else "still inconsistent: " + "; ".join(report.problems))
        )
    if not report.ok:
        ctx.exit(1)


@cli.command(name="eval")
@click.option(
    "--beir",
    "beir",
    required=True,
    type=PathType(exists=True, file_okay=False),
    help="BEIR directory: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv.",
)
@click.option(
    "--index",
    "index_path",
    default=None,
    type=PathType(file_okay=False),
    help="Index to ingest the corpus into and reuse [default: a temporary one].",
)
@click.option(
    "--mode",
    type=click.Choice([*MODES, "all"]),
    default=DEFAULT_MODE,
    show_default=True,
    help="Search mode to score, or all of them.",
)
@click.option("--split", default="test", show_default=True, help="Which qrels/SPLIT.tsv to score against.")
@setting_option("backend")
@click.option(
    "--baseline/--no-baseline",
    default=True,
    show_default=True,
    help="Also score plain tools on whole documents with the same model: dense-doc, lexical-doc (bm25s) and "
    "baseline (their RRF, k=60). The whole-document vectors are cached per corpus and model.",
)
@click.option("--progress/--no-progress", default=None, help="Progress bar [default: when stderr is a terminal].")
@json_option
@user_errors
def eval_(
    beir: str,
    index_path: str | None,
    mode: str,
    split: str,
    backend: str | None,
    baseline: bool,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Score retrieval on a BEIR dataset: nDCG@10 and Recall@100, documents ranked by their best chunk."""
    from citeline.eval.beir import evaluate_beir

    report = evaluate_beir(
        beir,
        index_path=index_path,
        mode=mode,
        split=split,
        backend=backend,
        progress=sys.stderr.isatty() if progress is None else progress,
        baseline=baseline,
    )
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False))
        return
    say(
        f"{report.dataset} ({report.split}): {report.queries} queries, {report.documents} documents in "
        f"{report.chunks} chunks, index {report.index}"
    )
    say(f"{'mode':<11} {'nDCG@10':>8} {'Recall@100':>11} {'seconds':>8}")
    for result in report.results:
        say(f"{result.mode:<11} {result.ndcg_at_10:>8.4f} {result.recall_at_100:>11.4f} {result.seconds:>8.1f}")


for _command in (
    serve.serve,
    serve.mcp,
    documents.documents,
    documents.show,
    documents.remove,
    tokens.tokens,
):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point."""
    warnings.showwarning = show_warning
    cli(prog_name="citeline")


if __name__ == "__main__":
    main()
