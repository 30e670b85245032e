"""The server's defaults and bounds: what one request may ask for, how long it may take, where the server
listens, and the names of its header and environment variables."""

from __future__ import annotations

import dataclasses

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

# What one request may ask for, so that none costs much more than a normal one: a search ranks at most
# MAX_K + MAX_OFFSET passages for a query of at most MAX_QUERY_CHARS characters, a listing returns at most MAX_PAGE
# rows, and each filter takes at most MAX_FILTER_VALUES values of at most MAX_QUERY_CHARS characters.
MAX_QUERY_CHARS = 1000
MAX_K = 100
MAX_OFFSET = 100
MAX_PAGE = 1000
DEFAULT_PAGE = 100
MAX_FILTER_VALUES = 20
MAX_ID_CHARS = 200


@dataclasses.dataclass(frozen=True)
class Limits:
    """The server's bounds on a request (the ``MAX_`` constants), which the page and the MCP tools keep too."""

    query_chars: int
    k: int
    offset: int
    id_chars: int
    filter_values: int  #: values of one filter (``source``, ``path``, ``where``)


#: The bounds above as the search page and the MCP tools take them.
LIMITS = Limits(MAX_QUERY_CHARS, MAX_K, MAX_OFFSET, MAX_ID_CHARS, MAX_FILTER_VALUES)
#: Seconds a request may take, waiting for the index included, before it is answered 503 (``timeout``).
DEFAULT_TIMEOUT = 30.0
#: Seconds a connection may take to send a request's head (after connecting, or after the last response): uvicorn
#: itself waits forever, so an idle or trickling client would hold a connection slot
#: (``citeline.server.serving.TimelyH11``).
HEAD_TIMEOUT = 10.0
#: Connections uvicorn serves at once; more are answered 503 at once (``limit_concurrency``).
DEFAULT_LIMIT_CONCURRENCY = 256
#: The response header naming the committed generation a search or health check read.
GENERATION_HEADER = "X-Citeline-Generation"
#: The environment variable that holds the bearer token (so that it does not show in ``ps``).
TOKEN_ENV = "CITELINE_TOKEN"
#: The environment variable ``app_from_environment`` reads its settings from (``serve(workers=N)`` sets it).
SETTINGS_ENV = "CITELINE_SERVE_SETTINGS"
