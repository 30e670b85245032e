"""What every request passes first: the Host and Origin check (without a token) or the bearer token, and a UTF-8
query string and path; the security headers on every response; and the refusal to listen where other machines
reach the index without a token."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from urllib.parse import unquote_to_bytes, urlsplit

from fastapi import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from citeline.errors import SettingsError
from citeline.server.access import CALLER, CALLER_KEY, OWNER, authenticate
from citeline.server.limits import TOKEN_ENV
from citeline.server.models import error_response
from citeline.store.access import TokenFile

_LOG = logging.getLogger("citeline.server")

#: The host names a server without a token answers to, with its own port, besides its own address and the ones the
#: user names (``allowed_hosts``).
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


class Guard:
    """ASGI middleware in front of every route: the Host and Origin check (without a token) or the bearer token,
    then a UTF-8 query string and path.

    Without a token, a request must name this server in its ``Host`` header (a loopback name, or the address the
    connection reached, with the server's port; or one of ``allowed_hosts``), else 421; and a browser's ``Origin``
    must be such a host's (or one of the ``cors`` origins), else 403. A web page the user visits can point a name
    of its own at 127.0.0.1 (DNS rebinding) and would then be same-origin with the server: its requests name its
    own host, and are refused.

    With a token, a browser asking for HTML is challenged with Basic authentication (the token as the password,
    any user name), so the search page works with a token and no script; programs send
    ``Authorization: Bearer TOKEN``.
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        tokens: TokenFile | None = None,
        allowed_hosts: Iterable[str] = (),
        cors: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.token = token.encode("utf-8") if token else None
        self.tokens = tokens  # named tokens with scopes (citeline.server.access), re-read when the file changes
        # Once the file is in force (it exists, with or without tokens left), every request needs a token, even
        # after the last is revoked or the file is removed while the server runs: revoking must never open a server.
        self.locked = False
        named = [host.strip().lower() for host in allowed_hosts]
        self.any_host = "*" in named
        self.named = {host for host in named if host and host != "*"}
        self.origins = {origin.rstrip("/").lower() for origin in cors}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        reset = CALLER.set(scope.get(CALLER_KEY, OWNER))  # the caller every read of this request is scoped to
        try:
            await self.app(scope, receive, send)
        finally:
            CALLER.reset(reset)

    def _refusal(self, scope: Scope) -> Response | None:
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        try:
            self.locked = self.locked or bool(self.tokens is not None and self.tokens.in_force())
        except SettingsError as exc:  # fail closed; the file's path and problem go to the log, not the caller
            _LOG.error("%s", exc)
            return error_response(503, "the server cannot read its tokens file; its log says why")
        named = self.tokens if self.locked else None
        if self.token is None and named is None:
            # No secret guards this server: only the Host and Origin check keeps other sites' pages out.
            refused = self._foreign(scope, headers)
            if refused is not None:
                return refused
        try:
            caller = authenticate(headers.get(b"authorization", b""), self.token, named)
        except SettingsError as exc:
            _LOG.error("%s", exc)
            return error_response(503, "the server cannot read its tokens file; its log says why")
        if caller is None:
            wants_page = b"text/html" in headers.get(b"accept", b"")
            challenge = 'Basic realm="citeline"' if wants_page else 'Bearer realm="citeline"'
            return error_response(
                401,
                "this server needs its token: send the header `Authorization: Bearer TOKEN`",
                {"WWW-Authenticate": challenge},
            )
        scope[CALLER_KEY] = caller
        for part, raw in (("query string", scope.get("query_string", b"")), ("path", scope.get("raw_path") or b"")):
            try:
                unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
            except UnicodeDecodeError:
                return error_response(400, f"the {part} is not valid UTF-8; percent-encode text as UTF-8")
        return None

    def _foreign(self, scope: Scope, headers: dict[bytes, bytes]) -> Response | None:
        """421 for a Host that is not this server's, 403 for an Origin that is not; None if both are."""
        host = headers.get(b"host", b"").decode("latin-1").strip().lower()
        if not self._ours(host, scope):
            return error_response(
                421,
                f"this server does not answer to the host {host[:100]!r}; name it with --allowed-host "
                "(allowed_hosts) if it is yours",
            )
        origin = headers.get(b"origin")
        if origin is not None:
            text = origin.decode("latin-1").strip().rstrip("/").lower()
            parts = urlsplit(text) if text.startswith(("http://", "https://")) else None
            if text not in self.origins and (parts is None or parts.path or not self._ours(parts.netloc, scope)):
                return error_response(403, f"requests from pages of {text[:100]!r} are refused")
        return None

    def _ours(self, host: str, scope: Scope) -> bool:
        """Whether ``host`` (a Host header's ``name[:port]``) names this server."""
        if self.any_host or host in self.named:
            return True
        name, port = _split_host(host)
        if name is None:
            return False
        if name in self.named:  # a name given without a port: on any port
            return True
        server = scope.get("server") or (None, None)
        own_port = server[1]
        if port != own_port and not (port is None and own_port == 80):
            return False
        own = str(server[0]).lower() if server[0] else None
        if own is not None and ":" in own:
            own = f"[{own}]"
        return name in LOOPBACK_NAMES or name == own


def _split_host(host: str) -> tuple[str | None, int | None]:
    """A Host header's name and port (None when absent); (None, None) if it is not ``name[:port]``."""
    if host.startswith("["):
        name, bracket, rest = host.partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None, None
        name, port = name + "]", rest[1:] or None
    else:
        name, _, port = host.partition(":") if host.count(":") == 1 else (host, "", "")
        if ":" in name:
            return None, None
    if not name:
        return None, None
    if port is None or port == "":
        return name, None
    return (name, int(port)) if port.isdigit() and len(port) <= 5 else (None, None)


#: The Content-Security-Policy of every response that sets none of its own: nothing may load, run or frame it.
STRICT_POLICY = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
#: The headers every response carries (the Content-Security-Policy unless the response has its own).
SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


class SecurityHeaders:
    """ASGI middleware around the whole app (its error pages included): ``X-Content-Type-Options: nosniff``,
    ``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer`` on every response, and :data:`STRICT_POLICY` as
    its Content-Security-Policy unless the route set a policy of its own (the search page, the API docs)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower().decode() not in SECURITY_HEADERS]
                if not any(k.lower() == b"content-security-policy" for k, _ in kept):
                    kept.append((b"content-security-policy", STRICT_POLICY.encode()))
                kept += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": kept}
            await send(message)

        await self.app(scope, receive, secured)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``): only this machine can connect."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, no_auth: bool) -> None:
    """Refuse (:class:`SettingsError`) to listen on an address other machines reach without a token, unless
    ``no_auth`` says so explicitly, and a token together with ``no_auth``."""
    if token and no_auth:
        raise SettingsError("give a token or --no-auth, not both")
    if not is_loopback(host) and not token and not no_auth:
        raise SettingsError(
            f"--host {host} lets other machines search this index: set a token (--token, or the {TOKEN_ENV} "
            "environment variable) or pass --no-auth if it is meant to be open"
        )
