"""The ``citeline`` commands that serve an index to people and other programs: ``serve`` (HTTP: the API, the page,
MCP over HTTP) and ``mcp`` (MCP over stdio)."""

from __future__ import annotations

import click

from citeline.cli.common import (
    PathType,
    index_option,
    search_dask_option,
    shard_workers_option,
    timeout_option,
    user_errors,
)


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
