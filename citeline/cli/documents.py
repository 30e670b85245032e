"""The ``citeline`` commands that read and manage the documents of an index beside ``ingest`` and ``search``:
``documents`` (list them), ``show`` (one, or a passage of it), ``remove``, and ``ingest -``'s stdin half."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from citeline.cli.common import (
    DOCUMENT_TABLE_COLUMNS,
    PathType,
    columns_option,
    emit_records,
    filter_options,
    filters_from,
    format_option,
    headers_option,
    index_option,
    json_option,
    name_records,
    picked_columns,
    resolve_format,
    say,
    user_errors,
    wait_option,
)
from citeline.ingest.options import IndexSettings
from citeline.sources.document import record_name
from citeline.store.connection import MAX_ROWS
from citeline.util.output import printable

#: Characters ``show --around`` prints on each side of the offset.
AROUND_CHARS = 300


@click.command()
@index_option
@filter_options
@click.option("--limit", type=click.IntRange(1, MAX_ROWS), default=None, help="At most N documents [default: all].")
@click.option(
    "--offset",
    type=click.IntRange(0, MAX_ROWS),
    default=0,
    help="Skip the first N documents (paging).",
    show_default=True,
)
@format_option
@columns_option
@headers_option
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
    offset: int,
    fmt: str | None,
    columns: str | None,
    headers: bool,
    as_json: bool,
) -> None:
    """List the documents in the index: id, source, title, format, chunks, pages, ingested_at, run, metadata."""
    from citeline.index import Index

    filters = filters_from(source, path_glob, where, ingested_after, ingested_before)
    output = resolve_format(fmt, as_json, default="table")
    assert output is not None
    from citeline.store.documents import DOCUMENT_FIELDS  # here: the listing imports pyarrow, which search does not

    picked_columns(columns, DOCUMENT_FIELDS)
    rows = [
        record.to_dict()
        for record in Index.open(index_path, repair=False).documents(filters=filters, limit=limit, offset=offset)
    ]
    if not rows and output == "table":
        say("no documents" + (" match the filters" if filters else " (see `citeline ingest`)"), err=True)
        return
    name_records(rows, output)
    emit_records(rows, output, DOCUMENT_TABLE_COLUMNS, columns=columns, headers=headers, known=DOCUMENT_FIELDS)


@click.command()
@click.argument("doc_id", metavar="DOC")
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
    """Print a document's text (or one chunk, or the text around an offset) with its provenance.

    DOC is a document id, a source file's path, or a record's name as search prints it (records.jsonl#rec17, its
    path#id): offsets are into the document's text, a record's own text for a record."""
    from citeline.index import Index

    if chunk is not None and around is not None:
        raise click.UsageError("give --chunk or --around, not both")
    detail = Index.open(index_path, repair=False).document(doc_id)
    start, end = 0, len(detail.text)
    if chunk is not None:
        start, end = detail.chunk_span(chunk)
    elif around is not None:
        start, end = detail.excerpt(around, around, context=AROUND_CHARS)
    doc, text = detail.to_dict(), detail.text
    if as_json:
        excerpt = {**{key: value for key, value in doc.items() if key != "text"}, "char_start": start,
                   "char_end": end, "text": text[start:end]}  # fmt: skip
        click.echo(json.dumps(excerpt, ensure_ascii=False))
        return
    pages = f", {doc['pages']} pages" if doc["pages"] else ""
    pages += f", read as {doc['encoding']}" if doc.get("encoding") else ""
    # A record's offsets are into its own text, not its file's: say so beside its name (file#id).
    of = " in the record's text (not the file's)" if doc["record_id"] is not None else ""
    name = record_name(doc["source_path"], doc["record_id"])
    click.echo(click.style(printable(name), fg="cyan") + f"  [chars {start}-{end} of {len(text)}{of}]")
    say(f"  title: {doc['title']}")
    say(f"  id {doc['doc_id']}, {doc['format']}, {doc['chunks']} chunks{pages}, content {doc['content_hash']}")
    say(f"  ingested {doc['ingested_at']} by run {doc['run_id']}")
    if doc["metadata"]:
        say(f"  metadata: {json.dumps(doc['metadata'], ensure_ascii=False)}")
    say()
    say(text[start:end], lines=True)


@click.command()
@click.argument("paths", nargs=-1, type=PathType())
@index_option
@click.option("--source", multiple=True, help="Remove every document of this source (as the --source filter selects).")
@click.option("--doc", "doc_ids", multiple=True, metavar="DOC_ID", help="Remove the document with this id; repeatable.")
@click.option("--dry-run", is_flag=True, help="List what would be removed; write nothing.")
@wait_option
@json_option
@user_errors
def remove(
    paths: tuple[str, ...],
    index_path: str,
    source: tuple[str, ...],
    doc_ids: tuple[str, ...],
    dry_run: bool,
    wait: float | None,
    as_json: bool,
) -> None:
    """Remove documents from the index: those whose source path is PATH or lies under the folder PATH, of a
    --source, or with a --doc id. Recorded as a run (`citeline runs`); a later `ingest` of their folder adds them
    back if their files are still there."""
    from citeline.index import Index

    summary = Index.open(index_path, repair=not dry_run).remove(
        paths, source=source, doc_ids=doc_ids, dry_run=dry_run, wait=wait
    )
    if as_json:
        click.echo(json.dumps(summary.to_dict(), ensure_ascii=False))
        return
    for document in summary.documents:
        name = document.get("name") or document["source_path"]  # a record: file#id
        say(f"{'would remove' if dry_run else 'removed'} {document['doc_id']}  {name}")
    count = f"{summary.removed} document{'s' * (summary.removed != 1)}"
    if dry_run:
        say(f"dry run, nothing written: would remove {count} from {index_path}", err=True)
    else:
        say(f"run {summary.run_id}: removed {count}; generation {summary.generation}", err=True)


def ingest_stdin(
    paths: tuple[str, ...], index_path: str, source: str | None, settings: dict[str, Any]
) -> dict[str, Any]:
    """`citeline ingest -`: texts as JSON lines on stdin (``citeline.ingest.texts.read_jsonl``) into
    ``Index.add_texts``.
    ``settings`` are the ``ingest`` options; those that only apply to folders must be left at their defaults."""
    from citeline.index import index_for_run
    from citeline.ingest.texts import DEFAULT_SOURCE, read_jsonl

    if paths != ("-",):
        raise click.UsageError("`-` (texts as JSON lines on stdin) cannot be combined with other PATHS")
    folders_only = ("prefect", "dask_address", "dask_workers", "allow_removals", "include", "exclude", "strict")
    for name in (*folders_only, "encoding", "shards"):
        if settings[name]:
            raise click.UsageError(f"--{name.replace('_', '-')} applies to folders, not to `ingest -`")
    records = read_jsonl(sys.stdin.buffer)  # all read and checked before the index is touched
    create = IndexSettings.pick(settings)
    with index_for_run(index_path, dry_run=settings["dry_run"], **create) as index:
        run = index.add_texts(
            records["texts"], records["ids"], records["metadata"], source or DEFAULT_SOURCE, titles=records["titles"],
            wait=settings["wait"], progress=settings["progress"], dry_run=settings["dry_run"],
        )  # fmt: skip
    return run.to_dict()
