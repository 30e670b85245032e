"""The plan step's logic: compare what a run found with what the index holds, and decide whether its removals
need the user's explicit choice. Plain data in, plain data out (no I/O): :mod:`citeline.ingest.pipeline` runs it.

**Nothing lost.** A document whose file or record failed to parse is kept; so is every document under a root or
folder that could not be read (an unreadable subfolder). A root that yields no files while documents were indexed
from it (an unmounted share, an empty Docker volume), or that would lose more than a threshold share of its
documents, is refused unless the user allows removals (:func:`removal_problems`, :func:`refuse_removals`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from citeline.errors import RemovalRefusedError
from citeline.ingest.options import COMMIT_EVERY, DEFAULT_REMOVAL_THRESHOLD  # noqa: F401  (re-exported)
from citeline.sources import remote
from citeline.sources.discovery import Discovery
from citeline.sources.parsers import Document, SourceFile
from citeline.store.file_stats import FileStat
from citeline.store.metadata import metadata_fingerprint, stored_metadata


@dataclass(frozen=True)
class FileReport:
    """A file and what a run reports about it: why it could not be ingested (a plan's ``errors``, and the removal
    guard's objections), why it was skipped, or a note on how it was read. A record, not an exception."""

    path: str
    reason: str


class DocumentKey(NamedTuple):
    """What planning needs of a parsed document, without its text: a run keeps one per document (about 300
    bytes) and parses the files of the documents it must index again, batch by batch, rather than holding every
    text from parse to commit."""

    doc_id: str
    #: what the plan compares with the stored document's: its text's hash, title and metadata
    #: (``citeline.store.metadata.metadata_fingerprint``)
    fingerprint: str
    source_root: str
    source_file: str  #: the file (relative to the root) the document came from
    chars: int  #: length of the text: what batches are sized by (about 1,000 characters a chunk)
    #: byte offset of a streamed record's line in its file (``Document.offset``), -1 for a whole file
    offset: int = -1

    @classmethod
    def of(cls, document: Document) -> DocumentKey:
        """The key of a parsed document."""
        source_file = document.source_file or document.source_id
        offset = -1 if document.offset is None else document.offset
        described = stored_metadata(document.metadata, document.properties)
        fingerprint = metadata_fingerprint(document.content_hash, document.title, described)
        return cls(document.doc_id, fingerprint, document.source_root, source_file, len(document.text), offset)


@dataclass
class ParsedBatch:
    """What parsing a batch of files produced: documents, per-file or per-record errors, the ids of records that
    failed (their stored versions are kept), and the ``(root, source_id)`` of files that failed as a whole or in
    part (none of their stored documents may be removed this run). ``keys`` stand for documents whose texts were
    let go (:meth:`absorb`, :meth:`without_texts`); ``documents`` and ``keys`` never share a document."""

    documents: list[Document] = field(default_factory=list)
    errors: list[FileReport] = field(default_factory=list)
    kept_doc_ids: list[str] = field(default_factory=list)
    incomplete: list[tuple[str, str]] = field(default_factory=list)
    keys: list[DocumentKey] = field(default_factory=list)
    #: characters of text held in ``documents`` (kept up to date by :meth:`absorb`)
    held_chars: int = 0
    #: ``(root, source_id)`` of the files not read because they are what was indexed (``citeline.ingest.freshness``):
    #: their stored documents are all unchanged, and the plan never loads them
    fresh_files: list[tuple[str, str]] = field(default_factory=list)
    #: how many stored documents those files hold
    fresh_documents: int = 0
    #: the files read whole, without an error, and the stat they were read at (``citeline.store.file_stats``:
    #: the run's last commit records it, so the next run need not read them)
    read_files: list[FileStat] = field(default_factory=list)
    #: files skipped rather than parsed, with why (an empty file): not errors, and no document of theirs remains
    skipped: list[FileReport] = field(default_factory=list)
    #: per record file with records left out for holding no text: its path as shown, how many, the first lines
    empty_records: list[tuple[str, int, list[int]]] = field(default_factory=list)
    #: files parsed whose log line says something of them (an encoding that was a close call), not errors
    notes: list[FileReport] = field(default_factory=list)
    #: the documents were given, not found under roots (``Index.add_texts``): they are a batch of their source, not
    #: all of it, so the plan compares the stored versions of their ids only (and removes nothing); held whole
    given: bool = False
    #: an explicit removal's selectors (``citeline.ingest.removal.selectors``): the plan removes what they match
    removing: list[tuple[str, str, str, list[Any]]] = field(default_factory=list)

    @classmethod
    def merge(cls, batches: Iterable[ParsedBatch]) -> ParsedBatch:
        """One batch holding everything of all ``batches``, in order (texts included)."""
        merged = cls()
        for batch in batches:
            merged.absorb(batch, hold_chars=None)
        return merged

    def absorb(self, batch: ParsedBatch, hold_chars: int | None) -> None:
        """Add ``batch``'s results. Its documents keep their texts while this batch holds at most ``hold_chars``
        characters of text (None: no limit); past that only their keys are kept, so memory stays bounded."""
        for document in batch.documents:  # given documents have no file to be parsed again from: held whole
            self.add(document, None if batch.given else hold_chars)
        self.given = self.given or batch.given
        self.removing.extend(batch.removing)
        self.keys.extend(batch.keys)
        self.errors.extend(batch.errors)
        self.kept_doc_ids.extend(batch.kept_doc_ids)
        self.incomplete.extend(batch.incomplete)
        self.fresh_files.extend(batch.fresh_files)
        self.fresh_documents += batch.fresh_documents
        self.read_files.extend(batch.read_files)
        self.skipped.extend(batch.skipped)
        self.empty_records.extend(batch.empty_records)
        self.notes.extend(batch.notes)

    def add(self, document: Document, hold_chars: int | None) -> None:
        """Add one parsed document: with its text while this batch holds at most ``hold_chars`` characters of text
        (None: no limit), else its key alone (what lets a record file of any size be parsed as it streams)."""
        if hold_chars is None or self.held_chars + len(document.text) <= hold_chars:
            self.documents.append(document)
            self.held_chars += len(document.text)
        else:
            self.keys.append(DocumentKey.of(document))

    def mark(self) -> tuple[int, int, int]:
        """Where the batch stands (documents, keys, held characters): :meth:`drop_since` goes back there."""
        return len(self.documents), len(self.keys), self.held_chars

    def drop_since(self, mark: tuple[int, int, int]) -> None:
        """Drop the documents added since :meth:`mark` (a streamed file that then failed as a whole)."""
        documents, keys, self.held_chars = mark
        del self.documents[documents:], self.keys[keys:]

    @property
    def document_count(self) -> int:
        """Documents the batch stands for: parsed (with or without their texts) and those of fresh files."""
        return len(self.documents) + len(self.keys) + self.fresh_documents

    def without_texts(self) -> ParsedBatch:
        """This batch with every document reduced to its key (what a parse task sends back to the flow)."""
        keys = [DocumentKey.of(document) for document in self.documents] + self.keys
        return ParsedBatch(
            [],
            self.errors,
            self.kept_doc_ids,
            self.incomplete,
            keys,
            0,
            self.fresh_files,
            self.fresh_documents,
            self.read_files,
            self.skipped,
            self.empty_records,
        )


@dataclass
class Plan:
    """What a run must change: documents to (re)index, documents to remove, and the counts for the ledger."""

    roots: list[str]
    #: documents to (re)index whose texts the plan holds
    to_index: list[Document]
    #: every stored document this run removes: replaced ones (``replaced``) and vanished ones
    remove_doc_ids: list[str]
    added: int
    updated: int
    unchanged: int
    errors: list[FileReport]
    #: per root: documents indexed from it before this run, files found under it now, documents that vanished
    stored_by_root: dict[str, int] = field(default_factory=dict)
    found_by_root: dict[str, int] = field(default_factory=dict)
    vanished_by_root: dict[str, int] = field(default_factory=dict)
    #: documents to (re)index whose texts were let go: their files are parsed again when their batch comes
    pending: list[DocumentKey] = field(default_factory=list)
    #: ids of stored documents that get a new version (removed in the commit that inserts it)
    replaced: set[str] = field(default_factory=set)
    #: the files read whole this run (``ParsedBatch.read_files``), recorded by the run's last commit
    read_files: list[FileStat] = field(default_factory=list)
    #: an explicit removal's documents (``doc_id``, ``source_path``, ``name``, ``title`` each, by path), and the
    #: selectors that match no document (as shown: ``--doc 0123...``), which refuse the whole removal
    removing: list[dict[str, str]] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)

    @property
    def removed(self) -> int:
        """Documents removed because they vanished (not those replaced by a new version)."""
        return len(self.remove_doc_ids) - self.updated

    @property
    def vanished_doc_ids(self) -> list[str]:
        """The stored documents this run removes because they vanished."""
        return [doc_id for doc_id in self.remove_doc_ids if doc_id not in self.replaced]


