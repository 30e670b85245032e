"""``normalize`` (every served answer's JSON-ready form) reads a dataclass field by field, without
``dataclasses.asdict``'s copy first (issue 51: the copy was most of what ``GET /search`` spent beyond the search).
Whatever a result carries (metadata of any shape: nested dicts and lists, tuples, dates and datetimes, timestamps as
text under the timestamp keys, enums, numpy numbers, bad timestamps), it must give what ``normalize(asdict(x))``
gave, value for value and type for type, or raise the same error."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from citeline.query.results import Highlight, Passage, SearchResult, Source
from citeline.store.ledger import RunSummary
from citeline.util.output import TIMESTAMP_KEYS, iso_utc, normalize


def _before(value: Any, key: str | None = None) -> Any:
    # normalize as it was: asdict first, then the walk.
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _before(dataclasses.asdict(value), key)
    if isinstance(value, Mapping):
        return {str(k): _before(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_before(item) for item in value]
    if isinstance(value, datetime | date):
        return iso_utc(value)
    if isinstance(value, str) and key in TIMESTAMP_KEYS:
        return iso_utc(value)
    return value


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


MOMENTS = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1)).map(
    lambda moment: moment.replace(microsecond=moment.microsecond // 1000 * 1000)
)
ZONES = st.sampled_from([None, UTC, timezone(timedelta(hours=5, minutes=30))])
STAMPS = st.builds(lambda moment, zone: moment.replace(tzinfo=zone), MOMENTS, ZONES)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    STAMPS,
    STAMPS.map(lambda moment: moment.isoformat()),  # a timestamp as text, as the catalog gives it
    st.dates(),
    st.sampled_from([Colour.RED, Level.HIGH, np.float64(0.25), np.int64(7), "not a date", "2026-13-45"]),
)
KEYS = st.one_of(st.sampled_from(sorted(TIMESTAMP_KEYS)), st.sampled_from(["title", "tags", "n"]), st.text(max_size=5))
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple), st.dictionaries(KEYS, inner, max_size=3)
    ),
    max_leaves=12,
)
TEXT_STAMPS = st.one_of(STAMPS.map(lambda moment: moment.isoformat()), st.sampled_from(["2026-01-31T08:00:00Z"]))


def _source(stamp: str, record: str | None) -> Source:
    return Source("d1", "/data/a.jsonl", "a.jsonl#r1", "A", 7, 0, 3, 9, "passage", 0.5, "h" * 64, "run", stamp,
                  record_id=record)  # fmt: skip


RESULTS = st.builds(
    lambda metadata, stamp, other, record, pages: SearchResult(
        text="passage",
        score=0.75,
        doc_id="d1",
        source_path="/data/a.jsonl",
        source_id="a.jsonl#r1",
        title="A",
        ordinal=0,
        char_start=3,
        char_end=9,
        content_hash="h" * 64,
        run_id="run",
        ingested_at=stamp,
        model="all-MiniLM-L6-v2",
        chunk_id=7,
        page=pages,
        sources=(_source(stamp, record), _source(other, None)),
        highlights=(Highlight(3, 9, "passage", 0.5, pages),),
        metadata=metadata,
        relevance=0.6,
        record_id=record,
        more_passages=(
            Passage(
                8,
                1,
                10,
                20,
                "another",
                0.4,
                highlights=(Highlight(10, 20, "another", 0.3),),
                sources=(_source(other, record),),
            ),
        ),
    ),
    st.dictionaries(KEYS, VALUES, max_size=4),
    TEXT_STAMPS,
    TEXT_STAMPS,
    st.one_of(st.none(), st.text(max_size=4)),
    st.one_of(st.none(), st.integers(1, 9)),
)


def _outcome(function: Any, value: Any) -> tuple[str, Any]:
    try:
        answer = function(value)
    except Exception as exc:  # the same error, or the same value
        return "error", (type(exc), str(exc))
    return "value", (answer, json.dumps(answer, default=repr, sort_keys=False))


@settings(max_examples=300, deadline=None)
@given(result=RESULTS)
def test_a_result_is_what_asdict_then_normalize_gave(result: SearchResult) -> None:
    before, after = _outcome(_before, result), _outcome(normalize, result)
    assert after == before
    if after[0] == "value":  # types too: a tuple stays a list, an enum stays itself, a bool is not an int
        assert _types(after[1][0]) == _types(before[1][0])


@settings(max_examples=200, deadline=None)
@given(value=VALUES, key=st.one_of(st.none(), KEYS))
def test_any_value_is_normalized_as_before(value: Any, key: str | None) -> None:
    before = _outcome(lambda v: _before(v, key), value)
    after = _outcome(lambda v: normalize(v, key), value)
    assert after == before
    if after[0] == "value":
        assert _types(after[1][0]) == _types(before[1][0])


def test_a_run_summary_and_a_dataclass_class() -> None:
    run = RunSummary.__new__(RunSummary)  # every field, as the ledger fills them
    for spec in dataclasses.fields(RunSummary):
        object.__setattr__(run, spec.name, "2026-01-31T08:00:00Z" if spec.name in TIMESTAMP_KEYS else spec.name)
    assert normalize(run) == _before(run)
    assert normalize(RunSummary) is RunSummary  # a class is a value, not an instance to read


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value)
