"""The lexical index: the BM25 analyzer and settings, immutable segments, queries over them, rare-term lookup
and merging."""
