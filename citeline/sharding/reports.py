"""``status`` and ``verify`` of a sharded root: each shard's answer, asked where the shard is, and the root's sums.

A client that sees the shards' folders asks them itself. A Dask client that sees only ``shards.json`` (each shard
on its worker's own disk: ``ShardedIndex.open`` with ``dask_address``) asks each shard's worker
(``shard_worker.shard_status`` and ``shard_worker.shard_check``, placed as searches are: ``shard_remote``). A client
with neither gets one line saying where to run the command.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from citeline.errors import IndexNotFoundError
from citeline.store.catalog import IndexStatus
from citeline.store.ledger import RunSummary
from citeline.store.verify import VerifyReport

T = TypeVar("T")


@dataclass(frozen=True)
class ShardedStatus(IndexStatus):
    """``citeline status`` of a sharded index: the sums, and each shard's generation (now, and as the manifest
    recorded it after the last run)."""

    shards: int = 1
    shard_generations: list[int] = field(default_factory=list)
    manifest_generations: list[int] = field(default_factory=list)


def not_here(root: Path, command: str) -> IndexNotFoundError:
    """The one line for a command that needs shard folders this process does not see."""
    return IndexNotFoundError(
        f"{root} has only its shards.json here, not its shard-NNN folders; run `citeline {command}` on the machine "
        "that holds them (or give --dask-address, with which status and verify ask the shards' Dask workers)"
    )


def each_shard(
    root: Path, parts: Sequence[Any], dask: Any, command: str, local: Callable[[int, Any], T], remote: Callable[..., T]
) -> list[T]:
    """``local(number, part)`` of every shard opened here; or, with only the manifest and a Dask connection,
    ``remote(shard_dir, number)`` as a task on each shard's worker (all at once); else :func:`not_here`."""
    if parts:
        return [local(number, part) for number, part in enumerate(parts)]
    if dask is None or not dask.placement.shards:
        raise not_here(root, command)
    dirs = [str((root / f"shard-{number:03d}").absolute()) for number in range(dask.placement.shards)]
    with ThreadPoolExecutor(max_workers=len(dirs)) as pool:
        futures = [pool.submit(dask.placement.run, n, remote, path, n) for n, path in enumerate(dirs)]
        return [future.result() for future in futures]


def merged_status(
    root: Path, statuses: Sequence[IndexStatus], last_run: RunSummary | None, manifest_generations: list[int]
) -> ShardedStatus:
    """The shards' counts added up, the first shard's model and settings, each shard's generation."""
    first = statuses[0]
    return ShardedStatus(
        path=str(root),
        documents=sum(status.documents for status in statuses),
        chunks=sum(status.chunks for status in statuses),
        model=first.model,
        backend=first.backend,
        model_fingerprint=first.model_fingerprint,
        dimension=first.dimension,
        generation=sum(status.generation for status in statuses),
        max_tokens=first.max_tokens,
        overlap_tokens=first.overlap_tokens,
        last_run=last_run,
        shards=len(statuses),
        shard_generations=[status.generation for status in statuses],
        manifest_generations=list(manifest_generations),
    )


def merged_report(
    root: Path, names: list[str], checked: Sequence[tuple[VerifyReport, list[str]]], recorded: list[int]
) -> VerifyReport:
    """One report of every shard's invariants (``checked``: each shard's report and its documents that belong in
    other shards), and the root's own: each shard at the generation the manifest ``recorded``."""
    reports = [report for report, _ in checked]
    problems = [
        f"{name}: {problem}" for name, report in zip(names, reports, strict=True) for problem in report.problems
    ]
    for name, (_, misplaced) in zip(names, checked, strict=True):
        if misplaced:
            problems.append(f"{name}: {len(misplaced)} documents belong in other shards ({misplaced[:3]})")
    now = [report.generation for report in reports]
    if now != recorded:
        problems.append(
            f"shard generations {now}, the manifest records {recorded} (a run stopped part "
            "way: run the same `citeline ingest` again)"
        )
    invariants: dict[str, list[str]] = {}
    for name, report in zip(names, reports, strict=True):
        for invariant, found in report.invariants.items():
            invariants.setdefault(invariant, []).extend(f"{name}: {problem}" for problem in found)
    checksums = [report.checksum_ok for report in reports]
    return VerifyReport(
        path=str(root),
        generation=sum(now),
        chunks=sum(report.chunks for report in reports),
        vector_count=sum(report.vector_count for report in reports),
        faiss_file=f"{names[0]}/{Path(reports[0].faiss_file).name} (and the other shards')",
        faiss_present=all(report.faiss_present for report in reports),
        faiss_ntotal=sum(report.faiss_ntotal or 0 for report in reports),
        ids_equal=all(report.ids_equal for report in reports),
        vectors_equal=all(report.vectors_equal for report in reports),
        checksum_ok=None if None in checksums else all(checksums),
        dangling_chunks=sum(report.dangling_chunks for report in reports),
        bm25_dir=f"{names[0]}/{Path(reports[0].bm25_dir).name} (and the other shards')",
        bm25_present=all(report.bm25_present for report in reports),
        bm25_ids_equal=all(report.bm25_ids_equal for report in reports),
        orphans=[f"{name}/{orphan}" for name, report in zip(names, reports, strict=True) for orphan in report.orphans],
        problems=problems,
        invariants=invariants,
    )
