"""What the ``citeline`` commands share: option tables (the ingestion settings are one table, used by ``ingest``,
``schedule``, ``python -m flows.ingest`` and ``python -m flows.serve``), filter options, output formats, and
one-line errors."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, fields
from functools import partial, wraps
from typing import TYPE_CHECKING, Any, TypeVar

import click

from citeline.errors import CitelineError, QueryError, SettingsError
from citeline.ingest import stopping
from citeline.ingest.options import IndexSettings, IngestOptions, placement_help, user_options
from citeline.query.results import SearchResult
from citeline.sources.document import record_name
from citeline.store import filters
from citeline.store.filters import FilterOptions
from citeline.store.ledger import RunSummary
from citeline.util.declared import offered, people_default
from citeline.util.output import OUTPUT_FORMATS, format_record, format_records, printable, search_records

if TYPE_CHECKING:
    from citeline.ingest.progress import Reporter

F = TypeVar("F", bound=Callable[..., Any])


class PathType(click.Path):
    """``click.Path`` that reports a path it cannot even look at (a NUL byte) as a usage error, not a traceback."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Check for a NUL byte, then convert as ``click.Path`` does."""
        if isinstance(value, str) and "\0" in value:
            self.fail(f"{value!r} contains a NUL character", param, ctx)
        return super().convert(value, param, ctx)


index_option = click.option(
    "--index",
    "index_path",
    default="index",
    envvar="CITELINE_INDEX",
    show_default=True,
    type=PathType(file_okay=False),
    help="Index directory (env CITELINE_INDEX).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON (one object per line).")


def timeout_option(help: str) -> Callable[[F], F]:
    """``--timeout SECONDS`` of a server (``serve``, ``mcp``): how long one request may take, waiting included."""
    return click.option(
        "--timeout", type=click.FloatRange(0, 3600, min_open=True), default=30.0, show_default=True, help=help
    )


def option_of(owner: type, spec: Field[Any]) -> Callable[[F], F]:
    """The click option of a declared field of ``owner`` (:class:`IndexSettings`, :class:`IngestOptions`; see
    :mod:`citeline.util.declared`): flag ``--name-with-dashes``, its default, help text, bounds (``click.IntRange``,
    ``click.FloatRange``) and choices (``click.Choice``) as declared there."""
    flag, meta, default = "--" + spec.name.replace("_", "-"), spec.metadata, spec.default
    low, high, choices, kind = meta["minimum"], meta["maximum"], meta.get("choices"), spec.type
    if kind == "bool | None":  # None: the index's own (or the default); --no-NAME: off
        return click.option(f"{flag}/--no-{flag[2:]}", default=None, help=meta["help"])
    if isinstance(default, bool):
        return click.option(flag, is_flag=True, default=default, help=meta["help"])
    if isinstance(default, tuple):
        return click.option(flag, multiple=True, default=default, metavar=meta["metavar"], help=meta["help"])
    if choices is not None:
        return click.option(flag, type=click.Choice(choices), default=default, help=meta["help"])
    if kind in ("str", "str | None"):  # checked as the class checks it (an unknown codec): a usage error
        checked = partial(_checked, owner)
        return click.option(flag, default=default, metavar=meta["metavar"], help=meta["help"], callback=checked)
    number: Any = float if kind in ("float", "float | None") else int
    bounds = (click.FloatRange if number is float else click.IntRange)(min=low, max=high)
    shown, env = default is not None, meta.get("env")
    return click.option(
        flag, type=bounds, default=default, show_default=shown, help=meta["help"], envvar=env, show_envvar=bool(env)
    )


