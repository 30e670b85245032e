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
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from citeline.errors import IndexLockedError
from citeline.store.locks import WRITE_LOCK_FILE, writer_lock

logger = logging.getLogger("citeline.ingest")

#: Share of a run's progress scale given to each stage (measured on 1,000 SciFact abstracts with the torch
#: model: embedding is ~85% of the wall time, chunking ~8%, the rest a few percent each).
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
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.current: str | None = None
        self.total: int | None = None
        self.done = 0
        self._started = time.monotonic()
        self.seconds: dict[str, float] = {}
        #: (part, parts) of the run's commits, once they began
        self.parts: tuple[int, int] | None = None

    # ---------------------------------------------------------------- what pipeline.run calls

    def stage(self, name: str, total: int | None = None) -> None:
        """A stage begins (``total`` units of work when known); the previous one ends and its seconds are logged."""
        with self._lock:
            self._end_stage()
            self.current, self.total, self.done = name, total, 0
            self._started = time.monotonic()
            self.on_stage(name, total)

    def advance(self, count: int = 1) -> None:
        """``count`` more units of the current stage are done."""
        with self._lock:
            self.done += count
            self.on_advance(count)

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
        """The run is over: end the last stage."""
        with self._lock:
            self._end_stage()
            self.current = None

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


def default_reporter(progress: bool) -> Reporter:
    """The reporter of a run that was not given one: a bar when ``progress``, else log lines only."""
    return Bar() if progress else Reporter()


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
