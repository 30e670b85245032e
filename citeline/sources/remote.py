"""Remote roots: documents kept in object stores (S3 and S3-compatible stores, Google Cloud Storage, Azure Blob) and
on web servers, read through fsspec (``s3://bucket/prefix``, ``gs://...``, ``az://...``, ``https://host/file.pdf``
and any other fsspec URL).

A remote root is listed, never downloaded, to plan a run: each object's key, size, modification time and
**stamp** (its ETag, with its version id where the store keeps versions; a web server's ``ETag``,
``Content-MD5`` or ``Digest``) become a :class:`~citeline.sources.document.SourceFile`, and the catalog's ``files``
table (``citeline.store.file_stats``) says which of them are unchanged, so an unchanged object is never fetched.
The listing is taken a page at a time and only :class:`Entry` tuples (key and stamp) are kept of it: 100,000
objects cost their keys, not the store's metadata dicts (docs/scale.md).

Credentials come from where the store's own client looks (environment variables, ``~/.aws``, a workload identity,
``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_STORAGE_*``), or from fsspec ``storage_options`` given to a run
(:func:`storage`: the CLI's ``--storage-option KEY=VALUE`` and ``--storage-options FILE``, ``Index.ingest``'s
``storage_options``, or the YAML/JSON file named by ``CITELINE_STORAGE_OPTIONS`` for the flow and workers). They
are held in memory for the run only: never in :class:`SourceFile`, the catalog, the ledger, a log line or a
Prefect parameter.

**What workers are given.** Everything needed to fetch and parse one object is its :class:`SourceFile` (root URL,
key, size, time and stamp: plain strings and numbers, picklable, no credentials), and the filesystem is rebuilt from
the URL's protocol and the storage options of the process that reads it (:func:`filesystem`): a Dask worker given
``SourceFile``\\ s fetches and parses its objects itself (``parsers.parse_source``), with credentials from its own
environment, never from the coordinator. Within one process the run's options are a context variable
(:func:`storage`), so two runs in one process each read with their own; threads that fetch for a run are started
in a copy of its context (:func:`in_context`).
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple, TypeVar
from urllib.parse import unquote

from citeline.errors import SettingsError, SourceError, SourceUnavailable
from citeline.sources import s3
from citeline.sources.document import SourceFile

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

T = TypeVar("T")

#: A URL's scheme: two characters at least, so ``C://`` stays a Windows path.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")
#: The environment variable naming a YAML or JSON file of storage options (the flow's and workers' credentials).
OPTIONS_ENV = "CITELINE_STORAGE_OPTIONS"
#: Web URLs are one document each (a page's links are not followed).
WEB_PROTOCOLS = ("http", "https")
#: Objects up to this size are fetched in one GET; larger ones (a big JSONL export) are streamed in blocks of it.
BLOCK_BYTES = 16 * 1024 * 1024


def protocol_of(root: str | os.PathLike[str]) -> str | None:
    """The fsspec protocol of a remote root (``s3``, ``gs``, ``https``...), or None for a local path (``file://``
    included)."""
    if not isinstance(root, str):
        return None
    match = _URL.match(root)
    if match is None or match.group(1).lower() == "file":
        return None
    return match.group(1).lower()


def is_remote(root: str | os.PathLike[str]) -> bool:
    """True when ``root`` is a URL read through fsspec rather than a local path."""
    return protocol_of(root) is not None


def normalized(url: str) -> str:
    """A root URL as runs key it: the scheme lower-cased, no trailing ``/`` (``s3://b/docs/`` is ``s3://b/docs``).

    A URL carrying credentials (``https://user:password@host/...``) is refused with one line: the URL is every
    document's provenance, stored and printed, so a secret in it would be written everywhere.

    A URL whose query string signs it (a presigned S3, GCS or Azure SAS URL: ``X-Amz-Signature``, ``sig``,
    ``token``...) is keyed without its signing parameters (:func:`without_secrets`): its provenance, stored and
    printed, holds none of them, and a URL signed again names the same document. The signed URL is what is
    fetched: this process keeps it in memory for the run (:func:`fetch_url`), never on disk."""
    protocol = protocol_of(url) or ""
    rest = url[len(protocol) + 3 :]
    if "@" in rest.split("/", 1)[0].split("?", 1)[0]:
        raise SourceError(
            f"{protocol}://...", "the URL holds credentials (user:password@); give them as storage options instead"
        )
    if protocol not in WEB_PROTOCOLS:
        rest = rest.rstrip("/")
    full = f"{protocol}://{rest}"
    keyed = without_secrets(full)
    if keyed != full:
        _signed[keyed] = full
    return keyed


#: Query parameters that sign a URL or carry a secret (compared lower-cased): AWS SigV4 and SigV2, Google Cloud
#: Storage's V4 and V2 signatures, Azure SAS tokens, CloudFront's signed URLs, and the generic names of tokens and
#: keys. Left out of a document's stored and printed URL; the signing parameters that are not secret (the date,
#: the expiry) go too, so a URL signed again is the same document.
_SECRET_PARAMS = re.compile(
    r"^(x-amz-.*|x-goog-.*|awsaccesskeyid|signature|expires|googleaccessid|policy|key-pair-id|sig|"
    r".*token|.*secret.*|.*password.*|passwd|api[-_]?key|apikey|key|auth|authorization|credentials?|access[-_]?key)$",
    re.IGNORECASE,
)
#: An Azure SAS token's other parameters (version, permissions, expiry, resource...): short names another site may
#: use for its own ends, so left out only beside the token's ``sig``.
_SAS_PARAMS = frozenset(
    {"sv", "ss", "srt", "sp", "se", "st", "spr", "sr", "si", "sdd", "skoid", "sktid", "skt", "ske", "sks", "skv"}
    | {"saoid", "suoid", "scid", "ses", "rscc", "rscd", "rsce", "rscl", "rsct"}
)
#: This process's signed URLs, by the URL they are keyed by (:func:`normalized`): what is fetched.
_signed: dict[str, str] = {}


def without_secrets(url: str) -> str:
    """``url`` without the query parameters that sign it or carry a secret (see :data:`_SECRET_PARAMS`); the rest
    of the query is kept as it was written."""
    base, question, query = url.partition("?")
    if not question:
        return url
    fragment = ""
    query, hash_, tail = query.partition("#")
    if hash_:
        fragment = "#" + tail
    names = [unquote(pair.partition("=")[0]).lower() for pair in query.split("&")]
    sas = "sig" in names
    kept = [
        pair
        for pair, name in zip(query.split("&"), names, strict=True)
        if pair and not _SECRET_PARAMS.match(name) and not (sas and name in _SAS_PARAMS)
    ]
    return base + ("?" + "&".join(kept) if kept else "") + fragment


def fetch_url(url: str) -> str:
    """The URL to fetch for ``url`` as documents key it: the signed URL it was given as, in this process."""
    return _signed.get(url, url)


def _scrubbed(text: str) -> str:
    # A client's message with the signed URLs it may quote replaced by the URLs they are keyed by.
    for keyed, signed in _signed.items():
        text = text.replace(signed, keyed).replace(signed.partition("?")[2], "...")
    return text


# ---------------------------------------------------------------- storage options (credentials)

#: The storage options of the run of this context (:func:`storage`): a context variable, so two runs in one process
#: (two threads, two tasks) each read with their own, and a thread started for a run sees them only when started in
#: a copy of the run's context (:func:`in_context`).
_run_options: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "citeline_storage_options", default=None
)


@contextlib.contextmanager
def storage(options: Mapping[str, Any] | None) -> Iterator[None]:
    """Use ``options`` (fsspec ``storage_options``: flat, or one mapping per protocol, ``{"s3": {...}}``) for the
    remote roots read inside; None: those of an enclosing ``storage`` (the CLI's around a Prefect run), else the
    file named by ``CITELINE_STORAGE_OPTIONS``, else the clients' own defaults. Held in this process's memory
    only, for the run."""
    token = _run_options.set(dict(options) if options is not None else _run_options.get())
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # a generator holding it closed from another context: it is closed
            _run_options.reset(token)


def in_context(function: Callable[..., T]) -> Callable[..., T]:
    """``function`` to run in another thread with the context of this one (its run's storage options, the objects
    fetched ahead): a thread pool's threads start in an empty context. Each call gets its own copy (one context
    cannot be entered by two threads at once)."""
    context = contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> T:
        return context.copy().run(function, *args, **kwargs)

    return run


def run_options_given() -> bool:
    """Whether a :func:`storage` of this process gives the storage options (else the environment file's, or the
    clients' defaults, are used)."""
    return _run_options.get() is not None


def load_options(path: str) -> dict[str, Any]:
    """The storage options in a YAML or JSON file (a mapping); a file that cannot be read or is not a mapping is
    one :class:`SettingsError` line naming the file (never echoing its content: it holds secrets)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            loaded = yaml.safe_load(handle)
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read the storage options: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError):
        raise SettingsError(f"{path}: the storage options are not valid YAML or JSON") from None
    if not isinstance(loaded, dict):
        raise SettingsError(f"{path}: the storage options must be a mapping of names to values")
    return loaded


def parse_pairs(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as storage options: a value is read as YAML (``anon=true`` is a bool, ``8`` an int), a
    dotted key nests (``client_kwargs.endpoint_url=http://...``)."""
    import yaml

    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"--storage-option {key.strip() or '?'}: give KEY=VALUE")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if not isinstance(value, (str, int, float, bool)) and value is not None:
            value = raw  # a secret with YAML punctuation in it is still the string given
        node = options
        *parents, last = key.strip().split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    return options


def options_for(protocol: str) -> dict[str, Any]:
    """The storage options of ``protocol``: the run's (:func:`storage`), or the ``CITELINE_STORAGE_OPTIONS`` file's;
    a section named after the protocol wins over the flat options."""
    given = _run_options.get()
    if given is None:
        path = os.environ.get(OPTIONS_ENV)
        given = load_options(path) if path else {}
    section = given.get(protocol)
    if isinstance(section, Mapping):
        return dict(section)
    return {key: value for key, value in given.items() if not (isinstance(value, Mapping) and key == protocol)}


def filesystem(url: str) -> tuple[AbstractFileSystem, str]:
    """The fsspec filesystem of ``url`` (built from its protocol and :func:`options_for`) and the path in it."""
    import fsspec

    protocol = protocol_of(url) or "file"
    options = options_for(protocol)
    if protocol in WEB_PROTOCOLS:
        options = _with_web_timeouts(options)
    try:
        return fsspec.core.url_to_fs(fetch_url(url), **options)
    except ImportError as exc:
        raise SourceError(url, f"reading {protocol}:// URLs needs a package: {_first_line(exc)}") from None
    except (ValueError, TypeError) as exc:  # an unknown protocol, or a storage option its client does not take
        raise SourceError(url, f"cannot use {protocol}://: {_first_line(exc)}") from None


#: How long a web server may keep a URL waiting, in seconds (aiohttp's ``ClientTimeout``): to connect, between two
#: pieces of its answer (headers, then each piece of the body: a server that goes silent after its headers, or
#: after a Content-Length it never sends, fails there), and for the whole of one request (a body trickled a few
#: bytes at a time, which never goes silent long enough). Without them a silent server held a run for aiohttp's
#: 300 s a request, its HEAD and its GET each, while the other URLs waited. A URL past one fails alone, "the
#: server did not answer in time". A storage option ``client_kwargs.timeout`` (an ``aiohttp.ClientTimeout``, from
#: Python) replaces them.
WEB_CONNECT_SECONDS = 10.0
WEB_SILENCE_SECONDS = 30.0
WEB_REQUEST_SECONDS = 300.0
#: The slowest a web body may arrive, in bytes a second, judged over each :data:`WEB_SILENCE_SECONDS` spent
#: waiting for it: a server that trickles a few bytes at a time is never silent long enough for the silence bound,
#: and held the run until the request bound. Only the time a read waits counts (a record file read as the run
#: goes, its pauses the run's own, is not slow for them). A URL under it fails alone, saying how fast it came.
WEB_MIN_BYTES_PER_SECOND = 1024


def _with_web_timeouts(options: Mapping[str, Any]) -> dict[str, Any]:
    import aiohttp

    client = dict(options.get("client_kwargs") or {})
    client.setdefault(
        "timeout",
        aiohttp.ClientTimeout(
            total=WEB_REQUEST_SECONDS, sock_connect=WEB_CONNECT_SECONDS, sock_read=WEB_SILENCE_SECONDS
        ),
    )
    return {**options, "client_kwargs": client}


# ---------------------------------------------------------------- listing


class Entry(NamedTuple):
    """One object of a listing: all of it a run keeps in memory before planning."""

    key: str  #: relative to the root, ``/``-separated
    size: int
    mtime: float
    stamp: str | None
    #: the Content-Type a web server gave (its media type, lower-cased, no parameters); None for a store's object
    media_type: str | None = None


@dataclass(frozen=True)
class Listing:
    """What listing a root gave: its objects (``single``: the root is one object, its entry's key its name) and
    the text of its ``.citelineignore``, if it has one."""

    entries: list[Entry]
    single: bool = False
    ignore_lines: list[str] | None = None


def source_files(root: str, listing: Listing) -> Iterator[SourceFile]:
    """The objects of ``root``'s listing as :class:`SourceFile` s (a single-object root is its own URL)."""
    for entry in listing.entries:
        url = root if listing.single else f"{root}/{entry.key}"
        yield SourceFile(
            root, url, entry.key, size=entry.size, mtime=entry.mtime, stamp=entry.stamp, media_type=entry.media_type
        )


def list_web_roots(roots: Iterable[str]) -> dict[str, Listing | SourceError]:
    """The listing of each web root of ``roots`` (its HEAD, as :func:`list_root` takes it), or the
    :class:`SourceError` it failed with (:class:`Gone` for 404 and 410), asked of the servers together (up to
    :data:`AHEAD_OBJECTS` at a time, on the filesystem's own event loop and session): a run's URLs each wait for
    their own server only, so ten URLs of a host that never answers cost one bound, not ten in a row. Other roots
    are left out (a store's listing failing stops the run: it is listed in its turn)."""
    import asyncio

    from fsspec.asyn import sync

    web = list(dict.fromkeys(root for root in roots if protocol_of(root) in WEB_PROTOCOLS))
    if len(web) < 2:
        return {}
    by_filesystem: dict[int, tuple[AbstractFileSystem, list[str]]] = {}
    for root in web:
        fs, _ = filesystem(root)  # http and https may have options of their own: one filesystem each
        by_filesystem.setdefault(id(fs), (fs, []))[1].append(root)
    listed: dict[str, Listing | SourceError] = {}
    for fs, urls in by_filesystem.values():
        slots = asyncio.Semaphore(AHEAD_OBJECTS)

        async def ask(url: str, fs: AbstractFileSystem = fs, slots: asyncio.Semaphore = slots) -> Any:
            async with slots:
                try:
                    return await _head(fs, url)
                except Exception as exc:
                    return SourceError(url, web_reason(exc))

        async def ask_all(urls: list[str] = urls, ask: Any = ask) -> list[Any]:
            return list(await asyncio.gather(*(ask(url) for url in urls)))

        for url, answer in zip(urls, sync(fs.loop, ask_all), strict=True):
            if isinstance(answer, SourceError):
                listed[url] = answer
                continue
            try:
                listed[url] = Listing([_answered(url, *answer)], single=True)
            except SourceError as exc:
                listed[url] = exc
    return listed


def list_root(root: str) -> Listing:
    """List the objects under ``root`` (a URL), keeping only their :class:`Entry` tuples.

    A web URL is one object (its size, time and stamp from a HEAD request). Anything else is listed recursively
    (S3 a page of 1,000 keys at a time, streamed from s3fs's paginator; other stores through ``fs.find``); when
    nothing lies below the root and the root is an object itself, it is a single-object root. A listing that
    cannot be taken (no such bucket, access denied, wrong credentials, the store not answering) raises one
    :class:`SourceError` line: the run stops before anything is planned, so nothing is removed.
    """
    fs, path = filesystem(root)
    protocol = protocol_of(root) or ""
    try:
        with contextlib.suppress(AttributeError):
            fs.invalidate_cache()  # a listing cached by an earlier run of this process is not this run's
        if protocol in WEB_PROTOCOLS:
            return Listing([web_entry(fs, root)], single=True)
        entries, ignore = [], None
        for entry in _walk(fs, path):
            if entry.key == IGNORE_KEY:
                ignore = entry
            entries.append(entry)
        if not entries and path.count("/") and fs.isfile(path):
            return Listing([_entry(fs.info(path), _name(path))], single=True)
        ignore_lines = None
        if ignore is not None:
            entries.remove(ignore)
            data = fs.cat_file(f"{path.rstrip('/')}/{IGNORE_KEY}")
            try:
                ignore_lines = data.decode("utf-8").splitlines()
            except UnicodeDecodeError as exc:
                raise SourceError(
                    f"{root}/{IGNORE_KEY}", f"the ignore file is not UTF-8 ({exc.reason}); save it as UTF-8"
                ) from None
        return Listing(entries, ignore_lines=ignore_lines)
    except SourceError:
        raise
    except FileNotFoundError:
        raise SourceError(root, "no such bucket, container or object") from None
    except PermissionError as exc:
        raise SourceError(
            root, f"access denied ({_first_line(exc)}); nothing was indexed or removed; {credentials_hint(protocol)}"
        ) from None
    except Exception as exc:  # the client's own errors: a connection refused, a bad signature, a timeout
        if _no_credentials(exc):
            raise SourceError(
                root,
                f"no credentials found ({_reason(exc)}); nothing was indexed or removed; {credentials_hint(protocol)}",
            ) from None
        raise SourceError(root, f"cannot list: {_reason(exc)}; nothing was indexed or removed") from None


#: Where each store's client takes credentials from, as an operator sets them (:func:`credentials_hint`).
_CREDENTIAL_SOURCES = {
    "s3": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or give storage options key and secret",
    "gs": "set GOOGLE_APPLICATION_CREDENTIALS to a service account's key file, or give the storage option token",
    "az": "set AZURE_STORAGE_CONNECTION_STRING (or AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY), or give "
    "storage options account_name and account_key",
}
_CREDENTIAL_PROTOCOLS = {"s3a": "s3", "gcs": "gs", "abfs": "az", "abfss": "az", "adl": "az"}


def credentials_hint(protocol: str) -> str:
    """How to give ``protocol``'s store the right credentials: its client's environment variables, or storage
    options, and the places citeline takes those from."""
    where = _CREDENTIAL_SOURCES.get(_CREDENTIAL_PROTOCOLS.get(protocol, protocol), "give storage options")
    return (
        f"{where} (--storage-option KEY=VALUE or --storage-options FILE, Index.ingest(storage_options=...), a "
        f"Prefect Secret block named by the flow's storage_block, or a file named by {OPTIONS_ENV})"
    )


def _no_credentials(exc: BaseException) -> bool:
    # botocore's NoCredentialsError / PartialCredentialsError, google-auth's DefaultCredentialsError: told apart by
    # name, without importing each store's client.
    names = {kind.__name__ for kind in type(exc).__mro__}
    return bool(names & {"NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError"})


#: The ignore file of a root (``citeline.sources.selection.IGNORE_FILE``; named here so listing needs no import).
IGNORE_KEY = ".citelineignore"


def _walk(fs: AbstractFileSystem, path: str) -> Iterator[Entry]:
    # Every object below ``path``, as entries. S3: a page of keys at a time (citeline.sources.s3); other stores
    # (and an s3fs without the paged listing): fs.find.
    if s3.paged(fs):
        for key, info in s3.objects(fs, path):
            yield _entry(info, key)
        return
    prefix = path.rstrip("/") + "/"
    for name, info in fs.find(path, detail=True, withdirs=False).items():
        key = name[len(prefix) :] if name.startswith(prefix) else _name(name)
        if key:
            yield _entry(info, key)


def version_of(source: SourceFile) -> str | None:
    """The S3 version id a listing gave ``source`` (the part of its stamp after ``@``), or None: an object of an
    unversioned bucket, written before versioning (``null``), or of another store."""
    if source.stamp is None or (protocol_of(source.path) or "") not in s3.PROTOCOLS:
        return None
    _, at, version = source.stamp.rpartition("@")
    return version if at and version and version != "null" else None


def _entry(info: Mapping[str, Any], key: str, media_type: str | None = None) -> Entry:
    # The size, time and stamp of an fsspec info dict, whatever the store named them. The stamp holds the tag (the
    # ETag, or a web server's Content-MD5 or Digest) and the modification time both: a server whose ETag does not
    # follow the content (a weak or inode-based one, a cache's) still shows a rewrite by its Last-Modified.
    tag = None
    for name in ("ETag", "etag", "md5Hash", "Content-MD5", "Digest", "content_md5"):
        if info.get(name):
            tag = str(info[name]).strip('"')
            break
    mtime = 0.0
    for name in ("LastModified", "last_modified", "mtime", "updated", "Last-Modified", "created"):
        value = info.get(name)
        if value:
            mtime = _epoch(value)
            break
    # The object's version where the store keeps them (S3's VersionId, Azure's version_id, GCS's generation): a new
    # version is a new stamp even when the ETag repeats.
    version = info.get("VersionId") or info.get("version_id") or info.get("generation")
    stamp = None
    if tag or version:
        stamp = (tag or "") + (f";{mtime!r}" if mtime else "") + (f"@{version}" if version else "")
    return Entry(key, int(info.get("size") or 0), mtime, stamp, media_type)


# ---------------------------------------------------------------- web URLs

#: The format of a web URL whose name has no suffix a parser reads, by its Content-Type (:func:`suffix_for`).
MEDIA_TYPES = {
    "text/html": ".html",
    "application/xhtml+xml": ".html",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "text/plain": ".txt",
    "application/pdf": ".pdf",
    "text/csv": ".csv",
    "text/tab-separated-values": ".tsv",
    "application/jsonl": ".jsonl",
    "application/jsonlines": ".jsonl",
    "application/x-jsonlines": ".jsonl",
    "application/x-ndjson": ".jsonl",
    "application/ndjson": ".jsonl",
    "text/x-rst": ".rst",
    "text/prs.fallenstein.rst": ".rst",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
}


def suffix_for(media_type: str | None) -> str | None:
    """The suffix of the format a Content-Type names (``text/html``: ``.html``), or None for a type citeline does
    not read (or no type)."""
    return MEDIA_TYPES.get((media_type or "").partition(";")[0].strip().lower())


class WebError(OSError):
    """A web URL that could not be read, in one line: the server's status in its own words (``404 Not Found``), a
    TLS failure, no connection, a timeout. An ``OSError``: the URL fails alone."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.strerror = reason
        self.status = status

    @property
    def gone(self) -> bool:
        """The server says the URL is gone (404 Not Found, 410 Gone)."""
        return self.status in GONE_STATUSES


class Gone(SourceError):
    """A web root whose server answers 404 or 410: its document is removed (under the removal guard)."""


#: The statuses that say a URL is gone for good: its document is removed, as a deleted file's.
GONE_STATUSES = (404, 410)


def _status_error(status: int, reason: str | None) -> WebError:
    return WebError(f"{status} {reason or _phrase(status)}".strip(), status)


def _phrase(status: int) -> str:
    # The standard phrase of an HTTP status (404: Not Found), for a server that sent none.
    import http

    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def web_reason(exc: BaseException) -> str:
    """What went wrong reading a web URL, in one line (never "no such object" for a server error or a TLS
    failure): the status in the server's words, a TLS failure, no connection, a timeout, a body cut short."""
    import asyncio
    import ssl

    import aiohttp

    if isinstance(exc, WebError):
        return exc.strerror or str(exc)
    if isinstance(exc, aiohttp.TooManyRedirects):  # a ClientResponseError of status 0: before it, or it says "0"
        return "too many redirects (a redirect loop, or a chain longer than aiohttp follows)"
    if isinstance(exc, aiohttp.ClientResponseError):
        return _status_error(exc.status, exc.message).strerror or ""
    if isinstance(exc, (aiohttp.ClientSSLError, ssl.SSLError)):
        return f"TLS failure ({_first_line(exc)})"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect ({_first_line(exc)})"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, aiohttp.ServerTimeoutError)):
        return "the server did not answer in time"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return f"the body was cut short or could not be decoded ({_first_line(exc)})"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection"
    return _reason(exc)


def web_entry(fs: AbstractFileSystem, url: str) -> Entry:
    """The entry of one web URL from a HEAD request (a GET's headers, its body unread, where HEAD is refused):
    size (``Content-Length`` of an unencoded body; 0 when unknown), time (``Last-Modified``), stamp (``ETag``,
    ``Content-MD5`` or ``Digest``, with the time) and media type (``Content-Type``). A URL that answers 404 or 410
    raises :class:`Gone`; any other failure one :class:`SourceError` line in the server's words."""
    from fsspec.asyn import sync

    try:
        answer = sync(fs.loop, _head, fs, url)
    except Exception as exc:
        raise SourceError(url, web_reason(exc)) from None
    return _answered(url, *answer)


async def _head(fs: AbstractFileSystem, url: str) -> tuple[int, str | None, dict[str, str]]:
    # The status, reason and headers (lower-cased names) of a HEAD of url, or of a GET where HEAD is refused.
    session = await fs.set_session()
    options = dict(fs.kwargs)
    headers = {**options.pop("headers", {}), "Accept-Encoding": "identity"}
    options.pop("allow_redirects", None)
    for method in (session.head, session.get):
        async with method(fs.encode_url(fetch_url(url)), allow_redirects=True, headers=headers, **options) as r:
            if method == session.head and r.status in (405, 501):  # HEAD not allowed: a GET, its body unread
                continue
            return r.status, r.reason, {name.lower(): value for name, value in r.headers.items()}
    raise AssertionError("unreachable")


def _answered(url: str, status: int, reason: str | None, headers: Mapping[str, str]) -> Entry:
    # The entry of a web URL from its HEAD's answer (web_entry), or its Gone or SourceError.
    if status >= 400:
        error = _status_error(status, reason)
        raise (Gone if error.gone else SourceError)(url, error.strerror or "")
    info: dict[str, Any] = {
        name: headers[name.lower()]
        for name in ("ETag", "Content-MD5", "Digest", "Last-Modified")
        if name.lower() in headers
    }
    if "content-length" in headers and headers.get("content-encoding", "identity") in ("identity", ""):
        with contextlib.suppress(ValueError):
            info["size"] = int(headers["content-length"])
    media_type = headers.get("content-type", "").partition(";")[0].strip().lower() or None
    return _entry(info, _name(url), media_type)


def site_of(root: str) -> str:
    """The site of a web root (``https://host``), its own root for anything else: the removal guard counts the
    URLs of one site together, as the files of one folder."""
    protocol = protocol_of(root)
    if protocol not in WEB_PROTOCOLS:
        return root
    return f"{protocol}://{root[len(protocol) + 3 :].split('/', 1)[0].split('?', 1)[0]}"


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)):
        return float(value)
    with contextlib.suppress(TypeError, ValueError):
        return parsedate_to_datetime(str(value)).timestamp()  # an HTTP date
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    return 0.0


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0] or path


