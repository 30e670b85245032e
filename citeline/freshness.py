"""Which discovered files need not be read again: those whose size and modification time are still what they were
when their documents were indexed, as make and rsync decide.

A run used to parse every file to compare content hashes, so an unchanged re-run cost what the corpus costs to
parse: 1.86 CPU-s at 100k chunks (46 JSONL files of 1,000 records), about ten times that at 1M, which is most of a
one-document update (bench/scale.py). A file is skipped only when every document stored from it recorded the
file's current size and modification time, and the file had been left alone for :data:`SETTLED_SECONDS` when
they were indexed (a file written in the same tick as it was read, on a filesystem with coarse timestamps, could
change again without its time moving: git's "racy" case). A skipped file's documents count as unchanged; one that
failed to parse has no stored documents and is read again. ``touch`` a file to make the next run read it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from citeline.planning import DocumentKey
from citeline.sources import SourceFile
from citeline.store import catalog
from citeline.store import documents as stored_documents

#: How long a file must have been unmodified when it was indexed for its time and size to vouch for it.
SETTLED_SECONDS = 2.0


def unchanged_files(
    index_dir: Path, roots: Sequence[str], files: Sequence[SourceFile]
) -> tuple[list[DocumentKey], list[SourceFile]]:
    """The keys of the stored documents of files that need not be read again, and the files that must be."""
    if not files or not catalog.db_path(index_dir).exists():
        return [], list(files)
    with contextlib.closing(catalog.connect(index_dir, read_only=True)) as connection:
        stored = stored_documents.file_fingerprints(connection, sorted(set(roots)))
    keys: list[DocumentKey] = []
    to_read: list[SourceFile] = []
    for source in files:
        documents = stored.get((source.root, source.source_id))
        try:
            stat = os.stat(source.path)
        except OSError:
            documents = None  # parsing will report it
        if documents and all(
            size == stat.st_size and mtime == stat.st_mtime and stat.st_mtime < indexed - SETTLED_SECONDS
            for _, _, size, mtime, indexed in documents
        ):
            keys += [
                DocumentKey(doc_id, content_hash, source.root, source.source_id, 0)
                for doc_id, content_hash, *_ in documents
            ]
        else:
            to_read.append(source)
    return keys, to_read
