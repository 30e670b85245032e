"""The index's two OS file locks: the single-writer lock (``write.lock``, held for a whole run) and the database
lock (``db.lock``, bracketing every DuckDB connection). Both are ``flock`` locks, so a killed process releases
them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from citeline.errors import IndexLockedError

WRITE_LOCK_FILE = "write.lock"
DB_LOCK_FILE = "db.lock"


@contextlib.contextmanager
def writer_lock(index_dir: Path, *, wait: float | None = None) -> Iterator[None]:
    """Hold the index's single-writer lock for the duration of the block.

    ``wait=None`` waits as long as it takes; a number waits that many seconds and then raises
    :class:`IndexLockedError`. The lock is an OS file lock, so a killed writer releases it.
    """
    index_dir.mkdir(parents=True, exist_ok=True)
    handle = (index_dir / WRITE_LOCK_FILE).open("a+")
    try:
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise IndexLockedError(
                        f"another process is writing to {index_dir}; wait for it to finish "
                        "(or pass a longer --wait)"
                    ) from None
                time.sleep(0.1)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()


def database_lock(index_dir: Path, *, exclusive: bool, deadline: float, what: str) -> BinaryIO | None:
    """Take the index's database lock, shared for readers and exclusive for a writer; None if it cannot exist.

    DuckDB's own file lock is an fcntl lock, which POSIX drops for the whole process as soon as *any* descriptor
    of the file is closed in that process (checked: a plain open() and close() of meta.duckdb beside a writing
    connection lets another process's reader in). The concurrency trials caught a reader reading a writer's
    half-written file that way ("Could not read enough bytes"), about once in 500 queries. An flock belongs to
    one open file description and is immune to that, so every DuckDB connection is bracketed by one. A writer
    holds it only while its connection is open (while it plans and commits), so readers wait at most for one
    commit. ``what`` names the database file in the error.
    """
    path = index_dir / DB_LOCK_FILE
    handle: BinaryIO
    try:
        handle = path.open("a+b")
    except FileNotFoundError:
        return None  # no index directory yet: the caller reports that
    except PermissionError:
        try:
            handle = path.open("rb")  # a read-only index directory still takes a shared lock
        except FileNotFoundError:
            return None  # nobody can be writing to a read-only directory without the lock file
    delay = 0.002
    while True:
        try:
            fcntl.flock(handle.fileno(), (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                raise IndexLockedError(
                    f"{what} stayed locked by another process's commit; try again, or look for a stuck citeline "
                    "process"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
