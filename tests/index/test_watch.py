"""``citeline watch`` as an operator runs it: a real process (tests/_hash_cli.py: the real command, the HashEmbedder)
watching a real folder, with real file events, real signals and the ledger read back from the index.

What it must do (issue 43.5, ``citeline.ingest.watching``): every change reaches the index (new, changed, deleted
files; an editor's temp-file-and-rename save), a burst of files is one run or a few, a file that fails is one line
and the watch goes on, a deleted folder meets the removal guard (refused, nothing removed), the index inside the
watched folder does not make the watch run forever, and SIGTERM/Ctrl-C stop it as they stop an ingest (143/130; a
run in progress commits what it embedded whole, its ledger row ``interrupted``)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _common import interruptible
from _hash_cli import SLOW_ENV, command
from conftest import HashEmbedder

from citeline import Index
from citeline.store import locks

#: Seconds a test waits for a run (the process starts, loads the tokenizer, runs; on a loaded CI machine).
RUN_TIMEOUT = 60.0
#: --debounce of the tests' watches: short, so tests are quick; the behaviour does not depend on it.
DEBOUNCE = "0.3"


class Watch:
    """A ``citeline watch`` process: its runs (``--json`` lines on stdout) and its stderr lines, read as they come."""

    def __init__(self, docs: Path, index: Path, *extra: str, env: dict[str, str] | None = None):
        argv = command("watch", str(docs), "--index", str(index), "--debounce", DEBOUNCE, "--json", *extra)
        environment = {**os.environ, **(env or {})}
        self.process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=environment,
            preexec_fn=interruptible,
        )
        self.runs: queue.Queue[dict[str, Any]] = queue.Queue()
        self.errors: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_runs, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_runs(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.runs.put(json.loads(line))

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            self.errors.put(line.rstrip("\n"))

    def run(self, timeout: float = RUN_TIMEOUT) -> dict[str, Any]:
        """The next run's ledger row (as ``--json`` prints it)."""
        try:
            return self.runs.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no run within {timeout} s; stderr:\n{''.join(self.stderr)}") from None

    def line(self, starts: str, timeout: float = RUN_TIMEOUT) -> str:
        """The next stderr line starting with ``starts``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.errors.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line.startswith(starts):
                return line
        raise AssertionError(f"no line starting {starts!r}; stderr:\n{''.join(self.stderr)}")

    def quiet(self, seconds: float) -> list[dict[str, Any]]:
        """The runs within ``seconds`` (none expected, usually)."""
        time.sleep(seconds)
        runs = []
        while not self.runs.empty():
            runs.append(self.runs.get())
        return runs

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send ``signum``; the exit status."""
        self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for reader in self._readers:
            reader.join(timeout=10)


@pytest.fixture
def watches() -> Any:
    started: list[Watch] = []

    def start(*args: Any, **kwargs: Any) -> Watch:
        watch = Watch(*args, **kwargs)
        started.append(watch)
        return watch

    yield start
    for watch in started:
        watch.close()


def _index(index: Path) -> Index:
    return Index.open(index, embedder=HashEmbedder())


def _found(index: Path, text: str) -> set[str]:
    return {Path(result.source_path).name for result in _index(index).search(text, k=10, mode="lexical")}


def test_every_change_reaches_the_index_and_the_index_inside_the_folder_does_not_retrigger(
    tmp_path: Path, watches: Any
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "river.md").write_text("# River\n\nThe river floods the lower mill every spring.\n", encoding="utf-8")
    index = docs / "ix"  # inside the watched folder: its own commits must not start runs
    watch = watches(docs, index)
    first = watch.run()
    assert (first["status"], first["added"]) == ("succeeded", 1), first
    watch.line("watching ")
    assert watch.quiet(3.0) == []  # the first run's commit (inside docs/) started no run

    (docs / "lamp.md").write_text("# Lamp\n\nA lamp burned in the harbour window.\n", encoding="utf-8")
    added = watch.run()
    assert (added["added"], added["updated"], added["removed"]) == (1, 0, 0), added
    assert "lamp.md" in _found(index, "harbour lamp")

    # An editor's save: the new text written to a temporary file, renamed over the document.
    temporary = docs / ".river.md.swp"
    temporary.write_text("# River\n\nThe river froze under the old stone bridge.\n", encoding="utf-8")
    os.replace(temporary, docs / "river.md")
    saved = watch.run()
    assert (saved["added"], saved["updated"], saved["removed"]) == (0, 1, 0), saved
    assert "river.md" in _found(index, "stone bridge froze")

    (docs / "lamp.md").unlink()
    removed = watch.run()
    assert (removed["removed"], removed["status"]) == (1, "succeeded"), removed
    assert "lamp.md" not in _found(index, "harbour lamp")
    assert watch.quiet(2.0) == []
    assert watch.stop(signal.SIGTERM) == 143
    assert watch.stderr[-1].strip() == "stopped watching by SIGTERM: no run was in progress", watch.stderr
    assert _index(index).verify().ok
    # each run its own ledger row, as citeline ingest writes them
    assert [run.status for run in _index(index).runs()] == ["succeeded"] * 4


