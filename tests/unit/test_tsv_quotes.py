"""A TSV reads back every row as written, whatever quote characters its cells hold (issue 50): one unbalanced
quote (``5" screen`` at a cell's start) used to open a quoted cell that swallowed every row after it, silently."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citeline.sources.parsers import SourceFile, parse_source

#: Cell text as spreadsheets export it: letters, spaces and every kind of quote, no tab or line break (which a
#: TSV cannot hold).
CELLS = st.text(alphabet=st.sampled_from("ab \"'`\u201c\u201d5x"), min_size=1, max_size=12).filter(str.strip)


def _read(tmp_path: Path, text: str) -> dict[str, dict[str, object]]:
    path = tmp_path / "table.tsv"
    path.write_text(text, encoding="utf-8")
    parsed = parse_source(SourceFile(str(tmp_path), str(path), path.name))
    assert not parsed.errors, [error.reason for error in parsed.errors]
    return {document.record_id or "": {"text": document.text, **document.metadata} for document in parsed.documents}


def test_an_unbalanced_quote_drops_no_row(tmp_path: Path) -> None:
    rows = ["id\ttext\tsize", 'r1\t"A screen\t5', "r2\tA lamp\t7", 'r3\t12" ruler, "boxed"\t9', "r4\tA desk\t3"]
    read = _read(tmp_path, "\n".join(rows) + "\n")
    assert list(read) == ["r1", "r2", "r3", "r4"]
    assert read["r1"]["text"] == '"A screen' and read["r3"]["text"] == '12" ruler, "boxed"'


def test_a_quoted_tsv_keeps_its_quoted_cells(tmp_path: Path) -> None:
    # A TSV whose quotes pair as quoting (a spreadsheet's export of a cell holding a tab) is read as quoted.
    read = _read(tmp_path, 'id\ttext\nr1\t"a cell\twith a tab"\nr2\tplain\n')
    assert read["r1"]["text"] == "a cell\twith a tab" and read["r2"]["text"] == "plain"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.tuples(CELLS, CELLS), min_size=1, max_size=8))
def test_any_quotes_in_cells_read_back_every_row(tmp_path: Path, cells: list[tuple[str, str]]) -> None:
    lines = ["id\ttext\tnote"] + [f"r{n}\t{text}\t{note}" for n, (text, note) in enumerate(cells)]
    read = _read(tmp_path, "\n".join(lines) + "\n")
    assert list(read) == [f"r{n}" for n in range(len(cells))], lines
    quoted = any(text.startswith('"') or note.startswith('"') for text, note in cells)
    for n, (text, _) in enumerate(cells):
        if not quoted:  # read by the csv module's quoting rules, where a quote only opens a cell at its start
            assert read[f"r{n}"]["text"] == text
