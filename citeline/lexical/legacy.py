"""The BM25 folder of an index written before segments (citeline 0.1.0: bm25s's own ``.npy`` and JSON files), read
through the current read interface (``citeline.query.readers.LexicalReader``) by :class:`LegacyLexical`.

The format itself (its files, how bm25s builds and reads them) is ``citeline.lexical.analyzer.LexicalIndex``'s, which
the eval baseline and the tuning experiments also use. This adapter is the only way a search reads such a folder: it
answers the reads the folder can (the k best, scores, the lookup of copies, by BM25 on the whole text) and says
plainly which it cannot. bm25s precomputes each posting's score with its own corpus's idf, so the folder keeps no
term statistics: :meth:`LegacyLexical.statistics` and :meth:`LegacyLexical.term_frequencies` return None (the
document-level BM25 signal and the relevance model's coverage then step aside), and :meth:`LegacyLexical.as_shard`
returns None (a sharded index refuses such a shard: ``citeline rebuild`` rewrites it in segments). The next commit
to the index, or ``citeline rebuild``, replaces the folder with a segmented one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from citeline.lexical.analyzer import LexicalIndex
from citeline.lexical.scoring import Statistics


class LegacyLexical:
    """A 0.1.0 bm25s folder as a ``LexicalReader`` (see the module docstring)."""

    def __init__(self, index: LexicalIndex):
        self.index = index  #: the folder's bm25s index (its format: ``citeline.lexical.analyzer``)

    @classmethod
    def load(cls, directory: Path, *, mmap: bool = False) -> LegacyLexical:
        """Read a folder of bm25s's own files; raises ``IndexCorruptError`` if it cannot be read."""
        return cls(LexicalIndex.load(directory, mmap=mmap))

    @property
    def chunk_ids(self) -> np.ndarray:
        """The chunk ids, ascending."""
        return self.index.chunk_ids

    def __len__(self) -> int:
        return len(self.index)

    def search(self, query: str, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k best chunks by BM25 as ``(chunk_id, score)``, best first (ties by chunk id); only matches."""
        return self.index.search(query, k, allowed)

    def ranked(
        self, query: str, k: int, allowed: np.ndarray | None = None
    ) -> tuple[list[tuple[int, float]], Callable[[np.ndarray], np.ndarray]]:
        """:meth:`search`'s k best and a function scoring any chunk ids, from one scoring of every chunk."""
        return self.index.ranked(query, k, allowed)

    def scores_of(self, query: str, ids: np.ndarray) -> np.ndarray:
        """The BM25 scores of chunk ``ids`` (0 for an id not held)."""
        return self.index.scores_of(query, ids)

    def sharing_rare_terms(
        self, texts: Sequence[str], k: int, *, terms: int = 8, min_share: float = 0.5, allowed: np.ndarray | None = None
    ) -> list[list[int]]:
        """For each text, its k best chunks by BM25 on the whole text (the folder has no postings to find rare
        terms in; ``terms`` and ``min_share`` do not apply)."""
        return self.index.sharing_rare_terms(texts, k, terms=terms, min_share=min_share, allowed=allowed)

    def statistics(self, query: str) -> Statistics | None:
        """None: the folder keeps no term statistics (see the module docstring)."""
        return None

    def term_frequencies(self, query: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """None: the folder keeps no term frequencies (see the module docstring)."""
        return None

    def as_shard(self) -> None:
        """None: its scores cannot take another corpus's statistics, so it cannot be a shard."""
        return None
