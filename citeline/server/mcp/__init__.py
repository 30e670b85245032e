"""The MCP server (Model Context Protocol): an index's search, documents and status as tools and resources for AI
assistants and agents, with the citation of every passage (``citeline mcp`` over stdio; ``citeline serve`` at
``/mcp`` over streamable HTTP). Built on the official ``mcp`` SDK's low-level server, so the protocol is the SDK's.

Tools: ``search`` (its input schema is generated from the fields of :class:`citeline.query.plan.SearchRequest`:
names, types, bounds and help are declared there once), ``get_passage`` and ``get_document`` (a bounded span of a
document's text, paged), ``list_documents`` (filters, paged), ``index_status``, and ``ingest`` only when roots were
allowed (``--allow-ingest ROOT``): the model names one of those roots, never a path. Every answer is bounded (see the
``MAX_`` constants of ``schemas.py`` and the server's :class:`citeline.server.limits.Limits`); a bad argument, a
query the index refuses or an unknown document is a tool error (``isError``) with one line, never a crash of the
server.

Resources: ``citeline://DOC_ID`` is a document's text, ``citeline://DOC_ID/chars/START-END`` the characters
``START`` to ``END`` of it (the offsets a search result cites), listed a page at a time.

Reads go through the server's :class:`citeline.server.service.ServedIndex` (:class:`citeline.server.IndexService`:
the kept-open index whose search snapshot reloads itself after a commit, one search at a time), so a search while
``citeline ingest`` commits answers from the generation before or after the commit, never a mix.

The modules, one job each: ``schemas.py`` (the tools' argument models and answer models), ``tools.py`` (the tools
and resources: :func:`build_server`), ``stdio.py`` (``citeline mcp``'s transport over stdin and stdout:
:func:`run_stdio`, coupled to the SDK's stdio internals, whose version its docstring names) and ``http.py`` (the
streamable-HTTP endpoint ``citeline serve`` mounts at ``/mcp``: :func:`http_app`).
"""

from citeline.server.mcp.http import http_app
from citeline.server.mcp.stdio import run_stdio
from citeline.server.mcp.tools import allowed_roots, build_server

__all__ = ["allowed_roots", "build_server", "http_app", "run_stdio"]