# ---------------------------------------------------------------- reading


#: Objects fetched together ahead of parsing (:func:`fetch_ahead`): at most this many GETs in flight ...
AHEAD_OBJECTS = 16
#: ... and this many bytes (their listed sizes) held at once, fetched and not yet parsed.
AHEAD_BYTES = 64 * 1024 * 1024
#: What an object fetched ahead may hold past its listed size (a web server's size is a claim, or unknown): one
#: that reads more is dropped and fetched alone when it is opened, so what is held ahead stays within
#: ``AHEAD_BYTES`` and this much an object.
AHEAD_SLACK = 1024 * 1024
#: The start of a streamed object kept as it is read, so a parser may go back there (a record file's first bytes
#: are sniffed, then read again) without a second GET.
KEPT_HEAD = 1024 * 1024
#: Bytes asked of a body at once, and the buffer of a streamed object's stream.
READ_BYTES = 256 * 1024

_ahead: contextvars.ContextVar[_Ahead | None] = contextvars.ContextVar("citeline_fetch_ahead", default=None)


class TooLarge(SourceError):
    """An object that read past the byte limit: reading stopped there (what a header said is not trusted)."""


def _too_large(url: str, limit: int) -> TooLarge:
    return TooLarge(
        url,
        f"more than {limit:,} bytes read, above the {limit:,}-byte limit; reading stopped there (raise "
        "max_file_bytes / --max-file-bytes to index it)",
    )


