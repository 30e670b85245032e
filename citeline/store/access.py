"""Named access tokens and their scopes: the tokens file (``tokens.json`` in the index directory, or a path the
server is given) and the filter a scope adds to every request (:class:`Scoped`).

A token is a high-entropy secret (``cl_`` and 32 random bytes, URL-safe) shown once when it is made; the file keeps
only its SHA-256 (a secret of 256 random bits needs no slow hash: nothing can be guessed, and the lookup stays a
hash and constant-time compares per request). Each token has a name, a scope (a filter in the vocabulary of search:
``source``, ``path_glob``, ``meta``, ``ingested_after``/``ingested_before``, see :mod:`citeline.store.filters`; an
empty scope sees everything) and what it may do (:data:`PERMISSIONS`).

The file is written whole to a temporary file and renamed into place (mode 0600), so a server that re-reads it on
change (:class:`TokenFile` stats it per request) reads the old or the new file, never half of one; each change
reads and writes it under a lock beside it (two changes at once keep both). A file edited by hand is read strictly
(:func:`_token_of`): an entry that could be read as more than it says is the file's error, never a wider token.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import secrets
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, MutableSequence, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from threading import Lock
from typing import Any

from citeline.errors import QueryError, SettingsError
from citeline.store.files import rename_into_place
from citeline.store.filters import Filters
from citeline.store.locks import file_lock

__all__ = [
    "PERMISSIONS",
    "TOKENS_FILE",
    "Scoped",
    "Token",
    "TokenFile",
    "scope_of",
    "scoped",
]

#: The file name of the tokens file in an index directory (the server's default).
TOKENS_FILE = "tokens.json"
#: What a token may do: ``search`` (search and facets), ``read`` (documents, a document's text and passages,
#: status), ``ingest`` (the MCP ``ingest`` tool, where the server offers one), ``metrics`` (``/metrics`` and the run
#: ledger; only a token without a scope may have it: the figures are the whole index's).
PERMISSIONS = ("search", "read", "ingest", "metrics")
#: What a token may do unless told.
DEFAULT_PERMISSIONS = ("search", "read")
_PREFIX = "cl_"
#: The filter that selects everything (the default of a scope; Filters is frozen, so one is shared).
_NOTHING = Filters()
_FORMAT = 1
#: Seconds a change to the tokens file waits for another's (each holds the lock for a read and a write).
_LOCK_WAIT = 10.0


@dataclass(frozen=True)
class Scoped(Filters):
    """A request's filters AND a caller's scope (and, for a lookup by id, AND one of ``doc_ids``): every surface
    hands it on where it would hand a :class:`Filters`, so the scope restricts the candidates before ranking, the
    listing, the facet counts and collapse's copies alike (each reads ``to_sql``)."""

    scope: Filters = _NOTHING
    doc_ids: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return Filters.__bool__(self) or bool(self.scope) or bool(self.doc_ids)

    def to_sql(self) -> tuple[str, list[Any]]:
        """The request's condition AND the scope's (AND the ids'), each part's parameters in order."""
        condition, params = Filters.to_sql(self)
        scope_condition, scope_params = self.scope.to_sql()
        sql = f"({condition}) AND ({scope_condition})"
        params = [*params, *scope_params]
        if self.doc_ids:
            sql += " AND d.doc_id IN (SELECT unnest(?::VARCHAR[]))"
            params.append(list(self.doc_ids))
        return sql, params


def scoped(filters: Filters | Mapping[str, Any] | None, scope: Filters, doc_ids: Sequence[str] = ()) -> Scoped:
    """``filters`` (a filter dict or :class:`Filters`) restricted to ``scope`` (and, given ``doc_ids``, to those
    documents). A filter that is already scoped keeps its own scope: scopes only ever narrow."""
    given = Filters.from_value(filters)
    if isinstance(given, Scoped):
        return Scoped(scope=_Both(first=given, second=scope), doc_ids=tuple(doc_ids))
    own = {spec.name: getattr(given, spec.name) for spec in dataclasses.fields(Filters)}
    return Scoped(**own, scope=scope, doc_ids=tuple(doc_ids))


