"""Who is asking, and what of the index they may see: the :class:`Caller` a request's token names, and the
:class:`ScopedIndex` every surface reads through for a scoped caller.

The guard (``guard.py``) resolves a request's token to a :class:`Caller` and sets it for the request
(:data:`CALLER`; the MCP handlers set it from the HTTP request the SDK hands them, :func:`acting`). The served index
(:class:`citeline.server.IndexService`) reads it: for a caller with a scope, searches and facet counts get the
scope ANDed into their filters (before ranking), and its other reads go through a :class:`ScopedIndex`, whose listing,
documents, status and runs show only what the scope selects. A hidden document is answered exactly as one that does not
exist (the same error and message), and the generation a scoped caller sees is its view's (:meth:`view_generation`),
so neither a count nor a generation betrays what it cannot see.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from starlette.requests import HTTPConnection

from citeline.errors import CitelineError, IndexNotFoundError
from citeline.index import Index
from citeline.query.plan import SearchRequest
from citeline.query.results import SearchResult
from citeline.store.access import PERMISSIONS, Scoped, TokenFile, scoped
from citeline.store.catalog import IndexStatus
from citeline.store.documents import DocumentDetail, DocumentInfo, Facet, not_found
from citeline.store.filters import Filters
from citeline.store.ledger import RunSummary

#: The request scope key (ASGI) under which the guard leaves the request's caller.
CALLER_KEY = "citeline.caller"


class AccessDenied(CitelineError):
    """The caller's token may not do this (403)."""

    http_status = 403


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: a token's name (never its secret), its scope (None: the whole index) and what it
    may do."""

    name: str
    scope: Filters | None = None
    permissions: tuple[str, ...] = PERMISSIONS

    def require(self, permission: str) -> None:
        """Raise :class:`AccessDenied` unless the caller may do ``permission``."""
        if permission not in self.permissions:
            raise AccessDenied(f"the token {self.name!r} may not {_VERBS[permission]}")


_VERBS = {
    "search": "search",
    "read": "read documents",
    "ingest": "ingest",
    "metrics": "read the metrics or the run ledger",
}
#: The caller of a server without tokens, of a request with the server's own ``--token``, and of ``citeline mcp``.
OWNER = Caller("-")
#: The caller of the request in progress (the guard sets it; the MCP handlers from the HTTP request).
CALLER: ContextVar[Caller] = ContextVar("citeline_caller", default=OWNER)


def authenticate(header: bytes, token: bytes | None, tokens: TokenFile | None) -> Caller | None:
    """The caller a request's ``Authorization`` header names: the server's own token (a caller with every
    permission and no scope), a named token of ``tokens``, or None when it names neither. Without a token and
    ``tokens`` (a server that never had named tokens), everyone is the owner (today's single-user default). Raises
    :class:`SettingsError` when the tokens file cannot be read (the guard then refuses every request)."""
    if token is None and tokens is None:
        return OWNER
    secret = credentials(header)
    if secret is None:
        return None
    found = None
    if token is not None and secrets.compare_digest(secret, token):
        found = OWNER if tokens is None else Caller("token")
    if tokens is not None:
        named = tokens.find(secret)
        if named is not None and found is None:
            scope = named.filters
            found = Caller(named.name, scope if scope else None, named.permissions)
    return found


def credentials(header: bytes) -> bytes | None:
    """The secret of a Bearer header, or the password of a Basic one (browsers), or None."""
    import base64
    import binascii

    scheme, _, value = header.partition(b" ")
    if scheme.lower() == b"bearer":
        return value.strip()
    if scheme.lower() == b"basic":
        try:
            return base64.b64decode(value.strip(), validate=True).partition(b":")[2]
        except (binascii.Error, ValueError):
            return None
    return None


@contextmanager
def acting(request: HTTPConnection | None) -> Iterator[None]:
    """Run the block as the caller the guard found for ``request`` (an HTTP request, or None: stdio, the owner).
    For the MCP handlers, which the SDK runs outside the request's own task."""
    caller = request.scope.get(CALLER_KEY, OWNER) if isinstance(request, HTTPConnection) else OWNER
    reset = CALLER.set(caller)
    try:
        yield
    finally:
        CALLER.reset(reset)


def view_generation(index: Index, scope: Filters) -> int:
    """The generation a scoped caller sees: a number (48 bits) that changes when a document it can see is added,
    changed or removed, and never because of one it cannot see (a fingerprint of the visible documents' ids and
    content hashes, not an order: compare it for equality)."""
    digest = hashlib.sha256()
    for row in index.documents(scoped(None, scope)):
        digest.update(f"{row.doc_id}\0{row.content_hash}\0{row.chunks}\n".encode())
    return int.from_bytes(digest.digest()[:6], "big")


class ScopedIndex:
    """The served index as a caller with a scope or fewer permissions sees it: the members of
    :class:`citeline.Index` the surfaces read (``documents``, ``document``, ``document_text``, ``facets``,
    ``status``, ``runs``), each showing only the documents the caller's scope selects, and each refused
    (:class:`AccessDenied`) unless the caller may do it."""

    def __init__(self, index: Index, caller: Caller, generation_of: Any):
        self._index, self._caller, self._generation_of = index, caller, generation_of
        self._scope = caller.scope or Filters()

    def documents(
        self, filters: Filters | Mapping[str, Any] | None = None, limit: int | None = None, offset: int = 0
    ) -> list[DocumentInfo]:
        """:meth:`citeline.Index.documents` within the scope."""
        self._caller.require("read")
        return self._index.documents(scoped(filters, self._scope), limit, offset)

    def document(self, doc_id: str) -> DocumentDetail:
        """:meth:`citeline.Index.document` within the scope: a document outside it is answered as one the index
        does not hold, and a name is looked for among the visible documents only (a hidden document of the same
        name makes it neither ambiguous nor missing)."""
        self._caller.require("read")
        try:  # (a name several visible documents fit is the index's QueryError, naming visible ones only)
            return self._index.document(doc_id, within=self._scope)
        except IndexNotFoundError:
            raise not_found(self._index.path, doc_id) from None

    def document_text(self, doc_id: str) -> str:
        """The stored text of a document within the scope."""
        return self.document(doc_id).text

    def facets(
        self,
        filters: Filters | Mapping[str, Any] | None = None,
        *,
        within: Sequence[SearchResult | str] | None = None,
        limit: int | None = None,
    ) -> list[Facet]:
        """:meth:`citeline.Index.facets` over the scope's documents only."""
        self._caller.require("search")
        return self._index.facets(scoped(filters, self._scope), within=within, limit=limit)

    def status(self) -> IndexStatus:
        """The index's status as the scope sees it: its documents and chunks, its view's generation, no last run
        (the ledger names roots and counts of the whole index)."""
        self._caller.require("read")
        shown = self._index.status()
        if not self._scope:
            return shown
        rows = self._index.documents(scoped(None, self._scope))
        return replace(
            shown,
            documents=len(rows),
            chunks=sum(row.chunks for row in rows),
            generation=self._generation_of(shown.generation),
            last_run=None,
        )

    def runs(self, limit: int = 20) -> list[RunSummary]:
        """The run ledger: not for a scoped caller (it names the whole index's roots and counts)."""
        self._caller.require("metrics")
        return self._index.runs(limit)

    def search(self, request: SearchRequest) -> list[SearchResult]:
        """:meth:`citeline.Index.search` within the scope."""
        self._caller.require("search")
        return self._index.search(replace(request, filters=scoped(request.filters, self._scope)))


def scoped_request(request: SearchRequest, scope: Filters) -> SearchRequest:
    """``request`` with ``scope`` ANDed into its filters."""
    return replace(request, filters=scoped(request.filters, scope))


__all__ = [
    "CALLER",
    "CALLER_KEY",
    "OWNER",
    "AccessDenied",
    "Caller",
    "Scoped",
    "ScopedIndex",
    "acting",
    "authenticate",
    "credentials",
    "scoped_request",
    "view_generation",
]
