"""Builders the test files share (a module of its own, so that no test file imports another across tiers)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

#: Hypothesis's profile of CI's second run (tests/conftest.py registers it): property tests at their full counts.
SLOW_PROFILE = "ci-slow"


def examples(full: int) -> int:
    """How many examples a property test draws: ``full`` under the :data:`SLOW_PROFILE` profile (CI's second run),
    a fifth of it and at least 10 in the default tier, whose job is feedback in minutes. Read when the test module
    is imported, after pytest has loaded ``--hypothesis-profile``."""
    from hypothesis import settings

    return full if settings.get_current_profile_name() == SLOW_PROFILE else max(10, full // 5)


#: The shard tests' corpus: this many synthetic abstracts (:func:`synthetic_abstracts`), whatever the machine holds.
SHARD_DOCUMENTS = 240


def minimal_pdf(pages: list[str]) -> bytes:
    """A valid PDF of ``pages`` (Helvetica, each line of a page's text a line of the page, written in PDF string
    syntax), cross-reference table included."""
    objects = {
        1: "<< /Type /Catalog /Pages 2 0 R >>",
        2: f"<< /Type /Pages /Kids [{' '.join(f'{4 + 2 * i} 0 R' for i in range(len(pages)))}] /Count {len(pages)} >>",
        3: "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    for i, text in enumerate(pages):
        # Each line a PDF string as written (octal escapes such as \\256 kept: a caller writes PDF string syntax).
        stream = "BT /F1 12 Tf 14 TL 72 720 Td " + " T* ".join(f"({line}) Tj" for line in text.split("\n")) + " ET"
        objects[4 + 2 * i] = (
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>"
        )
        objects[5 + 2 * i] = f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream"
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number in sorted(objects):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{objects[number]}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def minimal_docx() -> bytes:
    """A small Word document by python-docx: properties, a heading, a paragraph and a table."""
    import docx

    document = docx.Document()
    document.core_properties.author = "Mara"
    document.add_heading("Heading", level=1)
    document.add_paragraph("A paragraph about rivers.")
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "cell", "other"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


#: A valid file of every registered format (the fuzz tests mutate them; a contract test checks each format has one).
SAMPLES = {
    ".txt": b"A title\n\nSome text about rivers and bridges.\n",
    ".md": b"---\nauthor: Mara\nyear: 2021\ntags: [a, b]\n---\n# Heading\n\nA paragraph.\n\n- a list item\n",
    ".html": b"<html><head><title>T</title></head><body><article><p>Main text here.</p></article></body></html>",
    ".jsonl": b'{"_id": "1", "title": "One", "text": "first record"}\n{"id": 2, "text": "second"}\n',
    ".pdf": minimal_pdf(["First page about wages", "Second page"]),
    ".docx": minimal_docx(),
    ".rst": b"=====\nTitle\n=====\n\n:author: Mara\n:year: 2021\n\nA *paragraph*.\n\n- item\n\n::\n\n    code\n",
    ".csv": b'id,title,text,year\n1,One,"first, record",2021\n2,,second,2020\n',
    ".tsv": b"name\tcity\tyear\nMara\tTallinn\t2021\n",
}
ALIASES = {".markdown": ".md", ".htm": ".html"}


def sample(suffix: str) -> bytes:
    """A valid file of this suffix."""
    return SAMPLES[ALIASES.get(suffix, suffix)]


def make_beir(root: Path) -> Path:
    """A tiny BEIR dataset whose queries each name words of one document."""
    docs = {
        "10": ("Volcanoes", "Magma rises through the crust and erupts as lava from volcanic vents."),
        "11": ("Honeybees", "Worker bees forage for nectar and pollen and dance to share directions."),
        "12": ("Glaciers", "Compacted snow becomes glacial ice that flows slowly downhill under its weight."),
        "13": ("Tides", "The gravitational pull of the moon raises ocean tides twice a day."),
        "14": ("Photosynthesis", "Chloroplasts capture sunlight to turn carbon dioxide and water into sugar."),
    }
    root.mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as handle:
        for doc_id, (title, text) in docs.items():
            handle.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    queries = {
        "q1": "how does magma erupt as lava",
        "q2": "why do bees dance for nectar",
        "q3": "what makes ocean tides",
        "q4": "an unjudged query about glaciers",
    }
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\t10\t1\nq2\t11\t2\nq2\t14\t0\nq3\t13\t1\nq4\t12\t0\n"
    )
    return root


def synthetic_abstracts(count: int, seed: int = 13, sentences: int = 14) -> tuple[list[dict[str, str]], list[str]]:
    """Abstracts of made-up words with a Zipf-like law (a few very common words, a long rare tail) and queries
    drawn from them: enough shared and rare terms that BM25 statistics and ties matter as in SciFact."""
    rng = np.random.default_rng(seed)
    # The common words are English (the seeds' ~600 words: a made-up word costs the tokenizer several pieces, and
    # commits are planned from character counts), the rare tail made up.
    seeds = Path(__file__).resolve().parent.parent / "seeds"
    text = " ".join(path.read_text() for path in sorted(seeds.glob("*.md")))
    english = sorted({word.lower() for word in re.findall(r"[A-Za-z]{3,}", text)})
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "bra", "cor", "del", "fen", "gri", "hul"]
    rare = sorted({"".join(rng.choice(syllables, size=int(rng.integers(2, 4)))) for _ in range(3_000)} - set(english))
    words = [english[i] for i in rng.permutation(len(english))] + [rare[i] for i in rng.permutation(len(rare))]
    cumulative = np.cumsum(1.0 / np.arange(1, len(words) + 1) ** 1.1)
    cumulative /= cumulative[-1]

    def sentence(length: int) -> str:
        drawn = np.minimum(np.searchsorted(cumulative, rng.random(length)), len(words) - 1)
        return " ".join(words[i] for i in drawn).capitalize() + "."

    records = [
        {
            "id": f"s{n}",
            "title": sentence(int(rng.integers(4, 10)))[:-1],
            "text": " ".join(sentence(int(rng.integers(8, 30))) for _ in range(int(rng.integers(2, sentences)))),
        }
        for n in range(count)
    ]
    queries = []
    for n in rng.choice(count, size=min(100, count), replace=False):
        words_of = records[int(n)]["text"].rstrip(".").replace(".", "").split()
        queries.append(" ".join(rng.choice(words_of, size=min(7, len(words_of)), replace=False)))
    return records, queries


def same_ranking(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    """The same ranking: the same ids in the same order, where chunks with exactly equal scores (the HashEmbedder
    gives many) may come in either order, and a tie across the k-th place may keep either chunk (FAISS orders
    exact ties by its own heap, not by id)."""
    assert [score for _, score in got] == pytest.approx([score for _, score in want], abs=1e-6)
    # Groups of equal scores by position, judged on ``want``'s scores within 1e-6 (not by rounding, which can split
    # a float32 cosine's last bit into two groups: a hybrid candidate set that differs by a tied chunk at depth 200
    # changes BLAS's blocking, and so the last bit of other candidates' cosines).
    scores = [score for _, score in want]
    group = [next(j for j, other in enumerate(scores) if abs(other - score) <= 1e-6) for score in scores]
    tail = {i for i, score in enumerate(scores) if abs(score - scores[-1]) <= 1e-6}

    def grouped(ranking: list[tuple[int, float]]) -> dict[int, set[int]]:
        found: dict[int, set[int]] = {}
        for position, (chunk_id, _) in enumerate(ranking):
            if position not in tail:
                found.setdefault(group[position], set()).add(chunk_id)
        return found

    assert grouped(got) == grouped(want)


def shard_queries(count: int = 12) -> list[str]:
    """The first ``count`` queries drawn from the shard tests' corpus (:data:`SHARD_DOCUMENTS` abstracts)."""
    return synthetic_abstracts(SHARD_DOCUMENTS)[1][:count]


def abstracts_file(folder: Path, documents: int = SHARD_DOCUMENTS, name: str = "abstracts.jsonl") -> Path:
    """The first ``documents`` synthetic abstracts as one JSONL file in a new ``folder``; returns the folder."""
    folder.mkdir(parents=True)
    records, _ = synthetic_abstracts(documents)
    (folder / name).write_text("".join(json.dumps(record) + "\n" for record in records))
    return folder


def interruptible() -> None:
    """``preexec_fn`` of a child process a test will send SIGINT: SIGINT at its default action. Started in the
    background by a non-interactive shell (``pytest ... &``, nohup), the test run inherits SIGINT ignored, Python then
    installs no KeyboardInterrupt handler, and the child ignored the Ctrl-C the test sent (its run 'succeeded')."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def reading_only_on_workers(monkeypatch: pytest.MonkeyPatch, *forbidden: tuple[object, str]) -> list[Any]:
    """A sharded run on Dask with nothing read in this process: ``pipeline.parse_source`` (and each ``(module,
    name)`` of ``forbidden``) fails here, the workers have their own; returns the list the shards' jobs sent to the
    cluster are collected in."""
    from citeline.ingest import pipeline
    from citeline.sharding import index

    jobs: list[Any] = []
    real_execute_on = index.execute_on

    def seen(client: Any, busy: list[Any], shard_workers: Any) -> Any:
        jobs.extend(busy)
        return real_execute_on(client, busy, shard_workers)

    def not_here(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a source was read in the coordinator")

    monkeypatch.setattr(index, "execute_on", seen)
    for module, name in ((pipeline, "parse_source"), *forbidden):
        monkeypatch.setattr(module, name, not_here)
    return jobs


@contextlib.contextmanager
def no_library_warnings(*context: object) -> Iterator[None]:
    """Fail when the code inside raises a warning a user's terminal would show that citeline did not mean to give:
    one from a library (chardet's encoding fallback, ``re``'s "Possible nested set" on a translated glob), printed by
    the CLI as a ``warning:`` line that means nothing to the user. citeline's own warnings (raised in its modules)
    are messages it means, and Python hides deprecations outside ``__main__``."""
    import citeline

    own = str(Path(citeline.__file__).parent)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    shown = [
        f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})"
        for w in caught
        if not issubclass(w.category, DeprecationWarning | PendingDeprecationWarning)
        and not str(w.filename).startswith(own)
    ]
    assert not shown, (*context, shown)


#: What citeline says only of a damaged index (its database, ledger, manifest or files): a fuzz test over a healthy
#: one fails when an error says it, which is a caller's mistake (an argument DuckDB could not take) told as damage.
DAMAGE = re.compile(r"is damaged|database failed|from a backup")
