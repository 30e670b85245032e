"""How requests read the served index: the serving contract (:class:`ServedIndex`, what the routes, the page and
the MCP tools read through) and its implementation, one :class:`IndexService` kept open, searches in the index's
own slot, every request within the server's timeout."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio
import anyio.to_thread

from citeline.errors import CitelineError
from citeline.index import Index
from citeline.query.plan import SearchRequest
from citeline.query.results import SearchResult
from citeline.server.access import CALLER, ScopedIndex, scoped_request, view_generation
from citeline.store.access import PERMISSIONS
from citeline.store.catalog import IndexStatus
from citeline.store.documents import DocumentDetail, DocumentInfo, Facet
from citeline.store.filters import Filters
from citeline.store.ledger import RunSummary


class ServerBusyError(CitelineError):
    """A request waited longer than the server's timeout (for the index, or for its own work): 503."""

    http_status = 503


T = TypeVar("T")


@runtime_checkable
class ServedIndex(Protocol):
    """What the routes, the page and the MCP tools read the served index through (:class:`IndexService`): every
    read is the request's caller's (``citeline.server.access``: a scoped caller's searches, facet counts, listings,
    documents and status show only what its scope selects, and each is refused without its permission).

    The reads take the request's ``deadline`` (a :func:`time.monotonic` time) last, so a surface hands them to
    :meth:`run` with their other arguments: ``await served.run(served.document, doc_id)``; those that read the
    search's snapshot (``search``, ``facets``) wait for the index's search slot until it, the others read through
    short connections of their own and need not wait."""

    @property
    def name(self) -> str:
        """The served index's folder name (the page's heading)."""
        ...

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args, deadline)`` on a worker thread, within the server's timeout (else :class:`ServerBusyError`)."""
        ...

    def search(self, request: SearchRequest, deadline: float) -> tuple[list[SearchResult], int]:
        """The results of ``request`` and the generation they were read from (the caller's view of it)."""
        ...

    def facets(
        self,
        filters: Filters | Mapping[str, Any] | None,
        within: Sequence[SearchResult] | None,
        limit: int | None,
        deadline: float,
    ) -> list[Facet]:
        """The documents per metadata value of the documents ``filters`` select (of ``within``'s, when given)."""
        ...

    def document(self, doc_id: str, deadline: float) -> DocumentDetail:
        """One document, its text and chunk spans (``doc_id``: an id or a name, as :meth:`citeline.Index.document`)."""
        ...

    def documents(
        self, filters: Filters | Mapping[str, Any] | None, limit: int | None, offset: int, deadline: float
    ) -> list[DocumentInfo]:
        """The documents ``filters`` select, ``limit`` of them after the first ``offset``."""
        ...

    def status(self, deadline: float) -> IndexStatus:
        """Counts, model, generation and the last run."""
        ...

    def runs(self, limit: int, deadline: float) -> list[RunSummary]:
        """The run ledger, newest first."""
        ...

    def ingest(self, root: Path) -> RunSummary:
        """Bring the index up to date with ``root`` (the MCP ``ingest`` tool's, for a caller that may ingest)."""
        ...


