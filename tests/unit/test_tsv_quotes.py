"""A TSV reads back every row as written, whatever quote characters its cells hold (issue 50): one unbalanced
quote (``5" screen`` at a cell's start) used to open a quoted cell that swallowed every row after it, silently."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citeline.sources.document import Parsed
from citeline.sources.parsers import SourceFile, parse_source

#: Cell text as spreadsheets export it: letters, spaces and every kind of quote, no tab or line break (which a
#: TSV cannot hold).
CELLS = st.text(alphabet=st.sampled_from("ab \"'`\u201c\u201d5x"), min_size=1, max_size=12).filter(str.strip)


def _parsed(tmp_path: Path, text: str) -> Parsed:
    path = tmp_path / "table.tsv"
    path.write_text(text, encoding="utf-8")
    return parse_source(SourceFile(str(tmp_path), str(path), path.name))


def _read(tmp_path: Path, text: str) -> dict[str, dict[str, object]]:
    parsed = _parsed(tmp_path, text)
    assert not parsed.errors, [error.reason for error in parsed.errors]
    return {document.record_id or "": {"text": document.text, **document.metadata} for document in parsed.documents}


def _blank_when_quoted(cell: str) -> bool:
    # A cell a quoted reading may leave without text: only quotes and spaces (``""`` is a quoted empty cell).
    return not cell.replace('"', "").strip()


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
    parsed = _parsed(tmp_path, "\n".join(lines) + "\n")
    # Every row is read back or counted as a record without text, never lost; only a cell of quotes and spaces
    # may read as no text (``""``, a quoted empty cell), and a file of nothing else is one clear error.
    read = {document.record_id: document.text for document in parsed.documents}
    if parsed.errors:
        assert [error.reason for error in parsed.errors] == ["no records with text"], lines
        assert all(_blank_when_quoted(text) for text, _ in cells), lines
        return
    assert len(read) + parsed.empty_records == len(cells), lines
    assert list(read) == [f"r{n}" for n in range(len(cells)) if f"r{n}" in read], lines  # in order
    assert all(_blank_when_quoted(text) for n, (text, _) in enumerate(cells) if f"r{n}" not in read), lines
    quoted = any(text.startswith('"') or note.startswith('"') for text, note in cells)
    for n, (text, _) in enumerate(cells):
        if not quoted:  # read by the csv module's quoting rules, where a quote only opens a cell at its start
            assert read[f"r{n}"] == text
