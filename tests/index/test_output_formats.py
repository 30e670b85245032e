"""citeline.util.output: every output format, the one timestamp form, and real records from a real index."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.util.output import OUTPUT_FORMATS, format_record, format_records, iso_utc, normalize, search_records

RECORDS = [
    {"id": 1, "name": 'a, "quoted"\tname', "score": 0.123456789, "tags": ["x", "y"], "ok": True, "gone": None},
    {"id": 2, "name": "line\nbreak", "score": 2.0, "tags": [], "meta": {"author": "Zoë"}, "ok": False},
]


def test_iso_utc_accepts_every_form_and_prints_one() -> None:
    want = "2026-01-31T08:00:00.123+00:00"
    assert iso_utc("2026-01-31T08:00:00.123+00:00") == want
    assert iso_utc("2026-01-31T08:00:00.123000+00:00") == want  # DuckDB TIMESTAMPTZ .isoformat()
    assert iso_utc("2026-01-31T08:00:00.123Z") == want
    assert iso_utc("2026-01-31T09:00:00.123+01:00") == want
    assert iso_utc(datetime(2026, 1, 31, 8, 0, 0, 123000, tzinfo=UTC)) == want
    assert iso_utc(datetime(2026, 1, 31, 8, 0, 0, 123456)) == want  # naive is UTC; below ms is cut
    assert iso_utc(datetime(2026, 1, 31, 3, 0, 0, 123000, tzinfo=timezone(timedelta(hours=-5)))) == want
    assert iso_utc(date(2026, 1, 31)) == "2026-01-31T00:00:00.000+00:00"
    assert iso_utc(None) is None
    with pytest.raises(ValueError, match="not an ISO 8601 date-time: 'yesterday'"):
        iso_utc("yesterday")
    with pytest.raises(TypeError):
        iso_utc(3)  # type: ignore[arg-type]


def test_normalize_rewrites_timestamps_at_any_depth() -> None:
    record = {
        "started_at": "2026-01-31T08:00:00.123000+00:00",
        "last_run": {"finished_at": "2026-01-31T08:00:01Z", "roots": ("a", "b")},
        "sources": [{"ingested_at": datetime(2026, 1, 31, tzinfo=UTC)}],
        "title": "2026-01-31",  # not a timestamp key: left alone
    }
    assert normalize(record) == {
        "started_at": "2026-01-31T08:00:00.123+00:00",
        "last_run": {"finished_at": "2026-01-31T08:00:01.000+00:00", "roots": ["a", "b"]},
        "sources": [{"ingested_at": "2026-01-31T00:00:00.000+00:00"}],
        "title": "2026-01-31",
    }


def test_json_is_one_array_and_jsonl_one_object_per_line() -> None:
    assert json.loads(format_records(RECORDS, "json")) == RECORDS
    lines = format_records(RECORDS, "jsonl").splitlines()
    assert [json.loads(line) for line in lines] == RECORDS
    assert "Zoë" in format_records(RECORDS, "jsonl")  # not \u-escaped
    assert format_records([], "json") == "[]\n"
    assert format_records([], "jsonl") == ""


def _read_tsv(text: str) -> list[dict[str, str]]:
    """TSV as citeline writes it: one line a row, ``\\t``, ``\\n``, ``\\r`` and ``\\\\`` escaped in cells."""
    escapes = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}
    rows = [line.split("\t") for line in text.splitlines()]
    lines = [[re.sub(r"\\(.)", lambda m: escapes[m.group(1)], cell) for cell in row] for row in rows]
    return [dict(zip(lines[0], line, strict=True)) for line in lines[1:]]


def test_tsv_is_one_line_a_record_for_cut_and_awk() -> None:
    text = format_records(RECORDS, "tsv")
    assert len(text.splitlines()) == 1 + len(RECORDS)
    assert all(line.count("\t") == 6 for line in text.splitlines())
    assert _read_tsv(text)[1]["name"] == "line\nbreak" and "line\\nbreak" in text
    assert _read_tsv(format_records([{"a": "back\\slash\ttab\r"}], "tsv")) == [{"a": "back\\slash\ttab\r"}]
    assert format_records(RECORDS, "tsv", headers=False).splitlines()[0].startswith("1\t")
    assert format_records(RECORDS, "csv", headers=False).splitlines()[0].startswith("1,")


@pytest.mark.parametrize(("fmt", "delimiter"), [("csv", ","), ("tsv", "\t")])
def test_csv_and_tsv_round_trip_with_nested_values_as_json(fmt: str, delimiter: str) -> None:
    text = format_records(RECORDS, fmt)
    rows = list(csv.DictReader(io.StringIO(text), delimiter=delimiter)) if fmt == "csv" else _read_tsv(text)
    assert list(rows[0]) == ["id", "name", "score", "tags", "ok", "gone", "meta"]  # first-seen key order
    assert rows[0]["name"] == RECORDS[0]["name"]
    assert rows[1]["name"] == "line\nbreak"
    assert float(rows[0]["score"]) == RECORDS[0]["score"]  # exact
    assert json.loads(rows[0]["tags"]) == ["x", "y"]
    assert json.loads(rows[1]["meta"]) == {"author": "Zoë"}
    assert rows[0]["ok"] == "true" and rows[1]["ok"] == "false"
    assert rows[0]["gone"] == "" and rows[0]["meta"] == ""
    assert not text.endswith("\r\n")
    picked = format_records(RECORDS, fmt, columns=["name", "id"])
    parsed = list(csv.DictReader(io.StringIO(picked))) if fmt == "csv" else _read_tsv(picked)
    assert list(parsed[1].items()) == [("name", "line\nbreak"), ("id", "2")]
    assert format_records([], fmt) == ""
    assert format_records([], fmt, columns=["a", "b"]).splitlines() == [delimiter.join(["a", "b"])]


def test_table_aligns_columns_and_json_encodes_nested_cells() -> None:
    text = format_records(RECORDS, "table", columns=["id", "score", "tags", "meta"])
    lines = text.splitlines()
    assert lines[0].split() == ["id", "score", "tags", "meta"]
    assert set(lines[1]) <= {"─", "-", " "}
    assert lines[2].split()[:3] == ["1", "0.1235", '["x",']  # 4 significant digits for people
    assert '{"author": "Zoë"}' in lines[3]
    assert len(lines) == 2 + len(RECORDS)
    assert "line break" in format_records(RECORDS, "table")  # one line a record: a newline in a cell is a space
    capped = format_records([{"text": "word " * 40}], "table", max_col_width=30)
    assert max(len(line) for line in capped.splitlines()) <= 30 and capped.splitlines()[-1].endswith("…")
    assert format_records([], "table") == ""
    assert format_records(RECORDS, "table", headers=False).splitlines()[0].startswith("1 ")


def test_table_fits_the_width_cutting_only_wide_columns() -> None:
    record = {"rank": 1, "score": 0.5, "path": "/data/" + "deep/" * 30 + "file.md", "text": "word " * 80}
    lines = format_records([record], "table", width=80).splitlines()
    assert len(lines) == 3 and max(len(line) for line in lines) <= 80
    assert lines[2].split()[:2] == ["1", "0.5"]  # narrow columns whole
    assert lines[2].count("…") == 2  # the path and the text cut


def test_unknown_format_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown format 'xml'; choose one of table, json, jsonl, csv, tsv"):
        format_records(RECORDS, "xml")


def test_format_record_for_status() -> None:
    record = {"path": "ix", "documents": 2, "last_run": {"started_at": "2026-01-31T08:00:00Z"}}
    assert json.loads(format_record(record, "json"))["last_run"]["started_at"] == "2026-01-31T08:00:00.000+00:00"
    table = format_record(record, "table").splitlines()
    assert table[0].split() == ["path", "ix"]
    assert table[2].split() == ["last_run.started_at", "2026-01-31T08:00:00.000+00:00"]  # readable, not JSON
    assert len(format_record(record, "csv").splitlines()) == 2
    assert len(format_record(record, "jsonl").splitlines()) == 1


def test_real_records_print_in_every_format(tmp_path: Path, seeds_dir: Path) -> None:
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    summary = index.ingest([seeds_dir])
    records = search_records(index.search("soldiers defect from the garrison", k=3))
    assert [r["rank"] for r in records] == [1, 2, 3]
    assert next(iter(records[0])) == "rank"
    runs = [run.to_dict() for run in index.runs()]
    # ingest --json and runs --json printed the same instant two ways; normalized, they agree.
    assert normalize(summary.to_dict())["started_at"] == normalize(runs[0])["started_at"]
    assert normalize(runs[0])["started_at"].endswith("+00:00")
    status = index.status().to_dict()
    for fmt in OUTPUT_FORMATS:
        for rows in (records, runs):
            assert format_records(rows, fmt).strip()
        assert format_record(status, fmt).strip()
    parsed = list(csv.DictReader(io.StringIO(format_records(records, "csv"))))
    assert parsed[0]["doc_id"] == records[0]["doc_id"]
    assert json.loads(parsed[0]["sources"])[0]["doc_id"] == records[0]["doc_id"]
    assert parsed[0]["ingested_at"] == records[0]["ingested_at"] == iso_utc(records[0]["ingested_at"])


def test_normalize_turns_dataclasses_into_dicts() -> None:
    from dataclasses import dataclass

    @dataclass
    class Span:
        start: int
        ingested_at: datetime

    assert normalize({"highlights": [Span(1, datetime(2026, 1, 1, tzinfo=UTC))]}) == {
        "highlights": [{"start": 1, "ingested_at": "2026-01-01T00:00:00.000+00:00"}]
    }
