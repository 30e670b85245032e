"""Chunk ids: a light module, so that the query path (``citeline.query.doc_signals``) finds a document's chunks without
importing the writing pipeline (discovery, parsing, planning; what that costs a cold search:
docs/performance.md#choices-measured-in-the-code)."""

from __future__ import annotations

import hashlib


def chunk_id_for(doc_id: str, content_hash: str, ordinal: int) -> int:
    """A stable 63-bit chunk id, so an incremental build and a fresh build give the same ids."""
    digest = hashlib.blake2b(f"{doc_id}\0{content_hash}\0{ordinal}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF
