"""Issue 18, ideas not yet tried, scored on SciFact train (choose) and test (report) from cached scores.

    python bench/experiments/tune_q18.py --beir ../shared/benchmarks/scifact --index /tmp/q18-scifact \\
        > bench/results/scifact-quality-q18.txt          # and --index /tmp/q18-scifact-int8 (onnx-int8)

Reads every chunk vector, ordinal and text from the index's ``meta.duckdb``, embeds the queries with the index's
own query encoder, scores every chunk by cosine (exact) and by BM25 (the index's lexical ``scores_of``), then
replays ``citeline.query.stages.ConvexFusion`` in numpy (candidates: both rankings' top 300, as
``citeline eval``'s first k; cosines min-max over the dense top 200, BM25 over its best with floor 0) and ranks
documents by their best chunk as ``citeline eval`` does. Section 0 checks the replay against the library's numbers.
Sections:

1. dense mode: a document's score from its chunks' cosines (best chunk; blended with the cosine of its chunks'
   mean vector, plain or length-weighted; a title left alone as chunk 0 scored blended with the chunk after it,
   by score or by vector), by the relevant documents' chunk count as bench/dense_vs_whole.py splits them.
2. hybrid: the same document centroid as a document signal; the title blend in the dense part.
3. hybrid: query-adaptive dense weight from how peaked each list's normalised top 10 is.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np

from citeline import Index
from citeline.eval.beir import CorpusChunks, load_beir, ndcg, recall

CANDIDATES = 300  #: citeline eval's first k (3 chunks for each of the 100 documents it ranks)
SCALE_DEPTH = 200  #: Fusion.depth: the dense top list the cosines are rescaled by


class Corpus:
    """Every chunk of the index: vector, document, ordinal, text, length; chunks in (document, ordinal) order."""

    def __init__(self, index: Index, beir: Path):
        chunks = CorpusChunks(index, beir / "corpus.jsonl")
        connection = duckdb.connect(str(index.path / "meta.duckdb"), read_only=True)
        rows = connection.execute(
            "SELECT c.chunk_id, c.ordinal, c.vector, c.text, d.title FROM chunks c JOIN documents d USING (doc_id)"
        ).fetchall()
        connection.close()
        rows = [r for r in rows if r[0] in chunks.record_of]
        rows.sort(key=lambda r: (chunks.record_of[r[0]], r[1]))
        self.ids = [chunks.record_of[r[0]] for r in rows]
        self.doc_ids = list(dict.fromkeys(self.ids))
        position = {d: i for i, d in enumerate(self.doc_ids)}
        self.chunk_ids = np.array([r[0] for r in rows], dtype=np.int64)
        self.doc_of = np.array([position[d] for d in self.ids])
        self.ordinal = np.array([r[1] for r in rows])
        self.texts: list[str] = [r[3] for r in rows]  #: each chunk's own text (what embed_text "chunk" embeds)
        self.length = np.array([len(t) for t in self.texts], dtype=np.float64)
        self.vectors = np.asarray([r[2] for r in rows], dtype=np.float32)
        self.count = np.bincount(self.doc_of)
        self.starts = np.r_[0, np.cumsum(self.count)][:-1]
        several = self.count[self.doc_of] > 1
        #: chunk 0 whose text is the document's title alone (the chunker kept title and abstract apart)
        self.title_alone = (self.ordinal == 0) & several & np.array([r[3].strip() == r[4].strip() for r in rows])
        #: the chunk after each chunk in its document (itself for a document's last chunk)
        last = np.r_[self.starts[1:] - 1, len(rows) - 1][self.doc_of] == np.arange(len(rows))
        self.next = np.where(last, np.arange(len(rows)), np.arange(len(rows)) + 1)
        self.sorted_ids = np.argsort(self.chunk_ids)

    def reduce_max(self, scores: np.ndarray) -> np.ndarray:
        """Each document's best chunk score (queries x documents)."""
        return np.maximum.reduceat(scores, self.starts, axis=1)

    def mean_vectors(self, weights: np.ndarray | None = None, vectors: np.ndarray | None = None) -> np.ndarray:
        """Each document's normalised mean chunk vector (``weights``: per chunk; ``vectors``: other chunk vectors
        than the stored ones, in the same order)."""
        v = (self.vectors if vectors is None else vectors).astype(np.float64)
        if weights is not None:
            v = v * weights[:, None]
        sums = np.add.reduceat(v, self.starts, axis=0)
        return sums / np.linalg.norm(sums, axis=1, keepdims=True)


