"""The index's two OS locks: the single-writer lock (held for a whole run) and the database lock (``db.lock``,
bracketing every DuckDB connection). Both are ``flock`` locks, so a killed process releases them.

The writer lock is an flock on the index directory itself, not on a file in it: deleting a lock file while a
writer runs (``rm write.lock``, a cleanup script) let a second writer lock a new file of the same name, and both
committed (802 rows for 402 documents). A directory cannot be removed while it holds the index. Filesystems
that refuse an flock on a directory (some network filesystems) fall back to ``write.lock``, re-checked after
locking (see :func:`_lock_file`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from citeline.errors import IndexLockedError

WRITE_LOCK_FILE = "write.lock"
DB_LOCK_FILE = "db.lock"
DB_GATE_FILE = "db.gate"  #: taken before ``db.lock``, so that a waiting writer goes before new readers


def _retry_until(try_lock: Callable[[], bool], deadline: float | None, fail: Callable[[], Exception]) -> None:
    # Poll a non-blocking lock until it is taken or the deadline passes (None: forever).
    delay = 0.002
    while not try_lock():
        if deadline is not None and time.monotonic() >= deadline:
            raise fail()
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _flock(descriptor: int, operation: int) -> bool:
    try:
        fcntl.flock(descriptor, operation | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _same_file(descriptor: int, path: Path) -> bool:
    # True when ``path`` still names the file ``descriptor`` has open (it was not deleted or replaced meanwhile).
    try:
        current = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (opened.st_dev, opened.st_ino) == (current.st_dev, current.st_ino)


@contextlib.contextmanager
def writer_lock(index_dir: Path, *, wait: float | None = None) -> Iterator[None]:
    """Hold the index's single-writer lock for the duration of the block.

    ``wait=None`` waits as long as it takes; a number waits that many seconds and then raises
    :class:`IndexLockedError`. The lock is an OS lock on the index directory, so a killed writer releases it and
    no file's deletion can release it early.
    """
    index_dir.mkdir(parents=True, exist_ok=True)
    deadline = None if wait is None else time.monotonic() + wait

    def locked_out() -> Exception:
        return IndexLockedError(
            f"another process is writing to {index_dir}; wait for it to finish (or pass a longer --wait)"
        )

    descriptor = os.open(index_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            _retry_until(lambda: _flock(descriptor, fcntl.LOCK_EX), deadline, locked_out)
        except OSError as exc:
            if exc.errno not in (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.close(descriptor)  # no flock on directories here: lock a file that is re-checked after locking
            descriptor = _lock_file(index_dir / WRITE_LOCK_FILE, fcntl.LOCK_EX, deadline, locked_out)
        _note_holder(index_dir / WRITE_LOCK_FILE)
        yield
    finally:
        os.close(descriptor)  # releases the flock


@contextlib.contextmanager
def file_lock(path: Path, *, wait: float, what: str) -> Iterator[None]:
    """Hold an exclusive flock on the lock file ``path`` (created if missing) for the block: for a small file that
    is read, changed and written back whole (the tokens file), so that two writers at once do not each write
    their own change over the other's. Waits ``wait`` seconds, then raises :class:`IndexLockedError` naming
    ``what``."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def locked_out() -> Exception:
        return IndexLockedError(f"{what} stayed locked by another process for {wait:g} s ({path}); try again")

    descriptor = _lock_file(path, fcntl.LOCK_EX, time.monotonic() + wait, locked_out)
    try:
        yield
    finally:
        os.close(descriptor)  # releases the flock


def _note_holder(path: Path) -> None:
    """Write ``<pid> <start time>`` into ``write.lock``, so a waiting run can say who holds the index (the file
    only informs: the lock itself is on the directory, or on this file's descriptor, never on its contents)."""
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with contextlib.suppress(OSError), path.open("a+") as handle:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()} {started}\n")


def _lock_file(path: Path, operation: int, deadline: float | None, fail: Callable[[], Exception]) -> int:
    """Take an flock on the file at ``path`` (created if missing) and return its descriptor.

    After locking, the path must still name the locked file: if it was deleted or replaced between the open and
    the lock, the lock protects nothing, so it is dropped and taken again on the file now there.
    """
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _retry_until(functools.partial(_flock, descriptor, operation), deadline, fail)
        except BaseException:
            os.close(descriptor)
            raise
        if _same_file(descriptor, path):
            return descriptor
        os.close(descriptor)


def _open_lock_file(path: Path) -> BinaryIO | None:
    # A lock file opened for flock (created if missing); read-only in a read-only directory; None if it cannot exist.
    try:
        return path.open("a+b")
    except FileNotFoundError:
        return None  # no index directory yet: the caller reports that
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        try:
            return path.open("rb")  # a read-only index directory still takes a shared lock
        except FileNotFoundError:
            return None  # nobody can be writing to a read-only directory without the lock file


def _take(path: Path, operation: int, deadline: float, fail: Callable[[], Exception]) -> BinaryIO | None:
    # An flock on the file at ``path``, re-taken if the path was deleted or replaced between the open and the lock.
    while True:
        handle = _open_lock_file(path)
        if handle is None:
            return None
        try:
            _retry_until(functools.partial(_flock, handle.fileno(), operation), deadline, fail)
        except BaseException:
            handle.close()
            raise
        if _same_file(handle.fileno(), path):
            return handle
        handle.close()


def database_lock(index_dir: Path, *, exclusive: bool, deadline: float, what: str) -> BinaryIO | None:
    """Take the index's database lock, shared for readers and exclusive for a writer; None if it cannot exist.

    DuckDB's own file lock is an fcntl lock, which POSIX drops for the whole process as soon as *any* descriptor
    of the file is closed in that process (checked: a plain open() and close() of meta.duckdb beside a writing
    connection lets another process's reader in). The concurrency trials caught a reader reading a writer's
    half-written file that way ("Could not read enough bytes"), about once in 500 queries. An flock belongs to
    one open file description and is immune to that, so every DuckDB connection is bracketed by one. A writer
    holds it only while its connection is open (while it plans and commits), so readers wait at most for one
    commit. ``what`` names the database file in the error. After locking, ``db.lock`` must still be the file
    locked (it was not deleted or replaced in between), else the lock is taken again.

    Writers come first: the lock is taken through a gate (``db.gate``), shared by a reader only while it takes
    ``db.lock``, exclusive for a writer until it holds ``db.lock``. Without it, readers whose shared locks
    overlapped (three threads searching and reading documents back to back) kept a writer out until its
    deadline: an ``flock`` grants a new shared lock while an exclusive one waits, and the commit failed with
    "stayed locked" (``tests/index/test_thread_safety.py``). With the gate, new readers wait behind a waiting
    writer, which then waits only for the readers already in.
    """

    def locked_out() -> Exception:
        holders = "readers or another process's commit" if exclusive else "another process's commit"
        return IndexLockedError(f"{what} stayed locked by {holders}; try again, or look for a stuck citeline process")

    gate = _take(index_dir / DB_GATE_FILE, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, deadline, locked_out)
    try:
        return _take(index_dir / DB_LOCK_FILE, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, deadline, locked_out)
    finally:
        if gate is not None:
            gate.close()
