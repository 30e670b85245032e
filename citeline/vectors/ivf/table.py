"""An ``ivf`` file's *id table* (see ``citeline.vectors.ivf``'s docstring): every id ascending, the row of its
vector in the memory-mapped file and its list, appended after FAISS's bytes (FAISS reads what it wrote and ignores
the rest), and the views of the mapped file that ``IVFIndex.vectors`` gathers from. (Moved out of ``index.py``.)
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from citeline.errors import IndexCorruptError

#: The id table's footer: magic, id count, the table's byte offset, and the residue
#: (byte offset mod 4) every vector of the file shares; the table is the ids (int64, ascending), each one's vector
#: row in float32 units from that residue (int64), and its list (int32).
_TABLE_MAGIC = b"CLIVFTB1"
_FOOTER = struct.Struct("<8sQQQ")
_TABLE_ROW_BYTES = 8 + 8 + 4


def _list_positions(lists: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every id of ``lists`` ascending, with its list number and offset in the list."""
    ids, numbers, offsets = [], [], []
    for number in range(lists.nlist):
        if size := lists.list_size(number):
            ids.append(faiss.rev_swig_ptr(lists.get_ids(number), size).copy())
            numbers.append(np.full(size, number, dtype=np.int64))
            offsets.append(np.arange(size, dtype=np.int64))
    if not ids:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    held = np.concatenate(ids)
    order = np.argsort(held, kind="stable")
    return held[order], np.concatenate(numbers)[order], np.concatenate(offsets)[order]


def _mapped_region(lists: Any) -> np.ndarray | None:
    """The bytes of a memory-mapped file's lists (a view of FAISS's map), or None for in-memory lists."""
    mapped: Any = faiss.downcast_InvertedLists(lists)
    if not isinstance(mapped, faiss.OnDiskInvertedLists):
        return None
    return faiss.rev_swig_ptr(mapped.ptr, mapped.totsize)


def _vector_bytes(
    lists: Any, numbers: np.ndarray, offsets: np.ndarray, dimension: int
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """For memory-mapped lists: the mapped bytes, the byte offset of each (list, offset)'s vector in them and the
    residue mod 4 they all share. None for in-memory lists, or if the vectors are not equally aligned."""
    region = _mapped_region(lists)
    if region is None or not len(numbers):
        return None
    mapped: Any = faiss.downcast_InvertedLists(lists)
    # A list's codes start at its offset in the file; its ids follow its `capacity` codes.
    list_offsets = np.array([mapped.lists.at(number).offset for number in range(mapped.nlist)], dtype=np.int64)
    starts = list_offsets[numbers] + offsets * dimension * 4
    residue = int(starts[0] % 4)
    if np.any(starts % 4 != residue):
        return None
    return region, starts, residue


def _float_rows(region: np.ndarray, residue: int, dimension: int) -> np.ndarray:
    """The mapped file as overlapping float32 rows of ``dimension``, from byte ``residue`` on: row ``r`` starts at
    byte ``residue + 4 r``, so ``vectors()`` is one numpy gather instead of a walk through the lists one by one
    (docs/scale.md#choices-measured-in-the-code)."""
    floats = region[residue : residue + (len(region) - residue) // 4 * 4].view(np.float32)
    rows = np.lib.stride_tricks.as_strided(floats, shape=(len(floats) - dimension + 1, dimension), strides=(4, 4))
    rows.flags.writeable = False
    return rows


def _append_table(path: Path) -> None:
    """Append the id table to a just-written IVF file (read back memory-mapped for its vectors' offsets); a file
    whose vectors are not equally aligned gets none (readers walk its lists)."""
    index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
    lists = faiss.extract_index_ivf(index).invlists
    ids, numbers, offsets = _list_positions(lists)
    located = _vector_bytes(lists, numbers, offsets, int(index.d))
    del lists, index  # unmaps the file
    if located is None and len(ids):
        return
    starts, residue = (located[1], located[2]) if located is not None else (np.zeros(0, np.int64), 0)
    _write_table(path, ids, starts, numbers, residue)


def _write_table(path: Path, ids: np.ndarray, starts: np.ndarray, numbers: np.ndarray, residue: int) -> None:
    """Append the id table: ``ids`` ascending, the byte offset of each one's vector (``starts``, all ``residue``
    mod 4) and its list."""
    with path.open("ab") as out:
        table_offset = out.tell()
        out.write(np.ascontiguousarray(ids, dtype="<i8").tobytes())
        out.write(((np.asarray(starts, dtype=np.int64) - residue) // 4).astype("<i8").tobytes())
        out.write(np.asarray(numbers).astype("<i4").tobytes())
        out.write(_FOOTER.pack(_TABLE_MAGIC, len(ids), table_offset, residue))


def _read_table(path: Path, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """The id table of an IVF file, memory-mapped (ids, rows, lists, residue); None for a file without one."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            handle.seek(max(0, size - _FOOTER.size))
            magic, stored, offset, residue = _FOOTER.unpack(handle.read(_FOOTER.size).rjust(_FOOTER.size, b"\0"))
    except OSError as exc:
        raise IndexCorruptError(f"{path} cannot be read ({exc})") from exc
    if magic != _TABLE_MAGIC:
        return None
    if stored != count or offset + count * _TABLE_ROW_BYTES + _FOOTER.size != size or residue > 3:
        raise IndexCorruptError(f"{path}'s id table does not match its {count:,} vectors")
    if not count:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32), residue

    def mapped(dtype: str, start: int) -> np.ndarray:
        array = np.asarray(np.memmap(path, dtype=np.dtype(dtype), mode="r", offset=start, shape=(count,)))
        # The table follows FAISS's bytes, so it may start off an 8-byte boundary; numpy's searchsorted then copies
        # the whole misaligned array on every call; one aligned copy at open is far cheaper
        # (docs/scale.md#choices-measured-in-the-code).
        return array if start % array.dtype.itemsize == 0 else array.copy()

    return mapped("<i8", offset), mapped("<i8", offset + 8 * count), mapped("<i4", offset + 16 * count), residue


def table_offset(path: Path) -> int | None:
    """Where the id table of the IVF file at ``path`` starts (what precedes it is FAISS's bytes and, from
    ``citeline.vectors.ivf.codes``, a codes section); None for a file without the table."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        handle.seek(max(0, size - _FOOTER.size))
        magic, _, offset, _ = _FOOTER.unpack(handle.read(_FOOTER.size).rjust(_FOOTER.size, b"\0"))
    return int(offset) if magic == _TABLE_MAGIC else None
