"""Collapse precision: false and missed merges on the generated sets (tests/_collapse_sets.py).

    python bench/collapse_precision.py [--model] [--records 60] [-k 10]

Two levels:

- **Pairs** (:func:`citeline.query.collapse.collapse` on two hits): every pair of 40 templated records with equal
  chunk vectors (the worst case: a cosine of 1, as the real model nearly gives records of one frame), highlighted
  for the first record's answering sentence: a merge is a false merge. Every paragraph of the seed articles
  against its syndicated copy (light edits), once with equal vectors and once with orthogonal ones (the words
  alone must merge them): a pair left apart is a missed merge.
- **Index**: the records (JSON Lines), each seed article as Markdown, a syndicated copy, an MkDocs-like HTML page,
  an .rst source and its Sphinx-like HTML page, in one index (the tests' hashed bag-of-words embedder, or the real
  model with ``--model``). Each record's answering sentence is searched: sources from two records in one result are
  false merges. Each paragraph's first sentence of each seed article is searched: in the best result holding it,
  each of the article's five versions that is not among its sources is a missed merge, and sources of an article
  that shares no quote with the queried one are false merges.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from citeline import Index
from citeline.query.collapse import collapse, text_words
from citeline.query.highlight import highlight

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the generated sets and the tests' embedder

from _collapse_sets import (  # noqa: E402
    same_family,
    seed_articles,
    syndicated,
    templated_records,
    write_copies,
    write_records,
)
from _quote_set import hit  # noqa: E402


def merged(a: str, b: str, query: str, same_vector: bool) -> bool:
    """Do hits ``a`` and ``b`` (of two documents, searched for ``query``) become one result?"""
    hits = highlight([hit("a", a, 1, 1.0), hit("b", b, 2, 0.9)], query)
    vectors = np.ones((2, 2), np.float32) / np.sqrt(2) if same_vector else np.eye(2, dtype=np.float32)
    return len(collapse(hits, vectors, query_vector=vectors[0], encode=lambda t: np.zeros((len(t), 2)))) == 1


def paragraphs(text: str) -> list[str]:
    """The paragraphs of more than 20 words (the seed's note on itself aside: a syndicated copy drops it)."""
    return [p for p in text.split("\n\n") if len(p.split()) > 20 and not p.startswith("*A citeline seed")]


def pair_figures() -> dict[str, int]:
    """False merges among templated record pairs, missed merges among syndicated paragraph pairs."""
    records = templated_records(40)
    false = sum(merged(a.text, b.text, a.answer, True) for a, b in itertools.combinations(records, 2))
    missed_near = missed_far = pairs = 0
    for number, text in enumerate(seed_articles().values()):
        for original, copy in zip(paragraphs(text), paragraphs(syndicated(text, seed=number)), strict=True):
            query = original.split(". ")[0]
            pairs += 1
            missed_near += not merged(original, copy, query, True)
            missed_far += not merged(original, copy, query, False)
    return {
        "record_pairs": len(records) * (len(records) - 1) // 2,
        "record_pairs_merged (false)": false,
        "syndicated_pairs": pairs,
        "missed_equal_vectors": missed_near,
        "missed_orthogonal_vectors": missed_far,
    }


def holds(text: str, sentence: str) -> bool:
    """Does ``text`` hold (nearly) every word of ``sentence``?"""
    wanted = set(text_words(sentence)[1])
    return len(wanted & set(text_words(text)[1])) >= 0.8 * len(wanted)


def index_figures(model: bool, records: int, k: int) -> dict[str, object]:
    """False and missed merges of real searches over one index of every set."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        family = write_copies(root / "docs")
        generated = templated_records(records)
        write_records(root / "docs" / "records", generated)
        if model:
            index = Index.create(root / "ix")
        else:
            from conftest import HashEmbedder

            index = Index.create(root / "ix", embedder=HashEmbedder())
        index.ingest([root / "docs"])
        docs = root / "docs"

        def family_of(path: str) -> str:
            relative = str(Path(path).relative_to(docs))
            return family.get(relative, relative)

        false_records = record_results = 0
        title_highlights = 0
        for record in generated:
            results = index.search(record.answer, k=k)
            for result in results:
                in_records = [s for s in result.sources if "#" in s.source_id]
                false_records += max(len(in_records) - 1, 0)
            best = next((r for r in results if r.source_id.endswith(f"#{record.id}")), None)
            if best is not None:
                record_results += 1
                title_highlights += any(h.text.startswith("Record ") for h in best.highlights)
        # A question that holds no word of any record (they come back by their vectors): the highlight used to be
        # the first sentence, the title line.
        vague = index.search(
            "a fire destroyed the old building long ago",
            k=k,
            mode="dense",
            filters={"source": str(docs / "records")},
            min_score=0,
        )
        vague_titles = sum(any(h.text.startswith("Record ") for h in r.highlights) for r in vague)
        missed = false_articles = queries = 0
        cpu = time.process_time()
        for stem, text in seed_articles().items():
            for paragraph in paragraphs(text):
                sentence = paragraph.split(". ")[0]
                results = index.search(sentence, k=k)
                queries += 1
                holding = [r for r in results if holds(r.text, sentence)]
                if not holding:
                    missed += 5
                    continue
                best = holding[0]
                versions = {family_of(s.source_path) for s in best.sources}
                found = sum(1 for s in best.sources if family_of(s.source_path) == stem)
                missed += max(5 - found, 0)
                false_articles += sum(1 for v in versions if not same_family(v, stem))
        cpu = time.process_time() - cpu
        return {
            "embedder": "all-MiniLM-L6-v2" if model else "hash-bow-64 (tests)",
            "record_queries": len(generated),
            "false_merges_records": false_records,
            "record_highlight_is_title (its answer searched)": f"{title_highlights} of {record_results}",
            "record_highlight_is_title (a question with no record word)": f"{vague_titles} of {len(vague)}",
            "article_queries": queries,
            "missed_merges_articles (of 5 versions each)": missed,
            "false_merges_articles": false_articles,
            "article_search_cpu_ms_mean": round(cpu / max(queries, 1) * 1000, 2),
        }


def main() -> None:
    """Print the pair-level and index-level figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="store_true", help="the real model (default: the tests' hash embedder)")
    parser.add_argument("--records", type=int, default=60)
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps({"pairs": pair_figures(), "index": index_figures(args.model, args.records, args.k)}, indent=1))


if __name__ == "__main__":
    main()