def _checked(owner: type, ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    # A text option's value as its class takes it (``--encoding Latin-1`` -> ``iso8859-1``), or a usage error.
    if value is None or param.name is None:
        return value
    try:
        return getattr(owner(**{param.name: value}), param.name)
    except SettingsError as exc:
        raise click.BadParameter(str(exc)) from None


def setting_option(name: str) -> Callable[[F], F]:
    """The click option of the index setting ``name`` (a field of :class:`IndexSettings`)."""
    return option_of(IndexSettings, next(spec for spec in offered(IndexSettings, "cli") if spec.name == name))


def request_option(spec: Field[Any]) -> Callable[[F], F]:
    """The click option of a declared field of :class:`~citeline.SearchRequest`: its flags (``--name-with-dashes``,
    or the declared ``flags``; an on/off option ``--name/--no-name``), its default where people read
    (``people_default``), help text, choices and a fraction's bounds, all as declared there (a count's bounds the
    request checks)."""
    meta, name = spec.metadata, spec.name
    flags = meta.get("flags") or ("--" + name.replace("_", "-"),)
    default, choices = people_default(spec), meta.get("choices")
    if isinstance(default, bool):
        switch = flags[0] if "/" in flags[0] else f"{flags[0]}/--no-{flags[0][2:]}"
        shown = "[default:" not in meta["help"]  # a help text that says its defaults itself
        return click.option(switch, name, default=default, show_default=shown, help=meta["help"])
    # A fraction's declared bounds are click's to refuse (a usage error naming the flag, as --min-score's always
    # was); a count is only converted, and the request checks it: it clamps a k above its maximum to the maximum
    # (the CLI's -k 100000000 lists every passage), and k=0 is its one-line error.
    if choices is not None:
        kind: click.ParamType = click.Choice(choices)
    elif spec.type in ("float", "float | None"):
        kind = click.FloatRange(min=meta["minimum"], max=meta["maximum"])
    else:
        kind = click.INT
    return click.option(*flags, name, type=kind, default=default, show_default=default is not None, help=meta["help"])


def request_options(func: F) -> F:
    """Add :class:`~citeline.SearchRequest`'s options (all declared fields but the text and the filters, which are
    the command's argument and :func:`filter_options`) to a command, in declared order: the command receives them
    under the request's names."""
    from citeline.query.plan import SearchRequest

    for spec in reversed([spec for spec in offered(SearchRequest, "cli") if spec.name not in ("text", "filters")]):
        func = request_option(spec)(func)
    return func


#: The index settings' options (``citeline ingest``/``schedule``), in IndexSettings' order.
setting_options = [option_of(IndexSettings, spec) for spec in offered(IndexSettings, "cli")]
#: The run settings' options (``citeline ingest``/``schedule``), in IngestOptions' order.
run_options = [option_of(IngestOptions, spec) for spec in user_options("cli")]
wait_option = option_of(IngestOptions, next(spec for spec in user_options("cli") if spec.name == "wait"))
# The settings of an ingestion run, shared by `ingest` and `schedule`: Index.create's, the run's (one option per
# declared field: citeline.ingest.options), and where the work runs.
_INGEST_OPTIONS = [
    *setting_options,
    *run_options,
    click.option("--dask-address", default=None, help=placement_help("dask_address")),
    click.option("--dask-workers", type=click.IntRange(min=1), default=None, help=placement_help("dask_workers")),
]


def watch_options(func: F) -> F:
    """Add the options of ``citeline watch`` to a command: the index settings and the run options of ``ingest``
    but ``--dry-run`` (a watch writes; ``citeline ingest --dry-run`` plans one run)."""
    chosen = [option_of(IngestOptions, spec) for spec in user_options("cli") if spec.name != "dry_run"]
    for option in reversed([*setting_options, *chosen]):
        func = option(func)
    return func


shard_workers_option = click.option("--shard-workers", default=None, help=placement_help("shard_workers"))
search_dask_option = click.option(
    "--dask-address",
    default=None,
    help="On a sharded index: run each shard's part of the search as a task on this Dask scheduler's worker that "
    "holds the shard (tcp://HOST:8786) [default: threads in this process].",
)


storage_options_file_option = click.option(
    "--storage-options",
    "storage_options_file",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="A YAML or JSON file of fsspec storage options for remote roots (s3://, gs://, az://...: credentials, "
    "endpoint_url; flat, or one mapping per protocol) [default: env CITELINE_STORAGE_OPTIONS, else the store's "
    "own (environment, ~/.aws, ...)]. Never stored or logged.",
)
storage_block_option = click.option(
    "--storage-block", default=None, metavar="NAME", help=placement_help("storage_block")
)
storage_option_option = click.option(
    "--storage-option",
    "storage_option_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="One fsspec storage option for remote roots (key=..., anon=true, client_kwargs.endpoint_url=http://...); "
    "repeatable, over --storage-options' file. Never stored or logged.",
)


def storage_options_from(pairs: Sequence[str], file: str | None) -> dict[str, Any] | None:
    """The storage options a command was given (``--storage-options FILE``, then ``--storage-option`` pairs over
    it), or None when it was given none (the file of ``CITELINE_STORAGE_OPTIONS``, else the clients' defaults)."""
    from citeline.sources import remote

    if not pairs and file is None:
        return None
    options = remote.load_options(file) if file is not None else {}
    for key, value in remote.parse_pairs(pairs).items():
        if isinstance(value, dict) and isinstance(options.get(key), dict):
            options[key] = {**options[key], **value}
        else:
            options[key] = value
    return options


def ingest_options(func: F) -> F:
    """Add the ingestion settings' options to a command."""
    for option in reversed(_INGEST_OPTIONS):
        func = option(func)
    return func


def stop_signals(func: F) -> F:
    """Run the command with SIGTERM handled as Ctrl-C is (``citeline.ingest.stopping``): ``docker stop``,
    systemd and Kubernetes then stop an ingest as Ctrl-C does, keeping what was embedded whole; the exit status
    is 128 + the signal (:meth:`OneLineErrors.main`)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with stopping.handle_stop_signals():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def say(message: str = "", *, err: bool = False, nl: bool = True, lines: bool = False) -> None:
    """Print a line for people (on stderr with ``err``), its control characters escaped
    (:func:`citeline.util.output.printable`; ``lines``: text of several lines, its newlines and tabs kept): how the
    CLI prints everything but its exact formats (json, jsonl, csv, tsv), so that no file name, S3 key, title or
    error message can drive the terminal."""
    click.echo(printable(message, lines=lines), err=err, nl=nl)


def log_lines(bar: bool, every: float) -> Reporter | None:
    """The reporter of a run whose stderr is not a terminal (cron, systemd, nohup, a container) and draws no bar: a
    progress line on stderr every ``every`` seconds (``--progress-every``); None where a bar or a terminal shows
    progress, or ``every`` is 0."""
    if bar or every <= 0 or sys.stderr.isatty():
        return None
    from citeline.ingest.progress import Reporter

    return Reporter(every, write=lambda line: say(line, err=True))


def interrupted_line(signum: int) -> str:
    """The one line an ingest stopped by ``signum`` ends with: what its runs (one, or one per shard) kept."""
    name = signal.Signals(signum).name
    runs = stopping.interrupted_runs()
    if not runs:
        return f"interrupted by {name}" if signum != signal.SIGINT else "Aborted!"
    added, updated = sum(run.added for run in runs), sum(run.updated for run in runs)
    ids = ", ".join(run.run_id for run in runs)
    kept = (
        f"kept {added + updated} documents embedded whole ({added} added, {updated} updated), generation "
        f"{max(run.generation or 0 for run in runs)}"
        if added + updated
        else "nothing of it was committed"
    )
    return f"interrupted by {name}: {kept}; run {ids} is recorded as interrupted; run the same command to finish"


def user_errors(func: F) -> F:
    """Turn citeline's typed errors into a one-line message and their exit status (``exit_code``: 1, 2 for a usage
    error), never a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except CitelineError as exc:  # its own exit status; other ValueErrors are bugs
            if exc.exit_code == click.UsageError.exit_code:  # the library's usage errors: the line names --help
                raise click.UsageError(str(exc)) from exc
            error = click.ClickException(str(exc))
            error.exit_code = exc.exit_code  # type: ignore[misc]  # a ClassVar in click; OneLineErrors reads it here
            raise error from exc
        except BrokenPipeError:  # `citeline ... | head`: click's own handler exits quietly
            raise
        except OSError as exc:  # permissions, a full disk, a path that is a file: the user can fix these
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{where}{exc.strerror or exc}") from exc
        except Exception as exc:  # DuckDB's errors: the library reports damage where it reads; this is the last resort
            duckdb = sys.modules.get("duckdb")  # not imported: not DuckDB's (a search may never load it)
            if duckdb is None or not isinstance(exc, duckdb.Error):
                raise
            from citeline.store.connection import argument_error

            if (mistake := argument_error(exc)) is not None:  # the user's text, not the database
                raise click.ClickException(str(mistake)) from exc
            raise click.ClickException(f"the index's database failed: {str(exc).splitlines()[0]}") from exc

    return wrapper  # type: ignore[return-value]


class OneLineErrors(click.Group):
    """A group whose errors, usage errors included, print as one ``Error: ...`` line (exit 1, or 2 for usage)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command; in standalone mode, report click's errors on one line instead of a usage block."""
        if not standalone_mode:
            return super().main(args, prog_name, standalone_mode=False, **extra)
        try:
            result = super().main(args, prog_name, standalone_mode=False, **extra)
        except click.ClickException as exc:
            message = " ".join(exc.format_message().split())
            ctx = getattr(exc, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if isinstance(exc, click.UsageError) and ctx else ""
            say(f"Error: {message}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:  # Ctrl-C or SIGTERM (click turns KeyboardInterrupt into Abort): 128 + the signal
            signum = stopping.received_signal() or signal.SIGINT
            say(interrupted_line(signum), err=True)
            sys.exit(128 + signum)
        sys.exit(result if isinstance(result, int) else 0)


def show_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    # One line per warning on stderr, without the file and line of the code that raised it.
    say(f"warning: {message}", err=True)


def _filter_option(spec: Field[Any]) -> Callable[[F], F]:
    # A declared filter option (FilterOptions): repeatable when it takes several values.
    meta = spec.metadata
    flags = meta.get("flags") or ("--" + spec.name.replace("_", "-"),)
    if isinstance(spec.default, tuple):
        return click.option(*flags, multiple=True, metavar=meta["metavar"], help=meta["help"] + " Repeatable.")
    return click.option(*flags, metavar=meta["metavar"], help=meta["help"])


#: The filter options (FilterOptions' fields, in declared order).
_FILTER_OPTIONS = [_filter_option(spec) for spec in offered(FilterOptions)]


def filter_options(func: F) -> F:
    """Add the filter options (``--source``, ``--path``, ``--where``, ``--ingested-after/-before``) to a command."""
    for option in reversed(_FILTER_OPTIONS):
        func = option(func)
    return func


def filters_from(
    source: tuple[str, ...],
    path_glob: tuple[str, ...],
    where: tuple[str, ...],
    ingested_after: str | None,
    ingested_before: str | None,
) -> dict[str, Any]:
    """The filter options as the ``filters=`` dict of the Python API (:func:`citeline.store.filters.filters_from`,
    which every surface calls); a malformed ``--where`` is a usage error naming the flag."""
    try:
        return filters.filters_from(source, path_glob, where, ingested_after, ingested_before, where_name="'--where'")
    except QueryError as exc:
        raise click.UsageError(str(exc)) from None


format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(OUTPUT_FORMATS),
    default=None,
    help="Output format: an aligned table, a JSON array, JSON lines, CSV or TSV (--json is --format jsonl).",
)

#: The default columns of ``--format table`` (``--columns`` picks others; csv and tsv carry every field unless
#: told; json and jsonl whole records). ``highlight`` is a search result's best highlighted sentence, ``duration``
#: a run's seconds.
SEARCH_TABLE_COLUMNS = ("rank", "relevance", "source_path", "title", "highlight")
#: Every field of a search record (``--columns`` may name any): its rank, ``SearchResult``'s fields and the best
#: ``highlight``; of a run record: ``RunSummary``'s fields and its ``duration``.
SEARCH_FIELDS = ("rank", *(spec.name for spec in fields(SearchResult)), "highlight")
RUN_FIELDS = (*(spec.name for spec in fields(RunSummary)), "duration")
DOCUMENT_TABLE_COLUMNS = ("doc_id", "source_path", "title", "format", "chunks", "pages", "ingested_at")
RUN_TABLE_COLUMNS = (
    "run_id", "status", "started_at", "duration", "roots", "added", "updated", "unchanged", "removed", "failed",
)  # fmt: skip

columns_option = click.option(
    "--columns",
    default=None,
    metavar="A,B,...",
    help="Fields to print, in this order (table, csv, tsv) [default: a table's own columns, every field in csv/tsv].",
)
headers_option = click.option(
    "--headers/--no-headers", default=True, show_default=True, help="Print the header row (table, csv, tsv)."
)


def resolve_format(fmt: str | None, as_json: bool, default: str | None = None) -> str | None:
    """The output format of a command given ``--format`` and the ``--json`` shortcut (``jsonl``, what ``--json``
    printed so far, so scripts keep working); ``default`` when neither is given."""
    if as_json and fmt not in (None, "jsonl"):
        raise click.UsageError(f"--json means --format jsonl; it cannot be combined with --format {fmt}")
    return "jsonl" if as_json else (fmt or default)


def picked_columns(columns: str | None, known: Sequence[str]) -> list[str] | None:
    """The fields ``--columns`` (comma-separated) picks, checked against ``known`` (the fields a command's records
    carry, declared: :data:`SEARCH_FIELDS`, ``DOCUMENT_FIELDS``, :data:`RUN_FIELDS`), so that an unknown field is a
    usage error before any work, whether or not there is anything to print; None when not given."""
    if columns is None:
        return None
    picked = [name.strip() for name in columns.split(",") if name.strip()]
    unknown = [name for name in picked if name not in known]
    if unknown or not picked:
        raise click.BadParameter(
            f"unknown field {', '.join(unknown) or '(none given)'}; choose from {', '.join(known)}",
            param_hint="--columns",
        )
    return picked


def emit_records(
    records: Sequence[Mapping[str, Any]],
    fmt: str,
    table_columns: Sequence[str] | None = None,
    *,
    columns: str | None = None,
    headers: bool = True,
    known: Sequence[str] = (),
) -> None:
    """Print records in ``fmt``: ``columns`` (``--columns``, comma-separated) or, for a table, ``table_columns``
    pick the fields; an unknown field (neither in ``known``, the declared fields, nor in a record) is a usage error
    naming the known ones."""
    picked: Sequence[str] | None = table_columns if fmt == "table" else None
    if columns is not None:
        names = dict.fromkeys([*known, *(key for record in records for key in record)]) or (table_columns or ())
        picked = picked_columns(columns, list(names))
    click.echo(format_records(records, fmt, columns=picked, headers=headers), nl=False)


def emit_search(results: Sequence[Any], fmt: str, *, columns: str | None = None, headers: bool = True) -> None:
    """Print search results (``SearchResult`` objects) in ``fmt``, each record with its ``rank`` (and, in
    table, csv and tsv, its best ``highlight``); a table of no results is the line the text format prints."""
    if not results and fmt == "table":
        say(no_passages(filtered=False))
        return
    records = search_records(results)
    if fmt not in ("json", "jsonl"):
        for record in records:
            best = max(record.get("highlights") or [], key=lambda h: h["score"], default=None)
            record["highlight"] = best["text"] if best else record["text"]
    name_records(records, fmt)
    emit_records(records, fmt, SEARCH_TABLE_COLUMNS, columns=columns, headers=headers, known=SEARCH_FIELDS)


def name_records(records: Sequence[dict[str, Any]], fmt: str) -> None:
    """In a table, which people read, a record's ``source_path`` is the record's name (``records.jsonl#rec17``, as
    the text format prints it): every record of a file would otherwise show the same path. Other formats keep the
    path and the ``record_id`` apart, for programs."""
    if fmt == "table":
        for record in records:
            if record.get("record_id") is not None:
                record["source_path"] = record_name(record["source_path"], record["record_id"])


def no_passages(*, filtered: bool) -> str:
    """What ``citeline search`` prints for an answer without passages (the text format and ``--format table``)."""
    hint = " matching the filters" if filtered else ""
    return (
        f"no passages found{hint} above the relevance floor (--min-score 0 shows the best matches anyway; is the "
        "index empty? see `citeline status`)"
    )


def run_seconds(run: Mapping[str, Any]) -> float | None:
    """A run record's duration in seconds (None while it runs)."""
    from datetime import datetime

    if not run.get("finished_at") or not run.get("started_at"):
        return None
    started, finished = (datetime.fromisoformat(str(run[key])) for key in ("started_at", "finished_at"))
    return round((finished - started).total_seconds(), 1)


def emit_record(record: Mapping[str, Any], fmt: str) -> None:
    """Print one record (``status``) in ``fmt``."""
    click.echo(format_record(record, fmt), nl=False)
