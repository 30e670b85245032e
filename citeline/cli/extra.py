"""The ``citeline`` commands that read an index for people and other programs (``serve``, ``documents``, ``show``),
and the ones that manage what is in it beside ``ingest`` (``remove``, and ``ingest -``'s stdin half)."""

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
    search_dask_option,
    shard_workers_option,
    timeout_option,
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
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0: every one; needs --token or --no-auth).",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="Port to listen on.")
@click.option(
    "--token",
    envvar="CITELINE_TOKEN",
    show_envvar=True,
    default=None,
    help="Requests must send `Authorization: Bearer TOKEN` (browsers: any user, TOKEN as password). Prefer the "
    "environment variable: a flag shows in `ps`.",
)
@click.option("--no-auth", is_flag=True, help="Serve a non-loopback --host without a token (on purpose).")
@click.option(
    "--cors", multiple=True, metavar="ORIGIN", help="Let pages of ORIGIN call the API from a browser (repeatable)."
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="HOST",
    help="Without a token, also answer requests whose Host is HOST (NAME on any port, or NAME:PORT; * for any "
    "host, behind a proxy that checks it). Default: the bound address and localhost, on the port (repeatable).",
)
@click.option(
    "--tokens",
    "tokens_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The named tokens' file (`citeline tokens`), read again when it changes [default: INDEX/tokens.json].",
)
@click.option(
    "--access-log",
    type=click.Choice(["plain", "json", "off"]),
    default="plain",
    show_default=True,
    help="A line per request (token name, route, status, seconds) on the citeline.access logger.",
)
@click.option("--root-path", default="", metavar="PREFIX", help="The path prefix a reverse proxy serves this under.")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Processes serving the port; each runs one search at a time.",
)
@timeout_option("Seconds a request may take (waiting included) before it is answered 503.")
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
    help="uvicorn's log level (info logs every request).",
)
@search_dask_option
@shard_workers_option
@user_errors
def serve(
    index_path: str,
    host: str,
    port: int,
    token: str | None,
    no_auth: bool,
    cors: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    tokens_file: str | None,
    access_log: str,
    root_path: str,
    workers: int,
    timeout: float,
    log_level: str,
    dask_address: str | None,
    shard_workers: str | None,
) -> None:
    """Serve the index over HTTP (read-only): a search page at /, GET /search, /documents, /documents/ID,
    /status, /runs, /health, and MCP (streamable HTTP) at /mcp for AI assistants (the tools of `citeline mcp`).

    The OpenAPI schema is at /openapi.json and interactive docs at /docs (assets served locally). The server never
    takes the writer lock, so `citeline ingest` can run beside it; each query sees the newest committed generation.
    It listens on 127.0.0.1 unless --host says otherwise, and then needs --token (or CITELINE_TOKEN), named tokens
    (`citeline tokens`) or --no-auth. Named tokens each see their scope only; /metrics is Prometheus' scrape.
    """
    from citeline.server import serve as run_server

    run_server(
        index_path,
        host=host,
        port=port,
        token=token,
        no_auth=no_auth,
        cors=cors,
        allowed_hosts=allowed_hosts,
        tokens=tokens_file,
        access_log=access_log,
        root_path=root_path,
        workers=workers,
        timeout=timeout,
        log_level=log_level,
        dask_address=dask_address,
        shard_workers=shard_workers,
    )


@click.command("mcp")
@index_option
@click.option(
    "--allow-ingest",
    "allow_ingest",
    multiple=True,
    type=PathType(exists=True),
    metavar="ROOT",
    help="Offer an `ingest` tool that ingests ROOT (by its path or number; never a path the model chooses); "
    "repeatable [default: read-only, no ingest tool].",
)
@timeout_option("Seconds a tool call may take (waiting included) before it fails.")
@user_errors
def mcp(index_path: str, allow_ingest: tuple[str, ...], timeout: float) -> None:
    """Serve the index to AI assistants over MCP on stdin/stdout (what a local MCP client starts).

    Tools: search (each passage with its citation: source, record, document id, character offsets, highlighted
    sentences, a quote), get_passage, get_document, list_documents, index_status; documents are resources
    citeline://DOC_ID and citeline://DOC_ID/chars/START-END. `citeline serve` offers the same at /mcp over HTTP.
    """
    from citeline.server import serve_mcp_stdio

    serve_mcp_stdio(index_path, ingest_roots=allow_ingest, timeout=timeout)


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


# ---------------------------------------------------------------- citeline tokens
_tokens_file_option = click.option(
    "--file",
    "tokens_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The tokens file [default: INDEX/tokens.json, where `citeline serve` looks].",
)


def _token_file(index_path: str, tokens_file: str | None) -> Any:
    from pathlib import Path

    from citeline.store.access import TOKENS_FILE, TokenFile

    return TokenFile(tokens_file if tokens_file else Path(index_path) / TOKENS_FILE)


@click.group("tokens")
def tokens() -> None:
    """Named access tokens for `citeline serve`, each with a scope (the filters of search) and what it may do.

    A scoped token sees only the documents its scope selects, on every surface (search, facets, documents, the
    page, MCP); a running server reads the file again when it changes. Secrets are printed once, stored hashed.
    """


@tokens.command("add")
@click.argument("name")
@index_option
@_tokens_file_option
@filter_options
@click.option(
    "--can",
    "permissions",
    multiple=True,
    type=click.Choice(["search", "read", "ingest", "metrics"]),
    help="What the token may do; repeatable [default: search, read]. metrics: /metrics and /runs (unscoped only).",
)
@user_errors
def tokens_add(name: str, index_path: str, tokens_file: str | None, permissions: tuple[str, ...], **given: Any) -> None:
    """Add the token NAME and print its secret (once: only its hash is kept)."""
    scope = filters_from(**given)
    secret = _token_file(index_path, tokens_file).add(name, scope, permissions or None)
    click.echo(secret)
    click.echo(f"token {name!r} added; give the line above to its holder (it is not shown again)", err=True)


@tokens.command("list")
@index_option
@_tokens_file_option
@json_option
@user_errors
def tokens_list(index_path: str, tokens_file: str | None, as_json: bool) -> None:
    """The tokens: name, scope, permissions, when made and rotated (never a secret)."""
    listed = [token.to_dict() for token in _token_file(index_path, tokens_file).list()]
    if as_json:
        for record in listed:
            click.echo(json.dumps(record, default=str))
        return
    for record in listed:
        scope = json.dumps(record["scope"], default=str) if record["scope"] else "(the whole index)"
        click.echo(f"{record['name']}\t{','.join(record['permissions'])}\t{scope}")


@tokens.command("revoke")
@click.argument("name")
@index_option
@_tokens_file_option
@user_errors
def tokens_revoke(name: str, index_path: str, tokens_file: str | None) -> None:
    """Remove the token NAME; a running server refuses it from its next request."""
    _token_file(index_path, tokens_file).revoke(name)
    click.echo(f"token {name!r} revoked", err=True)


@tokens.command("rotate")
@click.argument("name")
@index_option
@_tokens_file_option
@user_errors
def tokens_rotate(name: str, index_path: str, tokens_file: str | None) -> None:
    """Give the token NAME a new secret (same scope) and print it; the old secret stops working."""
    click.echo(_token_file(index_path, tokens_file).rotate(name))
    click.echo(f"token {name!r} rotated; the old secret no longer works", err=True)
