"""Collapse precision: false and missed merges on the generated sets (tests/_collapse_sets.py); with ``--works``,
the works recognised at ingest (citeline/store/works.py) on the works sets (tests/_works_sets.py) and their cost.

    python bench/collapse_precision.py [--model] [--records 60] [-k 10]
    python bench/collapse_precision.py --works [--corpus 3000] [--sets-only]

``--works``: per set, pairs of files of one work merged or missed and pairs of different works merged (false), and
on the MkDocs and Sphinx sets the grouped top 5s' slots taken by a work already shown, with works and without; then
(unless ``--sets-only``) the CPU recognising works adds to an ingest of a generated corpus and to a search.

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
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from citeline import Index
from citeline.query.collapse import collapse, text_words
from citeline.query.highlight import highlight

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the generated sets and the tests' embedder

from _collapse_sets import (  # noqa: E402
    markdown_page,
    same_family,
    seed_articles,
    syndicated,
    templated_records,
    write_copies,
    write_records,
)
from _quote_set import hit  # noqa: E402
from _works_sets import (  # noqa: E402
    boilerplate_pages,
    four_formats,
    mkdocs_pairs,
    policy_versions,
    sphinx_pairs,
)


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


def _work_pairs(build: Any, roots: tuple[str, ...] = ("",)) -> dict[str, int]:
    """Build a set, ingest it (hash embedder), and count the pairs of files of one family (one work) in one work
    (merged) or not (missed), and the pairs of different families in one work (false)."""
    from conftest import HashEmbedder

    from citeline.store import generation, works

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        family = build(root / "c")
        index = Index.create(root / "ix", embedder=HashEmbedder())
        index.ingest([root / "c" / part for part in roots])
        by_doc = generation.read_meta(index.path).get(works.META_KEY, {})
        # by (path, doc id): a JSON Lines file holds many documents (records), each its own family
        work = {
            (str(Path(d.source_path).relative_to(root / "c")), d.doc_id): by_doc.get(d.doc_id, d.doc_id)
            for d in index.documents()
        }
    merged = missed = false = 0
    for a, b in itertools.combinations(sorted(work), 2):
        fa, fb = family.get(a[0], a[1]), family.get(b[0], b[1])
        together = work[a] == work[b]
        merged += fa == fb and together
        missed += fa == fb and not together
        false += fa != fb and together
    return {
        "files": len(work),
        "pairs_of_one_work": merged + missed,
        "merged": merged,
        "missed": missed,
        "false": false,
    }


def _records(root: Path) -> dict[str, str]:
    write_records(root, templated_records(60))
    return {}


def _syndicated(root: Path) -> dict[str, str]:
    family = {}
    for number, (stem, text) in enumerate(seed_articles().items()):
        for name, content in ((f"wire/{stem}.md", text), (f"paper/{stem}.txt", syndicated(text, seed=number))):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(content, encoding="utf-8")
            family[name] = stem
    return family


def _seeds(root: Path) -> dict[str, str]:
    shutil.copytree(REPO / "seeds", root)
    return {}


def _top5_repeats(build: Any, roots: tuple[str, ...], queries: list[str]) -> dict[str, int]:
    """Grouped top 5s (as the CLI shows them) of ``queries`` on a set, with works merged and without (the works map
    stubbed out, the same index): the slots taken by a work already shown above (its page or its source again)."""
    from conftest import HashEmbedder

    from citeline.query import plan
    from citeline.store import generation, works

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root / "c")
        index = Index.create(root / "ix", embedder=HashEmbedder())
        index.ingest([root / "c" / part for part in roots])
        by_doc = generation.read_meta(index.path).get(works.META_KEY, {})

        def repeats() -> int:
            count = 0
            for query in queries:
                seen: set[str] = set()
                for result in index.search(plan.SearchRequest.of(query, 5, group=True)):
                    work = by_doc.get(result.doc_id, result.doc_id)
                    count += work in seen
                    seen.add(work)
            return count

        merged = repeats()
        real = plan.work_map
        plan.work_map = lambda meta: {}
        try:
            apart = repeats()
        finally:
            plan.work_map = real
    return {"queries": len(queries), "repeated_slots_without_works": apart, "repeated_slots_with_works": merged}


def _headings() -> list[str]:
    """The section headings of the MkDocs set's pages (questions a reader of those pages would ask)."""
    from _works_sets import MKDOCS_PAGES

    found = []
    for page in MKDOCS_PAGES:
        for line in (REPO / "docs" / page).read_text(encoding="utf-8").splitlines():
            if line.startswith("## "):
                found.append(line[3:].strip())
    return found


def _first_sentences() -> list[str]:
    """The first sentence of each long paragraph of the seed articles."""
    return [
        paragraph.split(". ")[0]
        for text in seed_articles().values()
        for paragraph in text.split("\n\n")
        if len(paragraph.split()) > 20 and not paragraph.startswith("*A citeline")
    ]


