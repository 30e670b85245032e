"""citeline: a folder of documents in, searchable passages with exact provenance out."""
# ruff: noqa: E402  (the imports below run with the collector paused)

import gc

# Importing the package makes no garbage worth collecting, yet its allocations set off about 110 collections:
# 0.04-0.06 CPU-s of a cold `citeline search` (about 1.1 s). The collector is paused meanwhile; then what exists is
# moved to the permanent generation (gc.freeze: modules, classes, functions, which live as long as the process),
# since otherwise the first collection after the pause walks all of it (one 0.06 CPU-s collection, measured).
_collecting = gc.isenabled()
gc.disable()

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

if _collecting:
    gc.freeze()
    gc.enable()

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