@contextlib.contextmanager
def fetch_ahead(sources: Iterable[SourceFile], limit: int | None = None) -> Iterator[None]:
    """Inside, :func:`open_object` of one of ``sources`` (remote objects up to :data:`BLOCK_BYTES` as listed;
    others are left out) fetches it together with the next ones, concurrently: up to :data:`AHEAD_OBJECTS`
    objects and :data:`AHEAD_BYTES` of them at a time, the batch held until each is opened (then dropped), the next
    batch fetched when an object past it is opened. Each is read up to its listed size and :data:`AHEAD_SLACK`
    (and ``limit``, the bytes one object may have): one that reads more is fetched alone when it is opened, within
    the limit it is opened with. Objects are still parsed one at a time, in order, and each keeps its own outcome:
    a missing or forbidden object fails alone, the store not answering stops the run (:class:`SourceUnavailable`)
    when the object it failed on is opened. Per thread (a Dask worker's tasks each have their own). Inside an
    enclosing ``fetch_ahead`` that holds all of ``sources`` already, it adds nothing (a run fetching ahead across
    its file-by-file parse steps)."""
    ahead = _Ahead([source for source in sources if _fetched_whole(source)], limit)
    outer = _ahead.get()
    if not ahead.sources or (outer is not None and all(item.path in outer.position for item in ahead.sources)):
        yield
        return
    token = _ahead.set(ahead)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # a generator holding it closed from another context: it is closed
            _ahead.reset(token)
        ahead.close()


