"""How requests read the served index: one :class:`IndexService` kept open, searches in the index's own slot,
every request within the server's timeout."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from citeline.errors import CitelineError
from citeline.index import Index
from citeline.query.plan import SearchRequest
from citeline.query.results import SearchResult
from citeline.store.documents import Facet


class ServerBusyError(CitelineError):
    """A request waited longer than the server's timeout (for the index, or for its own work): 503."""


T = TypeVar("T")


class IndexService:
    """The served index, kept open (its search snapshot reloads itself after every commit). Searches run one at
    a time in the index's own search slot (:meth:`Index.reading`), which a request waits for until its deadline."""

    def __init__(self, index: Index, timeout: float):
        self.index = index
        self.timeout = timeout

    def _in_slot(self, work: Callable[[], T], deadline: float) -> T:
        # ``work`` in the index's search slot, waited for until ``deadline`` (then 503).
        try:
            with self.index.reading(timeout=deadline - time.monotonic()):
                return work()
        except TimeoutError:
            raise ServerBusyError(f"the server is busy: no search slot within {self.timeout:g} s; try again") from None

    def search(self, request: SearchRequest, deadline: float) -> tuple[list[SearchResult], int]:
        """The results of ``request`` and the generation of the snapshot they were read from."""

        def answer() -> tuple[list[SearchResult], int]:
            return self.index.search(request), int(self.index.snapshot(refresh=False).generation)

        return self._in_slot(answer, deadline)

    def facets(
        self, filters: Any, within: Sequence[SearchResult] | None, limit: int | None, deadline: float
    ) -> list[Facet]:
        """``Index.facets``, in the search slot (it reads the search's snapshot)."""
        return self._in_slot(lambda: self.index.facets(filters, within=within, limit=limit), deadline)

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args, deadline)`` on a worker thread, answered 503 after :attr:`timeout` seconds (the thread
        finishes on its own; the search lock keeps the abandoned ones from piling up)."""
        deadline = time.monotonic() + self.timeout
        try:
            with anyio.fail_after(self.timeout):
                return await anyio.to_thread.run_sync(functools.partial(work, *args, deadline), abandon_on_cancel=True)
        except TimeoutError:
            raise ServerBusyError(f"the request took longer than {self.timeout:g} s; try a narrower one") from None
