"""JSON Lines (``.jsonl``): one document per record."""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import BinaryIO

from citeline.errors import SourceError
from citeline.sources.document import (
    Document,
    Parsed,
    SourceFile,
    display_path,
    doc_id_of,
    is_valid_text,
    unstorable_field,
)
from citeline.sources.registry import first_line_title, parser, record_lines


@parser(".jsonl", records=True)
def read_jsonl(source: SourceFile, stream: BinaryIO, parsed: Parsed) -> Generator[Document, None, None]:
    """JSON Lines, one document per record: ``_id``/``id``, ``title``, ``text``; other fields become metadata.

    A BEIR ``corpus.jsonl`` ingests as it is. Each record is its own document (``source_id`` ``file#id``), added,
    updated and removed on its own, and a bad record fails alone with an error naming the file and line: invalid
    JSON, no id, an id that is not a string or integer, no text, or a lone-surrogate escape (``"\\ud800"``) in
    any field. A record whose id is known keeps its stored version; a line whose id is not known marks the file
    incomplete (:class:`Parsed`), so a half-read file never makes its missing records look deleted.

    Ids compare as text (``1`` and ``"1"`` are the same id). A repeated id is an error on each later line and
    the first record is kept: the first occurrence is what a reader of the file finds first, and keeping it
    (rather than refusing all) leaves the id searchable while the file is fixed.

    Streamed (a record format): read line by line from ``stream``, each document yielded as its line is read, so
    a file of any size is read with one line in memory (and the ids seen, for the duplicate check).
    """
    first_line: dict[str, int] = {}
    found = False

    def fail(line_number: int, reason: str, record_id: str | None = None) -> None:
        known = record_id is not None and is_valid_text(record_id)
        doc_id = doc_id_of(source.root, source.source_id, record_id) if known and record_id is not None else None
        parsed.fail_record(SourceError(source.path, f"line {line_number}: {reason}"), doc_id)

    for line_number, offset, line in record_lines(source, stream):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            fail(line_number, f"invalid JSON ({exc.msg})")
            continue
        except (ValueError, RecursionError) as exc:  # an integer past 4,300 digits; nesting past the stack
            fail(line_number, f"invalid JSON ({type(exc).__name__}: {str(exc)[:100]})")
            continue
        if not isinstance(record, dict):
            fail(line_number, "expected a JSON object")
            continue
        raw_id = record.get("_id", record.get("id"))
        if raw_id is None or raw_id == "":
            fail(line_number, "record has no _id or id")
            continue
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
            fail(line_number, f"record id must be a string or an integer, not {type(raw_id).__name__}")
            continue
        record_id = str(raw_id)
        shown_id = display_path(record_id)
        if not is_valid_text(record_id):
            fail(line_number, f"record id '{shown_id}' holds a lone surrogate (an invalid \\ud800-\\udfff escape)")
            continue
        if record_id in first_line:
            # Not a lost record: its id is indexed from the first line, so the file stays complete.
            reason = f"duplicate id '{shown_id}' (first on line {first_line[record_id]}); this record is skipped"
            parsed.errors.append(SourceError(source.path, f"line {line_number}: {reason}"))
            continue
        first_line[record_id] = line_number
        body = record.get("text")
        if not isinstance(body, str):
            fail(line_number, f"record '{shown_id}' has no text field", record_id)
            continue
        title = str(record.get("title") or "").strip()
        metadata = {k: v for k, v in record.items() if k not in ("_id", "id", "title", "text")}
        metadata["record_id"] = record_id
        if title and body.strip():
            # The title is part of what is searched (as BEIR and MTEB encode "title + text"), so the stored
            # text starts with it; body_start says where the record's own text begins.
            metadata["body_start"] = len(title) + 2
            body = f"{title}\n\n{body}"
        if not body.strip():
            continue  # an empty record is not a document (and was never one: nothing stored to keep)
        document = Document(
            source.root,
            f"{source.source_id}#{record_id}",
            source.path,
            title[:200] if title else first_line_title(body, record_id),
            body,
            "jsonl",
            metadata,
            source_file=source.source_id,
            record_id=record_id,
            offset=offset,
        )
        problem = unstorable_field(document)
        if problem is not None:
            fail(line_number, f"record '{shown_id}': {problem}", record_id)
            continue
        found = True
        yield document
    if not found and parsed.complete and not parsed.errors:
        raise SourceError(source.path, "no records with text")
