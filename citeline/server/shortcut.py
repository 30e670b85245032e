"""A shorter way through FastAPI for ``GET /search``, answering byte for byte what the route answers.

FastAPI validates each query parameter of a route on its own (a pydantic validation, a dependency call and their
bookkeeping per parameter: ``/search`` has 15), a fifth of the CPU the server's event loop spends on a search
request (docs/performance.md, "One validation for /search"). :class:`QueryShortcut` answers the same route from the
same declaration with one validation of all its parameters: it reads the route's own dependency tree (its query
parameters, their annotations and bounds, the dependencies that turn them into the endpoint's arguments), builds one
pydantic model of them, calls the route's dependencies and endpoint with what that model validated, and renders the
result with the route's own response field, status and headers. Anything it is not sure to answer as the route
would (a value the model refuses, a method or path that is not the route's) goes on to FastAPI, which answers it
(its 400 names the parameter as every route's does). The route stays the reference: the OpenAPI schema is its, and
tests/system/test_server_shortcut.py checks, over generated query strings, that both ways answer the same bytes.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi._compat import field_annotation_is_sequence
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import ResponseValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError, create_model
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.middleware import Middleware
from starlette.routing import get_route_path
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["QueryShortcut", "add_query_shortcut"]


class _Shortcut:
    """One route answered directly: its query parameters as one pydantic model, and how to call it."""

    def __init__(self, route: APIRoute):
        endpoint = route.dependant
        parts = [*endpoint.dependencies, endpoint]
        for part in parts:
            _require_query_only(route, part, endpoint)
        fields = [field for part in parts for field in part.query_params]
        names = [field.alias for field in fields]
        if len(set(names)) != len(names):
            raise ValueError(f"{route.path}: a query parameter is declared twice; a shortcut cannot tell them apart")
        plain = (
            route.response_model_include is None
            and route.response_model_exclude is None
            and route.response_model_by_alias
            and not (route.response_model_exclude_unset or route.response_model_exclude_defaults)
            and not route.response_model_exclude_none
        )
        if route.response_field is None or route.status_code not in (None, 200) or not plain:
            raise ValueError(f"{route.path}: a shortcut answers a route with a plain response model and status 200")
        self.route = route
        self.fields = fields
        #: the names each dependency (then the endpoint) takes, in the order FastAPI calls them
        self.calls = [(part, [field.name for field in part.query_params]) for part in endpoint.dependencies]
        self.own = [field.name for field in endpoint.query_params]
        #: parameter -> (argument name, whether it is a list)
        self.reads = {field.alias: (field.name, _is_list(field.field_info.annotation)) for field in fields}
        self.model: type[BaseModel] = create_model(
            f"Query_{route.name}",
            **{field.name: (field.field_info.annotation, field.field_info) for field in fields},  # type: ignore[call-overload]
        )

    def values(self, query_string: bytes) -> dict[str, Any] | None:
        """The route's query parameters from ``query_string``, validated; None if any is refused (FastAPI says
        why). A parameter given more than once is its last value, a list parameter all of them; others are
        ignored (as FastAPI reads them)."""
        given = QueryParams(query_string)
        raw: dict[str, Any] = {}
        for alias in given:  # what was given, not every parameter: a search names few
            read = self.reads.get(alias)
            if read is not None:
                name, many = read
                raw[name] = given.getlist(alias) if many else given[alias]
        try:
            return dict(self.model.model_validate(raw))
        except ValidationError:
            return None

    async def answer(self, values: dict[str, Any]) -> Response:
        """The route's answer to ``values``, as FastAPI renders it (status, headers and body)."""
        arguments: dict[str, Any] = {name: values[name] for name in self.own}
        for dependency, names in self.calls:
            call: Callable[..., Awaitable[Any]] = dependency.call  # type: ignore[assignment]
            arguments[dependency.name or ""] = await call(**{name: values[name] for name in names})
        endpoint = self.route.dependant
        headers = Response()  # the endpoint's for its headers, as FastAPI's solve_dependencies makes it
        del headers.headers["content-length"]
        headers.status_code = None  # type: ignore[assignment]
        if endpoint.response_param_name is not None:
            arguments[endpoint.response_param_name] = headers
        result = await endpoint.call(**arguments)  # type: ignore[misc]
        field = self.route.response_field
        assert field is not None  # checked in __init__
        validated, errors = field.validate(result, {}, loc=("response",))
        if errors:  # a bug, answered 500 as under FastAPI
            raise ResponseValidationError(errors=errors, body=result)
        body = field.serialize_json(validated, by_alias=True)
        response = Response(content=body, media_type="application/json", status_code=headers.status_code or 200)
        response.headers.raw.extend(headers.headers.raw)
        return response


