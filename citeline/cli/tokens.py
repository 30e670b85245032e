"""``citeline tokens``: the named access tokens of ``citeline serve`` (add, list, revoke, rotate)."""

from __future__ import annotations

import json
from typing import Any

import click

from citeline.cli.common import (
    filter_options,
    filters_from,
    index_option,
    json_option,
    user_errors,
)

_tokens_file_option = click.option(
    "--file",
    "tokens_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The tokens file [default: INDEX/tokens.json, where `citeline serve` looks].",
)


def _token_file(index_path: str, tokens_file: str | None) -> Any:
    from citeline.store.access import TokenFile

    return TokenFile.of_index(index_path, tokens_file)


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
