"""The lexical index: BM25 over chunk texts (bm25s's plain ``.npy``/JSON files, no pickles), its analyzer and
settings.

Documents and queries go through the same analyzer: bm25s's tokenizer (lower case, words of two or more
characters), its English stopword list, and the Snowball English stemmer (PyStemmer). The scoring variant and its
parameters were chosen on the tuning half of SciFact's test queries, and stay best on train
(docs/quality.md#how-the-first-settings-were-chosen).

New generations are segmented (``citeline.lexical.segments``); :class:`LexicalIndex` is the format of the bm25s
folders of indexes built before segments (a search reads them through ``citeline.lexical.legacy.LegacyLexical``), and
serves the eval baseline and tuning experiments.

This module owns the folders' formats (what files they hold, what settings they record); where they live and how
they are published crash-safely is ``citeline.store.generation``'s business.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from citeline.errors import IndexCorruptError
from citeline.util.arrays import load_npy, positions_of

if TYPE_CHECKING:
    import bm25s

#: BM25 scoring variant and parameters (bm25s names).
BM25_METHOD = "lucene"
BM25_K1 = 1.2
BM25_B = 0.5
STEMMER_LANGUAGE = "english"
STOPWORDS = "en"
#: File next to bm25s's own files mapping each BM25 document position to its chunk id.
CHUNK_IDS_FILE = "chunk_ids.npy"
#: File recording the analyzer and scoring settings the files were built with.
SETTINGS_FILE = "citeline.json"


def bm25_settings() -> dict[str, Any]:
    """The analyzer and scoring settings a BM25 folder built now would have (recorded with it)."""
    return {
        "method": BM25_METHOD,
        "k1": BM25_K1,
        "b": BM25_B,
        "stemmer": STEMMER_LANGUAGE,
        "stopwords": STOPWORDS,
        "text": "title + chunk",  # see store.catalog.lexical_texts
    }


_local = threading.local()


def _stemmer() -> Any:
    # A PyStemmer object is not safe to share between threads (it caches results), so each thread has its own.
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = _local.stemmer = Stemmer.Stemmer(STEMMER_LANGUAGE)
    return stemmer


#: bm25s's tokenizer pattern (scikit-learn's CountVectorizer default): words of two or more characters.
TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")
#: bm25s's English stopword list (``bm25s.stopwords.STOPWORDS_EN``, from NLTK), matched before stemming.
#: Held here so that a query is analyzed without importing bm25s, whose package imports scipy.sparse: that
#: import was most of a cold ``citeline search`` (docs/performance.md#choices-measured-in-the-code).
#: tests/index/test_search_modes.py checks both
#: against bm25s's own tokenizer.
ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "  # noqa: SIM905
    "this to was will with".split()
)


def analyze(texts: Sequence[str]) -> list[list[str]]:
    """Terms of each text as BM25 sees them: lower-cased words, English stopwords removed, stemmed.

    The same terms as ``bm25s.tokenize(texts, stopwords="en", stemmer=..., return_ids=False)``, which built
    0.1.0's folders: its regex on the lower-cased text, then its stopwords, then the Snowball English stemmer
    (each distinct word stemmed once, as bm25s does).
    """
    words = [[word for word in TOKEN_PATTERN.findall(text.lower()) if word not in ENGLISH_STOPWORDS] for text in texts]
    distinct = list(dict.fromkeys(word for text_words in words for word in text_words))
    stem = dict(zip(distinct, _stemmer().stemWords(distinct), strict=True))
    return [[stem[word] for word in text_words] for text_words in words]


@dataclass
class LexicalIndex:
    """A bm25s index over chunk texts, and the chunk id of each of its document positions (ascending).

    The folders of indexes built before segments (searched through ``citeline.lexical.legacy.LegacyLexical``), the
    eval baseline and tuning experiments; new generations are ``citeline.lexical.segments.SegmentedIndex``."""

    retriever: bm25s.BM25 | None  #: None for an index without chunks (bm25s cannot index nothing)
    chunk_ids: np.ndarray

    def __len__(self) -> int:
        return len(self.chunk_ids)

    @classmethod
    def build(
        cls,
        chunk_ids: np.ndarray,
        texts: Sequence[str],
        *,
        method: str = BM25_METHOD,
        k1: float = BM25_K1,
        b: float = BM25_B,
    ) -> LexicalIndex:
        """Index ``texts``; ``chunk_ids`` (same order, ascending) names them. Other scoring settings than the
        defaults are for tuning: an index's folder built with them is rebuilt when the index is opened."""
        import bm25s  # only for folders written before segments, and the eval baseline: slow to import

        ids = np.ascontiguousarray(chunk_ids, dtype=np.int64)
        if len(ids) != len(texts):
            raise ValueError(f"{len(ids)} chunk ids for {len(texts)} texts")
        if not len(ids):
            return cls(None, ids)
        retriever = bm25s.BM25(method=method, k1=k1, b=b)
        retriever.index(analyze(texts), show_progress=False)
        return cls(retriever, ids)

    def save(self, directory: Path) -> None:
        """Write bm25s's own files (numpy arrays and JSON, no pickles) plus the chunk ids and settings."""
        directory.mkdir(parents=True, exist_ok=True)
        if self.retriever is not None:
            self.retriever.save(str(directory), show_progress=False)
        np.save(directory / CHUNK_IDS_FILE, self.chunk_ids, allow_pickle=False)
        settings = bm25_settings()
        if self.retriever is not None:
            settings.update(method=self.retriever.method, k1=self.retriever.k1, b=self.retriever.b)
        (directory / SETTINGS_FILE).write_text(json.dumps({**settings, "chunks": len(self.chunk_ids)}))

    @classmethod
    def load(cls, directory: Path, *, mmap: bool = False) -> LexicalIndex:
        """Read a folder of bm25s's own files (generations before segments, written by :meth:`save`; segmented
        folders are read by ``citeline.lexical.segments.load_folder``); raises :class:`IndexCorruptError` if
        unreadable."""
        try:
            settings = json.loads((directory / SETTINGS_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise IndexCorruptError(f"{directory} cannot be read ({exc}); run `citeline rebuild`") from exc
        if "segments" in settings:
            raise IndexCorruptError(f"{directory} is segmented: read it with citeline.lexical.segments.load_folder")
        import bm25s  # only for folders written before segments, and the eval baseline: slow to import

        try:
            chunk_ids = load_npy(directory / CHUNK_IDS_FILE)
            retriever = None
            if len(chunk_ids):
                retriever = bm25s.BM25.load(str(directory), mmap=mmap, allow_pickle=False)
        except (OSError, ValueError, KeyError) as exc:
            raise IndexCorruptError(f"{directory} cannot be read ({exc}); run `citeline rebuild`") from exc
        if settings.get("chunks") != len(chunk_ids) or (
            retriever is not None and retriever.scores["num_docs"] != len(chunk_ids)
        ):
            raise IndexCorruptError(f"{directory} is inconsistent (chunk count); run `citeline rebuild`")
        return cls(retriever, chunk_ids.astype(np.int64, copy=False))

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every chunk (position order) for ``query``; zeros where no query term occurs."""
        if self.retriever is None:
            return np.zeros(0, dtype=np.float32)
        term_ids = self.retriever.get_tokens_ids(analyze([query])[0])
        if not term_ids:
            return np.zeros(len(self.chunk_ids), dtype=np.float32)
        scores: np.ndarray = self.retriever.get_scores_from_ids(term_ids)
        return scores

    def search(self, query: str, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k chunks with the highest BM25 score for ``query``, as ``(chunk_id, score)`` best first.

        Only chunks sharing at least one term with the query are returned (a BM25 score of 0 is no match). With
        ``allowed``, only those chunks are scored for the ranking, so the k best allowed matches come back.
        """
        return self.ranked(query, k, allowed)[0]

    def ranked(
        self, query: str, k: int, allowed: np.ndarray | None = None
    ) -> tuple[list[tuple[int, float]], Callable[[np.ndarray], np.ndarray]]:
        """:meth:`search`'s k best, and the BM25 score of any chunk ids for ``query`` (hybrid fusion reads its
        candidates' scores through it), from one scoring. A sharded index answers from each shard's k best and
        never gathers every chunk's score (``citeline.sharding.search.MergedLexical``)."""
        scores = self.scores(query)
        positions = None if allowed is None else positions_of(self.chunk_ids, allowed)
        top = [(int(self.chunk_ids[p]), float(scores[p])) for p in top_positions(scores, positions, k) if scores[p] > 0]
        return top, lambda ids: scores[positions_of(self.chunk_ids, ids)]

    def scores_of(self, query: str, ids: np.ndarray) -> np.ndarray:
        """The BM25 scores of chunk ``ids`` (0 for an id not held); segmented indexes score only those chunks."""
        scores = self.scores(query)
        ids = np.asarray(ids, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.chunk_ids, ids), max(len(self.chunk_ids) - 1, 0))
        held = self.chunk_ids[at] == ids if len(self.chunk_ids) else np.zeros(len(ids), dtype=bool)
        return np.where(held, scores[at] if len(scores) else 0, 0).astype(scores.dtype)

    def sharing_rare_terms(
        self, texts: Sequence[str], k: int, *, terms: int = 8, min_share: float = 0.5, allowed: np.ndarray | None = None
    ) -> list[list[int]]:
        """For each text, at most k chunk ids that repeat it (see ``SegmentedIndex.sharing_rare_terms``); this
        0.1.0 bm25s folder ranks each whole text by BM25 instead."""
        return [[chunk_id for chunk_id, _ in self.search(text, k, allowed)] for text in texts]


def top_positions(scores: np.ndarray, positions: np.ndarray | None, k: int) -> np.ndarray:
    """Positions of the k highest scores (among ``positions`` if given), best first, ties by position."""
    candidates = np.arange(len(scores)) if positions is None else positions
    values = scores[candidates]
    if k < len(candidates):
        # the k-th best value decides; of the chunks tied with it, the first positions (``positions`` ascend), so
        # ties go by position as promised (argpartition alone keeps an arbitrary one of them, and the shards'
        # merge of their top k could then keep another chunk than one index: citeline.sharding.search)
        kth = values[np.argpartition(-values, k - 1)[k - 1]]
        above = np.flatnonzero(values > kth)
        keep = np.concatenate([above, np.flatnonzero(values == kth)[: k - len(above)]])
        candidates, values = candidates[keep], values[keep]
    order = np.lexsort((candidates, -values))
    return candidates[order]


def settings_problems(directory: Path) -> list[str]:
    """Why a BM25 folder cannot serve this citeline: missing files, or built with other settings (empty: none)."""
    if not (directory / CHUNK_IDS_FILE).is_file() or not (directory / SETTINGS_FILE).is_file():
        return [f"{directory.name}/ is missing"]
    try:
        settings = json.loads((directory / SETTINGS_FILE).read_text())
    except ValueError:
        return [f"{directory.name}/{SETTINGS_FILE} cannot be read"]
    wanted = bm25_settings()
    if {key: settings.get(key) for key in wanted} != wanted:
        return [f"{directory.name}/ was built with other BM25 settings than this citeline's"]
    return []
