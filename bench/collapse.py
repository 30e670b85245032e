"""What collapse and grouping cost and how well they merge, one subcommand each (``--help`` after a subcommand
gives its options).

    python bench/collapse.py cost --index /tmp/scifact-int8 [--feedback]  # collapse's cost, by mode and stage
    python bench/collapse.py precision [--model] [--works]                 # false and missed merges, generated sets
    python bench/collapse.py precision --works --tree DOCS --page-roots ,_build/html,_build/html/_sources
    python bench/collapse.py eval                                          # quote-level collapse, tests/data/quotes
    python bench/collapse.py grouping --index IX --queries QUERIES.jsonl   # distinct documents in the top k

Run by hand; not part of CI. Figures are in docs/quality.md and docs/performance.md with their commands.
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import itertools
import json
import os
import pstats
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import citeline.query.collapse
from citeline import Index
from citeline.query import plan
from citeline.query.collapse import collapse, text_words
from citeline.query.highlight import highlight, terms

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"
#: CPU seconds spent in each stage, by stage name (filled while :func:`stages` is active).
SPENT: dict[str, float] = defaultdict(float)
sys.path.insert(0, str(REPO / "tests"))  # the evaluation set's harness, shared with tests/unit/test_quotes.py
from _quote_set import evaluate, hit  # noqa: E402

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
from _works_sets import (  # noqa: E402
    boilerplate_pages,
    four_formats,
    mkdocs_pairs,
    policy_versions,
    sphinx_pairs,
    tree_families,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")


# --- cost ------------------------------------------------------------------------------------------------------------

COST_DOC = """\
What collapse adds to a search: p50/p99 time with collapse on and off, per mode, on one index, and by stage.

    python bench/collapse.py cost [--index /tmp/scifact-int8] [--scifact ../shared/benchmarks/scifact] [-k 10]
                                  [--queries 300] [--profile hybrid] [--repeat 3]
    python bench/collapse.py cost --index /tmp/1M-index --hash-bow --claims --queries 50   # bench/scale.py's index
    python bench/collapse.py cost --feedback [--index ...] [--repeat 3]   # hybrid's feedback stage on and off