def plan_changes(
    stored: dict[str, tuple[str, str, str]],
    roots: Sequence[str],
    discovery: Discovery,
    parsed: ParsedBatch,
    stored_by_root: dict[str, int] | None = None,
) -> Plan:
    """Compare parsed documents with the stored ones (``doc_id -> (root, source_file, fingerprint)`` of the
    documents ingested from ``roots``; the fingerprint covers text, title and metadata): new, changed, unchanged,
    and vanished.

    File-level planning: ``stored`` may leave out the documents of ``parsed.fresh_files`` (files not read again,
    whose ``parsed.fresh_documents`` documents count as unchanged); then ``stored_by_root`` must give every
    root's stored document count (the removal guard's denominator), counted in SQL.

    Removal is scoped to the roots of this run, and never follows from not knowing: a stored document is kept
    when its file failed to parse (wholly or in part), its record failed, or it lies in a root or folder that
    could not be read this run. A transient read error must never delete what was indexed before. Whether the
    removals are too many is :func:`removal_problems`' question.
    """
    # Documents whose texts are held, then those known by key only; the parser reports repeated ids.
    seen: dict[str, tuple[DocumentKey, Document | None]] = {}
    for document in parsed.documents:
        seen[document.doc_id] = (DocumentKey.of(document), document)
    for key in parsed.keys:
        seen[key.doc_id] = (key, None)
    changed = [
        (key, doc) for doc_id, (key, doc) in seen.items() if stored.get(doc_id, ("", "", ""))[2] != key.fingerprint
    ]
    to_index = [doc for _, doc in changed if doc is not None]
    pending = [key for key, doc in changed if doc is None]
    updated_ids = [key.doc_id for key, _ in changed if key.doc_id in stored]
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
    if stored_by_root is None:
        stored_by_root = {}
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
        added=len(changed) - len(updated_ids),
        updated=len(updated_ids),
        unchanged=len(seen) - len(changed) + parsed.fresh_documents,
        errors=[FileReport(problem.path, problem.reason) for problem in discovery.errors] + list(parsed.errors),
        stored_by_root=stored_by_root,
        found_by_root=found_by_root,
        vanished_by_root=vanished_by_root,
        pending=pending,
        replaced=set(updated_ids),
        read_files=list(parsed.read_files),
    )


