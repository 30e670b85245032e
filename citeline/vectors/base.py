"""The ``VectorIndex`` protocol and the registry of kinds (the kinds themselves import this module).

A kind is one module and one registry line: decorate its class with ``@vector_index("name")`` and name its module
in ``citeline.vectors.KIND_MODULES`` (imported on the kind's first use). ``tests/unit/test_vector_contract.py`` runs
every registered kind through the same contract (exact ids, exact stored vectors, filtered search returning k
results whenever k allowed ids exist, copy-on-write updates, save/load round trips).

The index directory layer (``citeline.store.generation``) decides *where* a kind's file lives and publishes it
crash-safely; a kind only knows how to build, write, read and search its own file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar, runtime_checkable

import numpy as np

from citeline.errors import CitelineError
from citeline.util.registry import registering

__all__ = ["DEFAULT_KIND", "KINDS", "NEW_INDEX_KIND", "VectorIndex", "VectorReader", "kind_of", "vector_index"]


@runtime_checkable
class VectorReader(Protocol):
    """What the query plan reads of a generation's vectors: a kind's index, or its segments
    (``citeline.vectors.segments.SegmentedVectors``) read as one; a sharded index's merge
    (``citeline.sharding.search.MergedVectors``) and a shard on a Dask worker (``citeline.sharding.remote``)."""

    @property
    def kind(self) -> str:
        """The registry name of the kind the vectors are stored in (``index_meta.vector_index``)."""
        ...

    @property
    def dimension(self) -> int:
        """Vector length."""
        ...

    def __len__(self) -> int:
        """Number of vectors."""
        ...

    def ids(self) -> np.ndarray:
        """Every id held, ascending (int64)."""
        ...

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The ``k`` ids nearest ``query`` as ``(id, score)``, best first (ties by id)."""
        ...

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The exact stored vectors of ``ids`` (one row per id, float32); raises ``KeyError`` for an absent id."""
        ...


@runtime_checkable
class VectorIndex(Protocol):
    """What the store and the query plan need of a vector index over unit-length float32 vectors.

    Ids are int64 chunk ids. Scores are inner products (cosines, as vectors are unit length). ``allowed`` is
    ``None`` for every id, or a sorted int64 array of the ids a search may return: candidates are restricted
    *before* ranking, so ``search`` returns ``min(k, |allowed ∩ ids|)`` results.
    """

    #: the registry name, recorded in the index (``index_meta.vector_index``)
    kind: ClassVar[str]
    #: the file name ending of a generation's file: ``vectors.<generation>.<suffix>``
    suffix: ClassVar[str]

    @property
    def stored_kind(self) -> str:
        """The kind whose structure holds the vectors now: ``kind``, except for ``auto``, which answers the kind it
        holds (flat or ivf; ``citeline.vectors.segments`` sizes its deltas and over-fetch by it)."""
        ...

    @property
    def dimension(self) -> int:
        """Vector length."""
        ...

    @classmethod
    def build(cls, ids: np.ndarray, vectors: np.ndarray, dimension: int) -> VectorIndex:
        """An index over ``vectors`` (rows) named by ``ids`` (int64, unique)."""
        ...

    @classmethod
    def load(cls, path: Path) -> VectorIndex:
        """Read a file written by :meth:`save`; raises ``IndexCorruptError`` when it cannot be read."""
        ...

    def save(self, path: Path) -> None:
        """Write the index to ``path`` (a temporary name: the store fsyncs and renames it)."""
        ...

    def __len__(self) -> int:
        """Number of vectors."""
        ...

    def ids(self) -> np.ndarray:
        """Every id held, ascending (int64)."""
        ...

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The ``k`` ids nearest ``query`` as ``(id, score)``, best first (ties by id)."""
        ...

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The exact stored vectors of ``ids`` (one row per id, float32); raises ``KeyError`` for an absent id."""
        ...

    def updated(self, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> VectorIndex:
        """A new index: this one without ``remove_ids``, plus ``add_ids``/``add_vectors``. ``self`` is unchanged."""
        ...

    def write_updated(self, path: Path, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> int:
        """Write the file of what :meth:`updated` returns to ``path`` (a kind may stream it instead of building it
        in memory: a compaction of a large index); returns the number of vectors written."""
        ...


KINDS: dict[str, type[VectorIndex]] = {}
#: The kind of an index that predates recorded kinds (0.1.0 wrote only flat files).
DEFAULT_KIND = "flat"
#: The kind of a new index unless one is asked for: flat while small, ivf once large (``citeline.vectors.auto``).
NEW_INDEX_KIND = "auto"

T = TypeVar("T")


def vector_index(name: str) -> Callable[[T], T]:
    """Register a :class:`VectorIndex` class under ``name`` (like ``@parser`` for source formats)."""
    return registering(KINDS, name)


def kind_of(name: str) -> type[VectorIndex]:
    """The registered class of a kind, or a clear error listing the kinds there are."""
    try:
        return KINDS[name]
    except KeyError:
        raise CitelineError(
            f"unknown vector index kind {name!r}; this citeline has {', '.join(sorted(KINDS))}"
        ) from None