def _require_query_only(route: APIRoute, part: Dependant, endpoint: Dependant) -> None:
    # A shortcut takes dependencies and an endpoint that read query parameters only (the endpoint may also set
    # headers on its Response), and coroutine functions all: what it would otherwise have to re-implement.
    own = part is endpoint
    other = [
        part.path_params,
        part.header_params,
        part.cookie_params,
        part.body_params,
        part.request_param_name,
        part.websocket_param_name,
        part.http_connection_param_name,
        part.background_tasks_param_name,
        part.security_scopes_param_name,
        part.dependencies if not own else [],
        part.response_param_name if not own else None,
    ]
    if any(other) or part.call is None or not inspect.iscoroutinefunction(part.call):
        raise ValueError(f"{route.path}: a shortcut answers routes whose parts are coroutines of query parameters")


def _is_list(annotation: Any) -> bool:
    # FastAPI's own test of whether a query parameter takes every value given (getlist) or the last one: the
    # differential test (tests/system/test_server_shortcut.py) fails if a FastAPI release reads them otherwise.
    return bool(field_annotation_is_sequence(annotation))


class QueryShortcut:
    """ASGI middleware, innermost of the app's (so every other middleware still runs: the guard, the metrics and
    access log, the security headers): a ``GET`` of one of the routes at ``paths`` whose query parameters its
    model validates is answered here (:class:`_Shortcut`); any other request goes on to the app. What the route's
    code raises is answered by the app's exception handlers, as under FastAPI. Starlette builds it at the app's
    first request, when every route and handler is declared (:func:`add_query_shortcut`)."""

    def __init__(self, app: ASGIApp, fastapi: FastAPI, paths: Sequence[str]):
        self.app = app
        routes = [r for r in fastapi.routes if isinstance(r, APIRoute) and r.path in paths]
        routes = [route for route in routes if "GET" in (route.methods or set())]
        missing = set(paths) - {route.path for route in routes}
        if missing:
            raise ValueError(f"no GET route at {', '.join(sorted(missing))} to shortcut")
        self.shortcuts = {route.path: _Shortcut(route) for route in routes}
        self.handlers = dict(fastapi.exception_handlers)
        self.overrides = fastapi.dependency_overrides  # the app's, live: a dependency overridden goes to FastAPI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        shortcut = None
        if scope["type"] == "http" and scope["method"] == "GET" and not self.overrides:
            shortcut = self.shortcuts.get(get_route_path(scope))
        values = shortcut.values(scope.get("query_string", b"")) if shortcut is not None else None
        if shortcut is None or values is None:
            await self.app(scope, receive, send)
            return
        # What routing sets: the metrics label the route's pattern, as for a request FastAPI routed.
        scope["route"], scope["endpoint"], scope["path_params"] = shortcut.route, shortcut.route.endpoint, {}
        try:
            response = await shortcut.answer(values)
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                raise  # Starlette's ServerErrorMiddleware answers it (500), as it would the route's
            request = Request(scope, receive)
            if inspect.iscoroutinefunction(handler):
                response = await handler(request, exc)
            else:  # a plain function, on a worker thread as Starlette runs it
                response = await run_in_threadpool(handler, request, exc)
        await response(scope, receive, send)

    def _handler(self, exc: Exception) -> Callable[..., Any] | None:
        # The handler Starlette's ExceptionMiddleware would pick: that of the first of the exception's classes
        # with one (Exception's is the ServerErrorMiddleware's, outside this one: not here).
        for cls in type(exc).__mro__:
            if cls is Exception:
                return None
            if cls in self.handlers:
                return self.handlers[cls]
        return None


def add_query_shortcut(app: FastAPI, *paths: str) -> None:
    """Answer ``GET`` requests of the app's routes at ``paths`` through :class:`QueryShortcut`, innermost of the
    app's middleware."""
    app.user_middleware.append(Middleware(QueryShortcut, fastapi=app, paths=paths))
