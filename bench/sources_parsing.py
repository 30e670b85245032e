"""What reading a source costs, per format: parse_source on generated files of each kind, CPU and wall seconds.

    python bench/sources_parsing.py [--repeat 3]

Writes, in a temporary folder: the same ~1 MB of English-like text as UTF-8 and as Windows-1252 (to price
charset-normalizer's detection against a plain UTF-8 decode), 200 Markdown files with and 200 without YAML front
matter (to price PyYAML), a ~100 KB reStructuredText file (docutils), a Word document of 500 paragraphs and a
table (python-docx), and a CSV of 10,000 rows. Each line: the best of ``--repeat`` runs, CPU seconds (this process)
and wall seconds, and the characters of text parsed. Imports are paid before timing (each library is imported by a
first, untimed parse).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from citeline.sources.parsers import SourceFile, parse_source

WORDS = (
    "soldiers", "river", "crossing", "night", "families", "letters", "wages", "ledger", "ferry", "garrison",
    "winter", "café", "déjà", "naïve", "report", "quartermaster", "village", "bridge", "months", "rations",
    "coats", "boots", "orders", "captain",
)  # fmt: skip


def prose(rng: random.Random, words: int) -> str:
    """Sentences of random words, a paragraph break every 60 words."""
    out = []
    for i in range(words):
        out.append(rng.choice(WORDS) + ("." if i % 12 == 11 else ""))
        if i % 60 == 59:
            out.append("\n\n")
    return " ".join(out)


def timed(label: str, files: list[Path], root: Path, repeat: int) -> None:
    """Parse ``files`` ``repeat`` times; print the best CPU and wall seconds and the characters parsed."""
    sources = [SourceFile(str(root), str(path), path.name) for path in files]
    parse_source(sources[0])  # imports the format's library outside the timing
    best: tuple[float, float] | None = None
    chars = 0
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        chars = 0
        for source in sources:
            parsed = parse_source(source)
            assert not parsed.errors, parsed.errors
            chars += sum(len(d.text) for d in parsed.documents)
        took = (time.process_time() - cpu, time.perf_counter() - wall)
        best = took if best is None or took[0] < best[0] else best
    assert best is not None
    print(f"{label:<38} {len(files):>4} files {chars:>10,} chars  {best[0]:7.3f} CPU-s  {best[1]:7.3f} wall-s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="citeline-sources-") as folder:
        root = Path(folder)
        text = prose(rng, 160_000)
        write: dict[str, Callable[[], list[Path]]] = {}

        def encoded(name: str, encoding: str) -> list[Path]:
            path = root / name
            path.write_bytes(text.encode(encoding))
            return [path]

        def markdown(front: bool) -> list[Path]:
            paths = []
            for i in range(200):
                path = root / f"{'front' if front else 'plain'}{i}.md"
                head = f"---\ntitle: Note {i}\nauthor: Mara Ilves\nyear: {2000 + i % 25}\ntags: [a, b]\n---\n"
                path.write_text((head if front else "") + f"# Note {i}\n\n" + prose(rng, 400), encoding="utf-8")
                paths.append(path)
            return paths

        def rst() -> list[Path]:
            path = root / "long.rst"
            sections = [f"Section {i}\n{'=' * (8 + len(str(i)))}\n\n{prose(rng, 300)}\n" for i in range(50)]
            path.write_text("=====\nTitle\n=====\n\n:author: Mara\n:year: 2021\n\n" + "\n".join(sections))
            return [path]

        def word() -> list[Path]:
            import docx

            document = docx.Document()
            for _ in range(500):
                document.add_paragraph(prose(rng, 30))
            table = document.add_table(rows=50, cols=4)
            for row in table.rows:
                for cell in row.cells:
                    cell.text = prose(rng, 4)
            path = root / "long.docx"
            document.save(str(path))
            return [path]

        def table() -> list[Path]:
            path = root / "rows.csv"
            rows = [f'{i},Row {i},"{prose(rng, 25)}",{2000 + i % 25}' for i in range(10_000)]
            path.write_text("id,title,text,year\n" + "\n".join(rows) + "\n", encoding="utf-8")
            return [path]

        write["txt, UTF-8 (1 MB)"] = lambda: encoded("utf8.txt", "utf-8")
        write["txt, Windows-1252 (detected)"] = lambda: encoded("cp1252.txt", "cp1252")
        write["md, no front matter"] = lambda: markdown(False)
        write["md, YAML front matter"] = lambda: markdown(True)
        write["rst (docutils)"] = rst
        write["docx (python-docx)"] = word
        write["csv, 10,000 rows"] = table
        for label, make in write.items():
            timed(label, make(), root, args.repeat)


if __name__ == "__main__":
    main()
