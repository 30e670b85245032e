"""Issue 18: words that PDF typesetting breaks across lines ("signif-\\nicant"), on SciFact train and test.

    python bench/experiments/pdf_line_breaks.py --beir ../shared/benchmarks/scifact --index /tmp/q18-scifact-int8 \\
        > bench/results/scifact-pdf-line-breaks.txt          # and --index /tmp/q18-scifact (torch)

pypdf keeps a word broken at a line end as its two parts with a hyphen and a newline between them. This sets each
chunk's BM25 text (title and chunk, ``citeline.store.catalog.lexical_texts``) in ``--width``-character lines,
greedily, breaking a lower-case word with pyphen's English hyphenation patterns (TeX's minimums: 2 letters before
the break, 3 after) when at least 4 characters of the line are left, and a hyphenated compound at its own hyphen.
Then BM25 scores the broken text as it is, with every lower-case break joined, or with only the breaks joined
whose joined word occurs unbroken elsewhere in the same document. The model's input is left as it was (dense
unchanged), so this measures the lexical side and what it does to hybrid. Run by hand; not part of CI.
"""

from __future__ import annotations

import collections
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyphen

sys.path.insert(0, str(Path(__file__).resolve().parent))
from normalisation import bm25_matrix, bm25_texts, rankings, variant
from tune_prf import compared
from tune_q18 import Split, replay_setup

from citeline.eval.beir import load_beir

#: A line-end break: letters, a hyphen and a newline, then a lower-case letter.
BROKEN = re.compile(r"(\w*[a-z])-\n([a-z]\w*)")
WORD = re.compile(r"\w+")


def set_in_lines(text: str, width: int, hyphenator: pyphen.Pyphen) -> str:
    """``text`` in lines of at most ``width`` characters, words broken as the module docstring says."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            if len(line) + 1 + len(word) <= width or not line:
                line = f"{line} {word}" if line else word
                continue
            room = width - len(line) - 1
            parts: Iterable[tuple[str, str]] = ()
            if room >= 4 and word.isalpha() and word.islower():
                parts = hyphenator.iterate(word)  # the longest first part first
            elif room >= 4 and "-" in word:
                head, _, tail = word.rpartition("-")
                parts = [(head, tail)] if head and tail else []
            fitting = next(((head, tail) for head, tail in parts if len(head) + 1 <= room), None)
            if fitting:
                lines.append(f"{line} {fitting[0]}-")
                line = fitting[1]
            else:
                lines.append(line)
                line = word
        lines.append(line)
    return "\n".join(lines)


def joined(text: str, vocabulary: set[str] | None = None) -> str:
    """``text`` with its line-end breaks joined: all, or those whose joined word is in ``vocabulary``."""

    def join(match: re.Match[str]) -> str:
        word = match.group(1) + match.group(2)
        return word if vocabulary is None or word.lower() in vocabulary else match.group(0)

    return BROKEN.sub(join, text)


def main() -> None:
    started, cpu = time.perf_counter(), time.process_time()
    args, index, corpus = replay_setup(
        __doc__.splitlines()[0], lambda parser: parser.add_argument("--width", type=int, default=55)
    )
    lexical = bm25_texts(index, corpus)
    hyphenator = pyphen.Pyphen(lang="en_US", left=2, right=3)
    broken = [set_in_lines(text, args.width, hyphenator) for text in lexical]
    vocabulary: dict[int, set[str]] = collections.defaultdict(set)
    for document, text in zip(corpus.doc_of, broken, strict=True):
        vocabulary[int(document)].update(word.lower() for word in WORD.findall(BROKEN.sub(" ", text)))
    by_evidence = [joined(text, vocabulary[int(d)]) for d, text in zip(corpus.doc_of, broken, strict=True)]
    every = [joined(text) for text in broken]
    breaks = [m for text in broken for m in BROKEN.finditer(text)]
    own_hyphen = sum(
        1
        for text, original in zip(broken, lexical, strict=True)
        for m in BROKEN.finditer(text)
        if f"{m.group(1)}-{m.group(2)}" in original
    )
    left = sum(len(BROKEN.findall(text)) for text in by_evidence)
    print(f"# index {args.index} (backend {index.meta['backend']}): {len(lexical)} chunks, lines of {args.width}")
    print(f"# {len(breaks)} words broken at a line end, in {sum(1 for t in broken if BROKEN.search(t))} chunks;")
    print(
        f"# {own_hyphen} of them at a compound's own hyphen; joined by the document's vocabulary: {len(breaks) - left}"
    )
    print("# columns: nDCG@10 all, relevant documents of 1 chunk, 2, >=3 chunks; then Recall@100; d: against as is")
    vectors = corpus.vectors.astype(np.float64)
    cases = (("as is", lexical), ("broken", broken), ("joined by vocabulary", by_evidence), ("all joined", every))
    for name in ("train", "test"):
        split = Split(index, corpus, args.beir, name)
        queries = load_beir(args.beir, name).queries
        claims = [queries[q] for q in split.queries]
        base: dict[str, np.ndarray] = {}
        for label, case in cases:
            bm25 = bm25_matrix(case, claims, None)
            ranked = rankings(variant(split, bm25, split.query_vectors, vectors), corpus, vectors)
            for mode in ("lexical", "hybrid"):
                if mode not in base:
                    base[mode] = split.score_documents(ranked[mode])[0]
                print(compared(split, f"{mode:8s}{label}", ranked[mode], base[mode]), flush=True)
    print(f"\n# {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
