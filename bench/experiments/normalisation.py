"""Issue 18, query normalisation (Unicode NFKC, PDF ligatures, word forms), on SciFact train (choose) and test.

    python bench/experiments/normalisation.py --beir ../shared/benchmarks/scifact --index /tmp/q18-scifact-int8 \\
        --cache /tmp/lig-int8.npy > bench/results/scifact-normalisation.txt   # and the torch index

What is indexed and searched is text as a parser left it. PDF text extraction leaves typographic ligatures as
their own code points (pypdf extracts "ﬁ", U+FB01, for the two letters fi: py-pdf/pypdf#2046), and other sources
bring full-width digits, superscripts and the micro sign. The analyzer's words and the model's word pieces then
differ from what a reader types: BM25 sees "signiﬁcantly" as another word than "significantly", and the model's
tokenizer cuts it into five pieces. NFKC (Unicode's compatibility composition) writes each such character as the
letters it stands for and leaves every other text as it is.

1. **SciFact as it is** (10 ligatures, a few hundred other compatibility characters in 13,081 chunks): the shipped
   analysis against NFKC before it, for BM25 (documents and queries) and the model's input (the chunks whose text
   NFKC changes are embedded again, and every query). Lexical, dense (with its document stage) and hybrid (the
   shipped two-pass ``DEFAULT_FUSION``, replayed as ``bench/tune_strength.py`` does).
2. **SciFact as PDF extraction leaves it**: every lower-case ff, ffi, ffl, fi, fl in the titles and texts written
   as its ligature (U+FB00-FB04); chunks keep their bounds; the claims stay as typed. The shipped analysis of that
   text (every changed chunk embedded again: ``--cache`` keeps those vectors) against NFKC, which maps the
   ligatures back (its rows are section 1's NFKC rows), and against what ``citeline.sources.parsers.parse_pdf`` does
   since: the ligatures expanded to their letters in the PDF's text (``expand_ligatures``), which is SciFact as it
   is but for its own 10 ligatures (chunk bounds are kept; the parser's text would be chunked a few characters
   longer).
3. **Word forms for BM25** (documents and claims): a hyphenated compound also indexed joined ("IL-6" gives "il"
   and "il6", as "IL6" does; 275 of the 805 claims hold a hyphen), and single digits kept as words ("type 2",
   "IL-6": the shipped pattern drops one-character words). Lexical and hybrid; dense is unchanged.

Paired bootstrap intervals are against the shipped analysis of SciFact as it is. Run by hand; not part of CI.
"""

from __future__ import annotations

import copy
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_lexical import Bm25, analyze_with, query_weights
from tune_prf import compared
from tune_q18 import Corpus, Split, replay_setup
from tune_strength import ranking

from citeline import Index
from citeline.eval.beir import load_beir
from citeline.lexical.analyzer import BM25_B, BM25_K1, TOKEN_PATTERN
from citeline.query.dense_stage import DENSE_DOCUMENT_WEIGHT
from citeline.sources.parsers import expand_ligatures
from citeline.store.catalog import lexical_texts

#: Lower-case letter runs PDF fonts set as one glyph, longest first (U+FB00-FB04).
LIGATURES = (("ffi", "\ufb03"), ("ffl", "\ufb04"), ("ff", "\ufb00"), ("fi", "\ufb01"), ("fl", "\ufb02"))


def ligated(text: str) -> str:
    """``text`` with its lower-case ff, ffi, ffl, fi, fl written as ligatures, as PDF text extraction leaves them."""
    for letters, ligature in LIGATURES:
        text = text.replace(letters, ligature)
    return text


def nfkc(text: str) -> str:
    """Unicode's compatibility composition (the normalisation measured here)."""
    return unicodedata.normalize("NFKC", text)


#: A hyphenated compound (ASCII and Unicode hyphens), and a single digit standing alone.
COMPOUND = re.compile(r"(?u)\b\w+(?:[-\u2010\u2011]\w+)+\b")
DIGIT = re.compile(r"(?u)\b\d\b")


