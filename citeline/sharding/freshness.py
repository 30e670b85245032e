"""File-level freshness and the plan of a sharded run, decided once over every shard before anything is parsed.

A file's documents are spread over the shards (a JSONL file's records go wherever their ids route), so a file can
be left unread only when every document stored from it, in every shard, recorded its current size and modification
time (``citeline.ingest.freshness``'s rule, asked of each shard's catalog in SQL: :func:`unchanged_files`). Before this,
each shard planned freshness on its own after the root had parsed every file, so an unchanged re-run read every
file's contents.

A file's documents are committed together within a shard, but not across shards: a run killed (or a shard failed)
after some shards committed could leave a file whose stored documents all look fresh while the records routed to
the shards that did not commit are missing. So the root skips files only while the last run finished in every
shard (:func:`skipping_is_safe`: the manifest's last run did not fail and every shard is at the generation the
manifest recorded); otherwise it parses every file, as before, and the re-run that completes the shards makes
skipping safe again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citeline.ingest import freshness, removal
from citeline.ingest.planning import ParsedBatch, Plan
from citeline.sources.discovery import Discovery
from citeline.sources.parsers import SourceFile
from citeline.store import catalog, file_stats

#: The key of a manifest's run entry that ``ShardedIndex.verify`` recorded for a run that stopped part way.
RECOVERED = "recovered"


def skipping_is_safe(manifest_runs: Sequence[dict[str, Any]], recorded: Sequence[int], now: Sequence[int]) -> bool:
    """True when no file can have been committed in some shards and not in others: the manifest's last run (if
    any) did not fail nor stop part way, and every shard is at the generation the manifest recorded after it."""
    last = manifest_runs[-1] if manifest_runs else {}
    # A run that stopped part way and was recorded by verify afterwards ("recovered": ShardedIndex.verify) is as
    # unsafe as a failed one: some shards may hold a file's new documents and others its old ones.
    last_failed = last.get("status") == "failed" or bool(last.get(RECOVERED))
    return not last_failed and list(recorded) == list(now)


@dataclass
class Freshness:
    """What the root learnt of every shard's catalog before parsing."""

    #: ``(root, source_id)`` of the files no shard needs read (every document stored from them, in every shard,
    #: recorded the file's current size and time)
    skipped: list[tuple[str, str]]
    #: how many documents of those files each shard holds
    per_shard: list[int]
    #: the files that must be read
    to_read: list[SourceFile]
    #: each shard's committed generation, read on the same connection
    generations: list[int]
    #: every file the run found
    files: list[SourceFile] = field(default_factory=list)
    #: per shard, the files it holds documents of whose recorded stat is not the current one: a shard whose
    #: stale files the run reads must record their stat (:meth:`must_record`), even with nothing else to do
    stale: list[set[tuple[str, str]]] = field(default_factory=list)

    def read_all(self) -> Freshness:
        """The same, with every file to be read (when :func:`skipping_is_safe` says no)."""
        return Freshness([], [0] * len(self.per_shard), list(self.files), self.generations, self.files, self.stale)

    def must_record(self, read: ParsedBatch) -> list[bool]:
        """Per shard, whether a file ``read`` parsed whole is stale in it. Such a shard runs even when its
        documents are all unchanged, so that its ``files`` row gets the new stat: otherwise a file edited in
        one record (or touched) would stay stale in the shards holding its other records, and be read again on
        every run."""
        read_keys = {(stat.source_root, stat.source_file) for stat in read.read_files}
        return [bool(read_keys & stale) for stale in self.stale]


def unchanged_files(shard_dirs: Sequence[Path], files: Sequence[SourceFile]) -> Freshness:
    """Which files no shard needs read again, and each shard's generation (one read-only connection a shard)."""
    per_shard, generations = [0] * len(shard_dirs), [0] * len(shard_dirs)
    found = freshness.found_files(files)
    fresh: dict[tuple[str, str], dict[int, int]] = {}
    stale_in: list[set[tuple[str, str]]] = [set() for _ in shard_dirs]
    for number, directory in enumerate(shard_dirs):
        if not catalog.db_path(directory).exists():
            continue
        with contextlib.closing(catalog.connect(directory, read_only=True)) as connection:
            generations[number] = int(catalog.read_meta(connection)["generation"])
            rows = file_stats.fresh_files(connection, found, freshness.SETTLED_SECONDS) if files else []
        for root, source_file, documents, is_fresh in rows:
            if is_fresh:
                fresh.setdefault((root, source_file), {})[number] = documents
            else:
                stale_in[number].add((root, source_file))
    stale = set().union(*stale_in)
    skipped = sorted(key for key in fresh if key not in stale)
    for key in skipped:
        for number, documents in fresh[key].items():
            per_shard[number] += documents
    unread = set(skipped)
    to_read = [source for source in files if (source.root, source.source_id) not in unread]
    return Freshness(skipped, per_shard, to_read, generations, list(files), stale_in)


def with_fresh(parts: list[ParsedBatch], skipped: list[tuple[str, str]], per_shard: Sequence[int]) -> None:
    """Give each shard's part of the run the files nobody reads and the count of their documents it holds."""
    for part, documents in zip(parts, per_shard, strict=True):
        part.fresh_files = list(skipped)
        part.fresh_documents = documents


def merged_plan(
    shard_dirs: Sequence[Path], roots: list[str], discovery: Discovery, parts: list[ParsedBatch]
) -> tuple[Plan, list[bool]]:
    """The plan of the whole run (read-only): every shard's plan (``freshness.plan``: only the documents of files
    read or vanished are loaded), added up, for the removal guard and dry runs; and which shards have nothing to
    do (nothing to index or remove: their run would commit nothing, so it is not started)."""
    pairs = zip(shard_dirs, parts, strict=True)
    plans = [freshness.plan(directory, roots, discovery, part) for directory, part in pairs]
    idle = [not (plan.to_index or plan.pending or plan.remove_doc_ids) for plan in plans]
    for part, plan in zip(parts, plans, strict=True):
        if part.removing:  # each shard's run removes what it was planned to (its own plan then matches it all)
            part.removing = removal.only(plan.removing)
    total = plans[0]
    # all or nothing over the root: a selector is unmatched when no shard matches it
    total.unmatched = [shown for shown in total.unmatched if all(shown in plan.unmatched for plan in plans)]
    for plan in plans[1:]:
        total.to_index += plan.to_index
        total.remove_doc_ids += plan.remove_doc_ids
        total.removing += plan.removing
        total.added, total.updated, total.unchanged = (
            total.added + plan.added,
            total.updated + plan.updated,
            total.unchanged + plan.unchanged,
        )
        for mine, theirs in (
            (total.stored_by_root, plan.stored_by_root),
            (total.vanished_by_root, plan.vanished_by_root),
        ):
            for root, count in theirs.items():
                mine[root] = mine.get(root, 0) + count
    total.removing.sort(key=lambda record: (record["source_path"], record["doc_id"]))
    return total, idle