class IndexService:
    """The served index, kept open (its search snapshot reloads itself after every commit). Searches run one at
    a time in the index's own search slot (:meth:`Index.reading`), which a request waits for until its deadline.

    Every read is the request's caller's (``citeline.server.access.CALLER``): for a scoped caller, searches and
    facet counts are filtered by its scope before ranking, and the other reads go through a
    :class:`~citeline.server.access.ScopedIndex` showing only the documents the scope selects
    (:meth:`_viewed`)."""

    def __init__(self, index: Index, timeout: float):
        self.served = index
        self.timeout = timeout
        #: ``(generation, scope)`` -> the scope's view generation, for the generations read lately
        self._views: dict[tuple[int, Filters], int] = {}
        #: called with (stage, seconds) for each stage of a search: "wait" (for the slot) and "search"
        self.observe: Callable[[str, float], None] | None = None

    @property
    def name(self) -> str:
        """The served index's folder name."""
        return self.served.path.name

    def _viewed(self) -> Index | ScopedIndex:
        # The served index as the request's caller sees it (the index itself for an unscoped caller).
        caller = CALLER.get()
        if caller.scope is None and set(PERMISSIONS) <= set(caller.permissions):
            return self.served
        return ScopedIndex(self.served, caller, lambda generation: self._view_generation(caller.scope, generation))

    def _view_generation(self, scope: Filters | None, generation: int) -> int:
        # The generation ``scope`` sees of the committed ``generation`` (computed once per generation and scope).
        if scope is None:
            return generation
        key = (generation, scope)
        if key not in self._views:
            if len(self._views) > 256:
                self._views.clear()
            self._views[key] = view_generation(self.served, scope)
        return self._views[key]

    def _in_slot(self, work: Callable[[], T], deadline: float) -> T:
        # ``work`` in the index's search slot, waited for until ``deadline`` (then 503).
        started = time.perf_counter()
        try:
            with self.served.reading(timeout=deadline - time.monotonic()):
                if self.observe is not None:
                    self.observe("wait", time.perf_counter() - started)
                return work()
        except TimeoutError:
            raise ServerBusyError(f"the server is busy: no search slot within {self.timeout:g} s; try again") from None

    def search(self, request: SearchRequest, deadline: float) -> tuple[list[SearchResult], int]:
        """The results of ``request`` and the generation of the snapshot they were read from."""

        caller = CALLER.get()
        caller.require("search")
        wanted = request if caller.scope is None else scoped_request(request, caller.scope)

        def answer() -> tuple[list[SearchResult], int]:
            started = time.perf_counter()
            found = self.served.search(wanted)
            if self.observe is not None:
                self.observe("search", time.perf_counter() - started)
            return found, self._view_generation(caller.scope, int(self.served.snapshot(refresh=False).generation))

        return self._in_slot(answer, deadline)

    def facets(
        self,
        filters: Filters | Mapping[str, Any] | None,
        within: Sequence[SearchResult] | None,
        limit: int | None,
        deadline: float,
    ) -> list[Facet]:
        """``Index.facets``, in the search slot (it reads the search's snapshot)."""
        caller = CALLER.get()
        caller.require("search")
        return self._in_slot(lambda: self._viewed().facets(filters, within=within, limit=limit), deadline)

    def document(self, doc_id: str, deadline: float) -> DocumentDetail:
        """:meth:`citeline.Index.document`, as the caller sees it."""
        return self._viewed().document(doc_id)

    def documents(
        self, filters: Filters | Mapping[str, Any] | None, limit: int | None, offset: int, deadline: float
    ) -> list[DocumentInfo]:
        """:meth:`citeline.Index.documents`, as the caller sees it."""
        return self._viewed().documents(filters, limit, offset)

    def status(self, deadline: float) -> IndexStatus:
        """:meth:`citeline.Index.status`, as the caller sees it (a scoped caller: its view's counts and generation)."""
        return self._viewed().status()

    def runs(self, limit: int, deadline: float) -> list[RunSummary]:
        """:meth:`citeline.Index.runs` (for a caller that may read the metrics)."""
        return self._viewed().runs(limit)

    def ingest(self, root: Path) -> RunSummary:
        """Ingest ``root`` with a writer of its own (the served index only reads): the index's writer lock orders it
        with any other writer, and the search snapshot picks the commits up at its next search. The caller must
        have the ``ingest`` permission."""
        CALLER.get().require("ingest")
        return Index.open(self.served.path, embedder=self.served.embedder).ingest([root])

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args, deadline)`` on a worker thread, answered 503 after :attr:`timeout` seconds (the thread
        finishes on its own; the search lock keeps the abandoned ones from piling up)."""
        deadline = time.monotonic() + self.timeout
        try:
            with anyio.fail_after(self.timeout):
                return await anyio.to_thread.run_sync(functools.partial(work, *args, deadline), abandon_on_cancel=True)
        except TimeoutError:
            raise ServerBusyError(f"the request took longer than {self.timeout:g} s; try a narrower one") from None


def _conforms(service: IndexService) -> ServedIndex:
    """Never called: mypy checks here that :class:`IndexService` is a :class:`ServedIndex` (every member, typed);
    tests/index/test_protocol_conformance.py checks it at run time too."""
    return service
