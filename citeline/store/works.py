"""Works: documents whose texts are the same work (a rendered page and its markup source, the .docx and .pdf
exports of one report, a copy with light edits), recognised at ingest and stored in the catalog; a search shows the
documents of one work as one result (``citeline.query.works``). This module owns the works tables and every
statement on them, as ``file_stats`` owns the files table.

**The rule.** A document's text is normalised (:func:`words`: the residue of markup a source carries and its
rendering does not — reStructuredText and MyST roles, directives and toctrees, Markdown link targets, emphasis and
code fences, URLs, ``¶`` — case, punctuation and whitespace are dropped) and cut into word shingles
(:data:`SHINGLE_WORDS` words). Two documents are
the same work when their shingle sets have a Jaccard similarity of at least :data:`MIN_JACCARD`, or when the
smaller set lies at least :data:`MIN_CONTAINMENT` inside the larger one and their Jaccard is at least
:data:`MIN_JACCARD_CONTAINED` (a page whose navigation, or a source whose directives, add words the other lacks).
A work is a connected group of such pairs; its ``work_id`` is the smallest doc id of the group, so it stays the
same while that document stays in the work. Documents of fewer than :data:`MIN_SHINGLES` shingles take no part:
too little text to tell a copy from a record of the same form.

Why these thresholds (figures and the sets they were measured on: docs/quality.md#works): two versions of a policy
whose sections differ share their common sections' shingles but neither holds the other, so containment stays well
under :data:`MIN_CONTAINMENT`; records of one template share the frame's shingles, but each slot value breaks the
three shingles it is part of, so their Jaccard stays under :data:`MIN_JACCARD`; a lightly edited copy keeps most
shingles (Jaccard above :data:`MIN_JACCARD`); a rendered page and its source differ by what markup leaves behind,
which the normalisation removes, or which one side holds and the other does not (containment).

**Incremental.** Each document's MinHash signature (datasketch, :data:`NUM_PERM` permutations) is stored
(``work_sketches``) and cut into LSH bands (datasketch's choice of bands and rows for :data:`LSH_THRESHOLD`), each
band's hash stored too (``work_bands``). A commit hashes only the documents it adds or changes, finds their
candidates by a join on ``(band, hash)`` with the stored bands (no LSH over the whole corpus is built again), drops
those whose signatures estimate a Jaccard under :data:`MIN_ESTIMATE`, confirms the others on the two texts' shingle
sets (the rule above), stores the confirmed pairs (``work_links``) and recomputes the groups of the works it touched
(``work_members``). Removing a document drops its bands and links, so its work splits when
it held it together. The map doc id -> work id of every document in a work of two or more is written to
``index_meta`` (``works``), which every reader has already (meta.json), so a search reads no table for it.

Indexes written before the tables get them with their next commit (:func:`refresh`), every stored document hashed
once then; until then (a read-only index) no work is known and every document is its own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # imported where used: a search that reads meta.json never loads DuckDB
    import duckdb

#: Words a shingle holds: short enough that a chunk boundary or a dropped word breaks few shingles, long enough
#: that common phrases shared by unrelated texts are rare.
SHINGLE_WORDS = 3
#: MinHash permutations (datasketch's default).
NUM_PERM = 128
#: The Jaccard estimate at which LSH makes a pair a candidate about half the time (datasketch picks the bands and
#: rows): below the confirming thresholds, so a true pair is seldom missed, while templated records (whose Jaccard
#: is lower still) are seldom candidates at all.
LSH_THRESHOLD = 0.4
#: Confirmed: Jaccard of the shingle sets at least this (a lightly edited copy).
MIN_JACCARD = 0.7
#: Confirmed too: the smaller set at least this much inside the larger (a page whose kept navigation, or a source
#: whose directives, add words the other lacks) ...
MIN_CONTAINMENT = 0.9
#: ... with at least this Jaccard: a short text most of whose sentences recur in a text twice as long (an excerpt, a
#: digest of the same material) is not a copy of it.
MIN_JACCARD_CONTAINED = 0.5
#: Documents with fewer shingles take no part.
MIN_SHINGLES = 20
#: A candidate pair whose MinHash estimate of Jaccard (the stored signatures) is lower is not compared on its texts:
#: far enough below :data:`MIN_JACCARD_CONTAINED` that a true pair is dropped only by a many-sigma estimate error,
#: while the many chance candidates of texts that share some sentences (a template, a shared boilerplate) are.
MIN_ESTIMATE = 0.2
#: At most this many candidates are confirmed per document (those sharing the most bands first): bounds the cost of
#: a document that resembles very many (a template's records) whatever the corpus holds.
MAX_CANDIDATES = 64

#: Documents hashed (or candidate pairs compared) at a time: what memory holds of texts and shingles at once.
BATCH = 2000

#: The ``index_meta`` key of the map doc id -> work id.
META_KEY = "works"
#: The ``index_meta`` key of what the last commit's recognition did (documents hashed, pairs compared, linked).
CHECKED_KEY = "works_checked"

_BANDS, _ROWS = 0, 0  # set by _lsh_shape

_CREATE = """
CREATE TABLE IF NOT EXISTS work_bands (doc_id VARCHAR NOT NULL, band SMALLINT NOT NULL, hash BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS work_links (doc_a VARCHAR NOT NULL, doc_b VARCHAR NOT NULL, PRIMARY KEY (doc_a, doc_b));
CREATE TABLE IF NOT EXISTS work_members (doc_id VARCHAR NOT NULL PRIMARY KEY, work_id VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS work_sketches (doc_id VARCHAR NOT NULL PRIMARY KEY, signature BLOB NOT NULL);
"""
TABLES = ("work_bands", "work_links", "work_members", "work_sketches")

# ---------------------------------------------------------------- the sketch

_ROLE = re.compile(r":[\w.+-]+:`([^`<]*?)\s*(?:<[^>`]*>)?`")  # :ref:`text <target>` -> text
_DIRECTIVE = re.compile(r"^[ \t]*\.\. [\w:.+-]+::.*$", re.MULTILINE)  # .. note:: / .. code-block:: python
_FIELD = re.compile(r"^[ \t]+:[\w -]+:.*$", re.MULTILINE)  # an indented directive option (:maxdepth: 2)
_TARGET = re.compile(r"^[ \t]*\.\. _[^:\n]*:.*$", re.MULTILINE)  # .. _label: (a reST link target)
# [text](url "title") -> [text]. A target holds no "]" and a title no line break: each match's scan then ends at
# the next "]" (or line), so a long run of "](" with no ")" (a minified blob) costs its length, not its square.
_MD_LINK = re.compile(r"\]\([^)\s\]]*(?:\s+\"[^\"\n]*\")?\)")
_REST_LINK = re.compile(r"`([^`<]*?)\s*<[^>`]*>`_{1,2}")  # `text <url>`_ -> text
_URL = re.compile(r"\b(?:https?|ftp)://\S+")
# A toctree's body is a list of page names, which Sphinx renders as those pages' titles (or their whole outline):
# names the page does not hold, dropped whole (reST: the indented block; MyST: the fenced block).
_TOCTREE = re.compile(r"^([ \t]*)\.\. toctree::.*\n(?:\1[ \t]+.*\n|[ \t]*\n)*", re.MULTILINE)
# The MyST body ends at the next fence, or after at most 500 lines (an unclosed fence): a lazy match to the closing
# fence would scan to the text's end from every unclosed opening, quadratic in a text of many.
_MYST_TOCTREE = re.compile(
    r"^[ \t]*(?:`{3,}|:{3,})\{toctree\}.*\n"
    r"(?:(?![ \t]*(?:`{3,}|:{3,}))[^\n]*\n){0,500}(?:[ \t]*(?:`{3,}|:{3,})[ \t]*$)?",
    re.MULTILINE,
)
# MyST (Sphinx's Markdown): a directive's fence line ```{include} ../README.md and the :option: lines under it; a
# role {doc}`text <target>` -> text.
_MYST_DIRECTIVE = re.compile(r"^[ \t]*(?:`{3,}|:{3,})\{[\w:.+-]+\}.*$(?:\n[ \t]*:[\w-]+:.*$)*", re.MULTILINE)
_MYST_ROLE = re.compile(r"\{[\w:.+-]+\}`([^`<]*?)\s*(?:<[^>`]*>)?`")
# A Markdown code fence's line (```python title="app.py"): its language is no word of the rendered page.
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[^`\n]*$", re.MULTILINE)
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """``text``'s words as the work rule compares them: markup residue (reST and MyST roles, directives and their
    options, toctrees, link targets; Markdown link targets and code fences' lines; URLs; ``¶``), case and
    punctuation gone."""
    text = _TOCTREE.sub(" ", text)
    text = _MYST_TOCTREE.sub(" ", text)
    text = _MYST_DIRECTIVE.sub(" ", text)
    text = _MYST_ROLE.sub(r" \1 ", text)
    text = _FENCE.sub(" ", text)
    text = _ROLE.sub(r" \1 ", text)
    text = _REST_LINK.sub(r" \1 ", text)
    text = _MD_LINK.sub("] ", text)
    text = _DIRECTIVE.sub(" ", text)
    text = _FIELD.sub(" ", text)
    text = _TARGET.sub(" ", text)
    text = _URL.sub(" ", text)
    return _WORD.findall(text.casefold())


def shingles(text: str) -> set[str]:
    """The set of :data:`SHINGLE_WORDS`-word shingles of ``text``'s :func:`words`."""
    found = words(text)
    n = SHINGLE_WORDS
    return {" ".join(found[i : i + n]) for i in range(max(0, len(found) - n + 1))}


def _lsh_shape() -> tuple[int, int]:
    global _BANDS, _ROWS
    if not _BANDS:
        from datasketch import MinHashLSH

        lsh = MinHashLSH(threshold=LSH_THRESHOLD, num_perm=NUM_PERM)
        _BANDS, _ROWS = int(lsh.b), int(lsh.r)
    return _BANDS, _ROWS


def signature(shingle_set: Iterable[str]) -> np.ndarray:
    """The MinHash signature (datasketch, :data:`NUM_PERM` uint32 values) of a shingle set."""
    from datasketch import MinHash

    sketch = MinHash(num_perm=NUM_PERM)
    sketch.update_batch([shingle.encode("utf-8") for shingle in shingle_set])
    return np.asarray(sketch.hashvalues, dtype=np.uint32)


def band_hashes(values: np.ndarray) -> list[int]:
    """The LSH band hashes (signed 64-bit) of a MinHash signature, band by band."""
    bands, rows = _lsh_shape()
    return [
        int.from_bytes(hashlib.blake2b(values[b * rows : (b + 1) * rows].tobytes(), digest_size=8).digest(), "big")
        - (1 << 63)
        for b in range(bands)
    ]


def same_work(a: set[str], b: set[str]) -> bool:
    """Whether two documents' shingle sets (:func:`shingles`) are the same work (the module's rule)."""
    if len(a) < MIN_SHINGLES or len(b) < MIN_SHINGLES:
        return False
    shared = len(a & b)
    jaccard = shared / (len(a) + len(b) - shared)
    if jaccard >= MIN_JACCARD:
        return True
    return jaccard >= MIN_JACCARD_CONTAINED and shared / min(len(a), len(b)) >= MIN_CONTAINMENT


# ---------------------------------------------------------------- the tables


@dataclass(frozen=True)
class WorkUpdate:
    """What one commit's recognition did: documents hashed, candidate pairs compared, pairs confirmed, and the
    ``index_meta`` entries to write (the map of :data:`META_KEY`)."""

    hashed: int
    compared: int
    linked: int
    meta: dict[str, Any]


def exists(connection: duckdb.DuckDBPyConnection) -> bool:
    """Whether the catalog has the works tables."""
    rows = connection.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ANY(?)", [list(TABLES)]
    ).fetchall()
    return int(rows[0][0]) == len(TABLES)


def refresh(connection: duckdb.DuckDBPyConnection, removed: Sequence[str], added: Sequence[str]) -> WorkUpdate:
    """Update the works after a commit's changes (inside its transaction, after the rows are written): ``removed``
    documents (an updated one is removed and added) leave their works, ``added`` ones are hashed and linked to the
    stored documents they are the same work as. A catalog without the tables gets them, every document hashed."""
    if not exists(connection):
        connection.execute(_CREATE)
        added = [row[0] for row in connection.execute("SELECT doc_id FROM documents").fetchall()]
        removed = []
    gone = sorted(set(removed) | set(added))
    touched = _members_of_works(connection, gone)
    if gone:
        for table in ("work_bands", "work_sketches"):
            connection.execute(f"DELETE FROM {table} WHERE doc_id = ANY(?)", [gone])
        connection.execute("DELETE FROM work_links WHERE doc_a = ANY(?) OR doc_b = ANY(?)", [gone, gone])
    # Hashed, then compared, BATCH documents at a time: memory holds one batch's texts and shingles (an index's first
    # commit with works hashes every document it holds), the signatures of one batch of pairs.
    hashed, sketched = 0, list[str]()
    fresh = sorted(set(added))
    for at in range(0, len(fresh), BATCH):
        texts = _texts(connection, fresh[at : at + BATCH])
        hashed += len(texts)
        sets = {doc_id: shingles(text) for doc_id, text in texts.items()}
        signatures = {doc_id: signature(found) for doc_id, found in sets.items() if len(found) >= MIN_SHINGLES}
        _insert_sketches(connection, signatures)
        sketched.extend(signatures)
    candidates = _candidates(connection, sketched)
    pairs, links = [], []
    for at in range(0, len(candidates), BATCH):
        batch = candidates[at : at + BATCH]
        signatures = _signatures(connection, sorted({doc for pair in batch for doc in pair}))
        close = [
            (a, b)
            for a, b in batch
            if a in signatures and b in signatures and float(np.mean(signatures[a] == signatures[b])) >= MIN_ESTIMATE
        ]
        pairs += close
        texts = _texts(connection, sorted({doc for pair in close for doc in pair}))
        sets = {}
        for a, b in close:
            for doc in (a, b):
                if doc not in sets:
                    sets[doc] = shingles(texts[doc])
            if same_work(sets[a], sets[b]):
                links.append((min(a, b), max(a, b)))
    links = sorted(set(links))
    if links:
        connection.executemany("INSERT OR IGNORE INTO work_links VALUES (?, ?)", links)
    linked_docs = {doc for link in links for doc in link}
    _regroup(connection, touched | set(gone) | linked_docs | _members_of_works(connection, sorted(linked_docs)))
    checked = {"hashed": hashed, "candidates": len(candidates), "compared": len(pairs), "linked": len(links)}
    return WorkUpdate(hashed, len(pairs), len(links), {META_KEY: work_map(connection), CHECKED_KEY: checked})


def _texts(connection: duckdb.DuckDBPyConnection, doc_ids: Sequence[str]) -> dict[str, str]:
    if not doc_ids:
        return {}
    rows = connection.execute("SELECT doc_id, text FROM documents WHERE doc_id = ANY(?)", [list(doc_ids)]).fetchall()
    return {doc_id: text for doc_id, text in rows}


def _insert_sketches(connection: duckdb.DuckDBPyConnection, signatures: dict[str, np.ndarray]) -> None:
    """Store each document's signature and its band hashes."""
    if not signatures:
        return
    import pyarrow as pa

    doc_ids, bands, hashes = [], [], []
    for doc_id, values in signatures.items():
        for band, value in enumerate(band_hashes(values)):
            doc_ids.append(doc_id)
            bands.append(band)
            hashes.append(value)
    rows = pa.table(
        {
            "doc_id": pa.array(doc_ids, pa.string()),
            "band": pa.array(bands, pa.int16()),
            "hash": pa.array(hashes, pa.int64()),
        }
    )
    sketches = pa.table(
        {
            "doc_id": pa.array(list(signatures), pa.string()),
            "signature": pa.array([values.tobytes() for values in signatures.values()], pa.binary()),
        }
    )
    connection.register("_citeline_bands", rows)
    connection.register("_citeline_sketches", sketches)
    try:
        connection.execute("INSERT INTO work_bands SELECT doc_id, band, hash FROM _citeline_bands")
        connection.execute("INSERT INTO work_sketches SELECT doc_id, signature FROM _citeline_sketches")
    finally:
        connection.unregister("_citeline_bands")
        connection.unregister("_citeline_sketches")


def _signatures(connection: duckdb.DuckDBPyConnection, doc_ids: Sequence[str]) -> dict[str, np.ndarray]:
    if not doc_ids:
        return {}
    rows = connection.execute(
        "SELECT doc_id, signature FROM work_sketches WHERE doc_id = ANY(?)", [list(doc_ids)]
    ).fetchall()
    return {doc_id: np.frombuffer(blob, dtype=np.uint32) for doc_id, blob in rows}


def _candidates(connection: duckdb.DuckDBPyConnection, doc_ids: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs ``(new, other)`` sharing a band hash, at most :data:`MAX_CANDIDATES` per new document (most bands
    shared first); a pair of two new documents once."""
    if not doc_ids:
        return []
    rows = connection.execute(
        """
        SELECT a, b FROM (
            SELECT n.doc_id AS a, o.doc_id AS b, count(*) AS shared,
                row_number() OVER (PARTITION BY n.doc_id ORDER BY count(*) DESC, o.doc_id) AS place
            FROM work_bands n JOIN work_bands o ON n.band = o.band AND n.hash = o.hash AND n.doc_id <> o.doc_id
            WHERE n.doc_id = ANY(?)
            GROUP BY n.doc_id, o.doc_id
        ) WHERE place <= ? ORDER BY a, b
        """,
        [list(doc_ids), MAX_CANDIDATES],
    ).fetchall()
    new = set(doc_ids)
    return [(a, b) for a, b in rows if not (b in new and b < a)]


def _members_of_works(connection: duckdb.DuckDBPyConnection, doc_ids: Sequence[str]) -> set[str]:
    """Every member of the works that hold any of ``doc_ids``."""
    if not doc_ids:
        return set()
    rows = connection.execute(
        "SELECT doc_id FROM work_members WHERE work_id IN (SELECT work_id FROM work_members WHERE doc_id = ANY(?))",
        [list(doc_ids)],
    ).fetchall()
    return {row[0] for row in rows}


def _regroup(connection: duckdb.DuckDBPyConnection, docs: set[str]) -> None:
    """Recompute the works of ``docs`` (every member of each work they were or are in) from the links."""
    if not docs:
        return
    ids = sorted(docs)
    links = connection.execute(
        "SELECT doc_a, doc_b FROM work_links WHERE doc_a = ANY(?) OR doc_b = ANY(?)", [ids, ids]
    ).fetchall()
    parent: dict[str, str] = {}

    def root(doc: str) -> str:
        parent.setdefault(doc, doc)
        while parent[doc] != doc:
            parent[doc] = parent[parent[doc]]
            doc = parent[doc]
        return doc

    for a, b in links:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = {}
    for doc in parent:
        groups.setdefault(root(doc), []).append(doc)
    connection.execute("DELETE FROM work_members WHERE doc_id = ANY(?)", [sorted(set(ids) | set(parent))])
    rows = [(doc, min(members)) for members in groups.values() if len(members) > 1 for doc in members]
    if rows:
        connection.executemany("INSERT INTO work_members VALUES (?, ?)", rows)


def work_map(connection: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Doc id -> work id of every document in a work of two or more."""
    if not exists(connection):
        return {}
    return dict(connection.execute("SELECT doc_id, work_id FROM work_members ORDER BY doc_id").fetchall())


def problems(connection: duckdb.DuckDBPyConnection, meta: dict[str, Any]) -> list[str]:
    """What is wrong with the works (``verify``'s ``works_match``): members or bands of documents the catalog does
    not hold, a work of one document, a work id that is not its smallest member, or ``index_meta``'s map differing
    from the table."""
    if not exists(connection):
        return [] if not meta.get(META_KEY) else [f"index_meta lists works but {TABLES[2]} is missing"]
    found = []
    for table in ("work_members", "work_bands", "work_sketches"):
        (orphans,) = connection.execute(
            f"SELECT count(DISTINCT doc_id) FROM {table} WHERE doc_id NOT IN (SELECT doc_id FROM documents)"
        ).fetchall()[0]
        if orphans:
            found.append(f"{table} holds {orphans} documents the catalog does not")
    (bad,) = connection.execute(
        "SELECT count(*) FROM (SELECT work_id, count(*) AS n, min(doc_id) AS first FROM work_members "
        "GROUP BY work_id) WHERE n < 2 OR first <> work_id"
    ).fetchall()[0]
    if bad:
        found.append(f"{bad} works are of one document or not named by their smallest doc id")
    if meta.get(META_KEY, {}) != work_map(connection):
        found.append(f"index_meta's {META_KEY} differs from {TABLES[2]}")
    return found