def _fetched_whole(source: SourceFile) -> bool:
    return protocol_of(source.path) is not None and (source.size or 0) <= BLOCK_BYTES


class _Ahead:
    """The objects :func:`fetch_ahead` fetches, in order, and the batch fetched and not yet opened."""

    def __init__(self, sources: list[SourceFile], limit: int | None) -> None:
        self.sources = sources
        self.limit = limit
        self.position = {source.path: number for number, source in enumerate(sources)}
        self.fetched: dict[str, bytes | BaseException | None] = {}
        self._pool: ThreadPoolExecutor | None = None
        self.closed = False

    def take(self, source: SourceFile) -> bytes | BaseException | None:
        """The object's bytes (or the exception fetching it raised), fetching its batch first if it is not
        fetched; None for an object not fetched ahead (or opened a second time, or past what it may hold ahead):
        it is fetched alone."""
        if source.path not in self.fetched:
            first = self.position.get(source.path)
            if first is None or self.closed:
                return None
            self.fetched = {}  # the last batch's unopened objects (skipped, refused) are not kept
            batch: list[SourceFile] = []
            held = 0
            for candidate in self.sources[first:]:
                if batch and (len(batch) == AHEAD_OBJECTS or held + (candidate.size or 0) > AHEAD_BYTES):
                    break
                batch.append(candidate)
                held += candidate.size or 0
            if self._pool is None:
                self._pool = ThreadPoolExecutor(AHEAD_OBJECTS, thread_name_prefix="citeline-fetch")
            fetched = self._pool.map(in_context(lambda item: _fetch(item, self.limit)), batch)
            self.fetched = dict(zip((item.path for item in batch), fetched, strict=True))
        return self.fetched.pop(source.path, None)

    def close(self) -> None:
        """Drop what is held and stop the fetching threads."""
        self.fetched, self.closed = {}, True
        if self._pool is not None:  # a stop (Ctrl-C) waits for the GETs in flight only, never starts the others
            self._pool.shutdown(wait=True, cancel_futures=True)


