"""Give a copy of an index built without ``document_vectors`` the whole-document vectors ``citeline eval``'s
baseline row cached for its BEIR corpus (the same model, the same ``title + " " + text``), so the ``whole``
signal can be tuned without a second embedding pass:

    cp -r /tmp/qual2/base /tmp/qual3/whole
    python bench/experiments/tune_fill_document_vectors.py --beir ../shared/benchmarks/scifact --index /tmp/qual3/whole

What a new index with ``document_vectors`` stores at ingest (``citeline.ingest.embed_step``) is the same vector: the
texts are equal up to the first 4,000 characters and the model reads only the first 256 tokens of either.
Writes the catalog column and the meta flag, then rebuilds the derived files (the rows files carry the column).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

import pyarrow as pa

from citeline import Index
from citeline.eval.baseline import document_texts, document_vectors
from citeline.store import catalog
from citeline.store.rows import document_vectors_to_arrow
from citeline.util.ids import chunk_id_for


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    index = Index.open(args.index)
    corpus = args.beir / "corpus.jsonl"
    ids, texts = document_texts(corpus)
    start, start_cpu = time.perf_counter(), time.process_time()
    vectors = document_vectors(corpus, texts, index.embedder)  # the cache (encoded once by citeline eval)
    print(
        f"{len(texts)} whole-document vectors ({index.meta['backend']}): {time.perf_counter() - start:.0f} s wall, "
        f"{time.process_time() - start_cpu:.0f} CPU-s (a cache hit when encoded before)"
    )
    row_of = {f"{corpus.name}#{doc}": number for number, doc in enumerate(ids)}
    with contextlib.closing(catalog.connect(args.index, read_only=False)) as connection:
        documents = connection.execute("SELECT source_id, doc_id, content_hash FROM documents").fetchall()
        firsts = [chunk_id_for(doc_id, content_hash, 0) for _, doc_id, content_hash in documents]
        wanted = vectors[[row_of[source_id] for source_id, _, _ in documents]]
        catalog.create_schema(connection, index.dimension, document_vectors=True)
        table = pa.table(
            {
                "chunk_id": pa.array(firsts, type=pa.int64()),
                "vector": document_vectors_to_arrow(wanted, [True] * len(firsts)),
            }
        )
        connection.register("_filled", table)
        connection.execute(
            "UPDATE chunks SET document_vector = f.vector FROM _filled f WHERE chunks.chunk_id = f.chunk_id"
        )
        catalog.write_meta(connection, {**catalog.read_meta(connection), "document_vectors": True})
        filled = connection.execute("SELECT count(*) FROM chunks WHERE document_vector IS NOT NULL").fetchall()[0][0]
    report = Index.open(args.index).rebuild()
    print(f"{filled} of {len(documents)} documents given their cached vector; rebuilt: {report}")
    print(f"took {time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
