"""Publishing one artifact crash-safely: the only code in citeline that renames index files into place.

``publish(artifact, final, write)``: write the artifact (a file or a folder) under a temporary name and fsync it
(:func:`write_staged`), rename it into place and fsync the directory (:func:`swap_in`). The caller
(``store.generation``) records its size and checksum (:func:`artifact_bytes`, :func:`artifact_checksum`) in the
transaction that publishes the generation. The crash trials wrap :func:`write_staged` and :func:`swap_in`, whose
first argument names the artifact, so every stage of every artifact is a kill point.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def file_checksum(path: Path) -> str:
    """SHA-256 of a file, hex encoded, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def folder_checksum(path: Path) -> str:
    """SHA-256 over the names and SHA-256s of a folder's files, in name order."""
    digest = hashlib.sha256()
    for entry in sorted(path.iterdir()):
        digest.update(f"{entry.name}\0{file_checksum(entry)}\n".encode())
    return digest.hexdigest()


def artifact_checksum(path: Path) -> str:
    """The checksum recorded for an artifact: of the file, or of the folder's files."""
    return folder_checksum(path) if path.is_dir() else file_checksum(path)


#: Checksums this process computed, keyed by the artifact's files' identities (inode, size, mtime): index files are
#: immutable once published, so a writer's quick check before each commit need not hash the same segments again
#: (at 100k chunks the lexical segments' hashing was 0.43 of a one-document commit's 2.3 wall-s). ``verify``
#: always hashes (:func:`artifact_checksum`).
_KNOWN: dict[tuple[Any, ...], str] = {}
_KNOWN_MAX = 4_096


def _identity(path: Path) -> tuple[Any, ...]:
    identities: list[Any] = [str(path)]
    for entry in sorted(path.iterdir()) if path.is_dir() else [path]:
        stat = entry.stat()
        identities.append((entry.name, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return tuple(identities)


def known_checksum(path: Path) -> str:
    """:func:`artifact_checksum`, remembered for files this process has hashed and that have not changed since."""
    key = _identity(path)
    if key not in _KNOWN:
        if len(_KNOWN) >= _KNOWN_MAX:
            _KNOWN.clear()
        _KNOWN[key] = artifact_checksum(path)
    return _KNOWN[key]


def artifact_bytes(path: Path) -> int:
    """Size of an artifact on disk (a folder: the sum of its files)."""
    return sum(entry.stat().st_size for entry in path.iterdir()) if path.is_dir() else path.stat().st_size


def _fsync_directory(path: Path) -> None:
    directory = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def write_staged(artifact: str, tmp: Path, write: Callable[[Path], None]) -> None:
    """Write an artifact under its temporary name and fsync it (its files and, for a folder, the folder)."""
    _remove(tmp)
    write(tmp)
    entries = sorted(tmp.iterdir()) if tmp.is_dir() else [tmp]
    for entry in entries:
        with entry.open("rb") as handle:
            os.fsync(handle.fileno())
    if tmp.is_dir():
        _fsync_directory(tmp)


def swap_in(artifact: str, tmp: Path, final: Path) -> None:
    """Rename a staged artifact into place and fsync the directory.

    A folder of the same name (a rebuild of the current generation) is first moved aside and deleted after the
    rename. Readers in other processes never see the moment in between: the caller holds DuckDB's write
    connection throughout, and readers open DuckDB before they read artifacts.
    """
    old = final.with_name(final.name + ".tmp-old")
    if final.is_dir():
        _remove(old)
        os.replace(final, old)
    os.replace(tmp, final)
    _fsync_directory(final.parent)
    _remove(old)


def publish(artifact: str, final: Path, write: Callable[[Path], None]) -> None:
    """Publish one artifact crash-safely: write to a temporary name, fsync, rename into place, fsync the directory.

    ``write(path)`` writes the artifact (a file or a folder) at ``path``.
    """
    tmp = final.with_name(final.name + ".tmp")
    write_staged(artifact, tmp, write)
    swap_in(artifact, tmp, final)


def rename_into_place(staged: Path, final: Path) -> None:
    """Rename a complete file (a new index's ``meta.duckdb``, built under another name) into place and fsync the
    directory, so a crash leaves either no file or the whole one."""
    os.replace(staged, final)
    _fsync_directory(final.parent)


def replace_small_file(final: Path, data: bytes) -> None:
    """Write a small file that its readers check for themselves (``meta.json``: stamped, ``store.meta_cache``)
    under a temporary name, then rename it into place: readers see the old file or the new one, never half of
    it. Not fsynced and no kill point: it is no part of a generation, and after a crash a reader that finds it
    empty, unreadable or stale reads the catalog instead."""
    tmp = final.with_name(f"{final.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, final)