def removal_problems(plan: Plan, threshold: float = DEFAULT_REMOVAL_THRESHOLD) -> list[FileReport]:
    """The roots whose removals need an explicit choice: a root that yields no files at all while documents were
    indexed from it (an unmounted share, an empty volume), or one that would lose more than ``threshold`` of its
    documents. Empty when the plan's removals are ordinary."""
    problems = []
    for root, vanished in sorted(_by_scope(plan.vanished_by_root).items()):
        stored = _by_scope(plan.stored_by_root).get(root, 0)
        if not vanished or not stored:
            continue
        if not _by_scope(plan.found_by_root).get(root):
            problems.append(
                FileReport(
                    root,
                    (
                        f"holds no files now, but {stored} documents were indexed from it (an unmounted share or an "
                        "empty volume?)"
                    ),
                )
            )
        elif vanished / stored > threshold:
            problems.append(
                FileReport(
                    root,
                    (
                        f"{vanished} of the {stored} documents indexed from it vanished, more than the removal "
                        f"threshold ({threshold:g})"
                    ),
                )
            )
    return problems


def _by_scope(counts: dict[str, int]) -> dict[str, int]:
    # Counts per root summed per scope of the removal guard: a root's own, but the web URLs of one site together
    # (each URL is a root of one document: a gone one is one file deleted from the site, not a root emptied).
    summed: dict[str, int] = {}
    for root, count in counts.items():
        scope = remote.site_of(root)
        summed[scope] = summed.get(scope, 0) + count
    return summed


def refuse_removals(problems: Sequence[FileReport]) -> RemovalRefusedError:
    """The one-line error for a run refused by :func:`removal_problems`."""
    where = "; ".join(f"{problem.path} {problem.reason}" for problem in problems)
    return RemovalRefusedError(
        f"refused to remove documents, nothing was changed: {where}; if that is intended, run again with "
        "--allow-removals (allow_removals=True), or check what would change with --dry-run",
        [(problem.path, problem.reason) for problem in problems],
    )


# ---------------------------------------------------------------- the run's batches

#: Characters of document text per chunk, for sizing batches before chunking (SciFact-like text at 254 tokens:
#: about 1,000; a batch's real chunk count varies with the text, which is fine for a memory bound).
CHARS_PER_CHUNK = 1000