def _fetch(source: SourceFile, limit: int | None) -> bytes | BaseException | None:
    # One object read whole ahead of its parse, or the exception reading it raised (kept, raised when the object is
    # opened); None when it holds more than it may ahead (fetched alone when opened, within its own limit).
    ahead = (source.size or 0) + AHEAD_SLACK
    bound = ahead if limit is None else min(ahead, limit)
    try:
        with contextlib.closing(_stream(source, bound)) as stream:
            data: bytes = stream.read()
            return data
    except TooLarge as exc:
        return None if limit is None or bound < limit else exc
    except Exception as exc:
        return exc


@contextlib.contextmanager
def open_object(source: SourceFile, limit: int | None = None) -> Iterator[BinaryIO]:
    """Open a remote object for reading, never past ``limit`` bytes (None: no limit, for a record file read as it
    streams): a read past it raises :class:`TooLarge` (the object fails alone), whatever a header or the listing
    said of its size, counted on what is read (decompressed, after redirects). A store's object up to
    :data:`BLOCK_BYTES` is fetched in one GET (inside :func:`fetch_ahead`, with the next objects, concurrently);
    anything else is streamed (a web URL's body as it arrives, a store's object in ranged blocks) through a
    buffered stream (``io.BufferedReader``) with the file interface the parsers use on local files
    (``readline(size)``, ``seek``, ``tell``), so a record file of any size is read line by line in bounded memory.
    A missing or forbidden object raises its ``OSError`` (the file fails alone), as does any failure of a web URL
    (:class:`WebError`: each URL stands alone); a store not answering raises :class:`SourceUnavailable` (the run
    stops)."""
    try:
        ahead = _ahead.get()
        taken = ahead.take(source) if ahead is not None else None
        if isinstance(taken, BaseException):
            raise taken
        if taken is not None and (limit is None or len(taken) <= limit):
            handle: Any = io.BytesIO(taken)
        else:
            handle = _stream(source, limit)
    except Exception as exc:
        raise _translated(source.path, exc) from None
    with contextlib.closing(_Guarded(handle, source.path)) as guarded:
        yield guarded  # type: ignore[misc]