``--hash-bow`` opens the index with bench/scale.py's model-free embedder and ``--claims`` takes the first SciFact
claims (bench/scale.py's latency queries) instead of the judged test queries.

One process, one index, SciFact's test queries (the 300 of qrels/test.tsv). Each query's vector is encoded once
before timing and served from a cache: the model call is the same with collapse on or off (and collapse no longer
needs it in lexical mode), and it would add only noise; its own cost is printed once. Every query is then searched
with collapse on and with it off, in alternating order, after one warm-up search per setting; with ``--repeat N``
each of those searches runs N times in a row and the least time counts (the neighbours' load only ever adds).
Figures are CPU time (``time.process_time``: the machine is shared, so wall time mostly measures the neighbours)
and wall time, in ms. "added" is the per-query difference on - off.

By stage: the collapsed searches' time inside ranking, passages, highlights, :func:`citeline.query.collapse.collapse`
and :func:`citeline.query.collapse.add_unranked_copies` (and its lexical lookups), against the same stages with collapse
off. ``--profile MODE`` prints cProfile's top functions of that mode's collapsed searches.

``--feedback`` times hybrid's feedback stage instead (formerly a script of its own): whole searches (collapse on, k=10)
with ``DEFAULT_FUSION`` and with its feedback stage off, interleaved, p50/p90 CPU and wall ms, the per-query
difference, and how many top 10s are the same (``bench/results/feedback-cost.txt``).
"""


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def test_queries(scifact: Path, limit: int) -> list[str]:
    """The texts of SciFact's test queries (those qrels/test.tsv judges), in file order, at most ``limit``."""
    with (scifact / "qrels" / "test.tsv").open(encoding="utf-8") as rows:
        judged = {row["query-id"] for row in csv.DictReader(rows, delimiter="\t")}
    queries = [json.loads(line) for line in (scifact / "queries.jsonl").open(encoding="utf-8")]
    return [q["text"] for q in queries if str(q["_id"]) in judged][:limit]


def first_claims(scifact: Path, limit: int) -> list[str]:
    """The first ``limit`` SciFact claims, as bench/scale.py's latency step searches them."""
    with (scifact / "queries.jsonl").open(encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line, _ in zip(lines, range(limit), strict=False)]


def _timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[name] += time.process_time() - start

    return wrapper


def _timed_lookup(find: Callable[..., Any], passages: Callable[..., Any], *more: Any) -> citeline.query.collapse.Lookup:
    timed = [_timed("lookup: documents", function) for function in more]
    return citeline.query.collapse.Lookup(_timed("lookup: lexical", find), _timed("lookup: passages", passages), *timed)


@contextmanager
def stages() -> Iterator[None]:
    """Time the query plan's stages (module attributes are looked up at call time, so wrapping them works)."""
    patched = [
        (plan, "rank"),
        (plan, "fetch_passages"),
        (plan, "highlight"),
        (plan, "collapse"),  # the plan's loop calls collapse's functions by the names it imported
        (plan, "add_unranked_copies"),
    ]
    saved = [(module, name, getattr(module, name)) for module, name in patched if hasattr(module, name)]
    for module, name, function in saved:
        setattr(module, name, _timed(name, function))
    saved_lookup = getattr(plan, "Lookup", None)
    if saved_lookup is not None:
        plan.Lookup = _timed_lookup  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        for module, name, function in saved:
            setattr(module, name, function)
        if saved_lookup is not None:
            plan.Lookup = saved_lookup  # type: ignore[misc]


def run(index: Index, queries: list[str], vectors: dict[str, np.ndarray], mode: str, k: int) -> dict[str, Any]:
    """Search every query with collapse on and off; CPU and wall ms per search, and CPU ms by stage."""
    snapshot, model = index.snapshot(), index.meta["model"]

    def encode(text: str) -> np.ndarray:
        return vectors[text]

    def once(query: str, collapse_on: bool, repeat: int = 1) -> tuple[float, float]:
        request = plan.SearchRequest.of(query, k, mode=mode, collapse=collapse_on)
        best = (float("inf"), float("inf"))
        for _ in range(repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            plan.search(snapshot, request, encode, model)
            took = (time.process_time() - start_cpu) * 1000, (time.perf_counter() - start) * 1000
            best = (min(best[0], took[0]), min(best[1], took[1]))
        return best

    for collapse_on in (True, False):
        once(queries[0], collapse_on)
    timings: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    by_stage: dict[bool, dict[str, float]] = {}
    for collapse_on in (True, False):
        SPENT.clear()
        with stages():
            for query in queries:
                once(query, collapse_on)
        by_stage[collapse_on] = {name: seconds * 1000 / len(queries) for name, seconds in SPENT.items()}
    for n, query in enumerate(queries):
        for collapse_on in (True, False) if n % 2 else (False, True):
            timings[collapse_on].append(once(query, collapse_on, ARGS.repeat))
    return {"timings": timings, "stages": by_stage}


def report(mode: str, figures: dict[str, Any]) -> None:
    """Print one mode's figures."""
    on, off = figures["timings"][True], figures["timings"][False]
    print(f"\n{mode} (k={ARGS.k}, {len(on)} queries), ms per search:")
    for label, values in (("collapse on", on), ("collapse off", off)):
        cpu, wall = [v[0] for v in values], [v[1] for v in values]
        print(
            f"  {label:<13} CPU p50 {percentile(cpu, 0.5):6.2f}  p99 {percentile(cpu, 0.99):6.2f}  "
            f"mean {statistics.fmean(cpu):6.2f}   wall p50 {percentile(wall, 0.5):6.2f}  "
            f"p99 {percentile(wall, 0.99):6.2f}"
        )
    added_cpu = [a[0] - b[0] for a, b in zip(on, off, strict=True)]
    added_wall = [a[1] - b[1] for a, b in zip(on, off, strict=True)]
    print(
        f"  {'added':<13} CPU p50 {percentile(added_cpu, 0.5):6.2f}  p99 {percentile(added_cpu, 0.99):6.2f}  "
        f"mean {statistics.fmean(added_cpu):6.2f}   wall p50 {percentile(added_wall, 0.5):6.2f}  "
        f"p99 {percentile(added_wall, 0.99):6.2f}"
    )
    print(f"  p50(on) - p50(off): CPU {percentile([v[0] for v in on], 0.5) - percentile([v[0] for v in off], 0.5):.2f}")
    stage_on, stage_off = figures["stages"][True], figures["stages"][False]
    print("  CPU ms per search by stage (collapse on / off):")
    for name in sorted(set(stage_on) | set(stage_off), key=lambda n: -stage_on.get(n, 0.0)):
        print(f"    {name:<22} {stage_on.get(name, 0.0):6.2f} / {stage_off.get(name, 0.0):6.2f}")


def feedback(index: Index, queries: list[str], vectors: dict[str, np.ndarray], repeat: int) -> None:
    """Hybrid searches with the feedback stage on (``DEFAULT_FUSION``) and off, interleaved; print the figures."""
    snapshot = index.snapshot()
    settings = {"on": plan.DEFAULT_FUSION, "off": replace(plan.DEFAULT_FUSION, feedback=0.0)}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in settings}
    same = 0
    for i, text in enumerate(queries):
        order = list(settings.items()) if i % 2 == 0 else list(reversed(settings.items()))
        tops = {}
        for name, fusion in order:
            request = replace(plan.SearchRequest.of(text, 10), fusion=fusion)
            best = (float("inf"), float("inf"))
            for _ in range(repeat):
                wall, cpu = time.perf_counter(), time.process_time()
                hits = plan.search(snapshot, request, vectors.__getitem__, index.meta["model"])
                best = min(best, ((time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000))
            times[name].append(best)
            tops[name] = [h.chunk_id for h in hits]
        same += tops["on"] == tops["off"]
    print(f"# {len(queries)} claims, k=10, collapse on, best of {repeat}")
    for name, rows in times.items():
        cpu_ms = sorted(c for c, _ in rows)
        wall_ms = sorted(w for _, w in rows)
        print(
            f"feedback {name:3s}  CPU p50 {statistics.median(cpu_ms):6.2f} p90 {cpu_ms[int(0.9 * len(cpu_ms))]:6.2f}   "
            f"wall p50 {statistics.median(wall_ms):6.2f} p90 {wall_ms[int(0.9 * len(wall_ms))]:6.2f}  ms"
        )
    added = [on[0] - off[0] for on, off in zip(times["on"], times["off"], strict=True)]
    print(f"added CPU-ms a search: median {statistics.median(added):.2f}; same top 10 for {same} of {len(queries)}")


def cost_main() -> None:
    """Time every mode, print the figures; profile one mode if asked."""
    global ARGS
    parser = argparse.ArgumentParser(description=COST_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=Path("/tmp/scifact-int8"))
    parser.add_argument("--scifact", type=Path, default=SCIFACT)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--modes", default=",".join(plan.MODES))
    parser.add_argument("--profile", choices=plan.MODES)
    parser.add_argument(
        "--repeat", type=int, default=1, help="time each search this many times, keep the least (a loaded machine)"
    )
    parser.add_argument("--hash-bow", action="store_true", help="bench/scale.py's embedder (for its indexes)")
    parser.add_argument("--claims", action="store_true", help="the first SciFact claims, as bench/scale.py")
    parser.add_argument("--feedback", action="store_true", help="time hybrid's feedback stage on and off instead")
    ARGS = parser.parse_args()
    from _synthetic import open_index  # bench/ is on sys.path when this file runs as a script

    index = open_index(ARGS.index, ARGS.hash_bow)
    queries = (first_claims if ARGS.claims else test_queries)(ARGS.scifact, ARGS.queries)
    start, start_cpu = time.perf_counter(), time.process_time()
    vectors = {query: index.encode_query(query) for query in queries}
    encode_cpu = (time.process_time() - start_cpu) * 1000 / len(queries)
    encode_wall = (time.perf_counter() - start) * 1000 / len(queries)
    status = index.status()
    print(f"index {ARGS.index}: {status.chunks} chunks, backend {index.meta.get('backend')}; {len(queries)} queries")
    print(f"query encoding (not in the figures below): {encode_cpu:.2f} ms CPU, {encode_wall:.2f} ms wall per query")
    if ARGS.feedback:
        feedback(index, queries, vectors, ARGS.repeat)
        return
    for mode in ARGS.modes.split(","):
        report(mode, run(index, queries, vectors, mode, ARGS.k))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"\nprocess: {usage.ru_utime + usage.ru_stime:.1f} CPU-s, peak RSS {usage.ru_maxrss / 1e6:.2f} GB")
    if ARGS.profile:
        snapshot, model = index.snapshot(), index.meta["model"]
        profile = cProfile.Profile()
        profile.enable()
        for query in queries:
            plan.search(snapshot, plan.SearchRequest.of(query, ARGS.k, mode=ARGS.profile), vectors.__getitem__, model)
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(45)


ARGS = argparse.Namespace()


# --- eval ------------------------------------------------------------------------------------------------------------

EVAL_DOC = """\
Quote-level collapse: precision and recall on the evaluation set, and its cost per query on SciFact hits.

    python bench/collapse.py eval [--data tests/data/quotes] [--scifact ../shared/benchmarks/scifact]

The set (tests/data/quotes, original text) holds 31 pairs of passages from two invented outlets reporting the same
quote or statement, printed differently (quote marks, punctuation, case, accents, inserted and dropped words,
another attribution, other sentence splits), and 31 pairs on the same topic sharing many words but no quote. Each
pair is run through :func:`citeline.query.collapse.collapse` as two hits of a search for the A passage's first quote (or
first sentence), with highlights set as the query plan will set them. A pair that comes back as one result is a
collapse. Reported: precision, recall, and how much of each labelled quote the shared span covers (its words).
Each positive pair is also run with its B passage in NFD form with no-break spaces and curly quotes.

The cost: for 50 SciFact claims, the 40 abstracts (truncated to 1,200 characters, a chunk) that share the most
terms with the claim stand in for 40 hits (a collapsed search that deepened once); the collapse of those hits is
timed. What collapse adds to a whole search is bench/collapse.py cost's.
"""


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


def eval_main() -> None:
    """Print the evaluation figures and the cost per query."""
    parser = argparse.ArgumentParser(description=EVAL_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO / "tests" / "data" / "quotes")
    parser.add_argument("--scifact", type=Path, default=REPO.parent / "shared" / "benchmarks" / "scifact")
    args = parser.parse_args()
    figures = evaluate(args.data)
    print(json.dumps(figures, indent=1))
    if (args.scifact / "corpus.jsonl").exists():
        wall, cpu = latency(args.scifact)
        print(f"collapse of 40 SciFact candidates (k=10): {wall:.2f} ms wall, {cpu:.2f} ms CPU per query")


# --- precision -------------------------------------------------------------------------------------------------------

PRECISION_DOC = """\
Collapse precision: false and missed merges on the generated sets (tests/_collapse_sets.py); with ``--works``,
the works recognised at ingest (citeline/store/works.py) on the works sets (tests/_works_sets.py) and their cost.

    python bench/collapse.py precision [--model] [--records 60] [-k 10]
    python bench/collapse.py precision --works [--corpus 3000] [--sets-only]
    python bench/collapse.py precision --works --tree DOCS --page-roots ROOTS [--same PATH=PAGE]
                                       [--questions QUESTIONS.jsonl [--model]]

``--works``: per set, pairs of files of one work merged or missed and pairs of different works merged (false), and
on the MkDocs and Sphinx sets the grouped top 5s' slots taken by a work already shown, with works and without; then
(unless ``--sets-only``) the CPU recognising works adds to an ingest of a generated corpus and to a search.

``--works --tree DOCS``: the same on a real documentation tree instead (a folder as a user holds it: the sources
beside their build, ingested whole). Ground truth by page name (``tests/_works_sets.py``'s ``tree_families``): a
file's page is its path relative to the deepest of ``--page-roots`` holding it (comma-separated folders relative to
DOCS, '' for DOCS itself: a Sphinx checkout's ``,_build/html,_build/html/_sources``, an MkDocs one's ``docs,site``),
without ``.txt``, ``.html``/``.rst``/``.md`` and a trailing ``/index``; files of one page are one work, a file no
other shares a page with (a generated ``genindex.html``, a 404 page) is its own. ``--same README.md=index`` adds a
copy the names do not tell. The missed and false pairs are listed with the rule's two numbers (Jaccard,
containment). With ``--questions`` (JSON Lines ``{"_id", "text"}``): the grouped top 5s' slots taken by a page
already shown (its ground-truth family), with works and with the works map stubbed out, the tests' hash embedder or
with ``--model`` the real model (the ingest's CPU and wall seconds beside). bench/data/realdocs_*_questions.jsonl are
the questions of docs/quality.md#works.

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


def _work_pairs(build: Any, roots: tuple[str, ...] = ("",), explain: bool = False) -> dict[str, Any]:
    """Build a set, ingest it (hash embedder), and count the pairs of files of one family (one work) in one work
    (merged) or not (missed), and the pairs of different families in one work (false). With ``explain``, list the
    missed and false pairs with the two numbers :func:`citeline.store.works.same_work` reads (Jaccard, and how much
    of the smaller shingle set lies in the other) and each side's shingle count."""
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
        wrong: dict[str, list[tuple[tuple[str, str], tuple[str, str]]]] = {"missed": [], "false": []}
        for a, b in itertools.combinations(sorted(work), 2):
            fa, fb = family.get(a[0], a[1]), family.get(b[0], b[1])
            together = work[a] == work[b]
            if fa == fb and not together:
                wrong["missed"].append((a, b))
            if fa != fb and together:
                wrong["false"].append((a, b))
        same = sum(len(members) * (len(members) - 1) // 2 for members in _grouped(family, work).values())
        figures: dict[str, Any] = {
            "files": len(work),
            "pairs_of_one_work": same,
            "merged": same - len(wrong["missed"]),
            "missed": len(wrong["missed"]),
            "false": len(wrong["false"]),
        }
        if explain:
            for kind, pairs in wrong.items():
                figures[f"{kind}_pairs"] = [_pair_numbers(index, a, b) for a, b in pairs]
    return figures


def _grouped(family: dict[str, str], work: dict[tuple[str, str], str]) -> dict[str, list[tuple[str, str]]]:
    """The indexed documents (path, doc id) by family (a document no family names is its own)."""
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key in work:
        groups[family.get(key[0], key[1])].append(key)
    return groups


def _pair_numbers(index: Index, a: tuple[str, str], b: tuple[str, str]) -> dict[str, Any]:
    """Two documents' paths and what the works rule reads of them: Jaccard and containment of their shingle sets,
    and each set's size."""
    from citeline.store import works

    sa, sb = (works.shingles(index.document_text(doc) or "") for _, doc in (a, b))
    shared = len(sa & sb)
    return {
        "a": a[0],
        "b": b[0],
        "jaccard": round(shared / max(len(sa | sb), 1), 3),
        "containment": round(shared / max(min(len(sa), len(sb)), 1), 3),
        "shingles": [len(sa), len(sb)],
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


def _top5_repeats(
    build: Any, roots: tuple[str, ...], queries: list[str], truth: bool = False, model: bool = False
) -> dict[str, Any]:
    """Grouped top 5s (as the CLI shows them) of ``queries`` on a set, with works merged and without (the works map
    stubbed out, the same index): the slots taken by a work already shown above (its page or its source again).
    A slot's work is the one the index recognised, or with ``truth`` its family (the set's ground truth: a work the
    rule missed shown twice counts too). ``model``: the real model (default: the tests' hash embedder)."""
    from conftest import HashEmbedder

    from citeline.query import plan
    from citeline.store import generation, works

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        family = build(root / "c")
        index = Index.create(root / "ix", embedder=None if model else HashEmbedder())
        start, start_cpu = time.perf_counter(), time.process_time()
        index.ingest([root / "c" / part for part in roots])
        took = {
            "ingest_wall_s": round(time.perf_counter() - start, 1),
            "ingest_cpu_s": round(time.process_time() - start_cpu, 1),
        }
        by_doc = generation.read_meta(index.path).get(works.META_KEY, {})

        def work_of(result: Any) -> str:
            if truth:
                return str(family.get(str(Path(result.source_path).relative_to(root / "c")), result.doc_id))
            return str(by_doc.get(result.doc_id, result.doc_id))

        def repeats() -> list[str]:
            found = []
            for query in queries:
                seen: set[str] = set()
                for result in index.search(plan.SearchRequest.of(query, 5, group=True)):
                    work = work_of(result)
                    if work in seen:
                        found.append(f"{query}: {work}")
                    seen.add(work)
            return found

        merged = repeats()
        real = plan.work_map
        plan.work_map = lambda meta: {}
        try:
            apart = repeats()
        finally:
            plan.work_map = real
    figures: dict[str, Any] = {
        "queries": len(queries),
        "repeated_slots_without_works": len(apart),
        "repeated_slots_with_works": len(merged),
    }
    if truth:
        figures["repeated_with_works"] = merged
    return figures | ({"embedder": "all-MiniLM-L6-v2", **took} if model else {})


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


def tree_figures(
    tree: Path, page_roots: list[str], same: dict[str, str], questions: Path | None, model: bool
) -> dict[str, Any]:
    """Works on a documentation tree as a user's folder holds it (``tree``: sources beside their build, copied and
    ingested whole): pairs merged, missed and false against the ground truth of
    :func:`_works_sets.tree_families` (``page_roots``: the folders page names are taken relative to; ``same``: more
    files of a page, path -> page name), the missed
    and false pairs with their numbers; then with ``questions`` (JSON Lines, ``{"_id", "text"}``) the grouped top 5s'
    slots taken by a family already shown, works on and off (``model``: the real model)."""

    def build(root: Path) -> dict[str, str]:
        shutil.copytree(tree, root, symlinks=True)
        return tree_families(root, page_roots, same)

    figures = {"pairs": _work_pairs(build, explain=True)}
    if questions is not None:
        asked = [text for _, text in _queries(questions, None)[0]]
        figures["top 5s"] = _top5_repeats(build, ("",), asked, truth=True, model=model)
    return figures


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


def precision_main() -> None:
    """Print the pair-level and index-level figures as JSON."""
    parser = argparse.ArgumentParser(description=PRECISION_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="store_true", help="the real model (default: the tests' hash embedder)")
    parser.add_argument("--records", type=int, default=60)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--works", action="store_true", help="works: merges and misses per set, and their cost")
    parser.add_argument("--sets-only", action="store_true", help="--works: the sets, not the cost")
    parser.add_argument("--corpus", type=int, default=3000, help="--works: documents of the cost's generated corpus")
    parser.add_argument("--tree", type=Path, help="--works: a documentation tree (sources beside their build) instead")
    parser.add_argument(
        "--page-roots",
        default="",
        help="--tree: comma-separated folders (relative to the tree) page names are taken relative to: the sources', "
        "the build's, the build's _sources/ (the tree itself is one when it holds the sources: write it as '')",
    )
    parser.add_argument(
        "--same",
        action="append",
        default=[],
        metavar="PATH=PAGE",
        help="--tree: a file that is a copy of a page though its name does not say so (README.md=index)",
    )
    parser.add_argument("--questions", type=Path, help="--tree: JSON Lines questions for the top 5s")
    args = parser.parse_args()
    if args.works and args.tree:
        roots = [root.strip() for root in args.page_roots.split(",")]
        same = dict(pair.split("=", 1) for pair in args.same)
        print(json.dumps(tree_figures(args.tree, roots, same, args.questions, args.model), indent=1))
        return
    if args.works:
        figures: dict[str, Any] = {"works": works_figures()}
        if not args.sets_only:
            figures["cost"] = works_cost(args.corpus)
        print(json.dumps(figures, indent=1))
        return
    print(json.dumps({"pairs": pair_figures(), "index": index_figures(args.model, args.records, args.k)}, indent=1))


# --- grouping --------------------------------------------------------------------------------------------------------

GROUPING_DOC = """\
Does one result per document put more documents in the top k? Distinct documents in the top 5, flat and grouped.

    python bench/collapse.py grouping --index INDEX --queries QUERIES.jsonl [--qrels QRELS.tsv] [--k 5] [--mode hybrid]

``QUERIES.jsonl`` holds ``{"_id": ..., "text": ...}`` lines (BEIR's ``queries.jsonl``); with ``--qrels`` (BEIR's
``qrels/test.tsv``) only the judged queries run, and the share of queries with a relevant document in the top k is
reported too. Per setting (``group`` off: the API's default; on: the CLI's and the page's) it prints the mean number
of distinct documents (files, or records) among the top k results, the share of answers with k distinct ones, the
passages listed under the grouped results, and the mean wall time of a search. The index is read as ``Index.search``
reads it, with the default relevance floor. Run by hand; the figures are in docs/quality.md.
"""


def _queries(path: Path, qrels: Path | None) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
    queries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    relevant: dict[str, set[str]] = {}
    if qrels is not None:
        with qrels.open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                if int(row["score"]) > 0:
                    relevant.setdefault(row["query-id"], set()).add(row["corpus-id"])
        queries = [query for query in queries if str(query["_id"]) in relevant]
    return [(str(query["_id"]), query["text"]) for query in queries], relevant


def grouping_main() -> None:
    parser = argparse.ArgumentParser(description=GROUPING_DOC.split("\n\n")[0])
    parser.add_argument("--index", required=True, type=Path)
    parser.add_argument("--queries", required=True, type=Path)
    parser.add_argument("--qrels", type=Path, default=None)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--mode", default="hybrid")
    args = parser.parse_args()
    index = Index.open(args.index, repair=False)
    queries, relevant = _queries(args.queries, args.qrels)
    index.search(queries[0][1], args.k, mode=args.mode)  # the model loaded before timing
    print(f"{len(queries)} queries, k={args.k}, mode {args.mode}, index {args.index}")
    for group in (False, True):
        distinct, full, more, hit, seconds = [], 0, [], 0, []
        for query_id, text in queries:
            started = time.perf_counter()
            results = index.search(text, args.k, mode=args.mode, group=group)
            seconds.append(time.perf_counter() - started)
            # A record's document is its record (JSONL: the corpus id), a file's its path.
            names = [result.record_id or result.source_path for result in results]
            distinct.append(len(set(names)))
            full += len(set(names)) == args.k
            more.append(sum(len(result.more_passages) for result in results))
            hit += bool(relevant.get(query_id, set()) & set(names))
        line = (
            f"group={'on ' if group else 'off'}: distinct documents in the top {args.k}: "
            f"{statistics.mean(distinct):.2f} (all {args.k} distinct: {full}/{len(queries)}); passages listed under "
            f"them: {statistics.mean(more):.2f}; {1000 * statistics.mean(seconds):.1f} ms a search"
        )
        if relevant:
            line += f"; a relevant document in the top {args.k}: {hit}/{len(queries)}"
        print(line)


COMMANDS = {
    "cost": cost_main,
    "eval": eval_main,
    "precision": precision_main,
    "grouping": grouping_main,
}


if __name__ == "__main__":
    import _subcommands  # bench/ is on sys.path when this file runs as a script

    _subcommands.run(__doc__, COMMANDS)