def shipped_words(text: str) -> list[str]:
    """The shipped analyzer's words of lower-cased ``text`` (``citeline.lexical.analyzer.TOKEN_PATTERN``)."""
    return TOKEN_PATTERN.findall(text)


def with_compounds(text: str) -> list[str]:
    """The shipped words, and each hyphenated compound joined ("il-6" also gives "il6")."""
    return TOKEN_PATTERN.findall(text) + [re.sub(r"[-\u2010\u2011]", "", m) for m in COMPOUND.findall(text)]


def with_digits(text: str) -> list[str]:
    """The shipped words, and each single digit standing alone ("type 2" also gives "2")."""
    return TOKEN_PATTERN.findall(text) + DIGIT.findall(text)


def bm25_texts(index: Index, corpus: Corpus) -> list[str]:
    """What BM25 indexes for each chunk (title and chunk: ``citeline.store.catalog.lexical_texts``), in the
    corpus's order."""
    connection = duckdb.connect(str(index.path / "meta.duckdb"), read_only=True)
    ids, texts = lexical_texts(connection)
    connection.close()
    return [texts[i] for i in np.searchsorted(ids, corpus.chunk_ids)]


def bm25_matrix(
    texts: list[str],
    queries: list[str],
    normalise: Callable[[str], str] | None,
    words_of: Callable[[str], list[str]] = shipped_words,
) -> np.ndarray:
    """Every query's BM25 score of every text (the shipped variant and parameters, one bm25s index), with
    ``normalise`` applied to each text first and ``words_of`` finding the words of the lower-cased text."""

    def analyze(items: Sequence[str]) -> list[list[str]]:
        return analyze_with(words_of, [normalise(t) for t in items] if normalise else items)

    bm25 = Bm25(analyze(texts), k1=BM25_K1, b=BM25_B)
    return np.array([bm25.scores(query_weights(terms)) for terms in analyze(queries)])


def variant(split: Split, bm25: np.ndarray, query_vectors: np.ndarray, vectors: np.ndarray) -> Split:
    """``split`` with other BM25 scores, query vectors and chunk vectors."""
    other = copy.copy(split)
    other.bm25, other.query_vectors = bm25, query_vectors.astype(np.float32)
    other.cosines = (other.query_vectors @ vectors.T.astype(np.float32)).astype(np.float64)
    return other


def rankings(split: Split, corpus: Corpus, vectors: np.ndarray) -> dict[str, np.ndarray]:
    """Document scores of the three modes as the library ranks them (chunk ``vectors`` as float64; hybrid:
    ``bench/tune_strength.py``'s replay of ``DEFAULT_FUSION`` with no per-query multipliers)."""
    centroids = corpus.mean_vectors(corpus.length, vectors=vectors)
    ones = np.ones(len(split.queries))
    centroid_cosines = split.query_vectors.astype(np.float64) @ centroids.T
    weight = DENSE_DOCUMENT_WEIGHT
    dense = (1 - weight) * split.cosines + weight * centroid_cosines[:, corpus.doc_of]
    return {
        "lexical": corpus.reduce_max(split.bm25),
        "dense": corpus.reduce_max(dense),
        "hybrid": ranking(split, corpus, ones, ones, vectors, centroids),
    }


