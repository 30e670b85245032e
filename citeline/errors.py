"""Typed exceptions. Every message says what went wrong and how to fix it, and every kind says how it is answered:
its HTTP status (``citeline serve``'s answer, ``{"error": "<the message>"}``) and the CLI's exit status (after the
one ``Error:`` line). The surfaces read both from the class (``http_status``, ``exit_code``), so a new kind of error
declares them here, once; the table in docs/api.md#errors lists them."""

from __future__ import annotations

from typing import Any, ClassVar


class CitelineError(Exception):
    """Base class of every error citeline raises on purpose."""

    #: The HTTP status ``citeline serve`` answers it with: 500, a failure of the server's (a request's mistake is
    #: a 4xx of its kind).
    http_status: ClassVar[int] = 500
    #: The CLI's exit status: 1, an error (2: a usage error, whose line names the command's ``--help``).
    exit_code: ClassVar[int] = 1

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled as it is (message and attributes), not by calling the class again with ``args``, which holds the
        # message rather than the constructor's arguments: an error raised on a Dask worker or in a Prefect task
        # reaches the coordinator whole instead of as a TypeError of unpickling.
        return _rebuilt, (type(self), self.args, self.__dict__)


def status_of(exc: BaseException) -> int:
    """The HTTP status of an error a request raised: a :class:`CitelineError`'s own (``http_status``), 400 for
    another ``ValueError`` (a value the request gave), else 500 (a bug)."""
    if isinstance(exc, CitelineError):
        return exc.http_status
    return 400 if isinstance(exc, ValueError) else 500


def _rebuilt(cls: type[CitelineError], args: tuple[Any, ...], state: dict[str, Any]) -> CitelineError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class IndexNotFoundError(CitelineError):
    """The index directory holds no citeline index (or no such document: :func:`citeline.store.documents.not_found`)."""

    http_status = 404


class IndexMismatchError(CitelineError):
    """The index was built with another model, backend or schema version than the one asked for."""


class IndexLockedError(CitelineError):
    """Another process is writing to the index."""

    http_status = 409


class IndexCorruptError(CitelineError):
    """The index's files disagree with each other and could not be repaired."""


class SourceError(CitelineError):
    """A file could not be read or parsed. ``path`` names the file, ``reason`` the problem."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class SourceUnavailable(CitelineError):
    """A remote root's store stopped answering during a run (connection refused or reset, a timeout, a server
    error): the run stops with this one line rather than count every object after it as a failed file. Not a
    :class:`SourceError`, so a per-file handler does not swallow it; what the run committed before stands, and
    nothing is removed (the run did not finish)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}; nothing was removed, the next run goes on from the last commit")
        self.path = url
        self.reason = reason


class SettingsError(CitelineError, ValueError):
    """A setting or argument is invalid (``max_tokens=0``, a bad cron string): the CLI's usage error, exit 2."""

    http_status = 400
    exit_code = 2


class RemovalRefusedError(CitelineError):
    """A run would remove documents because a root came back empty or mostly vanished, and removals were not
    allowed (``allow_removals`` / ``--allow-removals``). ``problems`` holds ``(root, reason)`` pairs."""

    def __init__(self, message: str, problems: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


class PartialRunError(CitelineError):
    """A run with ``strict`` ended partial: some files failed (listed in ``run.errors``). What it committed stands;
    ``run`` is its ledger row. The CLI exits with status 3 (``--strict``)."""

    exit_code = 3

    def __init__(self, run: Any) -> None:
        self.run = run
        failed = [error.get("path") or error.get("reason", "") for error in run.errors]
        shown = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        super().__init__(
            f"run {run.run_id} was partial: {len(failed)} failed ({shown}); what it indexed is committed "
            "(`citeline runs` lists the reasons)"
        )


class IndexWriteError(CitelineError):
    """The index could not be written (disk full, read-only filesystem); it stays at its last generation."""


class CommitRefusedError(IndexWriteError):
    """The catalog refused what a commit wrote (a DuckDB error that is not the disk's: a value it cannot hold, a
    memory limit a document's rows passed): the commit rolled back. The ingest then commits its documents in parts
    to find those it refuses, each left out and reported with this error (``citeline.ingest.pipeline``)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason  #: DuckDB's first error, one line


class QueryError(CitelineError):
    """A search request is invalid (empty query, bad k, bad filter)."""

    http_status = 400


class IndexRepairedWarning(UserWarning):
    """Opening an index found its FAISS file damaged or stale and rebuilt it from DuckDB (or could not)."""
