"""The ``documents.metadata`` column: a document's user metadata, with citeline's own fields under one key.

A document's :attr:`~citeline.sources.document.Document.properties` (the encoding a file was read in, a PDF's
page count) are stored in the same JSON value as its metadata, under :data:`PROPERTIES_KEY`, so the catalog's
schema is unchanged; every reader splits them off (:func:`split_metadata`), so search results and ``meta`` filters only
ever see the user's metadata. Rows written before this split held ``pages`` (and ``page_starts``) in the
metadata itself, and records' (and added texts') ``record_id`` and ``body_start`` were metadata until issue 40:
:func:`split_metadata` moves them out too (a ``meta`` filter on such a row still sees them until it is ingested again).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from citeline.sources import MAX_METADATA_DEPTH

#: The key of citeline's own fields in the stored JSON (a ``meta`` filter on it is refused).
PROPERTIES_KEY = "_citeline"
#: What a PDF's metadata held before properties were stored apart (indexes written by earlier versions).
_LEGACY_PROPERTIES = ("pages", "page_starts")
#: What a record's (JSONL, CSV, TSV) and an added text's metadata held before they were properties.
_LEGACY_RECORD_PROPERTIES = ("record_id", "body_start")
#: The formats whose rows may hold them: records, and texts added with ``Index.add_texts`` (format ``text``, as
#: a ``.txt`` file, whose metadata is otherwise empty).
_RECORD_FORMATS = ("jsonl", "csv", "tsv", "text")


def stored_metadata(metadata: Mapping[str, Any], properties: Mapping[str, Any]) -> str:
    """The JSON text stored for a document's ``metadata`` and ``properties``.

    The key is reserved: a metadata field of that name (a JSONL record's ``_citeline``) is not stored, since a reader
    would take it for citeline's own."""
    reserved = properties or PROPERTIES_KEY in metadata
    value = {**metadata, PROPERTIES_KEY: dict(properties)} if reserved else dict(metadata)
    return json.dumps(value, ensure_ascii=False, allow_nan=False)  # never "NaN": unstorable_field refused it


#: :func:`metadata_fingerprint` of a ``documents d`` row, in SQL (DuckDB's ``sha256`` hashes the UTF-8 bytes, as
#: Python does).
FINGERPRINT_SQL = (
    "sha256(d.content_hash || chr(31) || coalesce(d.title, '') || chr(31) || coalesce(CAST(d.metadata AS VARCHAR), ''))"
)


def metadata_fingerprint(content_hash: str, title: str | None, metadata_json: str | None) -> str:
    """What decides whether a stored document is still what its source gives: the hash of its text's hash, its
    title and its metadata column as :func:`stored_metadata` writes it (the same in SQL: :data:`FINGERPRINT_SQL`).

    The text's hash alone missed an edit of metadata only: a JSONL record's or CSV row's field, a PDF's author, an
    HTML page's meta tags. The run called such a document unchanged and kept the old values, so filters answered
    from them. Now it is updated; its chunks' vectors come from the cache, since their texts did not change."""
    described = f"{content_hash}\x1f{title or ''}\x1f{metadata_json or ''}"
    return hashlib.sha256(described.encode("utf-8", "surrogatepass")).hexdigest()


#: What a value nested past the door's bound reads as (a row written before the bound: see :func:`_cut_deep`).
TOO_DEEP = f"(nested deeper than {MAX_METADATA_DEPTH} levels: not shown)"


def _cut_deep(value: dict[str, Any]) -> None:
    # Replace, in place and without recursion, each mapping or list nested past MAX_METADATA_DEPTH by TOO_DEEP.
    # Ingest refuses such metadata since issue 50; an index written before may hold it (a JSONL record nested 500
    # deep was accepted), and every reader walks metadata recursively (json's encoder, pydantic): one such row made
    # `citeline documents`, `search --format json`, GET /documents and /search fail with a RecursionError.
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        keys = node.keys() if isinstance(node, dict) else range(len(node))
        for key in list(keys):
            child = node[key]
            if isinstance(child, dict | list):
                if depth + 1 >= MAX_METADATA_DEPTH:
                    node[key] = TOO_DEEP
                else:
                    stack.append((child, depth + 1))


def split_metadata(text: str | None, document_format: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(metadata, properties)`` of a stored metadata JSON text (None or empty: two empty dicts).

    ``document_format``, when given, lets a legacy PDF row's ``pages`` and ``page_starts`` move to properties.
    """
    value = json.loads(text) if text else {}
    if not isinstance(value, dict):
        return {}, {}
    if text and text.count("{") + text.count("[") > MAX_METADATA_DEPTH:  # fewer brackets cannot nest that deep
        _cut_deep(value)
    if PROPERTIES_KEY in value:
        found = value.pop(PROPERTIES_KEY)
        properties = dict(found) if isinstance(found, dict) else {}
        if document_format in _RECORD_FORMATS and "record_id" not in properties and "body_start" not in properties:
            # A row from before record_id and body_start were properties (a record's own such field was then
            # overwritten by citeline's, so both are citeline's).
            properties.update((key, value.pop(key)) for key in _LEGACY_RECORD_PROPERTIES if key in value)
        return value, properties
    properties = {}
    if document_format == "pdf":  # a row from before properties were stored apart
        properties = {key: value.pop(key) for key in _LEGACY_PROPERTIES if key in value}
    elif document_format in _RECORD_FORMATS:
        properties = {key: value.pop(key) for key in _LEGACY_RECORD_PROPERTIES if key in value}
    return value, properties
