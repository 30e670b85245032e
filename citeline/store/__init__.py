"""The index directory: one module per thing on disk.

- :mod:`~citeline.store.catalog`: ``meta.duckdb`` (documents, chunks, index_meta) and every SQL statement
  (with :mod:`~citeline.store.checks`, the consistency queries, and :mod:`~citeline.store.rows`, the row shapes)
- :mod:`~citeline.store.ledger`: the ``runs`` table
- :mod:`~citeline.store.locks`: the writer lock (an flock on the index directory) and ``db.lock``
- :mod:`~citeline.store.generation`: the commit protocol and the generation files (vector index, BM25 folder)
- :mod:`~citeline.store.snapshot`: a reader's view of one generation
- :mod:`~citeline.store.verify`: the named invariants
"""
