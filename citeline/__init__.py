"""citeline: a folder of documents in, searchable passages with exact provenance out."""

from citeline.errors import (
    CitelineError,
    IndexCorruptError,
    IndexLockedError,
    IndexMismatchError,
    IndexNotFoundError,
    IndexRepairedWarning,
    IndexWriteError,
    QueryError,
    RemovalRefusedError,
    SettingsError,
    SourceError,
)
from citeline.index import Index
from citeline.query.plan import SearchRequest
from citeline.query.results import SearchResult
from citeline.store.catalog import IndexStatus
from citeline.store.documents import ChunkSpan, DocumentDetail, DocumentInfo, Facet, FacetValue
from citeline.store.ledger import RunSummary


def __getattr__(name: str) -> object:
    """``from citeline import ShardedIndex`` imports ``citeline.sharding.index`` then."""
    if name == "ShardedIndex":
        from citeline.sharding.index import ShardedIndex

        return ShardedIndex
    raise AttributeError(f"module 'citeline' has no attribute {name!r}")


__all__ = [
    "ChunkSpan",
    "CitelineError",
    "DocumentDetail",
    "DocumentInfo",
    "Facet",
    "FacetValue",
    "Index",
    "IndexCorruptError",
    "IndexLockedError",
    "IndexMismatchError",
    "IndexNotFoundError",
    "IndexRepairedWarning",
    "IndexStatus",
    "IndexWriteError",
    "QueryError",
    "RemovalRefusedError",
    "RunSummary",
    "SearchRequest",
    "SearchResult",
    "SettingsError",
    "ShardedIndex",
    "SourceError",
]
__version__ = "0.1.0"