@dataclass(frozen=True)
class _Both(Filters):
    """Two filters that must both hold (a scoped request scoped again)."""

    first: Filters = _NOTHING
    second: Filters = _NOTHING

    def __bool__(self) -> bool:
        return bool(self.first) or bool(self.second)

    def to_sql(self) -> tuple[str, list[Any]]:
        first, first_params = self.first.to_sql()
        second, second_params = self.second.to_sql()
        return f"({first}) AND ({second})", [*first_params, *second_params]


def scope_of(filters: Filters) -> Filters:
    """The caller's part of a request's filters: what the caller may see at all (the reference an unfiltered
    search is measured against), or an empty :class:`Filters` for an unscoped request."""
    if isinstance(filters, Scoped) and filters.scope:
        return Scoped(scope=filters.scope)
    return Filters()


@dataclass(frozen=True)
class Token:
    """One named token as the file holds it (never its secret): its scope as a filter dict, what it may do."""

    name: str
    digest: str
    scope: dict[str, Any] = field(default_factory=dict)
    permissions: tuple[str, ...] = DEFAULT_PERMISSIONS
    created_at: str = ""
    rotated_at: str | None = None

    @property
    def filters(self) -> Filters:
        """The scope as a validated filter (empty: the whole index)."""
        return Filters.from_value(self.scope)

    def can(self, permission: str) -> bool:
        """Whether the token may do ``permission`` (one of :data:`PERMISSIONS`)."""
        return permission in self.permissions

    def to_dict(self) -> dict[str, Any]:
        """The token as ``citeline tokens list`` shows it: no secret, no digest."""
        return {
            "name": self.name,
            "scope": self.scope,
            "permissions": list(self.permissions),
            "created_at": self.created_at,
            "rotated_at": self.rotated_at,
        }


def digest_of(secret: str | bytes) -> str:
    """The SHA-256 (hex) the file keeps of a secret."""
    raw = secret.encode("utf-8") if isinstance(secret, str) else secret
    return hashlib.sha256(raw).hexdigest()


def new_secret() -> str:
    """A new token secret: ``cl_`` and 256 random bits, URL-safe base64."""
    return _PREFIX + secrets.token_urlsafe(32)


def checked_scope(scope: Mapping[str, Any] | None) -> dict[str, Any]:
    """A scope filter dict as the file keeps it: validated as search validates filters, a ``source`` that names an
    existing folder or file kept as its absolute path (so a server started elsewhere reads the same source), any
    other source (an ``add_texts`` source name, a source id) as given."""
    wanted = {key: value for key, value in dict(scope or {}).items() if value}
    Filters.from_value(wanted)  # QueryError naming the bad key
    sources = wanted.get("source")
    if sources:
        listed = [sources] if isinstance(sources, str) else list(sources)
        wanted["source"] = [str(Path(item).resolve()) if Path(item).exists() else item for item in listed]
    return wanted


def _permissions(permissions: Sequence[str] | None, scope: Mapping[str, Any]) -> tuple[str, ...]:
    # What a new token may do (none given: the default), checked against its scope.
    return _checked_permissions(tuple(dict.fromkeys(permissions or DEFAULT_PERMISSIONS)), scope)


def _checked_permissions(chosen: tuple[str, ...], scope: Mapping[str, Any]) -> tuple[str, ...]:
    unknown = [name for name in chosen if name not in PERMISSIONS]
    if unknown:
        raise SettingsError(f"unknown permission {unknown[0]!r}; a token may have {', '.join(PERMISSIONS)}")
    if "metrics" in chosen and scope:
        raise SettingsError(
            "a scoped token cannot have 'metrics': /metrics and the run ledger count the whole index; give it to a "
            "token without a scope"
        )
    return chosen


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


_DIGEST = re.compile(r"[0-9a-f]{64}")


