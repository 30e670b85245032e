"""JSON Lines (``.jsonl``): one document per record (:mod:`citeline.sources.records`), streamed."""

from __future__ import annotations

import json
import math
from collections.abc import Generator
from typing import BinaryIO

from citeline.errors import SourceError
from citeline.sources.document import Document, Parsed, SourceFile
from citeline.sources.records import Records
from citeline.sources.registry import parser, record_lines


def _finite(text: str) -> float | str:
    """A JSON number as a float, or its text when no float holds it (``1e999``): Python's ``json`` made it
    ``inf``, which JSON cannot hold, so ``--json`` printed ``Infinity`` and the HTTP API failed on the document.
    The non-standard ``NaN`` and ``Infinity`` Python's ``json`` accepts stay text too (``parse_constant=str``)."""
    value = float(text)
    return value if math.isfinite(value) else text


@parser(".jsonl", records=True)
def read_jsonl(source: SourceFile, stream: BinaryIO, parsed: Parsed) -> Generator[Document, None, None]:
    """JSON Lines, one document per record: ``_id``/``id``, ``title``, ``text``; other fields become metadata.

    A BEIR ``corpus.jsonl`` ingests as it is. Each record is its own document (``source_id`` ``file#id``), added,
    updated and removed on its own, and a bad record fails alone with an error naming the file and line: invalid
    JSON, a byte that is not UTF-8, no id, an id that is not a string or integer, no text, or a lone-surrogate
    escape (``"\\ud800"``) in any field (see :mod:`citeline.sources.records` for ids, repeats and what a failed
    record keeps).

    Streamed (a record format): read line by line from ``stream`` (JSON Lines is UTF-8), each document yielded as
    its line is read, so a file of any size is read with one line in memory (and the ids seen, for the duplicate
    check).
    """
    records = Records(source, "jsonl", "utf-8", parsed)
    found = False
    for line_number, offset, line in record_lines(source, stream, records.fail):
        if not line.strip():
            continue
        try:
            record = json.loads(line, parse_float=_finite, parse_constant=str)
        except json.JSONDecodeError as exc:
            records.fail(line_number, f"invalid JSON ({exc.msg})")
            continue
        except (ValueError, RecursionError) as exc:  # an integer past 4,300 digits; nesting past the stack
            records.fail(line_number, f"invalid JSON ({type(exc).__name__}: {str(exc)[:100]})")
            continue
        if not isinstance(record, dict):
            records.fail(line_number, "expected a JSON object")
            continue
        raw_id = record.get("_id", record.get("id"))
        if raw_id is None or raw_id == "":
            records.fail(line_number, "record has no _id or id")
            continue
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
            records.fail(line_number, f"record id must be a string or an integer, not {type(raw_id).__name__}")
            continue
        body = record.get("text")
        title = str(record.get("title") or "").strip()
        metadata = {k: v for k, v in record.items() if k not in ("_id", "id", "title", "text")}
        text = body if isinstance(body, str) else None
        document = records.build(line_number, str(raw_id), title, text, metadata, "no text field", offset)
        if document is not None:
            found = True
            yield document
    if not found and parsed.complete and not parsed.errors:
        raise SourceError(source.path, "no records with text")
