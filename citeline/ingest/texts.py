"""Texts that are not files (``Index.add_texts``, ``citeline ingest -``): the same plan, chunking, embedding and
commit as files, with ids the caller gives or content hashes.

**Where a text lives.** A text's source is a name (``texts`` by default), stored as its ``source_root``; its id is
its ``source_id``, its source path is ``SOURCE:ID``, and its doc id is :func:`citeline.sources.parsers.doc_id_of` of the
two. A source must not be an absolute path: file roots always are (``ingest`` resolves them), so texts and files
never share a root, and an ``ingest`` of a folder can never remove a text as vanished, nor ``add_texts`` a file.
``--source texts`` (and ``filters={"source": "texts"}``) selects them in search, ``documents`` and ``remove``.

**Incremental.** Same id, text, title and metadata: unchanged (nothing embedded, nothing written but the ledger
row). Same id, anything else new: replaced by what was given (a metadata-only change re-embeds nothing). Texts
are never removed by being left out of a later call; only ``remove`` removes them.
Without ``ids``, a text's id is the SHA-256 of its text (hex): the same text is the same document, and an edited
text is a new document beside the old one.

**Bad input changes nothing.** ``add_texts`` checks every text first and raises one :class:`SettingsError`
naming the first bad one (``texts[3]``); :func:`read_jsonl` does the same for stdin with the line number, so a
half-valid batch is never half-indexed (a script fixes its input and reruns; the rerun finds the valid texts
unchanged if they were indexed by an earlier run).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from citeline.errors import SettingsError, SourceError
from citeline.ingest.options import IngestOptions
from citeline.ingest.planning import ParsedBatch, Plan, plan_changes
from citeline.sources.discovery import Discovery
from citeline.sources.parsers import (
    DEFAULT_SOURCE,
    Document,
    display_path,
    first_line_title,
    text_hash,
    unstorable_field,
)
from citeline.store import catalog
from citeline.store.documents import planned_documents

#: The keys of a stdin JSON line (``_id`` is accepted for ``id``, as BEIR corpora spell it).
JSONL_KEYS = ("id", "text", "title", "metadata")


def check_source(source: object) -> str:
    """``source`` if it can name texts: non-empty text, not an absolute or home path (see the module docstring)."""
    if not isinstance(source, str) or not source.strip() or "\0" in source:
        raise SettingsError(f"source must be a non-empty name such as {DEFAULT_SOURCE!r}, not {source!r}")
    if source.startswith(("/", "~", "\\")) or (len(source) > 1 and source[1] == ":"):
        raise SettingsError(
            f"source {source!r} looks like a path; texts need a name that is not an absolute path (such as "
            f"{DEFAULT_SOURCE!r}), so that ingesting a folder never touches them"
        )
    return source


def documents_of(
    texts: Sequence[str],
    ids: Sequence[str | int] | None = None,
    metadata: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    source: str = DEFAULT_SOURCE,
    titles: Sequence[str | None] | None = None,
) -> list[Document]:
    """The documents of ``add_texts``' arguments, checked; the first bad argument raises :class:`SettingsError`
    naming it (``texts[3]``, ``ids[2]``). A repeated content-hash id (the same text twice) is one document."""
    source = check_source(source)
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise SettingsError(f"texts must be a list of strings, not {type(texts).__name__}")
    count = len(texts)
    for name, values in (("ids", ids), ("titles", titles)):
        if values is not None and (isinstance(values, str) or not isinstance(values, Sequence) or len(values) != count):
            raise SettingsError(f"{name} must be a list as long as texts ({count}), not {values!r:.80}")
    per_text: Sequence[Mapping[str, Any] | None]
    if metadata is None or isinstance(metadata, Mapping):
        per_text = [metadata] * count
    elif isinstance(metadata, Sequence) and not isinstance(metadata, str) and len(metadata) == count:
        per_text = metadata
    else:
        raise SettingsError(f"metadata must be one dict, or a list of dicts as long as texts ({count})")
    documents: list[Document] = []
    first: dict[str, int] = {}
    for position, text in enumerate(texts):
        where = f"texts[{position}]"
        if not isinstance(text, str) or not text.strip():
            raise SettingsError(f"{where} must be text that is not empty, not {text!r:.80}")
        if ids is None:
            record_id = text_hash(text)
        else:
            raw = ids[position]
            if isinstance(raw, bool) or not isinstance(raw, str | int) or raw == "":
                raise SettingsError(f"ids[{position}] must be a non-empty string or an integer, not {raw!r}")
            record_id = str(raw)
        if record_id in first:
            if ids is None:
                continue  # the same text again: the same document
            raise SettingsError(f"ids[{position}] {record_id!r} repeats ids[{first[record_id]}]; ids must be unique")
        first[record_id] = position
        meta = per_text[position]
        if meta is not None and (not isinstance(meta, Mapping) or not all(isinstance(k, str) for k in meta)):
            raise SettingsError(f"metadata of {where} must be a dict with text keys, not {meta!r:.80}")
        title = (titles[position] if titles is not None else None) or ""
        if not isinstance(title, str):
            raise SettingsError(f"titles[{position}] must be text, not {title!r:.80}")
        documents.append(_document(source, record_id, text, title.strip(), dict(meta or {})))
        problem = unstorable_field(documents[-1])
        if problem is not None:
            raise SettingsError(f"{where} (id {display_path(record_id)!r}): {problem}")
    return documents


def _document(source: str, record_id: str, text: str, title: str, metadata: dict[str, Any]) -> Document:
    # A title is part of what is searched, as for a JSONL record: the stored text starts with it, and body_start
    # (a property: citeline's own, not the user's metadata) says where the text itself begins.
    properties = {}
    if title:
        properties["body_start"] = len(title) + 2
        text = f"{title}\n\n{text}"
    return Document(
        source_root=source,
        source_id=record_id,
        path=f"{source}:{record_id}",
        title=title[:200] if title else first_line_title(text, record_id),
        text=text,
        format="text",
        metadata=metadata,
        properties=properties,
        source_file=record_id,
        size_bytes=len(text.encode("utf-8", "surrogatepass")),  # checked by unstorable_field next
    )


def run_of(
    documents: list[Document],
    source: str,
    *,
    wait: float | None = None,
    progress: bool = False,
    dry_run: bool = False,
) -> tuple[Discovery, ParsedBatch, IngestOptions]:
    """``add_texts`` as a run of ``pipeline.run`` (the index's ``run``): its discovery, parsed batch (given to
    ``pipeline.GivenSteps``) and options. The documents (from :func:`documents_of`) are given, not discovered;
    the plan compares the stored versions of their ids only (``ParsedBatch.given``: nothing else of the source is
    removed), then the pipeline's chunk, embed and commit steps, as for files. Plain and sharded alike: on a
    sharded root each text goes to the shard its id routes to."""
    given = ParsedBatch(documents=documents, given=True)
    return Discovery(roots=[source]), given, IngestOptions(wait=wait, progress=progress, dry_run=dry_run)


def plan(index_dir: Path, source: Sequence[str], discovery: Discovery, parsed: ParsedBatch) -> Plan:
    """The plan of given texts over one index (``pipeline.plan`` of a ``given`` batch)."""
    # pipeline.plan compares a root's stored documents with everything found under it, and removes the rest;
    # texts come in batches that are not the whole source, so the plan sees the stored versions of these ids only.
    # The plan compares fingerprints (text, title and metadata), so a text whose title or metadata changed is
    # replaced even when its text did not (its chunks' vectors are reused from the cache).
    ids = [document.doc_id for document in parsed.documents]
    with contextlib.closing(catalog.connect(index_dir, read_only=True)) as connection:  # under the writer lock
        stored = planned_documents(connection, ids)
    return plan_changes(stored, list(source), discovery, parsed)


def read_jsonl(lines: Iterable[str | bytes], where: str = "<stdin>") -> dict[str, Any]:
    """``add_texts``' arguments (``texts``, ``ids``, ``titles``, ``metadata``) from JSON lines ``{"id": ...,
    "text": ..., "title": ..., "metadata": {...}}`` (only ``text`` is required; ``_id`` is ``id``). The first bad
    line raises :class:`SourceError` naming ``where`` and the line number. Ids are given on every line or on
    none (then each text's id is its content hash)."""
    texts: list[str] = []
    ids: list[str | int | None] = []
    titles: list[str | None] = []
    metadata: list[dict[str, Any] | None] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SourceError(where, f"line {number}: not valid UTF-8 at byte {exc.start}") from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            raise SourceError(where, f"line {number}: invalid JSON ({reason})") from None
        if not isinstance(record, dict):
            raise SourceError(where, f'line {number}: expected a JSON object such as {{"id": 1, "text": "..."}}')
        if "_id" in record and "id" not in record:
            record["id"] = record.pop("_id")
        unknown = sorted(set(record) - set(JSONL_KEYS))
        if unknown:
            raise SourceError(
                where,
                f"line {number}: unknown key {unknown[0]!r}; a line has {', '.join(JSONL_KEYS)} (put other "
                "fields under metadata)",
            )
        problem = _line_problem(record, bool(ids) and ids[0] is not None, bool(texts))
        if problem is None and record.get("id") is not None:
            seen = first_line.setdefault(str(record["id"]), number)
            problem = (
                None if seen == number else f"id {str(record['id'])!r:.60} repeats line {seen}; ids must be unique"
            )
        if problem:
            raise SourceError(where, f"line {number}: {problem}")
        texts.append(record["text"])
        ids.append(record.get("id"))
        titles.append(record.get("title"))
        metadata.append(record.get("metadata"))
    has_ids = bool(ids) and ids[0] is not None
    return {"texts": texts, "ids": ids if has_ids else None, "titles": titles, "metadata": metadata}


def _line_problem(record: dict[str, Any], ids_so_far: bool, lines_so_far: bool) -> str | None:
    text, raw_id = record.get("text"), record.get("id")
    if not isinstance(text, str) or not text.strip():
        return 'no text (a line needs a non-empty "text" string)'
    if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or raw_id == ""):
        return f"id must be a non-empty string or an integer, not {raw_id!r:.60}"
    if lines_so_far and (raw_id is not None) != ids_so_far:
        return "give an id on every line or on none (without ids, a text's id is its content hash)"
    if not isinstance(record.get("title", ""), str | None):
        return "title must be text"
    if not isinstance(record.get("metadata", {}), dict | None):
        return "metadata must be a JSON object"
    return None