@dataclass
class Work:
    """One chunk/embed batch of a run: documents whose texts the plan holds, and files to parse again for the
    planned documents they hold (``wanted``: a file's path -> the ids of those documents)."""

    documents: list[Document] = field(default_factory=list)
    files: list[SourceFile] = field(default_factory=list)
    wanted: dict[str, set[str]] = field(default_factory=dict)
    chars: int = 0
    #: a streamed record file's path -> the byte offsets of the first and last lines to read (its wanted records
    #: lie between); a file not here is read whole
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def documents_planned(self) -> int:
        """How many documents the batch is to index."""
        return len(self.documents) + sum(len(ids) for ids in self.wanted.values())

    @classmethod
    def joined(cls, parts: Sequence[Work]) -> Work:
        """One batch of all of ``parts``."""
        work = cls()
        for part in parts:
            work.documents.extend(part.documents)
            work.chars += part.chars
            for source in part.files:  # a file in two parts of one batch is read once, over both spans
                if source.path not in work.wanted:
                    work.files.append(source)
                    work.wanted[source.path] = set(part.wanted[source.path])
                    if source.path in part.spans:
                        work.spans[source.path] = part.spans[source.path]
                    continue
                work.wanted[source.path] |= part.wanted[source.path]
                span, other = work.spans.pop(source.path, None), part.spans.get(source.path)
                if span is not None and other is not None:
                    work.spans[source.path] = (min(span[0], other[0]), max(span[1], other[1]))
        return work


def work_batches(plan: Plan, files: Sequence[SourceFile], commit_every: int, chunks_per_batch: int) -> list[list[Work]]:
    """The plan's documents to index as commit groups of about ``commit_every`` chunks, each split into chunk/embed
    batches of about ``chunks_per_batch`` chunks: first the documents the plan holds, then the files (in
    ``files``' order, discovery's) holding its pending documents.

    A file's pending records are cut into pieces of at most a batch and a group, in file order, each naming the
    byte span of its records (:attr:`Work.spans`), so a record file of any size is embedded and committed in parts,
    and each part reads only its span of the file again. That is safe to resume: the ``files`` table
    (``citeline.store.file_stats``) is written only by a run's last commit, so after a crash the file is read and
    hashed again and only the records not committed are embedded. (Files used to be never split, when freshness
    was read off the documents' own stat; an index written before that table gets it with its first commit.)"""
    held: dict[tuple[str, str], Work] = {}
    for document in plan.to_index:
        piece = held.setdefault((document.source_root, document.source_file or document.source_id), Work())
        piece.documents.append(document)
        piece.chars += len(document.text)
    by_file: dict[tuple[str, str], list[DocumentKey]] = {}
    for key in plan.pending:
        by_file.setdefault((key.source_root, key.source_file), []).append(key)
    pieces = list(held.values())
    piece_chars = min(commit_every, chunks_per_batch) * CHARS_PER_CHUNK  # a piece fits a batch and a group
    for source in files:
        pieces.extend(_file_pieces(source, by_file.get((source.root, source.source_id), []), piece_chars))
    groups = _packed(pieces, commit_every * CHARS_PER_CHUNK)
    return [[Work.joined(batch) for batch in _packed(group, chunks_per_batch * CHARS_PER_CHUNK)] for group in groups]


_Sized = TypeVar("_Sized", Work, DocumentKey)


def _file_pieces(source: SourceFile, keys: Sequence[DocumentKey], chars: int) -> list[Work]:
    # The pending documents of one file as pieces of at most ``chars`` characters (a larger record alone), in
    # file order; a piece of streamed records names the span of lines it reads.
    pieces: list[Work] = []
    for batch in _packed(sorted(keys, key=lambda key: key.offset), chars):
        piece = Work(files=[source], wanted={source.path: {key.doc_id for key in batch}})
        piece.chars = sum(key.chars for key in batch)
        offsets = [key.offset for key in batch]
        if min(offsets) >= 0:
            piece.spans[source.path] = (min(offsets), max(offsets))
        pieces.append(piece)
    return pieces


def _packed(pieces: Sequence[_Sized], chars: int) -> list[list[_Sized]]:
    # Consecutive pieces (or keys) in groups of at most ``chars`` characters (a larger piece alone).
    groups: list[list[_Sized]] = []
    size = 0
    for piece in pieces:
        if not groups or (size + piece.chars > chars and groups[-1]):
            groups.append([])
            size = 0
        groups[-1].append(piece)
        size += piece.chars
    return groups
