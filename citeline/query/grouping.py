"""One result per document: a grouped search's last step (``SearchRequest.group``).

A long document that answers a query well has several chunks near the top of the ranking, and they push other
documents out of the first k: on a documentation tree the top 5 held 3.3 distinct files on average (issue 42). A
grouped search keeps each document's best passage as its result, in rank order, and lists the document's other
passages that answered under it (``SearchResult.more_passages``, best first); k counts documents.

Grouping reads the passages the plan already ranked, collapsed and floored: the plan ranks deeper (at least
:data:`GROUP_FIRST_DEPTH` times k, then four times deeper while fewer than k documents are found and more hits
exist), so a document's other passages are those among that ranking, not every chunk of it that mentions the query.
A collapsed result (one passage shared by several documents) is grouped under the document of its first source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from citeline.query.results import SearchResult, evolve

Unit = Callable[[SearchResult], str]


def _document(result: SearchResult) -> str:
    return result.doc_id


#: A grouped search first ranks this many times k passages (the same depth a collapsed search starts at).
GROUP_FIRST_DEPTH = 4


def document_count(results: Sequence[SearchResult], unit: Unit = _document) -> int:
    """How many distinct documents ``results`` come from (a collapsed result counts for its first source's); with
    ``unit``, how many distinct units (a work: ``citeline.query.works.unit_of``)."""
    return len({unit(result) for result in results})


def first_documents(results: Sequence[SearchResult], k: int, unit: Unit = _document) -> list[SearchResult]:
    """``results`` (best first) less those of documents after the ``k``-th distinct one: what a grouped answer of
    k documents can show (so only those passages are highlighted and looked up)."""
    seen: set[str] = set()
    kept = []
    for result in results:
        if (key := unit(result)) not in seen:
            if len(seen) == k:
                continue
            seen.add(key)
        kept.append(result)
    return kept


def by_document(results: Sequence[SearchResult], k: int, unit: Unit = _document) -> list[SearchResult]:
    """One result per document (per ``unit``: a work, whose copies' other passages are listed under it), at most
    ``k``, best first: each document's best passage, with its other passages of ``results`` (best first) as
    ``more_passages``."""
    heads: dict[str, SearchResult] = {}
    more: dict[str, list[SearchResult]] = {}
    for result in results:
        key = unit(result)
        if key in heads:
            more[key].append(result)
        elif len(heads) < k:
            heads[key], more[key] = result, []
    return [
        evolve(head, more_passages=tuple(other.as_passage() for other in more[doc_id])) if more[doc_id] else head
        for doc_id, head in heads.items()
    ]
