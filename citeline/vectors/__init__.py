"""Vector index kinds behind one small protocol (:mod:`citeline.vectors.base`), and the registry that names them.

A kind is one module and one registry line: decorate its class with ``@vector_index("name")`` (from
``citeline.vectors.base``) and import the module below. ``tests/test_vector_contract.py`` runs every registered kind
through the same contract (exact ids, exact stored vectors, filtered search returning k results whenever k allowed
ids exist, copy-on-write updates, save/load round trips).
"""

# The kinds: each import registers one (auto builds on flat and ivf, so they come first).
from citeline.vectors import (  # noqa: F401
    auto,
    flat,
    hnsw,
    ivf,
    segments,
)
from citeline.vectors.base import DEFAULT_KIND, KINDS, NEW_INDEX_KIND, VectorIndex, VectorReader, kind_of, vector_index

__all__ = ["DEFAULT_KIND", "KINDS", "NEW_INDEX_KIND", "VectorIndex", "VectorReader", "kind_of", "vector_index"]