def _stream(source: SourceFile, limit: int | None) -> BinaryIO:
    # The object's stream: its bytes when a store's listed size is one GET's, else its body streamed (_Body).
    fs, path = filesystem(source.path)
    if protocol_of(source.path) in WEB_PROTOCOLS:
        url = fetch_url(source.path)
        return io.BufferedReader(_Body(source.path, lambda _: (_WebGet(fs, url), 0), limit, seeks=False), READ_BYTES)
    if (source.size or 0) <= BLOCK_BYTES:  # one GET, ranged to the limit: an object rewritten larger stops there
        end = None if limit is None else limit + 1
        data = fs.cat_file(
            path,
            **(s3.whole_get(version_of(source)) if s3.is_s3(fs) else {}),
            **({"start": 0, "end": end} if end else {}),
        )
        if limit is not None and len(data) > limit:
            raise _too_large(source.path, limit)
        return io.BytesIO(data)
    # streamed: read at the latest version (s3fs ties its block reads to the ETag it first saw)
    handle = fs.open(path, "rb", block_size=BLOCK_BYTES, cache_type="readahead", size=source.size)

    def seek(offset: int) -> tuple[Any, int]:
        handle.seek(offset)
        return handle, offset

    return io.BufferedReader(_Body(source.path, seek, limit, seeks=True), READ_BYTES)