def _token_of(item: Any, n: int) -> Token:
    """Entry ``n`` of a tokens file as a :class:`Token`; a ValueError naming the entry and what is wrong with it.

    Strict where a lenient reading would widen what a hand-edited entry allows: ``permissions`` missing is the
    default, but an empty list is a token that may do nothing (not the default); a ``scope`` missing, null or
    ``{}`` is the whole index, but a scope that names options and selects nothing by them (``{"path_glob": []}``)
    is an error, not the whole index."""
    if not isinstance(item, dict):
        raise ValueError(f"entry {n} is not an object")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"entry {n} has no name")
    where = f"token {name!r}"
    if not isinstance(item.get("digest"), str) or not _DIGEST.fullmatch(item["digest"]):
        raise ValueError(f"{where}: its digest is not a SHA-256 in hex (64 of 0-9a-f)")
    permissions = item.get("permissions", DEFAULT_PERMISSIONS)
    if not isinstance(permissions, list | tuple) or not all(isinstance(one, str) for one in permissions):
        raise ValueError(f"{where}: permissions must be a list of {', '.join(PERMISSIONS)}")
    scope = item.get("scope") or {}
    if not isinstance(scope, dict):
        raise ValueError(f"{where}: its scope must be an object of filters (or {{}} for the whole index)")
    try:
        if scope and not Filters.from_value(scope):
            shown = json.dumps(scope)
            raise ValueError(f"{where}: its scope {shown} selects by nothing; write {{}} for the whole index")
        chosen = _checked_permissions(tuple(dict.fromkeys(permissions)), scope)
    except (QueryError, SettingsError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    rotated = item.get("rotated_at")
    return Token(
        name=name,
        digest=item["digest"],
        scope=scope,
        permissions=chosen,
        created_at=str(item.get("created_at", "")),
        rotated_at=None if rotated is None else str(rotated),
    )


class TokenFile:
    """The tokens file at ``path``: read (and re-read whenever its stat changes: size, mtime, inode), and managed
    (:meth:`add`, :meth:`list`, :meth:`revoke`, :meth:`rotate`; the API of ``citeline tokens``)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._lock = Lock()
        self._stamp: tuple[int, int, int, int] | None = None
        self._tokens: tuple[Token, ...] = ()

    @classmethod
    def of_index(cls, index_path: str | os.PathLike[str], path: str | os.PathLike[str] | None = None) -> TokenFile:
        """The tokens file of the index at ``index_path``: the file ``path`` when one is given, else
        :data:`TOKENS_FILE` in the index directory, where ``citeline serve`` and ``citeline tokens`` both look by
        default. It need not exist yet."""
        return cls(path or Path(index_path) / TOKENS_FILE)

    # ---------------------------------------------------------------- reading
    def tokens(self) -> tuple[Token, ...]:
        """The tokens the file holds now (none when there is no file). A file that cannot be read, is not a
        tokens file, holds an entry that is not a whole token, or that users other than its owner's group may write
        raises :class:`SettingsError` naming it and the problem: a server then refuses every request rather than
        serve with scopes it could not read."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._tokens = None, ()
            return ()
        # the mode too: a chmod that lets everyone write the file changes neither its size nor its mtime
        stamp = (stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_mode)
        with self._lock:
            if stamp != self._stamp:
                if stat.st_mode & 0o002:
                    raise SettingsError(
                        f"{self.path}: every user may write the tokens file (mode {stat.st_mode & 0o777:o}), and so "
                        f"give themselves any token; `chmod 600 {self.path}`"
                    )
                self._tokens = self._read()
                self._stamp = stamp
            return self._tokens

    def _read(self) -> tuple[Token, ...]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("format") != _FORMAT or not isinstance(data.get("tokens"), list):
                raise ValueError(f"not a citeline tokens file (format {_FORMAT})")
            tokens = tuple(_token_of(item, n) for n, item in enumerate(data["tokens"]))
        except (OSError, ValueError) as exc:
            raise SettingsError(f"{self.path}: cannot read the tokens file: {exc}") from None
        names, digests = Counter(token.name for token in tokens), Counter(token.digest for token in tokens)
        # Which entry would a request get? Neither: the file is wrong (a copied entry whose scope was then edited).
        twice = [f"two tokens are named {name!r}" for name, n in names.items() if n > 1]
        twice += [f"two tokens have the same secret (digest {digest[:8]}...)" for digest, n in digests.items() if n > 1]
        if twice:
            raise SettingsError(f"{self.path}: cannot read the tokens file: {twice[0]}")
        return tokens

    def in_force(self) -> bool:
        """Whether the file guards a server: it holds a token, or it exists with none left (every token revoked).
        Revoking every token locks a server out, across a restart too; only removing the file (a decision, not a
        revocation) returns a server to answering everyone as its owner. Raises :class:`SettingsError` as
        :meth:`tokens` does."""
        return bool(self.tokens()) or self.path.exists()

    def find(self, secret: bytes) -> Token | None:
        """The token whose secret is ``secret``, or None. Every token's digest is compared (in constant time)."""
        digest = digest_of(secret).encode("ascii")
        found = None
        for token in self.tokens():
            if secrets.compare_digest(digest, token.digest.encode("ascii")):
                found = token
        return found

    # ---------------------------------------------------------------- managing
    def list(self) -> list[Token]:
        """The tokens, by name."""
        return sorted(self.tokens(), key=lambda token: token.name)

    def add(self, name: str, scope: Mapping[str, Any] | None = None, permissions: Sequence[str] | None = None) -> str:
        """Add the token ``name`` with ``scope`` (a filter dict; empty: the whole index) and ``permissions``
        (default ``search`` and ``read``); returns its secret, which is shown only now."""
        if not name or not name.strip() or any(ch.isspace() or not ch.isprintable() for ch in name):
            raise SettingsError(f"a token name is one word of printable characters, got {name!r}")
        try:
            wanted = checked_scope(scope)
        except QueryError as exc:
            raise SettingsError(f"token {name!r}: {exc}") from None
        chosen = _permissions(permissions, wanted)
        with self._changing() as tokens:
            if any(token.name == name for token in tokens):
                raise SettingsError(f"there is a token {name!r} already; revoke or rotate it, or choose another name")
            secret = new_secret()
            tokens.append(Token(name, digest_of(secret), wanted, chosen, _now()))
        return secret

    def revoke(self, name: str) -> None:
        """Remove the token ``name``: a running server refuses it from its next request."""
        with self._changing() as tokens:
            kept = [token for token in tokens if token.name != name]
            if len(kept) == len(tokens):
                raise SettingsError(f"no token {name!r} in {self.path}; `citeline tokens list` shows them")
            tokens[:] = kept

    def rotate(self, name: str) -> str:
        """A new secret for the token ``name`` (same scope and permissions); the old one stops working. Returns
        the new secret."""
        with self._changing() as tokens:
            at = next((i for i, token in enumerate(tokens) if token.name == name), None)
            if at is None:
                raise SettingsError(f"no token {name!r} in {self.path}; `citeline tokens list` shows them")
            secret = new_secret()
            tokens[at] = dataclasses.replace(tokens[at], digest=digest_of(secret), rotated_at=_now())
        return secret

    @contextmanager
    def _changing(self) -> Iterator[MutableSequence[Token]]:
        # The tokens as the file holds them now, to change in place; written back when the block ends without an
        # error. Under the file's lock (``.tokens.json.lock`` beside it), read afresh rather than from the cache:
        # two `citeline tokens add` at once each wrote the file it had read plus its own token, and one was lost.
        with file_lock(self.path.with_name(f".{self.path.name}.lock"), wait=_LOCK_WAIT, what=str(self.path)):
            tokens = list(self._read()) if self.path.exists() else []
            yield tokens
            self._write(tokens)

    def _write(self, tokens: Sequence[Token]) -> None:
        data = {
            "format": _FORMAT,
            "tokens": [
                {
                    "name": token.name,
                    "digest": token.digest,
                    "scope": token.scope,
                    "permissions": list(token.permissions),
                    "created_at": token.created_at,
                    "rotated_at": token.rotated_at,
                }
                for token in tokens
            ],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, staged = tempfile.mkstemp(prefix=".tokens.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=1, default=str)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(staged, 0o600)
            rename_into_place(Path(staged), self.path)
        except BaseException:
            Path(staged).unlink(missing_ok=True)
            raise
