"""Merging lexical segments into one, written straight to its folder a range of terms at a time.

A merge (ten segments of a size tier) or a compaction (every segment, past a quarter deleted) used to gather every
posting of its segments in memory and sort them at once: tens of bytes a posting at the peak (term, document and count
as int64, the sort order, the sorted copies), gigabytes for a large merge at 1M chunks
(docs/scale.md#choices-measured-in-the-code). Here the postings of one range of term hashes (:data:`GROUP_POSTINGS` at
most) are read from each segment (with ``pread``-like reads, not through the memory maps, so the files' pages never
count towards the process's resident memory), renumbered, sorted and appended to the new segment's ``postings.npy`` and
``tfs.npy``,
whose lengths are counted first. The result is array for array the segment :meth:`Segment.build` makes of the
live chunks' texts (``tests/index/test_incremental_commits.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from citeline.lexical.segments import Part, Segment

#: Postings merged at once: about 40 bytes each while a range is sorted (160 MB).
GROUP_POSTINGS = 4_000_000


def write_merged(parts: Sequence[Part], directory: Path) -> Segment:
    """Write one segment holding the live documents of ``parts`` into ``directory``; returns it memory-mapped."""
    directory.mkdir(parents=True, exist_ok=True)
    segments = [part.segment for part in parts]
    ids = np.concatenate([part.segment.chunk_ids[part.live] for part in parts] or [np.zeros(0, np.int64)])
    if len(np.unique(ids)) != len(ids):
        raise ValueError("a chunk id occurs twice in one segment")
    order = np.argsort(ids, kind="stable")
    position = np.empty(len(ids), dtype=np.int64)
    position[order] = np.arange(len(ids))
    remaps, offset = [], 0
    for part in parts:
        remap = np.full(len(part.segment), -1, dtype=np.int64)
        count = part.live_count
        remap[part.live] = position[offset : offset + count]
        offset += count
        remaps.append(remap)
    lengths = np.concatenate([part.segment.lengths[part.live] for part in parts] or [np.zeros(0, np.int32)])
    np.save(directory / "chunk_ids.npy", np.ascontiguousarray(ids[order], dtype=np.int64), allow_pickle=False)
    np.save(directory / "lengths.npy", np.ascontiguousarray(lengths[order], dtype=np.int32), allow_pickle=False)
    del ids, order, position, lengths
    terms = np.unique(np.concatenate([np.asarray(s.terms) for s in segments] or [np.zeros(0, np.uint64)]))
    weight = np.zeros(len(terms) + 1, dtype=np.int64)
    for segment in segments:
        weight[np.searchsorted(terms, segment.terms) + 1] += np.diff(segment.indptr)  # a segment's terms are unique
    bounds = _groups(np.cumsum(weight))
    total = sum(_live_postings(segment, remap) for segment, remap in zip(segments, remaps, strict=True))
    out_terms, out_counts = [], []
    with (directory / "postings.npy").open("wb") as postings, (directory / "tfs.npy").open("wb") as tfs:
        _header(postings, np.int32, total)
        _header(tfs, np.uint16, total)
        for first, last in itertools.pairwise(bounds):
            keys, docs, counts = _range(segments, remaps, terms[first], terms[last - 1])
            sort = np.lexsort((docs, keys))
            keys = keys[sort]
            new_term = np.ones(len(keys), dtype=bool)
            new_term[1:] = keys[1:] != keys[:-1]
            starts = np.flatnonzero(new_term)
            out_terms.append(keys[starts])
            out_counts.append(np.diff(np.append(starts, len(keys))))
            postings.write(docs[sort].astype("<i4").tobytes())
            tfs.write(counts[sort].astype("<u2").tobytes())
    merged_terms = np.concatenate(out_terms or [np.zeros(0, np.uint64)]).astype(np.uint64)
    counts = np.concatenate(out_counts or [np.zeros(0, np.int64)])
    np.save(directory / "terms.npy", merged_terms, allow_pickle=False)
    np.save(directory / "indptr.npy", np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), allow_pickle=False)
    return Segment.load(directory)


def _groups(cumulative: np.ndarray) -> list[int]:
    """Term index bounds ``[0, ..., len(terms)]`` of ranges holding about :data:`GROUP_POSTINGS` postings each."""
    count = len(cumulative) - 1
    bounds = [0]
    while bounds[-1] < count:
        start = bounds[-1]
        end = int(np.searchsorted(cumulative, cumulative[start] + GROUP_POSTINGS, side="right")) - 1
        bounds.append(min(count, max(end, start + 1)))
    return bounds


def _slice(array: np.ndarray, start: int, stop: int) -> np.ndarray:
    """``array[start:stop]`` read from its file when it is memory-mapped (the map's pages are left untouched)."""
    if isinstance(array, np.memmap) and array.filename is not None and stop > start:
        with open(array.filename, "rb") as handle:
            handle.seek(array.offset + start * array.itemsize)
            return np.fromfile(handle, dtype=array.dtype, count=stop - start)
    return np.asarray(array[start:stop])


def _live_postings(segment: Segment, remap: np.ndarray) -> int:
    count = 0
    for start in range(0, len(segment.postings), GROUP_POSTINGS):
        count += int(np.count_nonzero(remap[_slice(segment.postings, start, start + GROUP_POSTINGS)] >= 0))
    return count


def _range(
    segments: Sequence[Segment], remaps: Sequence[np.ndarray], low: np.uint64, high: np.uint64
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The live postings of terms ``low..high`` (inclusive) of every segment: term hashes, new document positions,
    term frequencies."""
    keys, docs, counts = [], [], []
    for segment, remap in zip(segments, remaps, strict=True):
        first = int(np.searchsorted(segment.terms, low, side="left"))
        last = int(np.searchsorted(segment.terms, high, side="right"))
        if last <= first:
            continue
        indptr = np.asarray(segment.indptr[first : last + 1])
        begin, end = int(indptr[0]), int(indptr[-1])
        new = remap[_slice(segment.postings, begin, end)]
        keep = new >= 0
        keys.append(np.repeat(np.asarray(segment.terms[first:last]), np.diff(indptr))[keep])
        docs.append(new[keep])
        counts.append(_slice(segment.tfs, begin, end)[keep])
    if not keys:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.uint16)
    return np.concatenate(keys), np.concatenate(docs), np.concatenate(counts)


def _header(handle: BinaryIO, dtype: type, length: int) -> None:
    """The ``.npy`` header of a 1-D array of ``length`` items (the data follows as it is merged)."""
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (length,)}
    np.lib.format.write_array_header_1_0(handle, header)