class Split:
    """One split's queries with their cosine and BM25 score of every chunk."""

    def __init__(self, index: Index, corpus: Corpus, beir: Path, name: str):
        dataset = load_beir(beir, name)
        self.name = name
        self.queries = [q for q in dataset.queries if q in dataset.qrels]
        self.qrels = dataset.qrels
        self.query_vectors = np.asarray([index.encode_query(dataset.queries[q]) for q in self.queries], np.float32)
        self.cosines = (self.query_vectors @ corpus.vectors.T).astype(np.float64)
        lexical = index.snapshot().lexical
        self.bm25 = np.array(
            [lexical.scores_of(dataset.queries[q], corpus.chunk_ids) for q in self.queries], dtype=np.float64
        )
        position = {d: i for i, d in enumerate(corpus.doc_ids)}
        most = [max(int(corpus.count[position[d]]) for d in self.qrels[q] if d in position) for q in self.queries]
        relevant = np.array(most)
        self.groups = {"all": relevant > 0, "rel 1 chunk": relevant == 1, "2": relevant == 2, ">=3": relevant >= 3}
        self.corpus = corpus

    def score_documents(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-query nDCG@10 and Recall@100 of documents ranked by ``scores`` (queries x documents)."""
        ids = self.corpus.doc_ids
        top = np.argsort(-scores, axis=1, kind="stable")[:, :100]
        nd = np.array([ndcg([ids[j] for j in top[i, :10]], self.qrels[q]) for i, q in enumerate(self.queries)])
        rc = np.array([recall([ids[j] for j in top[i]], self.qrels[q]) for i, q in enumerate(self.queries)])
        return nd, rc

    def row(self, label: str, scores: np.ndarray) -> str:
        """One printed line: nDCG@10 overall and per group, Recall@100."""
        return self.line(label, *self.score_documents(scores))

    def line(self, label: str, nd: np.ndarray, rc: np.ndarray) -> str:
        """:meth:`row`'s line from per-query nDCG@10 and Recall@100 already computed."""
        groups = "".join(f"{nd[m].mean():9.4f}" for m in self.groups.values())
        return f"  {self.name:5s} {label:58s}{groups}  R@100 {rc.mean():.4f}"


def top_mask(scores: np.ndarray, k: int) -> np.ndarray:
    """Which entries are in each row's top k (positive scores only for BM25-like rows)."""
    mask = np.zeros(scores.shape, dtype=bool)
    part = np.argpartition(-scores, k, axis=1)[:, :k]
    np.put_along_axis(mask, part, True, axis=1)
    return mask


def scaled_chunks(split: Split, cosines: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The min-max rescaled cosines and BM25 scores and the candidate mask, as ``stages.ConvexFusion`` computes them."""
    cos = split.cosines if cosines is None else cosines
    candidates = top_mask(cos, CANDIDATES) | (top_mask(split.bm25, CANDIDATES) & (split.bm25 > 0))
    ranked = -np.sort(-cos, axis=1)
    low, high = ranked[:, SCALE_DEPTH - 1 : SCALE_DEPTH], ranked[:, :1]
    d = (cos - low) / (high - low)
    l_high = split.bm25.max(axis=1, keepdims=True)
    lex = split.bm25 / np.where(l_high > 0, l_high, 1.0)
    return d, lex, candidates


def scale_like_dense(values: np.ndarray, split: Split, cosines: np.ndarray | None = None) -> np.ndarray:
    """Rescale document cosines as the chunk cosines are (the dense top 200's min..max)."""
    cos = split.cosines if cosines is None else cosines
    ranked = -np.sort(-cos, axis=1)
    low, high = ranked[:, SCALE_DEPTH - 1 : SCALE_DEPTH], ranked[:, :1]
    return (values - low) / (high - low)


def hybrid_documents(
    split: Split,
    weight: float | np.ndarray,
    cosines: np.ndarray | None = None,
    document: tuple[np.ndarray, float] | None = None,
) -> np.ndarray:
    """Document scores of the convex fusion (best candidate chunk); ``document``: a per-document dense signal
    (queries x documents, on the cosine scale) and its weight, added as ``Fusion.documents`` adds one."""
    d, lex, candidates = scaled_chunks(split, cosines)
    w = np.asarray(weight, dtype=np.float64).reshape(-1, 1) if np.ndim(weight) else weight
    fused = w * d + (1 - w) * lex
    if document is not None:
        values, share = document
        fused = (1 - share) * fused + share * scale_like_dense(values, split, cosines)[:, split.corpus.doc_of]
    fused = np.where(candidates, fused, -1e9)
    return split.corpus.reduce_max(fused)


def peak(values: np.ndarray, top: int = 10) -> np.ndarray:
    """Each row's best minus the mean of its next ``top - 1`` (rows scaled so the best is 1): how far it stands out."""
    ranked = -np.sort(-values, axis=1)[:, :top]
    return ranked[:, 0] - ranked[:, 1:].mean(axis=1)


def replay_setup(
    description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None
) -> tuple[argparse.Namespace, Index, Corpus]:
    """A replay script's command line (``--beir``, ``--index``, and ``extra``'s options), its index and corpus."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    if extra is not None:
        extra(parser)
    args = parser.parse_args()
    index = Index.open(args.index)
    return args, index, Corpus(index, args.beir)


def main() -> None:
    started, cpu = time.perf_counter(), time.process_time()
    args, index, corpus = replay_setup(__doc__.splitlines()[0])
    print(f"# index {args.index} (backend {index.meta['backend']}): {len(corpus.chunk_ids)} chunks of")
    print(f"# {len(corpus.doc_ids)} documents; title alone as chunk 0: {int(corpus.title_alone.sum())}")
    splits = [Split(index, corpus, args.beir, name) for name in ("train", "test")]
    print("# columns: nDCG@10 all, relevant documents of 1 chunk, 2, >=3 chunks; then Recall@100")
    for split in splits:
        print(f"# {split.name}: " + ", ".join(f"{k} {int(m.sum())}" for k, m in split.groups.items()))

    print("\n## 0. replay check (library: citeline eval on the same index)")
    for split in splits:
        print(split.row("dense: best chunk", corpus.reduce_max(split.cosines)))
        print(split.row("hybrid: convex 0.4 (DEFAULT_FUSION)", hybrid_documents(split, 0.4)))
        print(split.row("hybrid: convex 0.5 (CHUNK_FUSION)", hybrid_documents(split, 0.5)))

    print("\n## 1. dense mode: a document's score from its chunks")
    mean = corpus.mean_vectors()
    by_length = corpus.mean_vectors(corpus.length)
    by_sqrt = corpus.mean_vectors(np.sqrt(corpus.length))
    dense_variants: dict[str, Callable[[Split], np.ndarray]] = {
        "best chunk (shipped)": lambda s: corpus.reduce_max(s.cosines)
    }
    for name, centroid in (("mean", mean), ("length-weighted mean", by_length), ("sqrt-length mean", by_sqrt)):
        dense_variants[f"cosine of {name} alone"] = lambda s, c=centroid: s.query_vectors.astype(np.float64) @ c.T
        for a in (0.1, 0.2, 0.3, 0.5):
            dense_variants[f"(1-{a})*best + {a}*cos({name})"] = lambda s, c=centroid, a=a: (
                (1 - a) * corpus.reduce_max(s.cosines) + a * (s.query_vectors.astype(np.float64) @ c.T)
            )
    title, after = np.flatnonzero(corpus.title_alone), corpus.next[corpus.title_alone]

    def title_blend(s: Split, a: float) -> np.ndarray:
        blended = s.cosines.copy()
        blended[:, title] = a * s.cosines[:, title] + (1 - a) * s.cosines[:, after]
        return blended

    for a in (0.0, 0.25, 0.5, 0.75):
        dense_variants[f"title alone = {a}*title + {1 - a}*next chunk"] = lambda s, a=a: corpus.reduce_max(
            title_blend(s, a)
        )

    def title_vector(a: float) -> np.ndarray:
        v = corpus.vectors.astype(np.float64).copy()
        v[title] = a * v[title] + (1 - a) * v[after]
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    for a in (0.25, 0.5, 0.75):
        tv = title_vector(a)
        dense_variants[f"title vector = norm({a}*title + {1 - a}*next)"] = lambda s, tv=tv: corpus.reduce_max(
            s.query_vectors.astype(np.float64) @ tv.T
        )
    for split in splits:
        for name, variant in dense_variants.items():
            print(split.row(name, variant(split)), flush=True)

    print("\n## 2. hybrid (convex 0.4) with a document centroid signal, or the title blend in the dense part")
    for split in splits:
        for name, centroid in (("mean", mean), ("length-weighted mean", by_length)):
            values = split.query_vectors.astype(np.float64) @ centroid.T
            for share in (0.05, 0.1, 0.2):
                label = f"0.4 + cos({name}) at {share}"
                print(split.row(label, hybrid_documents(split, 0.4, document=(values, share))), flush=True)
        for a in (0.25, 0.5, 0.75):
            print(
                split.row(
                    f"0.4, title alone = {a}*title + {1 - a}*next", hybrid_documents(split, 0.4, title_blend(split, a))
                )
            )

    print("\n## 3. hybrid: query-adaptive dense weight w = clip(w0 + beta*(peak_dense - peak_lexical), lo, hi)")
    for split in splits:
        d, lex, _ = scaled_chunks(split)
        gap = peak(d) - peak(lex)
        print(f"  {split.name}: peak_dense - peak_lexical: mean {gap.mean():.3f}, sd {gap.std():.3f}")
        for w0 in (0.4, 0.5):
            for beta in (-1.0, -0.5, 0.5, 1.0, 2.0):
                for lo, hi in ((0.3, 0.6), (0.2, 0.7)):
                    w = np.clip(w0 + beta * gap, lo, hi)
                    label = f"w0={w0} beta={beta} [{lo}, {hi}]"
                    print(split.row(label, hybrid_documents(split, w)), flush=True)
    print(f"\n# {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