def main() -> None:
    started, cpu = time.perf_counter(), time.process_time()
    args, index, corpus = replay_setup(
        __doc__.splitlines()[0],
        lambda parser: parser.add_argument("--cache", type=Path, required=True, help="ligated chunks' vectors (.npy)"),
    )
    print(f"# index {args.index} (backend {index.meta['backend']}): {len(corpus.chunk_ids)} chunks")
    lexical = bm25_texts(index, corpus)
    embedded = corpus.texts  # what the model read (the index's embed_text: "chunk")
    if index.meta.get("embed_text", "chunk") != "chunk":
        raise SystemExit("this replay expects an index whose model embeds the chunk alone")

    stored = corpus.vectors.astype(np.float64)
    changed = [i for i, t in enumerate(embedded) if nfkc(t) != t]
    vectors_nfkc = stored.copy()
    if changed:
        vectors_nfkc[changed] = index.encode([nfkc(embedded[i]) for i in changed])
    lig_changed = [i for i, t in enumerate(embedded) if ligated(t) != t]
    if args.cache.exists():
        lig_vectors = np.load(args.cache)
        print(f"# the ligated chunks' vectors: read from {args.cache}")
    else:
        began, began_cpu = time.perf_counter(), time.process_time()
        lig_vectors = index.encode([ligated(embedded[i]) for i in lig_changed])
        np.save(args.cache, lig_vectors)
        took = f"{time.perf_counter() - began:.0f} s wall, {time.process_time() - began_cpu:.0f} CPU-s"
        print(f"# embedded {len(lig_changed)} ligated chunks in {took}")
    vectors_lig = stored.copy()
    vectors_lig[lig_changed] = lig_vectors
    expanded = [i for i, t in enumerate(embedded) if expand_ligatures(t) != t]
    vectors_expanded = stored.copy()
    if expanded:
        vectors_expanded[expanded] = index.encode([expand_ligatures(embedded[i]) for i in expanded])
    characters = sum(1 for t in lexical for ch in t if nfkc(ch) != ch)
    print(f"# chunks whose embedded text NFKC changes: {len(changed)}; ", end="")
    print(f"compatibility characters in BM25 texts: {characters}")
    print(f"# chunks with a ligature once ff/ffi/ffl/fi/fl are ligated: {len(lig_changed)}; ", end="")
    print(f"with one as is: {len(expanded)}")
    print("# columns: nDCG@10 all, relevant documents of 1 chunk, 2, >=3 chunks; then Recall@100; d: against shipped")

    for name in ("train", "test"):
        split = Split(index, corpus, args.beir, name)
        queries = load_beir(args.beir, name).queries
        claims = [queries[q] for q in split.queries]
        fold = [i for i, q in enumerate(claims) if nfkc(q) != q]
        print(f"# {name}: {len(claims)} claims, {len(fold)} of them changed by NFKC")
        bm25_shipped = bm25_matrix(lexical, claims, None)
        drift = float(np.abs(bm25_shipped - split.bm25).max())
        print(f"# {name}: replayed BM25 against the index's own: largest difference {drift:.2e}")
        q_nfkc = split.query_vectors.copy()
        if fold:
            q_nfkc[fold] = np.asarray([index.encode_query(nfkc(claims[i])) for i in fold])
        cases = {
            "as is, shipped analysis": (bm25_shipped, split.query_vectors, stored),
            "as is, NFKC": (bm25_matrix(lexical, claims, nfkc), q_nfkc, vectors_nfkc),
            "PDF ligatures, shipped analysis": (
                bm25_matrix([ligated(t) for t in lexical], claims, None),
                split.query_vectors,
                vectors_lig,
            ),
            "PDF ligatures, expanded by the parser": (
                bm25_matrix([expand_ligatures(ligated(t)) for t in lexical], claims, None),
                split.query_vectors,
                vectors_expanded,
            ),
        }
        base: dict[str, np.ndarray] = {}
        for label, (bm25, query_vectors, vectors) in cases.items():
            ranked = rankings(variant(split, bm25, query_vectors, vectors), corpus, vectors)
            for mode, docs in ranked.items():
                if mode not in base:
                    base[mode] = split.score_documents(docs)[0]
                print(compared(split, f"{mode:8s}{label}", docs, base[mode]), flush=True)
        print("#   (PDF ligatures with NFKC: the 'as is, NFKC' rows, since NFKC maps every ligature back)")
        for label, words_of in (("compounds also joined", with_compounds), ("single digits kept", with_digits)):
            ranked = rankings(
                variant(split, bm25_matrix(lexical, claims, None, words_of), split.query_vectors, stored),
                corpus,
                stored,
            )
            for mode in ("lexical", "hybrid"):
                print(compared(split, f"{mode:8s}{label}", ranked[mode], base[mode]), flush=True)
    print(f"\n# {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
