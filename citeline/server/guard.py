"""What every request passes first: the bearer token (when set) and a UTF-8 query string and path; and the
refusal to listen where other machines reach the index without a token."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import secrets
from urllib.parse import unquote_to_bytes

from fastapi import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from citeline.errors import SettingsError
from citeline.server.limits import TOKEN_ENV
from citeline.server.models import error_response


class Guard:
    """ASGI middleware in front of every route: the bearer token (when set), then a UTF-8 query string and path.

    A browser asking for HTML is challenged with Basic authentication (the token as the password, any user
    name), so the search page works with a token and no script; programs send ``Authorization: Bearer TOKEN``.
    """

    def __init__(self, app: ASGIApp, token: str | None):
        self.app = app
        self.token = token.encode("utf-8") if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> Response | None:
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        if self.token is not None and not self._authorised(headers.get(b"authorization", b"")):
            wants_page = b"text/html" in headers.get(b"accept", b"")
            challenge = 'Basic realm="citeline"' if wants_page else 'Bearer realm="citeline"'
            return error_response(
                401,
                "this server needs its token: send the header `Authorization: Bearer TOKEN`",
                {"WWW-Authenticate": challenge},
            )
        for part, raw in (("query string", scope.get("query_string", b"")), ("path", scope.get("raw_path") or b"")):
            try:
                unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
            except UnicodeDecodeError:
                return error_response(400, f"the {part} is not valid UTF-8; percent-encode text as UTF-8")
        return None

    def _authorised(self, header: bytes) -> bool:
        assert self.token is not None
        scheme, _, credentials = header.partition(b" ")
        if scheme.lower() == b"bearer":
            return secrets.compare_digest(credentials.strip(), self.token)
        if scheme.lower() == b"basic":
            try:
                password = base64.b64decode(credentials.strip(), validate=True).partition(b":")[2]
            except (binascii.Error, ValueError):
                return False
            return secrets.compare_digest(password, self.token)
        return False


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
