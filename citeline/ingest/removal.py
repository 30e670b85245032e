"""Removing documents explicitly (``Index.remove``, ``citeline remove``): by source path, by source, or by id.

A removal is a run like any ingest: it holds the writer lock, commits one new generation through the commit
protocol (``store.generation.commit``: the same transaction, artifacts and kill points as an ingest, with an
empty insert), and leaves a row in the run ledger (``citeline runs``) whose ``roots`` name what was asked
(``remove path /abs/dir``, ``remove source texts``, ``remove doc 0123abcd...``) and whose ``removed`` counts the
documents.

**Removal, not exclusion.** A removed document leaves the index; nothing remembers it. The next ``ingest`` of its
root adds it back if its file is still there, because an ingest makes the index match the files (and texts come
back when they are added again). An exclusion list would be a second source of truth that every ingest, filter and
listing must consult, and it would make "what is indexed" differ from "what is under the root" in a way no file
shows; to keep a file out for good, move it out of the root.

**All or nothing.** Every selector must match at least one document: a path, source or id that matches nothing
(a typo, an id from another index) is one error naming it, and nothing is removed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from citeline.errors import QueryError, SettingsError
from citeline.ingest.embed_step import WrittenIndex
from citeline.ingest.options import IngestOptions
from citeline.ingest.planning import ParsedBatch, Plan
from citeline.ingest.runs import RemovalSummary  # noqa: F401  (re-exported: a removal's row is imported from here)
from citeline.sources import remote
from citeline.sources.discovery import Discovery
from citeline.sources.document import record_name, record_of
from citeline.sources.parsers import display_path
from citeline.store import catalog
from citeline.store.connection import check_text
from citeline.store.filters import Filters
from citeline.util.paths import UnresolvablePath, resolved


@runtime_checkable
class Writer(WrittenIndex, Protocol):
    """What a removal or an ``add_texts`` run needs of its index (:class:`citeline.Index` is one): the index a
    pipeline run writes, whose ``meta["generation"]`` the run keeps up to date."""

    meta: dict[str, Any]


class NothingMatchesError(QueryError):
    """Some selectors of a removal match no document: nothing is removed, and no run is recorded (a typo in what
    was asked, not a run that failed)."""


def _strings(name: str, values: str | os.PathLike[str] | Sequence[Any] | None) -> list[str]:
    # One value or a list of them, as text; a value that is not text (or is empty) is a SettingsError naming it.
    if values is None:
        return []
    items = [values] if isinstance(values, str | os.PathLike) else list(values)
    out = []
    for item in items:
        text = os.fspath(item) if isinstance(item, os.PathLike) else item
        if not isinstance(text, str) or not text.strip() or "\0" in text:
            raise SettingsError(f"remove: {name} must be non-empty text without NUL characters, not {item!r}")
        check_text(f"remove: {name}", text, "; no file whose name is not UTF-8 is indexed")
        out.append(text)
    return out


def selectors(
    paths: Sequence[str | os.PathLike[str]] | str | None,
    source: Sequence[str] | str | None,
    doc_ids: Sequence[str] | str | None,
) -> list[tuple[str, str, str, list[Any]]]:
    """The selectors of a removal: ``(kind, shown value, WHERE condition, params)`` each, in the order given."""
    out: list[tuple[str, str, str, list[Any]]] = []
    for path in _strings("paths", paths):
        if remote.is_remote(path):  # a URL as its documents store it (s3://bucket/prefix: everything below it)
            url = remote.normalized(path)
            out.append(("path", url, catalog.PATH_CONDITION, [url, path, url.rstrip("/") + "/"]))
            continue
        try:
            absolute = str(resolved(path))
        except UnresolvablePath as exc:
            raise SettingsError(f"remove: path {path!r} cannot be resolved: {exc}") from None
        out.append(("path", absolute, catalog.PATH_CONDITION, [absolute, path, absolute.rstrip(os.sep) + os.sep]))
    for value in _strings("source", source):
        condition, params = Filters.from_value({"source": value}).to_sql()
        out.append(("source", value, condition, params))
    for doc_id in _strings("doc_ids", doc_ids):
        out.append(("doc", doc_id, catalog.IDS_CONDITION, [[doc_id]]))
    if not out:
        raise SettingsError("remove what? give PATH..., --source S or --doc DOC_ID (paths=, source=, doc_ids=)")
    return out


def matching(index_dir: Path, chosen: list[tuple[str, str, str, list[Any]]]) -> tuple[list[dict[str, str]], list[str]]:
    """The documents the selectors match (each once, sorted by path), and the selectors that match none (as
    shown: ``--doc 0123...``)."""
    found: dict[str, dict[str, str]] = {}
    unmatched = []
    with contextlib.closing(catalog.connect(index_dir, read_only=True)) as connection:
        for kind, shown, condition, params in chosen:
            rows = catalog.damage_reported(catalog.select_documents, connection, condition, params)
            if not rows:
                unmatched.append(f"{'--' if kind != 'path' else ''}{kind} {display_path(shown)}")
            for doc_id, _root, source_file, _hash, path, title, source_id in rows:
                name = record_name(path, record_of(source_id, source_file))
                found.setdefault(doc_id, {"doc_id": doc_id, "source_path": path, "name": name, "title": title})
    return sorted(found.values(), key=lambda record: (record["source_path"], record["doc_id"])), unmatched


def nothing_matches(index_dir: Path, unmatched: Sequence[str]) -> QueryError:
    """The one-line error of a removal some selectors of which match no document: nothing is removed."""
    return NothingMatchesError(
        f"nothing removed: no document in {index_dir} matches {', '.join(unmatched)}; "
        "list what is indexed with `citeline documents`"
    )


#: A removal's selectors, as :func:`selectors` makes them.
Chosen = list[tuple[str, str, str, list[Any]]]


def roots_of(chosen: Chosen) -> list[str]:
    """What a removal's ledger row names as its roots: ``remove path /abs/dir``, ``remove source texts``..."""
    return [f"remove {kind} {shown}" for kind, shown, _, _ in chosen]


def plan(index_dir: Path, roots: list[str], chosen: Chosen) -> Plan:
    """A removal's plan over one index (read-only; the run holds the writer lock, so what is removed is what was
    selected): the documents the selectors match, and the selectors matching none (:attr:`Plan.unmatched`: the
    run refuses the removal; a sharded root asks it of the plans of all its shards added up)."""
    documents, unmatched = matching(index_dir, chosen)
    return Plan(
        roots=roots, to_index=[], remove_doc_ids=[record["doc_id"] for record in documents], added=0, updated=0,
        unchanged=0, errors=[], removing=documents, unmatched=unmatched,
    )  # fmt: skip


def only(documents: Sequence[dict[str, str]]) -> Chosen:
    """Selectors matching exactly ``documents`` (by id): a shard's part of a removal planned over all shards."""
    return [("doc", "planned", catalog.IDS_CONDITION, [[record["doc_id"] for record in documents]])]


def run_of(
    chosen: Chosen, *, dry_run: bool = False, wait: float | None = None
) -> tuple[Discovery, ParsedBatch, IngestOptions]:
    """A removal as a run of ``pipeline.run`` (the index's ``run``): its discovery, parsed batch (given to
    ``pipeline.GivenSteps``: nothing to discover or parse) and options. The plan is :func:`plan`; the removal
    guard is not asked (a removal is the explicit choice it asks for), nor the query model prepared again (a
    removal adds no text)."""
    options = IngestOptions(dry_run=dry_run, wait=wait, allow_removals=True, prepare_queries=False)
    return Discovery(roots=roots_of(chosen)), ParsedBatch(removing=chosen), options
