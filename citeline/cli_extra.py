"""Commands for ``citeline``: ``serve``, ``documents``, ``show``, and the ``--format`` option of ``search``,
``documents``, ``runs`` and ``status``.

Not attached yet. To attach them, at the end of ``citeline/cli.py`` (after every name this module imports from it
is defined)::

    from citeline import cli_extra  # noqa: E402

    cli_extra.register(cli)

and give ``search``, ``runs`` and ``status`` the option with ``@cli_extra.format_option`` (beside ``--json``),
printing through :func:`emit_search`, :func:`emit_records` and :func:`emit_record` when ``resolve_format``
returns a format (None keeps the current human-readable output).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from citeline.cli import _where, index_option, json_option, user_errors
from citeline.formats import FORMATS, format_record, format_records, search_records

__all__ = [
    "SEARCH_TABLE_COLUMNS",
    "documents",
    "emit_record",
    "emit_records",
    "emit_search",
    "format_option",
    "register",
    "resolve_format",
    "serve",
    "show",
]

F = TypeVar("F", bound=Callable[..., Any])

format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Output format: an aligned table, a JSON array, JSON lines, CSV or TSV (--json is --format jsonl).",
)

#: The columns of ``search --format table`` (csv and tsv carry every field; json and jsonl whole records).
SEARCH_TABLE_COLUMNS = ("rank", "score", "source_id", "ordinal", "char_start", "char_end", "page", "title", "text")
DOCUMENT_TABLE_COLUMNS = ("doc_id", "source_id", "title", "format", "chunks", "pages", "ingested_at", "run_id")
RUN_TABLE_COLUMNS = (
    "run_id", "status", "started_at", "generation", "added", "updated", "unchanged", "removed", "failed",
    "chunks_embedded", "chunks_reused",
)  # fmt: skip
#: Table cells wider than this wrap (passage texts, titles).
TABLE_CELL_WIDTH = 60
#: Characters ``show --around`` prints on each side of the offset.
AROUND_CHARS = 300


def resolve_format(fmt: str | None, as_json: bool, default: str | None = None) -> str | None:
    """The output format of a command given ``--format`` and the ``--json`` shortcut (``jsonl``, what ``--json``
    printed so far, so scripts keep working); ``default`` when neither is given."""
    if as_json and fmt not in (None, "jsonl"):
        raise click.UsageError(f"--json means --format jsonl; it cannot be combined with --format {fmt}")
    return "jsonl" if as_json else (fmt or default)


def emit_records(records: Sequence[Mapping[str, Any]], fmt: str, table_columns: Sequence[str] | None = None) -> None:
    """Print records in ``fmt``; ``table_columns`` picks the columns of a table."""
    columns = table_columns if fmt == "table" else None
    click.echo(format_records(records, fmt, columns=columns, max_col_width=TABLE_CELL_WIDTH), nl=False)


def emit_search(results: Sequence[Any], fmt: str) -> None:
    """Print search results (``SearchResult`` objects) in ``fmt``, each record with its ``rank``."""
    emit_records(search_records(results), fmt, SEARCH_TABLE_COLUMNS)


def emit_record(record: Mapping[str, Any], fmt: str) -> None:
    """Print one record (``status``) in ``fmt``."""
    click.echo(format_record(record, fmt), nl=False)


@click.command()
@index_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every one).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="Port to listen on.")
@user_errors
def serve(index_path: str, host: str, port: int) -> None:
    """Serve the index over HTTP (read-only): GET /search, /documents, /documents/ID, /status, /runs, /health.

    The OpenAPI schema is at /openapi.json and interactive docs at /docs. The server never takes the writer
    lock, so `citeline ingest` can run beside it; each query sees the newest committed generation.
    """
    from citeline.server import serve as run_server

    run_server(index_path, host=host, port=port)


@click.command()
@index_option
@click.option("--source", multiple=True, help="Only this ingested folder or file (or a source id); repeatable.")
@click.option(
    "--path",
    "path_glob",
    multiple=True,
    metavar="GLOB",
    help="Only documents whose source id or path matches GLOB, e.g. '*.md'; repeatable.",
)
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only documents whose metadata KEY equals VALUE; repeatable (keys AND, a repeated key ORs).",
)
@click.option("--ingested-after", metavar="DATE", help="Only documents ingested at or after DATE (ISO 8601).")
@click.option("--ingested-before", metavar="DATE", help="Only documents ingested before DATE (ISO 8601).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N documents [default: all].")
@format_option
@json_option
@user_errors
def documents(
    index_path: str,
    source: tuple[str, ...],
    path_glob: tuple[str, ...],
    where: tuple[str, ...],
    ingested_after: str | None,
    ingested_before: str | None,
    limit: int | None,
    fmt: str | None,
    as_json: bool,
) -> None:
    """List the documents in the index: id, source, title, format, chunks, pages, ingested_at, run, metadata."""
    from citeline import _documents
    from citeline.index import Index

    filters: dict[str, Any] = {
        key: value
        for key, value in {
            "source": list(source), "path_glob": list(path_glob), "meta": _where(where),
            "ingested_after": ingested_after, "ingested_before": ingested_before,
        }.items()
        if value
    }  # fmt: skip
    output = resolve_format(fmt, as_json, default="table")
    assert output is not None
    rows = _documents.documents(Index.open(index_path, repair=False), filters=filters, limit=limit)
    if not rows and output == "table":
        click.echo("no documents" + (" match the filters" if filters else " (see `citeline ingest`)"), err=True)
        return
    emit_records(rows, output, DOCUMENT_TABLE_COLUMNS)


@click.command()
@click.argument("doc_id")
@index_option
@click.option(
    "--chunk", type=click.IntRange(min=0), default=None, metavar="N", help="Only chunk N (its ordinal) of the document."
)
@click.option(
    "--around",
    type=click.IntRange(min=0),
    default=None,
    metavar="CHAR",
    help=f"Only the text around character offset CHAR ({AROUND_CHARS} characters each side).",
)
@json_option
@user_errors
def show(index_path: str, doc_id: str, chunk: int | None, around: int | None, as_json: bool) -> None:
    """Print a document's text (or one chunk, or the text around an offset) with its provenance."""
    from citeline import _documents
    from citeline.index import Index

    if chunk is not None and around is not None:
        raise click.UsageError("give --chunk or --around, not both")
    doc = _documents.document(Index.open(index_path, repair=False), doc_id)
    text: str = doc["text"]
    start, end = 0, len(text)
    if chunk is not None:
        spans = [span for span in doc["spans"] if span["ordinal"] == chunk]
        if not spans:
            raise click.ClickException(f"document {doc_id} has chunks 0 to {len(doc['spans']) - 1}, not {chunk}")
        start, end = spans[0]["char_start"], spans[0]["char_end"]
    elif around is not None:
        if around > len(text):
            raise click.ClickException(
                f"document {doc_id} has {len(text)} characters; --around {around} is past the end"
            )
        start, end = max(0, around - AROUND_CHARS), min(len(text), around + AROUND_CHARS)
    if as_json:
        excerpt = {**{key: value for key, value in doc.items() if key != "text"}, "char_start": start,
                   "char_end": end, "text": text[start:end]}  # fmt: skip
        click.echo(json.dumps(excerpt, ensure_ascii=False))
        return
    pages = f", {doc['pages']} pages" if doc["pages"] else ""
    click.echo(click.style(doc["source_path"], fg="cyan") + f"  [chars {start}-{end} of {len(text)}]")
    click.echo(f"  title: {doc['title']}")
    click.echo(f"  id {doc['doc_id']}, {doc['format']}, {doc['chunks']} chunks{pages}, content {doc['content_hash']}")
    click.echo(f"  ingested {doc['ingested_at']} by run {doc['run_id']}")
    if doc["metadata"]:
        click.echo(f"  metadata: {json.dumps(doc['metadata'], ensure_ascii=False)}")
    click.echo()
    click.echo(text[start:end])


def register(group: click.Group) -> None:
    """Attach ``serve``, ``documents`` and ``show`` to the ``citeline`` group."""
    for command in (serve, documents, show):
        group.add_command(command)