def works_figures() -> dict[str, dict[str, int]]:
    """Merges and misses of works per set (pairs of files)."""
    return {
        "mkdocs (docs/ pages beside their Markdown)": _work_pairs(mkdocs_pairs, ("docs", "site")),
        "sphinx (pages beside _sources/*.rst.txt)": _work_pairs(sphinx_pairs, ("build",)),
        "four formats (.md .html .docx .pdf)": _work_pairs(four_formats),
        "syndicated copies": _work_pairs(_syndicated),
        "templated records (60)": _work_pairs(_records),
        "policy versions": _work_pairs(policy_versions),
        "pages sharing only a site frame": _work_pairs(boilerplate_pages),
        "seeds/": _work_pairs(_seeds),
        "top 5s, mkdocs set (its pages' headings)": _top5_repeats(mkdocs_pairs, ("docs", "site"), _headings()),
        "top 5s, sphinx set (the articles' paragraphs)": _top5_repeats(sphinx_pairs, ("build",), _first_sentences()),
    }


def _generated_corpus(root: Path, documents: int) -> None:
    """``documents`` articles of 150-400 words drawn from the seed articles' sentences (each its own mix), a tenth of
    them also as an MkDocs-like page (a work of two): what a collection of a few thousand documents costs."""
    import random

    rng = random.Random(7)
    sentences = [s for text in seed_articles().values() for s in text.replace("\n", " ").split(". ") if len(s) > 30]
    (root / "md").mkdir(parents=True)
    (root / "html").mkdir()
    for number in range(documents):
        body = ". ".join(rng.sample(sentences, rng.randint(8, 20))) + "."
        text = f"# Article {number}\n\n{body}\n"
        (root / "md" / f"a{number:05d}.md").write_text(text, encoding="utf-8")
        if number % 10 == 0:
            (root / "html" / f"a{number:05d}.html").write_text(markdown_page(text), encoding="utf-8")


def works_cost(documents: int, queries: int = 30) -> dict[str, Any]:
    """CPU seconds an ingest of the generated corpus spends recognising works, of the whole ingest's; then of an
    edit of one document; and the CPU a search spends merging copies."""
    from conftest import HashEmbedder

    from citeline.query import plan
    from citeline.store import generation, works

    spent = {"refresh": 0.0, "merge": 0.0}
    refresh, merge = works.refresh, plan.merge_copies

    def timed(function: Any, key: str) -> Any:
        def run(*args: Any) -> Any:
            start = time.process_time()
            try:
                return function(*args)
            finally:
                spent[key] += time.process_time() - start

        return run

    works.refresh, plan.merge_copies = timed(refresh, "refresh"), timed(merge, "merge")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            _generated_corpus(root / "c", documents)
            index = Index.create(root / "ix", embedder=HashEmbedder())
            start = time.process_time()
            index.ingest([root / "c"])
            ingest_cpu = time.process_time() - start
            first = dict(spent)
            meta = generation.read_meta(index.path)
            edited = root / "c" / "md" / "a00010.md"
            edited.write_text(edited.read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
            spent["refresh"] = 0.0
            start = time.process_time()
            index.ingest([root / "c"])
            edit_cpu = time.process_time() - start
            edit_refresh = spent["refresh"]
            checked = generation.read_meta(index.path)[works.CHECKED_KEY]
            sentences = [s for text in seed_articles().values() for s in text.split(". ") if len(s) > 40]
            spent["merge"] = 0.0
            start = time.process_time()
            for query in sentences[:queries]:
                index.search(query, k=10)
            search_cpu = time.process_time() - start
    finally:
        works.refresh, plan.merge_copies = refresh, merge
    return {
        "documents": documents + (documents + 9) // 10,
        "works": len(set(meta[works.META_KEY].values())),
        "ingest_cpu_s": round(ingest_cpu, 2),
        "works_cpu_s": round(first["refresh"], 2),
        "edit_one_ingest_cpu_s": round(edit_cpu, 2),
        "edit_one_works_cpu_s": round(edit_refresh, 3),
        "edit_one_checked": checked,
        "search_cpu_ms_mean": round(search_cpu / queries * 1000, 2),
        "merge_cpu_ms_mean": round(spent["merge"] / queries * 1000, 3),
    }


def main() -> None:
    """Print the pair-level and index-level figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="store_true", help="the real model (default: the tests' hash embedder)")
    parser.add_argument("--records", type=int, default=60)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--works", action="store_true", help="works: merges and misses per set, and their cost")
    parser.add_argument("--sets-only", action="store_true", help="--works: the sets, not the cost")
    parser.add_argument("--corpus", type=int, default=3000, help="--works: documents of the cost's generated corpus")
    args = parser.parse_args()
    if args.works:
        figures: dict[str, Any] = {"works": works_figures()}
        if not args.sets_only:
            figures["cost"] = works_cost(args.corpus)
        print(json.dumps(figures, indent=1))
        return
    print(json.dumps({"pairs": pair_figures(), "index": index_figures(args.model, args.records, args.k)}, indent=1))


if __name__ == "__main__":
    main()
