"""The plan step's logic: compare what a run found with what the index holds, and decide whether its removals
need the user's explicit choice. Plain data in, plain data out (no I/O): :mod:`citeline.pipeline` runs it.

**Nothing lost.** A document whose file or record failed to parse is kept; so is every document under a root or
folder that could not be read (an unreadable subfolder). A root that yields no files while documents were indexed
from it (an unmounted share, an empty Docker volume), or that would lose more than a threshold share of its
documents, is refused unless the user allows removals (:func:`removal_problems`, :func:`refuse_removals`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from citeline.discovery import Discovery
from citeline.errors import RemovalRefusedError
from citeline.sources import Document


@dataclass(frozen=True)
class FileError:
    """A file that could not be ingested, and why."""

    path: str
    reason: str


@dataclass
class ParsedBatch:
    """What parsing a batch of files produced: documents, per-file or per-record errors, the ids of records that
    failed (their stored versions are kept), and the ``(root, source_id)`` of files that failed as a whole or in
    part (none of their stored documents may be removed this run)."""

    documents: list[Document] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    kept_doc_ids: list[str] = field(default_factory=list)
    incomplete: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def merge(cls, batches: Iterable[ParsedBatch]) -> ParsedBatch:
        """One batch holding everything of all ``batches``, in order."""
        merged = cls()
        for batch in batches:
            merged.documents.extend(batch.documents)
            merged.errors.extend(batch.errors)
            merged.kept_doc_ids.extend(batch.kept_doc_ids)
            merged.incomplete.extend(batch.incomplete)
        return merged


@dataclass
class Plan:
    """What a run must change: documents to (re)index, documents to remove, and the counts for the ledger."""

    roots: list[str]
    to_index: list[Document]
    remove_doc_ids: list[str]
    added: int
    updated: int
    unchanged: int
    errors: list[FileError]
    #: per root: documents indexed from it before this run, files found under it now, documents that vanished
    stored_by_root: dict[str, int] = field(default_factory=dict)
    found_by_root: dict[str, int] = field(default_factory=dict)
    vanished_by_root: dict[str, int] = field(default_factory=dict)

    @property
    def removed(self) -> int:
        """Documents removed because they vanished (not those replaced by a new version)."""
        return len(self.remove_doc_ids) - self.updated


def plan_changes(
    stored: dict[str, tuple[str, str, str]],
    roots: Sequence[str],
    discovery: Discovery,
    parsed: ParsedBatch,
) -> Plan:
    """Compare parsed documents with the stored ones (``doc_id -> (root, source_file, content_hash)`` of the
    documents ingested from ``roots``): new, changed, unchanged, and vanished.

    Removal is scoped to the roots of this run, and never follows from not knowing: a stored document is kept
    when its file failed to parse (wholly or in part), its record failed, or it lies in a root or folder that
    could not be read this run. A transient read error must never delete what was indexed before. Whether the
    removals are too many is :func:`removal_problems`' question.
    """
    seen = {document.doc_id: document for document in parsed.documents}  # the parser reports repeated ids
    to_index = [doc for doc_id, doc in seen.items() if stored.get(doc_id, ("", "", ""))[2] != doc.content_hash]
    updated_ids = [doc.doc_id for doc in to_index if doc.doc_id in stored]
    incomplete, kept = set(parsed.incomplete), set(parsed.kept_doc_ids)
    vanished = [
        doc_id
        for doc_id, (root, source_file, _) in stored.items()
        if doc_id not in seen
        and doc_id not in kept
        and (root, source_file) not in incomplete
        and not discovery.contents_unknown(os.path.join(root, source_file))
        and not discovery.contents_unknown(root)
    ]
    stored_by_root: dict[str, int] = {}
    for root, _, _ in stored.values():
        stored_by_root[root] = stored_by_root.get(root, 0) + 1
    found_by_root: dict[str, int] = {}
    for source in discovery.files:
        found_by_root[source.root] = found_by_root.get(source.root, 0) + 1
    vanished_by_root: dict[str, int] = {}
    for doc_id in vanished:
        root = stored[doc_id][0]
        vanished_by_root[root] = vanished_by_root.get(root, 0) + 1
    return Plan(
        roots=sorted(set(roots)),
        to_index=to_index,
        remove_doc_ids=updated_ids + vanished,
        added=len(to_index) - len(updated_ids),
        updated=len(updated_ids),
        unchanged=len(seen) - len(to_index),
        errors=[FileError(problem.path, problem.reason) for problem in discovery.errors] + list(parsed.errors),
        stored_by_root=stored_by_root,
        found_by_root=found_by_root,
        vanished_by_root=vanished_by_root,
    )


#: Share of a root's indexed documents one run may remove without ``allow_removals``.
DEFAULT_REMOVAL_THRESHOLD = 0.5


def removal_problems(plan: Plan, threshold: float = DEFAULT_REMOVAL_THRESHOLD) -> list[FileError]:
    """The roots whose removals need an explicit choice: a root that yields no files at all while documents were
    indexed from it (an unmounted share, an empty volume), or one that would lose more than ``threshold`` of its
    documents. Empty when the plan's removals are ordinary."""
    problems = []
    for root, vanished in sorted(plan.vanished_by_root.items()):
        stored = plan.stored_by_root.get(root, 0)
        if not vanished or not stored:
            continue
        if not plan.found_by_root.get(root):
            problems.append(
                FileError(
                    root,
                    (
                        f"holds no files now, but {stored} documents were indexed from it (an unmounted share or an "
                        "empty volume?)"
                    ),
                )
            )
        elif vanished / stored > threshold:
            problems.append(
                FileError(
                    root,
                    (
                        f"{vanished} of the {stored} documents indexed from it vanished, more than the removal "
                        f"threshold ({threshold:g})"
                    ),
                )
            )
    return problems


def refuse_removals(problems: Sequence[FileError]) -> RemovalRefusedError:
    """The one-line error for a run refused by :func:`removal_problems`."""
    where = "; ".join(f"{problem.path} {problem.reason}" for problem in problems)
    return RemovalRefusedError(
        f"refused to remove documents, nothing was changed: {where}; if that is intended, run again with "
        "--allow-removals (allow_removals=True), or check what would change with --dry-run",
        [(problem.path, problem.reason) for problem in problems],
    )
