"""Writing an ``ivf`` FAISS file list by list, so that building or compacting an index of any size holds one span
of vectors in memory, never all of them.

``faiss.write_index`` needs the whole index in memory (``ArrayInvertedLists``): at 1M x 384 that is 1.5 GB of lists,
and a compaction used to hold them twice (a copy of the memory-mapped lists to add to, and the copy ``save`` made) next
to the old file's pages it had touched (bench/results/scale-1M.txt; docs/scale.md#choices-measured-in-the-code). Here
the old lists are read with ``pread`` a span at a time (no page of the old file is mapped into this process), each
vector is assigned to its list, and the new file is written in place with
``pwrite`` at offsets known up front.

The file is byte for byte what ``IVFIndex.save`` wrote with FAISS (``faiss.write_index`` of an ``IndexIVFFlat``
with in-memory lists and no direct map, then citeline's id table, appended by ``citeline.vectors.ivf``):
``tests/unit/test_vector_contract.py`` compares the two. The header (dimensions, nprobe, the quantizer) is FAISS's own
serialization of the trained index with empty lists; this module writes what follows it (faiss/impl/index_write.cpp,
``write_direct_map`` and the ``ArrayInvertedLists`` branch of ``write_InvertedLists``):

    direct map:  i8 type (0: none), u64 0 (no array)
    lists:       "ilar", u64 nlist, u64 code size, then "full", u64 nlist, nlist x u64 sizes when more than half
                 the lists hold vectors, else "sprs", u64 2m, m x (u64 list, u64 size); then every non-empty
                 list's codes (float32 rows) followed by its ids (i64)
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

#: Bytes of old lists read per ``pread`` (and so the vectors held at once while copying): 64 MB is 44k vectors of 384
#: dimensions. Larger spans do not copy faster (page cache to page cache; docs/scale.md#choices-measured-in-the-code).
SPAN_BYTES = 64 * 1024 * 1024
#: Vectors assigned to lists per quantizer search when added or re-assigned (FAISS's own add batches by 64k too).
ASSIGN_BATCH = 65_536
#: The tail of FAISS's serialization of an IVF index with no direct map and no vectors in its lists: the direct
#: map (type 0, empty array), then "ilar" lists with no entries.
_EMPTY_TAIL_BYTES = 1 + 8 + 4 + 8 + 8 + 4 + 8
_NO_MAP_TYPE = 0
#: Offsets of ``nlist`` and ``nprobe`` in an IVF file: fourcc, d (i32), ntotal, two dummies (i64), is_trained
#: (u8), metric (i32) for the inner product (no metric argument follows), then nlist and nprobe (u64).
_NLIST_AT, _NPROBE_AT = 37, 45


@dataclass
class Block:
    """Vectors on their way into a new file: their ids, the list each goes to, and how to read the rows (float32,
    one per id; called once, when the block is written)."""

    ids: np.ndarray
    lists: np.ndarray
    read: Callable[[], np.ndarray]


def list_spans(ivf: Any, span_bytes: int = SPAN_BYTES) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The ``(list numbers, list sizes)`` of consecutive non-empty lists of ``ivf``, about ``span_bytes`` at a time."""
    lists = ivf.invlists
    sizes = np.array([lists.list_size(number) for number in range(lists.nlist)], dtype=np.int64)
    numbers = np.flatnonzero(sizes)
    width = int(ivf.code_size) + 8
    start = 0
    while start < len(numbers):
        taken = np.cumsum(sizes[numbers[start:]] * width)
        end = start + max(1, int(np.searchsorted(taken, span_bytes, side="right")))
        yield numbers[start:end], sizes[numbers[start:end]]
        start = end


