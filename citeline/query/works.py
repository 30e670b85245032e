"""Works in an answer: the copies of one work (a rendered page and its markup source, a report's .docx and .pdf, a
copy with light edits; recognised at ingest, ``citeline.store.works``) are one result listing each copy.

The plan runs this after collapse and the relevance floor, before grouping (:func:`merge_copies`): a hit of a copy
joins the first better-ranked result of its work that lists no passage of its document yet and that says the same
thing (their passages share at least :data:`SAME_PASSAGE` of the smaller one's word shingles; chunks of two copies
are cut at other places, so they seldom hold exactly the same words). It becomes one of that result's ``sources``,
with its own document, path and offsets; a hit of a copy that says something else stays a result of its own (and is
listed under its work's result when the search groups: k then counts works, see ``citeline.query.grouping``).

**Which copy's passage is shown** (:func:`shown_first`): the published form over its editable source: a rendered
page (``.html``), then a ``.pdf``, then a ``.docx``, then markup and plain text (``.md``, ``.rst``, a Sphinx
``_sources/*.rst.txt``, ``.txt``); among copies of one form, the better-ranked. Why: the published form is what a
reader opens and links to, and its text holds no markup (reST roles, directive lines, Markdown link targets) where
its source's does. The result keeps its rank, score and relevance (the best of its copies'); ``sources`` lists the
shown copy first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from citeline.query.results import SearchResult, Source, evolve
from citeline.store.works import META_KEY, shingles

#: Two copies' passages are one result when the smaller one's word shingles are at least this share of the shared.
SAME_PASSAGE = 0.5

#: Forms a copy's file may have, published first (see the module docstring); anything else counts as a source.
PUBLISHED = (".html", ".htm", ".xhtml", ".pdf", ".docx")

Unit = Callable[[SearchResult], str]


def work_map(meta: Mapping[str, Any]) -> dict[str, str]:
    """The doc id -> work id map an index's meta holds (empty: no work of two documents, or an index that has not
    recognised works yet)."""
    found = meta.get(META_KEY)
    return found if isinstance(found, dict) else {}


def unit_of(works: Mapping[str, str]) -> Unit:
    """A result's unit for counting and grouping: its document's work (the document itself when in none)."""
    return lambda result: works.get(result.doc_id, result.doc_id)


def _form(path: str) -> int:
    lowered = path.lower()
    if lowered.endswith(".rst.txt"):
        return len(PUBLISHED)
    return next((at for at, suffix in enumerate(PUBLISHED) if lowered.endswith(suffix)), len(PUBLISHED))


#: Turns sources (another copy's passage that collapse listed) into full results, highlighted: the plan's.
Complete = Callable[[Sequence[Source]], list[SearchResult]]


def shown_first(
    result: SearchResult, copies: Sequence[SearchResult], works: Mapping[str, str], complete: Complete | None
) -> SearchResult:
    """``result`` with the passage of the copy :func:`the rule <citeline.query.works>` shows first among itself,
    ``copies`` (the hits that joined it) and the sources collapse listed of its work's other documents: that copy's
    passage, provenance and highlights (a source is made a full result by ``complete``), ``result``'s score and
    relevance, every copy in ``sources`` (the shown one first, then the others in rank order)."""
    work = works.get(result.doc_id)
    listed = [*result.sources[:1], *(hit.as_source() for hit in copies), *result.sources[1:]]
    unique: dict[str, Source] = {}
    for source in listed:
        unique.setdefault(source.doc_id, source)
    listed = list(unique.values())
    candidates = [source for source in listed if work is not None and works.get(source.doc_id) == work]
    best = min(candidates, key=lambda source: _form(source.source_path), default=listed[0])  # stable: rank on a tie
    shown = result
    if best.doc_id != result.doc_id:
        joined = next((hit for hit in copies if hit.doc_id == best.doc_id), None)
        if joined is None and complete is not None:
            joined = next(iter(complete([best])), None)
        if joined is None:
            return evolve(result, sources=tuple(listed))
        shown = joined
    ordered = [best, *(source for source in listed if source.doc_id != best.doc_id)]
    if not copies and shown is result and ordered == list(result.sources):
        return result
    # A grouped result keeps the passages listed under it (each names its own document in its sources).
    return evolve(
        shown,
        score=result.score,
        relevance=result.relevance,
        sources=tuple(ordered),
        more_passages=result.more_passages,
    )


class _Merger:
    """:func:`merge_copies` one result at a time (each passage's shingles computed once)."""

    def __init__(self, works: Mapping[str, str], complete: Complete | None = None):
        self.works, self.complete = works, complete
        self.kept: list[tuple[SearchResult, list[SearchResult], set[str], set[str]]] = []

    def add(self, result: SearchResult) -> None:
        work = self.works.get(result.doc_id)
        words = shingles(result.text) if work is not None else set()
        if work is not None:
            for head, copies, docs, head_words in self.kept:
                if (
                    self.works.get(head.doc_id) == work
                    and result.doc_id not in docs
                    and _same_passage(head_words, words)
                ):
                    copies.append(result)
                    docs.update(source.doc_id for source in result.sources)
                    return
        self.kept.append((result, [], {source.doc_id for source in result.sources} | {result.doc_id}, words))

    def results(self) -> list[SearchResult]:
        return [shown_first(head, copies, self.works, self.complete) for head, copies, _, _ in self.kept]


def merge_copies(
    results: Sequence[SearchResult], works: Mapping[str, str], complete: Complete | None = None
) -> list[SearchResult]:
    """``results`` (best first) with each hit of a copy joined to the first better-ranked result of its work that
    lists no passage of its document and shares its passage (:data:`SAME_PASSAGE`), and each result showing the
    copy the rule shows first (:func:`shown_first`; ``complete`` reads a copy collapse listed); see the module
    docstring."""
    if not works or not any(source.doc_id in works for result in results for source in result.sources):
        return list(results)
    merger = _Merger(works, complete)
    for result in results:
        merger.add(result)
    return [_named(result, works) for result in merger.results()]


def _named(result: SearchResult, works: Mapping[str, str]) -> SearchResult:
    """``result`` and its sources with the ``work_id`` of their documents."""
    if not any(source.doc_id in works for source in result.sources) and result.doc_id not in works:
        return result
    sources = tuple(evolve(source, work_id=works.get(source.doc_id)) for source in result.sources)
    return evolve(result, work_id=works.get(result.doc_id), sources=sources)


def _same_passage(a: set[str], b: set[str]) -> bool:
    return bool(a) and bool(b) and len(a & b) >= SAME_PASSAGE * min(len(a), len(b))


def first_units(results: Sequence[SearchResult], k: int, works: Mapping[str, str]) -> list[SearchResult]:
    """The first of ``results`` (best first) that :func:`merge_copies` makes at most ``k`` results of: what an
    ungrouped answer of k results can show."""
    if not works:
        return list(results[:k])
    merger = _Merger(works)
    for at, result in enumerate(results):
        merger.add(result)
        if len(merger.kept) > k:
            return list(results[:at])
    return list(results)


def unit_count(results: Sequence[SearchResult], works: Mapping[str, str]) -> int:
    """How many results :func:`merge_copies` makes of ``results``."""
    if not works:
        return len(results)
    merger = _Merger(works)
    for result in results:
        merger.add(result)
    return len(merger.kept)


def list_copies(results: Sequence[SearchResult]) -> list[SearchResult]:
    """Grouped ``results`` (one per work) with each copy whose passage is listed only under a result (in
    ``more_passages``) named in the result's ``sources``, by that passage; ``more_passages`` then keeps the passages
    of the result's own document only, so each passage listed under a result is in the document the result names
    (its offsets are into that document's text) and every copy of the work that answered is on the result itself."""
    out = []
    for result in results:
        listed = {source.doc_id for source in result.sources}
        extra, own = [], []
        for passage in result.more_passages:
            first = passage.sources[0] if passage.sources else None
            if first is None or first.doc_id == result.doc_id:
                own.append(passage)
            elif first.doc_id not in listed:
                listed.add(first.doc_id)
                extra.append(first)
        if extra or len(own) != len(result.more_passages):
            result = evolve(result, sources=(*result.sources, *extra), more_passages=tuple(own))
        out.append(result)
    return out


def named_by_listed_copies(results: Sequence[SearchResult], works: Mapping[str, str]) -> list[SearchResult]:
    """``results`` whose ``work_id`` fields name only copies the answer lists: for a filtered request (a token's scope
    among the filters), a work's id is the smallest doc id among the copies a result lists, and None where it lists
    one copy alone. The stored work id is the smallest doc id of *all* its copies, and a copy outside the filters
    must not show through it (neither its id nor that it exists)."""
    out = []
    for result in results:
        members: dict[str, list[str]] = {}
        for source in result.sources:
            work = works.get(source.doc_id)
            if work is not None:
                members.setdefault(work, []).append(source.doc_id)
        if result.doc_id in works and not result.sources:
            members.setdefault(works[result.doc_id], []).append(result.doc_id)
        shown = {work: min(ids) if len(set(ids)) > 1 else None for work, ids in members.items()}

        def visible(doc_id: str, shown: dict[str, str | None] = shown) -> str | None:
            work = works.get(doc_id)
            return None if work is None else shown.get(work)

        sources = tuple(evolve(source, work_id=visible(source.doc_id)) for source in result.sources)
        passages = tuple(
            evolve(passage, sources=tuple(evolve(s, work_id=visible(s.doc_id)) for s in passage.sources))
            for passage in result.more_passages
        )
        out.append(evolve(result, work_id=visible(result.doc_id), sources=sources, more_passages=passages))
    return out


#: Chunks a lookup of a source's passage by its rare terms returns (the published copy of that passage is among the
#: first: it holds the same rare words).
COPY_LOOKUP_DEPTH = 8


def add_published_copies(
    results: Sequence[SearchResult],
    works: Mapping[str, str],
    find: Callable[[Sequence[str]], list[list[int]]],
    documents: Callable[[Sequence[int]], list[str]],
    fetch: Callable[[Sequence[int]], list[SearchResult]],
) -> list[SearchResult]:
    """``results`` where a result shows a source form (Markdown, reST, text) of a work that has a published copy:
    the published copy's own passage saying the same thing shown instead, when the lexical lookup finds it (it did
    not rank among the hits: the query's words fell on the source's chunk, not the page's, both being near).

    ``find(texts)``: for each text, the chunk ids that share its rare terms best; ``documents(ids)``: each chunk's
    doc id; ``fetch(ids)``: those chunks as highlighted results."""
    wanted = [
        at
        for at, result in enumerate(results)
        if result.doc_id in works and _form(result.source_path) >= len(PUBLISHED)
    ]
    if not wanted:
        return list(results)
    found = find([results[at].text for at in wanted])
    ids = sorted({chunk_id for chunk_ids in found for chunk_id in chunk_ids})
    owner = dict(zip(ids, documents(ids), strict=True))
    shown = {source.chunk_id for result in results for source in result.sources}  # never one passage twice
    out = list(results)
    for at, chunk_ids in zip(wanted, found, strict=True):
        result = out[at]
        work = works[result.doc_id]
        listed = {source.doc_id for source in result.sources}
        others = [c for c in chunk_ids if c not in shown and owner[c] not in listed and works.get(owner[c]) == work]
        if not others:
            continue
        words = shingles(result.text)
        copies: dict[str, SearchResult] = {}
        for hit in fetch(others):
            if hit.doc_id not in copies and _same_passage(words, shingles(hit.text)):
                copies[hit.doc_id] = evolve(hit, score=result.score, relevance=result.relevance)
        if copies:
            shown.update(copy.chunk_id for copy in copies.values())
            out[at] = _named(shown_first(result, list(copies.values()), works, None), works)
    return out
