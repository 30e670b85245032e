"""What an ingestion run tells the people watching it: stages, counts, seconds, how far along, who holds the lock.

:func:`citeline.ingest.pipeline.run` reports to a :class:`Reporter`. The base class logs one line per stage result to
the
``citeline.ingest`` logger at INFO (silent on a console unless logging is configured, e.g. ``citeline ingest -v``);
:class:`Bar` adds a terminal progress bar per stage; the Prefect flow (``citeline.orchestration.ingest``) subclasses
it to log through Prefect's run logger and update a progress artifact. No Prefect imports here.

Progress is counted in *units of the current stage* (files while parsing, documents while chunking, chunks while
embedding); :meth:`Reporter.fraction` maps them onto one 0..1 scale for the whole run with fixed stage weights. A
run commits in parts (about ``commit_every`` chunks each, :meth:`Reporter.part`): each part repeats the parse
(files parsed again), chunk, embed and commit stages, and gets an equal share of their weight.

A run nobody watches on a terminal (cron, systemd, nohup, a container, a Prefect worker) gets a *progress line* every
``every`` seconds (``IngestOptions.progress_every``): files listed and parsed, chunks embedded of the planned total,
the rate and the time left (:meth:`Reporter.progress_line`), written by ``write`` (the CLI: stderr) or logged (the
flow: Prefect's run logger). The pipeline tells the reporter what it counts through :meth:`Reporter.discovered`
and :meth:`Reporter.planned`; the reporter is passed to the run explicitly (``IngestOptions.reporter``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from citeline.errors import IndexLockedError
from citeline.store.locks import WRITE_LOCK_FILE, writer_lock

logger = logging.getLogger("citeline.ingest")

#: Share of a run's progress scale given to each stage, in proportion to the stages' measured wall time
#: (docs/performance.md#choices-measured-in-the-code): embedding most of it, chunking a little.
STAGE_WEIGHTS = {
    "discover": 0.01,
    "parse": 0.04,
    "plan": 0.01,
    "chunk": 0.08,
    "embed": 0.80,
    "commit": 0.05,
    "query model": 0.01,  # the ONNX export: about 30 s once per model, then a file check
}
STAGES = tuple(STAGE_WEIGHTS)
#: The stages each part of a run repeats after planning.
PART_STAGES = ("chunk", "embed", "commit")


class Reporter:
    """Receives a run's progress. This one logs each stage's results and seconds to ``citeline.ingest``.

    Thread-safe: chunk/embed batches may advance it from several threads.

    ``every`` > 0: a progress line (:meth:`progress_line`) every ``every`` seconds from the first stage to
    :meth:`finish`, given to ``write`` (else logged at INFO through :meth:`emit`), from a thread of its own, so a
    line comes on time even while one long embedding batch or the commit runs.
    """

    #: whether the ``embed`` stage counts chunks (the flow's counts thousandths of its batches instead, and its
    #: batches report their chunks through :meth:`chunks_embedded`)
    embed_counts_chunks = True

    def __init__(self, every: float = 0.0, write: Callable[[str], None] | None = None) -> None:
        self._lock = threading.RLock()
        self.current: str | None = None
        self.total: int | None = None
        self.done = 0
        self._started = time.monotonic()
        self.seconds: dict[str, float] = {}
        #: (part, parts) of the run's commits, once they began
        self.parts: tuple[int, int] | None = None
        # What the progress lines count: files listed, files to parse and parsed (before the plan), the chunks
        # planned per part (estimates, replaced by each part's exact count when its embedding begins), embedded.
        self.every, self._write = every, write
        self._begun: float | None = None
        self.listed: int | None = None
        self.to_parse: int | None = None
        self.parsed = 0
        self.embedded = 0
        self._planned: list[int] | None = None
        self._exact: dict[int, int] = {}
        self._ticking = threading.Event()
        self._ticker: threading.Thread | None = None

    # ---------------------------------------------------------------- what pipeline.run calls

    def stage(self, name: str, total: int | None = None) -> None:
        """A stage begins (``total`` units of work when known); the previous one ends and its seconds are logged."""
        with self._lock:
            self._end_stage()
            self.current, self.total, self.done = name, total, 0
            self._started = time.monotonic()
            if self._begun is None:
                self._begun = self._started
            if name == "parse" and self._planned is None:
                self.to_parse = total
            if name == "embed" and self.embed_counts_chunks and total is not None:
                self._exact[self.parts[0] if self.parts else 1] = total
            self._start_ticker()
            self.on_stage(name, total)

    def advance(self, count: int = 1) -> None:
        """``count`` more units of the current stage are done."""
        with self._lock:
            self.done += count
            if self.current == "parse" and self._planned is None:
                self.parsed += count
            elif self.current == "embed" and self.embed_counts_chunks:
                self.embedded += count
            self.on_advance(count)

    def discovered(self, files: int) -> None:
        """Discovery listed ``files`` files (for the progress lines)."""
        with self._lock:
            self.listed = files

    def planned(self, chunks: Sequence[int]) -> None:
        """The plan is made: about ``chunks[n]`` chunks for part n + 1 (for the progress lines' total)."""
        with self._lock:
            self._planned = list(chunks)

    def chunks_embedded(self, count: int) -> None:
        """``count`` more chunks are embedded (a flow's batch, whose stage is counted in other units)."""
        with self._lock:
            self.embedded += count

    def part(self, number: int, parts: int) -> None:
        """Part ``number`` of ``parts`` begins: its chunk, embed and commit stages follow (and a parse stage when
        it parses files again)."""
        with self._lock:
            self.parts = (number, parts)

    def info(self, message: str) -> None:
        """A result worth a log line (counts of a stage, a file that failed)."""
        self.emit(logging.INFO, message)

    def warning(self, message: str) -> None:
        """Something of a file the user should check although it was indexed (an encoding guessed)."""
        self.emit(logging.WARNING, message)

    def waiting(self, message: str) -> None:
        """The run waits for another writer's lock (``message`` names it)."""
        self.emit(logging.WARNING, message)

    def finish(self) -> None:
        """The run is over: end the last stage (and the progress lines)."""
        with self._lock:
            self._end_stage()
            self.current = None
        self._stop_ticker()

    def progress_line(self) -> str:
        """The run so far, in one line for a log: ``progress [embed, commit 1 of 2] 2m10s: files 1,000 listed,
        1,000 of 1,000 parsed; chunks 3,200 of about 8,000 embedded, 110 chunks/s; about 45s left``."""
        with self._lock:
            now = time.monotonic()
            where = self.current or ("starting" if self._begun is None else "done")
            if self.parts and self.parts[1] > 1 and self.current in ("parse", *PART_STAGES):
                where += f", commit {self.parts[0]} of {self.parts[1]}"
            elapsed = now - (self._begun if self._begun is not None else now)
            files = f"files {_count(self.listed)} listed"
            if self.to_parse is not None:
                files += f", {self.parsed:,} of {self.to_parse:,} parsed"
            chunks, rate = "chunks not planned yet", 0.0
            planned = self._planned_chunks()
            embedding = self.seconds.get("embed", 0.0) + (now - self._started if self.current == "embed" else 0.0)
            if embedding > 0:
                rate = self.embedded / embedding
            if planned is not None:
                total, exact = planned
                chunks = f"chunks {self.embedded:,} of {'' if exact else 'about '}{total:,} embedded"
                chunks += f", {rate:,.0f} chunks/s" if rate else ""
            elif self.embedded:
                chunks = f"chunks {self.embedded:,} embedded, {rate:,.0f} chunks/s"
            return f"progress [{where}] {_duration(elapsed)}: {files}; {chunks}; {self._time_left(elapsed, rate)}"

    def _planned_chunks(self) -> tuple[int, bool] | None:
        # The chunks to embed: each part's exact count once its embedding began, else the plan's estimate.
        if self._planned is None:
            return None
        parts = [self._exact.get(number, estimate) for number, estimate in enumerate(self._planned, 1)]
        exact = all(number in self._exact for number in range(1, len(self._planned) + 1))
        return sum(parts), exact

    def _time_left(self, elapsed: float, rate: float) -> str:
        # While embedding (most of a run): the chunks left at the rate so far; else the run's fraction so far.
        if self.current is None:
            return "time left not known yet" if self._begun is None else "finished"
        planned = self._planned_chunks()
        if self.current == "embed" and rate > 0 and planned is not None:
            return f"about {_duration(max(planned[0] - self.embedded, 0) / rate)} left (embedding)"
        fraction = self.fraction()
        if fraction < 0.02 or elapsed < 1.0:
            return "time left not known yet"
        return f"about {_duration(elapsed * (1.0 - fraction) / fraction)} left"

    def _start_ticker(self) -> None:
        if self.every > 0 and self._ticker is None:
            self._ticking.clear()
            self._ticker = threading.Thread(target=self._tick, name="citeline-progress", daemon=True)
            self._ticker.start()

    def _stop_ticker(self) -> None:
        ticker, self._ticker = self._ticker, None
        self._ticking.set()
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(timeout=5.0)

    def _tick(self) -> None:
        while not self._ticking.wait(self.every):
            line = self.progress_line()
            try:
                if self._write is not None:
                    self._write(line)
                else:
                    self.emit(logging.INFO, line)
            except Exception:  # a closed pipe or a logging handler's failure must not stop the run
                logger.debug("could not write a progress line", exc_info=True)

    # ---------------------------------------------------------------- for subclasses

    def emit(self, level: int, message: str) -> None:
        """Where lines go: the ``citeline.ingest`` logger."""
        logger.log(level, message)

    def on_stage(self, name: str, total: int | None) -> None:
        """Hook: a stage began."""

    def on_advance(self, count: int) -> None:
        """Hook: the current stage advanced."""

    def on_stage_end(self, name: str, seconds: float) -> None:
        """Hook: a stage ended after ``seconds``."""
        self.info(f"{name}: {seconds:.1f} s")

    def fraction(self) -> float:
        """How far the run is, 0..1, by :data:`STAGE_WEIGHTS`."""
        with self._lock:
            if self.current is None:
                return 1.0 if self.seconds else 0.0
            within = min(self.done / self.total, 1.0) if self.total else 0.0
            if self.parts is not None and self.current in ("parse", *PART_STAGES):
                # Stages before the parts, the parts done, then this part's stages before the current one (a part's
                # parsing again counts as the start of its chunking).
                number, parts = self.parts
                before = sum(STAGE_WEIGHTS[stage] for stage in STAGES[: STAGES.index("chunk")])
                share = sum(STAGE_WEIGHTS[stage] for stage in PART_STAGES)
                current = 0.0
                if self.current in PART_STAGES:
                    earlier = PART_STAGES[: PART_STAGES.index(self.current)]
                    current = sum(STAGE_WEIGHTS[stage] for stage in earlier) + STAGE_WEIGHTS[self.current] * within
                return min(before + (share * (number - 1) + current) / parts, 1.0)
            before = sum(w for stage, w in STAGE_WEIGHTS.items() if stage in self.seconds and stage != self.current)
            return min(before + STAGE_WEIGHTS.get(self.current, 0.0) * within, 1.0)

    def _end_stage(self) -> None:
        if self.current is not None:
            seconds = time.monotonic() - self._started
            self.seconds[self.current] = self.seconds.get(self.current, 0.0) + seconds
            self.on_stage_end(self.current, seconds)


class Bar(Reporter):
    """A progress bar per stage on stderr (tqdm), redrawn at least every second so the elapsed time moves even
    while one embedding batch or the commit runs. Result lines go to the log as in :class:`Reporter`."""

    def __init__(self, refresh_seconds: float = 1.0) -> None:
        super().__init__()
        self._bar: Any = None
        self._stop = threading.Event()
        self._refresher = threading.Thread(target=self._refresh, args=(refresh_seconds,), daemon=True)
        self._refresher.start()

    def on_stage(self, name: str, total: int | None) -> None:
        from tqdm.auto import tqdm

        unit = {"parse": "file", "chunk": "doc", "embed": "chunk", "discover": "file"}.get(name, "step")
        # A stage without a count (discover, plan, commit) shows its elapsed time, which the refresher keeps moving.
        shape = None if total is not None else "{desc}: {elapsed}"
        self._bar = tqdm(
            total=total, desc=f"{name:<8}", unit=unit, leave=True, dynamic_ncols=True, mininterval=0.5, bar_format=shape
        )

    def on_advance(self, count: int) -> None:
        if self._bar is not None:
            self._bar.update(count)

    def on_stage_end(self, name: str, seconds: float) -> None:
        super().on_stage_end(name, seconds)
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def finish(self) -> None:
        super().finish()
        self._stop.set()

    def _refresh(self, every: float) -> None:
        while not self._stop.wait(every):
            with self._lock:
                if self._bar is not None:
                    self._bar.refresh()


def default_reporter(progress: bool, every: float = 0.0) -> Reporter:
    """The reporter of a run that was not given one: a bar when ``progress``, else log lines only (with a progress
    line logged every ``every`` seconds when > 0)."""
    return Bar() if progress else Reporter(every)


def _count(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _duration(seconds: float) -> str:
    # 45s, 2m10s, 1h05m: short enough for a log line, exact enough to see a run move.
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


# ---------------------------------------------------------------- the writer lock's holder


def lock_holder(index_dir: Path, lock_file: str = WRITE_LOCK_FILE) -> str:
    """Who holds the index's writer lock, for a message: ``pid 1234 since 2026-12-03T09:47:09Z``.

    The holder writes its pid into the lock file when it takes the lock, so the file's modification time is when
    it did; a second field, if the lock file has one, is taken as the start time instead.
    """
    path = index_dir / lock_file
    try:
        fields = path.read_text().split()
        modified = path.stat().st_mtime
    except OSError:
        return "another process"
    pid = fields[0] if fields else "?"
    since = fields[1] if len(fields) > 1 else _iso(modified)
    alive = "" if not pid.isdigit() or _alive(int(pid)) else ", not running on this host"
    return f"pid {pid} since {since}{alive}"


def _iso(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def announced_writer_lock(index_dir: Path, wait: float | None, reporter: Reporter) -> Iterator[None]:
    """The index's writer lock (``store.locks.writer_lock``); a run that has to wait for it, or gives up at once,
    says who holds it: in ``reporter.waiting`` and in the :class:`IndexLockedError` it raises."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(writer_lock(index_dir, wait=0))
        except IndexLockedError as exc:
            holder = lock_holder(index_dir)
            if wait == 0:
                raise IndexLockedError(f"{exc} (held by {holder})") from None
            reporter.waiting(
                f"waiting for the writer lock of {index_dir}: held by {holder}"
                + (f"; giving up after {wait:g} s" if wait is not None else "")
            )
            try:
                stack.enter_context(writer_lock(index_dir, wait=wait))
            except IndexLockedError as again:
                raise IndexLockedError(f"{again} (held by {holder})") from None
            reporter.info(f"took the writer lock of {index_dir}")
        yield