def read_lists(ivf: Any, path: Path | None, numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ids and vectors (float32 rows) of lists ``numbers`` of ``ivf``, in list order. Lists memory-mapped from
    ``path`` are read with one ``pread`` of the span they occupy, so none of the file's pages count towards this
    process's resident memory; in-memory lists are copied out."""
    lists, code_size = ivf.invlists, int(ivf.code_size)
    dimension = code_size // 4
    mapped: Any = faiss.downcast_InvertedLists(lists)
    sizes = [lists.list_size(int(number)) for number in numbers]
    if path is not None and isinstance(mapped, faiss.OnDiskInvertedLists) and len(numbers):
        entries = [mapped.lists.at(int(number)) for number in numbers]  # type: ignore[attr-defined]
        first = int(entries[0].offset)
        last = int(entries[-1].offset) + int(entries[-1].capacity) * (code_size + 8)
        with path.open("rb") as handle:
            data = os.pread(handle.fileno(), last - first, first)
        if len(data) != last - first:
            raise OSError(f"{path} ended before its inverted lists did")
        codes, ids = [], []
        for entry, size in zip(entries, sizes, strict=True):
            at = int(entry.offset) - first
            codes.append(np.frombuffer(data, np.float32, size * dimension, at))
            ids.append(np.frombuffer(data, np.int64, size, at + int(entry.capacity) * code_size))
    else:
        pairs = list(zip(numbers.tolist(), sizes, strict=True))
        codes = [faiss.rev_swig_ptr(lists.get_codes(n), s * code_size).view(np.float32).copy() for n, s in pairs]
        ids = [faiss.rev_swig_ptr(lists.get_ids(n), s).copy() for n, s in pairs]
    if not len(numbers):
        return np.zeros(0, np.int64), np.zeros((0, dimension), np.float32)
    return np.concatenate(ids).astype(np.int64), np.concatenate(codes).reshape(-1, dimension)


def assigned(quantizer: Any, vectors: np.ndarray) -> np.ndarray:
    """The list each vector goes to: its nearest centroid (what ``IndexIVF.add_with_ids`` assigns)."""
    out = np.empty(len(vectors), dtype=np.int64)
    for start in range(0, len(vectors), ASSIGN_BATCH):
        batch = np.ascontiguousarray(vectors[start : start + ASSIGN_BATCH], dtype=np.float32)
        out[start : start + len(batch)] = quantizer.assign(batch, 1).reshape(-1)
    return out


def write(path: Path, empty: Any, blocks: Iterable[Block]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Write an IVF file at ``path`` holding ``blocks``' vectors, each in its list (in the order given within a
    list); ``empty`` is the trained ``IndexIVFFlat`` (quantizer, nprobe) with empty lists and no direct map.
    Returns where the vectors went: their ids ascending, each one's byte offset in the file and its list."""
    blocks = list(blocks)
    nlist, code_size = int(empty.nlist), int(empty.code_size)
    ids = np.concatenate([block.ids for block in blocks] or [np.zeros(0, np.int64)]).astype(np.int64)
    lists = np.concatenate([block.lists for block in blocks] or [np.zeros(0, np.int64)]).astype(np.int64)
    if len(np.unique(ids)) != len(ids):
        raise ValueError("an added id is already in the index; remove it in the same update")
    sizes = np.bincount(lists, minlength=nlist).astype(np.int64)
    # Each vector's offset in its list: vectors keep the order given within a list.
    by_list = np.argsort(lists, kind="stable")
    first_of_list = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    slots = np.empty(len(ids), dtype=np.int64)
    slots[by_list] = np.arange(len(ids)) - first_of_list[lists[by_list]]
    header = _header(empty, len(ids))
    held = np.flatnonzero(sizes)
    if len(held) > nlist // 2:
        sizes_field = b"full" + struct.pack("<Q", nlist) + sizes.astype("<u8").tobytes()
    else:
        sparse = np.stack([held, sizes[held]], axis=1).astype("<u8")
        sizes_field = b"sprs" + struct.pack("<Q", sparse.size) + sparse.tobytes()
    with path.open("wb") as out:
        out.write(header)
        out.write(struct.pack("<bQ", _NO_MAP_TYPE, 0))
        out.write(b"ilar" + struct.pack("<QQ", nlist, code_size) + sizes_field)
        data_at = out.tell()
        list_at = data_at + np.concatenate([[0], np.cumsum(sizes * (code_size + 8))[:-1]])
        out.truncate(data_at + int(np.sum(sizes * (code_size + 8))))
        done = 0
        for block, start in zip(blocks, np.cumsum([0] + [len(b.ids) for b in blocks[:-1]]), strict=True):
            count = len(block.ids)
            vectors = np.ascontiguousarray(block.read(), dtype=np.float32)
            if vectors.shape != (count, code_size // 4):
                raise ValueError(f"a block of {count} ids read {vectors.shape} vectors")
            _write_runs(
                out.fileno(),
                vectors,
                block.ids,
                lists[start : start + count],
                slots[start : start + count],
                list_at,
                sizes,
                code_size,
            )
            done += count
    by_id = np.argsort(ids)
    return ids[by_id], list_at[lists[by_id]] + slots[by_id] * code_size, lists[by_id]


def _write_runs(
    fd: int,
    vectors: np.ndarray,
    ids: np.ndarray,
    lists: np.ndarray,
    slots: np.ndarray,
    list_at: np.ndarray,
    sizes: np.ndarray,
    code_size: int,
) -> None:
    """``pwrite`` one block's rows and ids where they belong, one call per run of consecutive offsets in a list."""
    if not len(ids):
        return
    order = np.lexsort((slots, lists))
    lists, slots = lists[order], slots[order]
    breaks = np.flatnonzero((lists[1:] != lists[:-1]) | (slots[1:] != slots[:-1] + 1)) + 1
    starts, ends = np.concatenate([[0], breaks]), np.concatenate([breaks, [len(order)]])
    rows = vectors[order]
    keys = np.ascontiguousarray(ids[order], dtype="<i8")
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        number, slot = int(lists[start]), int(slots[start])
        at = int(list_at[number])
        os.pwrite(fd, rows[start:end].tobytes(), at + slot * code_size)
        os.pwrite(fd, keys[start:end].tobytes(), at + int(sizes[number]) * code_size + slot * 8)


def _header(empty: Any, ntotal: int) -> bytes:
    """FAISS's serialization of ``empty`` up to its direct map, with ``ntotal`` vectors."""
    if empty.ntotal != 0 or int(empty.direct_map.type) != _NO_MAP_TYPE:
        raise ValueError("the header comes from a trained IVF index with empty lists and no direct map")
    empty.ntotal = ntotal
    try:
        data = faiss.serialize_index(empty).tobytes()
    finally:
        empty.ntotal = 0
    tail = data[-_EMPTY_TAIL_BYTES:]
    expected = struct.pack("<bQ", _NO_MAP_TYPE, 0) + b"ilar" + struct.pack("<QQ", empty.nlist, empty.code_size)
    if not tail.startswith(expected) or data[:4] != b"IwFl":
        raise ValueError("FAISS wrote an IVF header this module does not know; write the index with faiss instead")
    return data[:-_EMPTY_TAIL_BYTES]


def set_nprobe(path: Path, nlist: int, nprobe: int) -> None:
    """Store ``nprobe`` in the header of the IVF file at ``path`` (it is measured once the lists are written)."""
    with path.open("r+b") as handle:
        handle.seek(_NLIST_AT)
        if struct.unpack("<Q", handle.read(8))[0] != nlist:
            raise ValueError(f"{path} is not an IVF file with {nlist} lists")
        handle.seek(_NPROBE_AT)
        handle.write(struct.pack("<Q", nprobe))
