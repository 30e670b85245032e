"""Files of records (JSON Lines, CSV, TSV): each record its own document, failing alone.

:class:`Records` gathers one file's records into a :class:`~citeline.sources.document.Parsed`: it checks each
record's id (valid text, not seen before in the file), builds its document (``source_id`` ``file#id``; the title,
when there is one, starts the text, as BEIR and MTEB encode "title + text", and the property ``body_start`` says
where the record's own text begins; ``record_id`` and ``body_start`` are properties, never user metadata), and
turns each problem into an error naming the file and line. A record whose id is
known keeps its stored version; a line whose id is not known marks the file incomplete, so a half-read file never
makes its missing records look deleted.

Ids compare as text (``1`` and ``"1"`` are the same id). A repeated id is an error on each later line and the
first record is kept: the first occurrence is what a reader of the file finds first, and keeping it (rather than
refusing all) leaves the id searchable while the file is fixed.
"""

from __future__ import annotations

from typing import Any

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
from citeline.sources.registry import first_line_title


class Records:
    """The documents and problems of one file of records (see the module docstring)."""

    def __init__(self, source: SourceFile, document_format: str, encoding: str, parsed: Parsed | None = None) -> None:
        self.source = source
        self.format = document_format
        self.encoding = encoding
        self.parsed = Parsed() if parsed is None else parsed
        self.first_line: dict[str, int] = {}

    def fail(self, line_number: int, reason: str, record_id: str | None = None) -> None:
        """Fail the record on ``line_number``: its stored version is kept when its id is known."""
        known = record_id is not None and is_valid_text(record_id)
        doc_id = doc_id_of(self.source.root, self.source.source_id, record_id) if known and record_id else None
        self.parsed.fail_record(SourceError(self.source.path, f"line {line_number}: {reason}"), doc_id)

    def add(
        self, line_number: int, record_id: str, title: str, body: str | None, metadata: dict[str, Any], missing: str
    ) -> None:
        """Add one record, or fail it: ``body`` None fails it with ``missing`` (what field it lacks)."""
        document = self.build(line_number, record_id, title, body, metadata, missing)
        if document is not None:
            self.parsed.documents.append(document)

    def build(
        self,
        line_number: int,
        record_id: str,
        title: str,
        body: str | None,
        metadata: dict[str, Any],
        missing: str,
        offset: int | None = None,
    ) -> Document | None:
        """One record's document, or None: failed (in :attr:`parsed`), a repeated id, or no text. ``offset``: the
        byte offset of its line, for a streamed file (:attr:`Document.offset`)."""
        shown_id = display_path(record_id)
        if not is_valid_text(record_id):
            self.fail(line_number, f"record id '{shown_id}' holds a lone surrogate (an invalid \\ud800-\\udfff escape)")
            return None
        if record_id in self.first_line:
            # Not a lost record: its id is indexed from the first line, so the file stays complete.
            reason = f"duplicate id '{shown_id}' (first on line {self.first_line[record_id]}); this record is skipped"
            self.parsed.errors.append(SourceError(self.source.path, f"line {line_number}: {reason}"))
            return None
        self.first_line[record_id] = line_number
        if body is None:
            self.fail(line_number, f"record '{shown_id}' has {missing}", record_id)
            return None
        # citeline's own fields are properties, not metadata: a record's own "record_id" field stays the user's.
        properties: dict[str, Any] = {"encoding": self.encoding, "record_id": record_id}
        if title and body.strip():
            properties["body_start"] = len(title) + 2
            body = f"{title}\n\n{body}"
        if not body.strip():
            # An empty record is not a document (and was never one: nothing stored to keep); the log counts it.
            self.parsed.add_empty(line_number)
            return None
        document = Document(
            self.source.root,
            f"{self.source.source_id}#{record_id}",
            self.source.path,
            title[:200] if title else first_line_title(body, record_id),
            body,
            self.format,
            metadata,
            source_file=self.source.source_id,
            record_id=record_id,
            properties=properties,
            offset=offset,
        )
        problem = unstorable_field(document)
        if problem is not None:
            self.fail(line_number, f"record '{shown_id}': {problem}", record_id)
            return None
        return document

    def result(self) -> Parsed:
        """What the file gave; a file that held no record with text (and no failed one) raises."""
        if not self.parsed.documents and self.parsed.complete and not self.parsed.errors:
            raise SourceError(self.source.path, "no records with text")
        return self.parsed
