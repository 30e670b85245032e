"""A hostile index: the worst values the door accepts (issue 50), for every read surface's test to read back.

Ingest accepts metadata up to :data:`~citeline.sources.MAX_METADATA_DEPTH` levels deep, up to
:data:`~citeline.sources.MAX_METADATA_FIELDS` fields and :data:`~citeline.sources.MAX_METADATA_CHARS` characters
of JSON, integers within 64 bits, and any text that encodes as UTF-8 (control characters, escape sequences, bidi
marks, NUL). :func:`worst_folder` writes files holding each of those at its bound, beside an ordinary note; every
surface (the CLI's ``documents``, ``search`` and ``show`` in every format, the HTTP API and page, the MCP tools)
must read them back: a JSONL record nested 500 deep was accepted and then broke ``citeline documents``, ``search
--format json``, ``GET /documents`` and ``/search`` with a RecursionError.

Every hostile document holds :data:`WORD` in its text, so one search returns them all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from citeline.sources import MAX_METADATA_CHARS, MAX_METADATA_DEPTH, MAX_METADATA_FIELDS

#: The word every hostile document's text holds (a search for it returns them).
WORD = "quayside"
#: Text that has broken printers and parsers elsewhere: C0 and C1 controls, an ANSI escape, bidi overrides, NUL,
#: a line separator, a BOM, astral characters, quotes and delimiters of every output format.
NASTY = "a\x00b\x07c\x1b[31mred\x1b[0m \u202egnp.exe\u202c \u2028 \ufeff \U0001f600 \"q\" 's' ,;\t|\r\n\\ <b>&amp;"


def _deepest(leaf: Any) -> Any:
    # Mappings and lists alternating, as deep as the door accepts (the fields are level 1).
    value = leaf
    for level in range(MAX_METADATA_DEPTH - 1):
        value = {"k": value} if level % 2 else [value]
    return value


def worst_records() -> list[dict[str, Any]]:
    """JSONL records at each bound of the door."""
    widest = {f"field {i:04d}": i for i in range(MAX_METADATA_FIELDS - 2)}
    filler = "x" * (MAX_METADATA_CHARS - 200)
    return [
        {"_id": "deep", "text": f"The deepest metadata at the {WORD}.", "tree": _deepest(NASTY)},
        {"_id": "wide", "text": f"The widest metadata at the {WORD}.", **widest},
        {"_id": "large", "text": f"The largest metadata at the {WORD}.", "notes": filler},
        {
            "_id": "numbers",
            "text": f"Numbers at their bounds at the {WORD}.",
            "biggest": 2**63 - 1,
            "smallest": -(2**63),
            "huge": 1.7976931348623157e308,
            "tiny": 5e-324,
            "negative zero": -0.0,
            "text number": "1e999",
            "nothing": None,
            "yes": True,
            "empty list": [],
            "empty map": {},
        },
        {
            "_id": NASTY,
            "title": NASTY,
            "text": f"{NASTY} at the {WORD}.",
            NASTY: NASTY,
            "": "an empty key",
            "a.b": "a dotted key",
            "'; DROP TABLE documents; --": "a key written as SQL",
            "$.x": ["a", 1, None, {"b": [2.5]}],
            "year": 2021,
        },
    ]


def worst_folder(folder: Path) -> Path:
    """Write the hostile files into ``folder`` (created): a JSONL file of :func:`worst_records`, a CSV table with
    as many columns as a document may hold, a Markdown file whose front matter nests to the bound, and an
    ordinary note. Returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "worst.jsonl").write_text(
        "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in worst_records()), encoding="utf-8"
    )
    columns = MAX_METADATA_FIELDS
    header = ["id", "text"] + [f"col{i}" for i in range(columns)]
    row = ["row1", f"A wide table row at the {WORD}."] + [str(i) for i in range(columns)]
    (folder / "wide.csv").write_text(",".join(header) + "\n" + ",".join(row) + "\n", encoding="utf-8")
    nested = "x"
    for _ in range(MAX_METADATA_DEPTH - 1):
        nested = f"[{nested}]"
    (folder / "front.md").write_text(
        f"---\ntitle: Front matter\ndate: 2021-03-04\ntree: {nested}\n---\n\n# Front\n\nNested front matter at the "
        f"{WORD}.\n",
        encoding="utf-8",
    )
    (folder / "note.md").write_text(f"# Note\n\nAn ordinary note about the {WORD} cranes.\n", encoding="utf-8")
    return folder


#: How many documents :func:`worst_folder` gives: the JSONL records, the table's row, the Markdown files.
DOCUMENTS = len(worst_records()) + 1 + 2
