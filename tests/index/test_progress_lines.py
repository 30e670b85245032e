"""Progress an operator can read in a log (issue 43.6): ``citeline ingest`` with stderr a pipe (cron, systemd, nohup,
a container) writes a progress line every ``--progress-every`` seconds (``CITELINE_PROGRESS_EVERY``): files listed
and parsed, chunks embedded of the planned total, the rate and the time left. Before, such a run printed nothing
until its last line.

A real process (tests/_hash_cli.py: the real command, the HashEmbedder paced so the run lasts a few seconds), its
stderr a pipe as a log collector's; the Prefect flow's lines (its run logger) are checked in-process."""

from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path

import pytest
from _hash_cli import SLOW_ENV, command
from _stop_signals import write_folder

from citeline.ingest.progress import Reporter

LINE = re.compile(
    r"progress \[(?P<stage>[a-z ]+)(?:, commit \d+ of \d+)?\] (?P<elapsed>\S+): files (?P<listed>[\d,?]+) listed"
    r"(?:, (?P<parsed>[\d,]+) of (?P<to_parse>[\d,]+) parsed)?; "
    r"(?:chunks not planned yet|chunks (?P<embedded>[\d,]+) of (?P<about>about )?(?P<planned>[\d,]+) embedded"
    r"(?:, (?P<rate>[\d,]+) chunks/s)?); (?P<left>.+)"
)
DOCUMENTS = 120


def _number(text: str | None) -> int:
    return int((text or "0").replace(",", ""))


def _ingest(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    docs = write_folder(tmp_path / "docs", DOCUMENTS)  # about 840 chunks
    environment = {**os.environ, SLOW_ENV: "0.004", **(env or {})}  # about 3.5 s of embedding
    argv = command("ingest", str(docs), "--index", str(tmp_path / "ix"), *args)
    return subprocess.run(argv, capture_output=True, text=True, env=environment, timeout=300)


def test_a_run_whose_stderr_is_a_pipe_prints_progress_lines(tmp_path: Path) -> None:
    done = _ingest(tmp_path, "--progress-every", "0.25")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("progress ")]
    assert len(lines) >= 5, done.stderr
    matches = [LINE.fullmatch(line) for line in lines]
    assert all(matches), [line for line, match in zip(lines, matches, strict=True) if not match]
    parsed = [match for match in matches if match and match["stage"] != "discover"]
    assert all(_number(match["listed"]) == DOCUMENTS for match in parsed)
    assert all(_number(match["to_parse"]) == DOCUMENTS for match in parsed if match["to_parse"])
    embedding = [match for match in matches if match and match["stage"] == "embed"]
    assert len(embedding) >= 3, done.stderr
    counts = [_number(match["embedded"]) for match in embedding]
    assert counts == sorted(counts) and counts[-1] > 0, counts  # the count moves, never back
    total = _number(embedding[-1]["planned"])
    summary = done.stdout.strip().splitlines()[-1]  # the run's line: N chunks embedded
    embedded = int(re.search(r"(\d+) chunks embedded", summary).group(1))  # type: ignore[union-attr]
    assert counts[-1] <= total <= embedded, (counts, total, summary)
    assert embedding[-1]["about"] is None  # while embedding, the total is the exact count of this commit's chunks
    assert all(_number(match["rate"]) > 0 for match in embedding[1:])
    assert all(re.fullmatch(r"about (\d+s|\d+m\d\ds) left \(embedding\)", match["left"]) for match in embedding[1:])


def test_the_interval_comes_from_the_environment_and_zero_turns_the_lines_off(tmp_path: Path) -> None:
    from_env = _ingest(tmp_path / "env", env={"CITELINE_PROGRESS_EVERY": "0.25"})
    assert from_env.returncode == 0, from_env.stderr
    assert sum(line.startswith("progress [") for line in from_env.stderr.splitlines()) >= 5, from_env.stderr
    off = _ingest(tmp_path / "off", "--progress-every", "0")
    assert off.returncode == 0, off.stderr
    assert not any(line.startswith("progress [") for line in off.stderr.splitlines()), off.stderr


def test_a_reporter_counts_parts_and_says_what_it_does_not_know_yet() -> None:
    lines: list[str] = []
    reporter = Reporter(every=0.0, write=lines.append)
    assert "files ? listed; chunks not planned yet; time left not known yet" in reporter.progress_line()
    reporter.stage("discover")
    reporter.discovered(10)
    reporter.stage("parse", 4)
    reporter.advance(4)
    reporter.planned([100, 50])  # two commits, estimated from their characters
    reporter.part(1, 2)
    reporter.stage("embed", 90)  # part 1's exact count replaces its estimate
    reporter.advance(30)
    line = reporter.progress_line()
    assert "[embed, commit 1 of 2]" in line and "files 10 listed, 4 of 4 parsed" in line, line
    assert "chunks 30 of about 140 embedded" in line, line
    reporter.part(2, 2)
    reporter.stage("parse", 2)  # a part's parsing again is not counted as the run's parsing
    reporter.advance(2)
    reporter.stage("embed", 40)
    line = reporter.progress_line()
    assert "4 of 4 parsed" in line and "chunks 30 of 130 embedded" in line, line
    reporter.finish()


@pytest.mark.parametrize("every", [0.05])
def test_the_lines_are_written_on_time_and_stop_with_the_run(every: float) -> None:
    import time

    lines: list[str] = []
    reporter = Reporter(every=every, write=lines.append)
    reporter.stage("embed", 10)  # one long batch: no advance, the lines still come
    time.sleep(every * 8)
    reporter.finish()
    written = len(lines)
    assert written >= 3, lines
    time.sleep(every * 4)
    assert len(lines) == written  # none after the run


def test_the_flow_logs_its_lines_through_its_reporter(caplog: pytest.LogCaptureFixture) -> None:
    """Without a ``write``, a reporter logs its lines (the flow's FlowReporter: Prefect's run logger)."""
    import time

    reporter = Reporter(every=0.05)
    with caplog.at_level(logging.INFO, logger="citeline.ingest"):
        reporter.stage("parse", 3)
        time.sleep(0.3)
        reporter.finish()
    assert any(record.getMessage().startswith("progress [parse]") for record in caplog.records), caplog.text
