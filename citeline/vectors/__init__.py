"""Vector index kinds behind one small protocol (:mod:`citeline.vectors.base`), and the registry that names them.

A kind is one module and one registry line: decorate its class with ``@vector_index("name")`` (from
``citeline.vectors.base``) and add its module to :data:`KIND_MODULES` below. ``tests/unit/test_vector_contract.py`` runs
every registered kind through the same contract (exact ids, exact stored vectors, filtered search returning k results
whenever k allowed ids exist, copy-on-write updates, save/load round trips).

A kind's module is imported when the kind is first asked for (:func:`kind_of`), and every kind's once
:data:`KINDS` is read: a cold search of a small (flat) index loads neither ivf nor hnsw (with the full build, which
``store.generation`` now imports where it builds; what their modules cost a cold search:
docs/performance.md#choices-measured-in-the-code).
"""

from __future__ import annotations

import importlib

from citeline.vectors import base
from citeline.vectors.base import DEFAULT_KIND, NEW_INDEX_KIND, VectorIndex, VectorReader, vector_index

#: Every kind's module, by registry name (importing a module registers its kind).
KIND_MODULES = {
    "auto": "citeline.vectors.auto",
    "flat": "citeline.vectors.flat",
    "hnsw": "citeline.vectors.hnsw",
    "ivf": "citeline.vectors.ivf",
}


def kind_of(name: str) -> type[VectorIndex]:
    """The registered class of a kind (its module imported on first use), or a clear error listing the kinds."""
    if name not in base.KINDS:
        if name in KIND_MODULES:
            importlib.import_module(KIND_MODULES[name])
        else:
            load_all()
    return base.kind_of(name)


def load_all() -> dict[str, type[VectorIndex]]:
    """Import every kind's module; the registry then holds them all."""
    for module in KIND_MODULES.values():
        importlib.import_module(module)
    return base.KINDS


def __getattr__(name: str) -> object:
    """``KINDS``: every kind, their modules imported when it is first read. (``from citeline.vectors import ivf``
    imports a submodule as ever.)"""
    if name == "KINDS":
        return load_all()
    raise AttributeError(f"module 'citeline.vectors' has no attribute {name!r}")


__all__ = [
    "DEFAULT_KIND",
    "KINDS",
    "KIND_MODULES",
    "NEW_INDEX_KIND",
    "VectorIndex",
    "VectorReader",
    "kind_of",
    "load_all",
    "vector_index",
]
