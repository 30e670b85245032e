"""The index a run works on, for every ingestion path (``citeline ingest``, ``ingest -``, the Prefect flow).

A dry run writes nothing, and that includes the index itself: ``Index.create`` would create the directory and an
empty index where none exists yet. So a dry run on a path that holds no index plans against an empty index of the
same settings in a temporary folder, removed afterwards: every document is planned as new, and the path is left
as it was (missing, or without an index).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from citeline.index import SHARDS_MANIFEST, Index
from citeline.store import catalog


def holds_index(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds an index (a plain index's catalog or a sharded root's manifest)."""
    return catalog.db_path(Path(path)).exists() or (Path(path) / SHARDS_MANIFEST).exists()


@contextlib.contextmanager
def index_for_run(
    path: str | os.PathLike[str], *, dry_run: bool, create: Callable[..., Index] | None = None, **settings: Any
) -> Iterator[Index]:
    """``create(path, **settings)`` (default ``Index.create``); for a dry run where ``path`` holds no index, an
    empty index of those settings in a temporary folder (removed on exit), so that the dry run creates nothing at
    ``path``. ``create``: the caller's front class (the flow's, which its tests replace)."""
    create = create or Index.create
    if not dry_run or holds_index(path):
        yield create(path, **settings)
        return
    scratch = tempfile.mkdtemp(prefix="citeline-dry-run-")
    try:
        yield create(Path(scratch) / Path(path).name, **settings)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
