"""A shorter way through FastAPI for ``GET /search``, answering byte for byte what the route answers.

FastAPI validates each query parameter of a route on its own (a pydantic validation, a dependency call and their
bookkeeping per parameter: ``/search`` has 15), a fifth of the CPU the server's event loop spends on a search
request (docs/performance.md, "One validation for /search"). A :class:`QueryRoute` answers from the same
declaration with one validation of all its parameters: it reads the route's own dependency tree (its query
parameters, their annotations and bounds, the dependencies that turn them into the endpoint's arguments), builds one
pydantic model of them, calls the route's dependencies and endpoint with what that model validated, and renders the
result with the route's own response field, status and headers. A request it is not sure to answer as FastAPI would
(a value the model refuses) goes on to FastAPI's handler of the same route, which answers it (its 400 names the
parameter as every route's does). The route stays the reference: the OpenAPI schema is its, and
tests/system/test_server_shortcut.py checks, over generated query strings, that both handlers answer the same
bytes.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi._compat import field_annotation_is_sequence
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import ResponseValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError, create_model
from starlette.datastructures import QueryParams

__all__ = ["QueryRoute"]


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


class QueryRoute(APIRoute):
    """A FastAPI route (``route_class_override`` of ``add_api_route``) whose requests :class:`_Shortcut` answers
    when its model validates their query parameters, and FastAPI's own handler otherwise (a value it refuses, or a
    dependency the app overrides). Routing, the exception handlers and FastAPI's per-request scope are the route's
    as for any other: only the handler inside differs. A route it could not answer as FastAPI does is refused
    when it is declared (:class:`_Shortcut`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        routed = super().get_route_handler()
        shortcut = _Shortcut(self)

        async def handler(request: Request) -> Response:
            overridden = getattr(self.dependency_overrides_provider, "dependency_overrides", None)
            values = None if overridden else shortcut.values(request.scope.get("query_string", b""))
            if values is None:
                return await routed(request)
            return await shortcut.answer(values)

        return handler
