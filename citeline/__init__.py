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
from citeline.results import SearchResult
from citeline.shards import ShardedIndex  # registers the sharded front class with Index.open/create
from citeline.store.catalog import IndexStatus
from citeline.store.ledger import RunSummary

__all__ = [
    "CitelineError",
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
    "SearchResult",
    "SettingsError",
    "ShardedIndex",
    "SourceError",
]
__version__ = "0.1.0"