def test_a_burst_of_files_is_one_run_or_a_few(tmp_path: Path, watches: Any) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "start.txt").write_text("the first letter\n", encoding="utf-8")
    index = tmp_path / "ix"
    watch = watches(docs, index)
    watch.run()
    watch.line("watching ")
    burst = docs / "checkout"
    burst.mkdir()
    for number in range(500):  # a git checkout, an unzip: 500 files in well under a second
        (burst / f"note{number:03d}.txt").write_text(f"note {number} about the garden market\n", encoding="utf-8")
    added, runs = 0, 0
    while added < 500:
        run = watch.run()
        added, runs = added + run["added"], runs + 1
    assert added == 500 and runs <= 3, (added, runs)
    assert watch.quiet(2.0) == []
    assert _index(index).status().documents == 501
    assert len(_index(index).runs()) == 1 + runs  # one ledger row a run
    assert watch.stop(signal.SIGINT) == 130


def test_a_file_that_fails_is_one_line_and_the_watch_goes_on(tmp_path: Path, watches: Any) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("a good winter letter\n", encoding="utf-8")
    watch = watches(docs, tmp_path / "ix")
    watch.run()
    watch.line("watching ")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7\nthis is not a PDF at all\n")
    partial = watch.run()
    assert (partial["status"], partial["failed"]) == ("partial", 1), partial
    [error] = partial["errors"]  # one line naming the file (the CLI prints it so without --json)
    assert error["path"].endswith("broken.pdf") and "\n" not in error["reason"], error
    (docs / "later.md").write_text("a later soldier letter\n", encoding="utf-8")
    later = watch.run()
    assert later["added"] == 1, later
    assert "Traceback" not in "".join(watch.stderr)
    assert watch.process.poll() is None


def test_a_deleted_folder_meets_the_removal_guard(tmp_path: Path, watches: Any) -> None:
    docs = tmp_path / "docs"
    (docs / "archive").mkdir(parents=True)
    (docs / "kept.md").write_text("kept letter\n", encoding="utf-8")
    for number in range(4):
        (docs / "archive" / f"old{number}.md").write_text(f"old letter {number} of the mill\n", encoding="utf-8")
    index = tmp_path / "ix"
    watch = watches(docs, index)
    assert watch.run()["added"] == 5
    watch.line("watching ")
    shutil.rmtree(docs / "archive")  # 4 of 5 documents: past the removal threshold
    refused = watch.line("Error: ")
    assert "refused" in refused and "allow-removals" in refused.replace("_", "-"), refused
    assert _index(index).status().documents == 5  # nothing removed
    assert _index(index).runs(1)[0].status == "refused"
    assert watch.process.poll() is None  # the watch goes on
    assert watch.stop(signal.SIGTERM) == 143


def test_a_run_that_cannot_take_the_lock_is_tried_again_once_it_is_free(tmp_path: Path, watches: Any) -> None:
    """Another writer (a scheduled ingest) holds the lock past --wait: one line, then the run as soon as it is free."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("a bridge letter\n", encoding="utf-8")
    index = tmp_path / "ix"
    Index.create(index, embedder=HashEmbedder())
    with locks.writer_lock(index):
        watch = watches(docs, index, "--wait", "0")
        refused = watch.line("Error: ")
        assert "trying again" in refused, refused
        watch.line("watching ")
        assert watch.quiet(2.5) == []  # no run, and no second line while it is held
        assert not any(line.startswith("Error: ") for line in list(watch.errors.queue)), watch.stderr
    assert watch.run()["added"] == 1  # at the next tick after the lock is released
    assert watch.stop(signal.SIGTERM) == 143


def test_sigterm_during_a_run_commits_what_was_embedded_and_records_it_interrupted(
    tmp_path: Path, watches: Any
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "seed.md").write_text("seed\n", encoding="utf-8")
    index = tmp_path / "ix"
    watch = watches(docs, index, "--progress-every", "0.2", env={SLOW_ENV: "0.004"})
    watch.run()
    watch.line("watching ")
    words = " ".join(f"river{number} bridge{number % 13} mill{number % 7}" for number in range(900))
    for number in range(60):  # about 420 chunks at 4 ms each: the run embeds for a second or two
        (docs / f"doc{number:02d}.md").write_text(f"# Doc {number}\n\n{words}\n", encoding="utf-8")
    watch.line("progress [embed]")  # the run is embedding
    assert watch.stop(signal.SIGTERM) == 143
    last = watch.stderr[-1].strip()
    assert last.startswith("interrupted by SIGTERM:") and "recorded as interrupted" in last, watch.stderr
    assert "Traceback" not in "".join(watch.stderr)
    latest = _index(index).runs(1)[0]
    assert latest.status == "interrupted", latest
    assert _index(index).verify().ok


def test_index_watch_in_a_program_stops_when_asked(tmp_path: Path) -> None:
    """The Python API: the same runs, stopped by an event from another thread (a program's own shutdown)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("a garden letter\n", encoding="utf-8")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    runs: list[Any] = []
    ready, stop = threading.Event(), threading.Event()
    watcher = threading.Thread(
        target=index.watch,
        args=([docs],),
        kwargs={"debounce": 0.2, "on_run": runs.append, "on_ready": ready.set, "stop": stop, "exclude": ["*.txt"]},
    )
    watcher.start()
    try:
        assert ready.wait(RUN_TIMEOUT)
        (docs / "skip.txt").write_text("excluded: never a run\n", encoding="utf-8")
        time.sleep(1.5)
        assert len(runs) == 1
        (docs / "b.md").write_text("a market letter\n", encoding="utf-8")
        deadline = time.monotonic() + RUN_TIMEOUT
        while len(runs) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        watcher.join(timeout=RUN_TIMEOUT)
    assert not watcher.is_alive()
    assert [run.added for run in runs] == [1, 1]
    assert index.status().documents == 2
