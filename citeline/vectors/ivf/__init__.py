"""The ``ivf`` vector index kind: inverted lists over the raw vectors, probed ``nprobe`` lists deep.

Importing this package registers the kind (``citeline.vectors.KIND_MODULES``). Its modules:

- ``index``: :class:`IVFIndex` itself (training, search, updates, the file's layout in its docstring);
- ``table``: the id table an ``ivf`` file ends with, and the views of the mapped file it reads vectors through;
- ``files``: writing a file list by list, so building or compacting an index of any size holds one span of lists;
- ``codes``: the 4-bit fast-scan PQ codes beside a large file's exact lists;
- ``calibration``: how many lists a search probes (the fixed rule and the calibration measured at build);
- ``build``: building a file from vectors read a span at a time (``citeline rebuild`` at any size).
"""

from __future__ import annotations

from citeline.vectors.ivf.index import (
    CALIBRATION_QUERIES,
    CALIBRATION_RECALL,
    FILTERED_BUDGET,
    LISTS_PER_SQRT,
    MIN_PER_LIST,
    NPROBE_FRACTION,
    NPROBE_MIN,
    TRAIN_ITERATIONS,
    TRAIN_PER_LIST,
    IVFIndex,
    nlist_for,
    nprobe_for,
)

__all__ = [
    "CALIBRATION_QUERIES",
    "CALIBRATION_RECALL",
    "FILTERED_BUDGET",
    "LISTS_PER_SQRT",
    "MIN_PER_LIST",
    "NPROBE_FRACTION",
    "NPROBE_MIN",
    "TRAIN_ITERATIONS",
    "TRAIN_PER_LIST",
    "IVFIndex",
    "nlist_for",
    "nprobe_for",
]