class _WebGet:
    """One GET of a web URL (redirects followed), its body read as it arrives: decompressed (aiohttp undoes a
    ``Content-Encoding``), in pieces of at most the size asked, so what is read is what is counted."""

    def __init__(self, fs: AbstractFileSystem, url: str) -> None:
        from fsspec.asyn import sync

        self._loop = fs.loop

        async def get() -> Any:
            session = await fs.set_session()
            response = await session.get(fs.encode_url(url), allow_redirects=True, **fs.kwargs)
            if response.status >= 400:
                response.release()
                raise _status_error(response.status, response.reason)
            return response

        self._response = sync(self._loop, get)
        self._waited, self._got = 0.0, 0  # since the last check of the rate (WEB_MIN_BYTES_PER_SECOND)

    def read(self, size: int) -> bytes:
        from fsspec.asyn import sync

        began = time.monotonic()
        data: bytes = sync(self._loop, self._response.content.read, size)
        self._waited += time.monotonic() - began
        self._got += len(data)
        if data and self._waited >= WEB_SILENCE_SECONDS:
            if self._got < WEB_MIN_BYTES_PER_SECOND * self._waited:
                raise WebError(
                    f"the server sent {self._got:,} bytes in {self._waited:.0f} s, slower than the "
                    f"{WEB_MIN_BYTES_PER_SECOND:,} bytes a second a download must keep"
                )
            self._waited, self._got = 0.0, 0
        return data

    def close(self) -> None:
        from fsspec.asyn import sync

        async def close() -> None:
            # A body read to its end gives its connection back for the next GET (keep-alive); one left unread (past
            # the limit) drops it, unread bytes and all.
            if self._response.content.at_eof():
                self._response.release()
            else:
                self._response.close()

        with contextlib.suppress(Exception):
            sync(self._loop, close)


