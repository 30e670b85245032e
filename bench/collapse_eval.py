"""Quote-level collapse: precision and recall on the evaluation set, and its cost per query on SciFact hits.

    python bench/collapse_eval.py [--data tests/data/quotes] [--scifact ../shared/benchmarks/scifact]

The set (tests/data/quotes, original text) holds 31 pairs of passages from two invented outlets reporting the same
quote or statement, printed differently (quote marks, punctuation, case, accents, inserted and dropped words,
another attribution, other sentence splits), and 31 pairs on the same topic sharing many words but no quote. Each
pair is run through :func:`citeline.query.collapse.collapse` as two hits of a search for the A passage's first quote (or
first sentence), with highlights set as the query plan will set them. A pair that comes back as one result is a
collapse. Reported: precision, recall, and how much of each labelled quote the shared span covers (its words).
Each positive pair is also run with its B passage in NFD form with no-break spaces and curly quotes.

The cost: for 50 SciFact claims, the 40 abstracts (truncated to 1,200 characters, a chunk) that share the most
terms with the claim stand in for 40 hits (a collapsed search that deepened once); the collapse of those hits is
timed. What collapse adds to a whole search is bench/collapse_cost.py's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from citeline.query.collapse import collapse
from citeline.query.highlight import highlight, terms

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the evaluation set's harness, shared with tests/unit/test_quotes.py

from _quote_set import evaluate, hit  # noqa: E402


def latency(scifact: Path, queries: int = 50, candidates: int = 40) -> tuple[float, float]:
    """Mean wall and CPU milliseconds of collapsing ``candidates`` SciFact hits for a claim."""
    docs = [json.loads(line) for line in (scifact / "corpus.jsonl").open(encoding="utf-8")]
    doc_terms = [set(terms(doc["text"][:1200])) for doc in docs]
    claims = [json.loads(line)["text"] for line in (scifact / "queries.jsonl").open(encoding="utf-8")][:queries]
    rng = np.random.default_rng(0)
    wall = cpu = 0.0
    for claim in claims:
        wanted = set(terms(claim))
        best = sorted(range(len(docs)), key=lambda i: -len(wanted & doc_terms[i]))[:candidates]
        hits = highlight(
            [hit(docs[i]["_id"], docs[i]["text"][:1200], i, 1.0 - n / 100) for n, i in enumerate(best)], claim
        )
        vectors = rng.normal(size=(len(hits), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        start, start_cpu = time.perf_counter(), time.process_time()
        collapse(hits, vectors, query_vector=vectors[0], encode=lambda t: np.zeros((len(t), 384), np.float32))
        wall += time.perf_counter() - start
        cpu += time.process_time() - start_cpu
    return wall / len(claims) * 1000, cpu / len(claims) * 1000


def main() -> None:
    """Print the evaluation figures and the cost per query."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO / "tests" / "data" / "quotes")
    parser.add_argument("--scifact", type=Path, default=REPO.parent / "shared" / "benchmarks" / "scifact")
    args = parser.parse_args()
    figures = evaluate(args.data)
    print(json.dumps(figures, indent=1))
    if (args.scifact / "corpus.jsonl").exists():
        wall, cpu = latency(args.scifact)
        print(f"collapse of 40 SciFact candidates (k=10): {wall:.2f} ms wall, {cpu:.2f} ms CPU per query")


if __name__ == "__main__":
    main()