class _Body(io.RawIOBase):
    """A remote object as a raw stream for :class:`io.BufferedReader`: read from a body (``reopen(offset)`` gives
    one and where it stands), never past ``limit`` bytes of the object. ``seeks``: the body seeks (a store's
    object); else it only reads forward (a web URL's GET): a move forward reads past the bytes between, a move
    back within the kept start (:data:`KEPT_HEAD`) is served from it, and one further back is a new GET."""

    def __init__(self, url: str, reopen: Any, limit: int | None, *, seeks: bool) -> None:
        super().__init__()
        self._url, self._reopen, self._limit, self._seeks = url, reopen, limit, seeks
        self._file, self._at = reopen(0)
        self._pos = 0
        self._head = bytearray()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation("a remote object is not sought from its end")
        if offset < 0:
            raise ValueError(f"negative position {offset}")
        self._pos = offset
        return offset

    def readinto(self, buffer: Any) -> int:
        want = len(buffer)
        if self._pos < len(self._head):
            chunk = bytes(self._head[self._pos : self._pos + want])
        else:
            if self._pos != self._at:
                self._move()
            chunk = self._file.read(want)
            self._advance(chunk)
        buffer[: len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)

    def readall(self) -> bytes:
        # Into one growing buffer whose value is handed over without a copy (a list of parts joined held the
        # object twice at the end).
        out = io.BytesIO()
        try:
            while chunk := self.read(READ_BYTES):
                out.write(chunk)
        except BaseException:
            out.close()  # the error's traceback holds this frame: what was read must not live on with it
            raise
        return out.getvalue()

    def _advance(self, chunk: bytes) -> None:
        # ``chunk`` was read from the body: keep it if it extends the kept start, and stop past the limit.
        if len(self._head) == self._at and self._at < KEPT_HEAD:
            self._head += chunk
        self._at += len(chunk)
        if self._limit is not None and self._at > self._limit:
            raise _too_large(self._url, self._limit)

    def _move(self) -> None:
        # Bring the body to the position asked for.
        if self._seeks:
            self._file, self._at = self._reopen(self._pos)
        elif self._pos < self._at:  # back past the kept start: a new GET, read up to there
            self._file.close()
            self._file, self._at = self._reopen(0)
        while self._at < self._pos:
            skipped = self._file.read(min(READ_BYTES, self._pos - self._at))
            if not skipped:
                self._pos = self._at  # past the end: reads give nothing
                return
            self._advance(skipped)

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self._file.close()
            self._head = bytearray()
        super().close()


def _translated(url: str, exc: BaseException) -> BaseException:
    # The per-object errors stay (the file fails alone), and any failure of a web URL (each URL stands alone);
    # anything else means the store is not answering.
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, SourceError, WebError)):
        return exc
    if protocol_of(url) in WEB_PROTOCOLS:
        return WebError(web_reason(exc))
    if _no_credentials(exc):  # a worker without the coordinator's credentials: the run stops, nothing removed
        hint = credentials_hint(protocol_of(url) or "")
        return SourceUnavailable(url, f"no credentials found in this process ({_reason(exc)}); {hint}")
    return SourceUnavailable(url, f"the store stopped answering ({_reason(exc)})")


class _Guarded:
    """A remote file whose reads raise :class:`SourceUnavailable` when the store stops answering mid-read."""

    def __init__(self, handle: Any, url: str) -> None:
        self._handle, self._url = handle, url

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self._handle, name)(*args)
        except Exception as exc:
            raise _translated(self._url, exc) from None

    def read(self, size: int = -1) -> bytes:
        """Read up to ``size`` bytes (all: -1)."""
        return self._call("read", size)

    def readline(self, size: int = -1) -> bytes:
        """Read one line of at most ``size`` bytes."""
        return self._call("readline", size)

    def seek(self, offset: int, whence: int = 0) -> int:
        """Move to ``offset``."""
        return self._call("seek", offset, whence)

    def tell(self) -> int:
        """The position."""
        return self._call("tell")

    def close(self) -> None:
        """Close the remote file."""
        with contextlib.suppress(Exception):
            self._handle.close()


def _first_line(exc: BaseException) -> str:
    return _scrubbed((str(exc).strip().splitlines() or [type(exc).__name__])[0])


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {_first_line(exc)}"
