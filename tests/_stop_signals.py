"""Stop signals sent to real ingesting processes: shared by tests/index/test_stop_signals.py (the CLI and a program
calling :meth:`citeline.Index.ingest`) and tests/system/test_flows.py (a Prefect flow run).

Run as a script it is the process that gets the signal, ingesting with a slowed HashEmbedder (about
:data:`SECONDS_PER_TEXT` per text, so a run is mid-embedding for seconds) and printing a marker line on stderr at
each point the parent may signal it:

``python tests/_stop_signals.py cli ARGS...``
    ``citeline ARGS...`` (the real command: its ``main``), the model replaced by the slowed HashEmbedder;
``python tests/_stop_signals.py api DOCS INDEX``
    a program that calls ``Index.open(INDEX).ingest([DOCS])`` and sets no signal handler;
``python tests/_stop_signals.py flow DOCS INDEX``
    the Prefect flow (``ingest_flow``) in this process, as a deployment's flow-run process runs it.

Markers: ``embedded N`` after each encode call (N texts so far), ``parsing`` at each file parsed (parsing is slowed
to :data:`SECONDS_PER_FILE` a file), ``committing interrupted`` before the commit of what a stop kept (slowed by
:data:`INTERRUPTED_COMMIT_PAUSE`, so a second signal lands inside it).
"""

from __future__ import annotations

import queue
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from _common import interruptible  # noqa: E402
from conftest import HashEmbedder  # noqa: E402

SECONDS_PER_TEXT = 0.003
SECONDS_PER_FILE = 0.05
INTERRUPTED_COMMIT_PAUSE = 3.0
#: Documents of the test folder: about 1,400 chunks, more than one embed window (``EMBED_WINDOW``), so a signal
#: after the first window finds documents embedded whole and others not yet.
DOCUMENTS = 200
#: docker stop's default grace before SIGKILL: a stopped ingest must have exited well within it.
GRACE_SECONDS = 10.0
#: Texts embedded before the signal: past the first embed window (1,024), so some documents are embedded whole.
EMBEDDED_BEFORE_SIGNAL = 1100
WORDS = ["river", "bridge", "mill", "soldier", "harbour", "letter", "winter", "garden", "market", "lamp"]


def write_folder(docs: Path, documents: int = DOCUMENTS) -> Path:
    """``documents`` Markdown files of 400 words each (seven chunks of the test chunking)."""
    docs.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    for number in range(documents):
        words = " ".join(f"{rng.choice(WORDS)}{rng.randrange(1000)}" for _ in range(400))
        (docs / f"doc{number:03d}.md").write_text(f"# Document {number}\n\n{words}\n", encoding="utf-8")
    return docs


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class SlowHashEmbedder(HashEmbedder):
    """The HashEmbedder at about :data:`SECONDS_PER_TEXT` a text, saying how many texts it has embedded."""

    def encode(self, texts: Any, *, batch_size: int | None = 64) -> Any:
        vectors = super().encode(texts, batch_size=batch_size)
        if texts != [" "]:  # the warm-up call (embed_step) is not embedding
            time.sleep(SECONDS_PER_TEXT * len(texts))
            _say(f"embedded {self.texts_encoded}")
        return vectors


def _install() -> None:
    # The model is the slowed HashEmbedder wherever the CLI, the API or the flow would load the real one; parsing
    # and the commit of what a stop kept say when they run.
    import citeline.index
    from citeline.ingest import pipeline

    embedder = SlowHashEmbedder()
    citeline.index.SentenceTransformerEmbedder = lambda *args, **kwargs: embedder  # type: ignore[assignment,misc]
    parse = pipeline.parse_source

    def slow_parse(*args: Any, **kwargs: Any) -> Any:
        _say("parsing")
        time.sleep(SECONDS_PER_FILE)
        return parse(*args, **kwargs)

    pipeline.parse_source = slow_parse
    commit = pipeline.commit_batch

    def marked_commit(index_dir: Any, batch: Any, run: Any) -> Any:
        if run.status == "interrupted":
            _say("committing interrupted")
            time.sleep(INTERRUPTED_COMMIT_PAUSE)
        return commit(index_dir, batch, run)

    pipeline.commit_batch = marked_commit


def command(kind: str, *args: str) -> list[str]:
    """The command line of a process of this script (``cli``, ``api`` or ``flow``)."""
    return [sys.executable, str(Path(__file__).resolve()), kind, *args]


def create_index(path: Path) -> None:
    """A new index for the slowed HashEmbedder (its model name is the HashEmbedder's)."""
    from citeline import Index

    Index.create(path, embedder=HashEmbedder())


@dataclass
class Stopped:
    """How a process ended after a stop signal: its status, the seconds from the signal to its exit, its output."""

    returncode: int
    seconds: float
    stdout: str
    stderr: str


def _lines(stream: Any, lines: queue.Queue[str | None], seen: list[str]) -> None:
    for line in stream:
        seen.append(line)
        lines.put(line.rstrip("\n"))
    lines.put(None)


def signal_at(
    argv: list[str],
    signals: list[int],
    when: str,
    *,
    env: dict[str, str] | None = None,
    start_timeout: float = 180.0,
    exit_timeout: float = 60.0,
) -> Stopped:
    """Start ``argv``; at its first stderr line for which ``when`` matches (a marker, or ``embedded>=N``) send
    ``signals[0]``; each further signal at the next ``committing interrupted`` marker. Returns how it ended."""
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, bufsize=1, preexec_fn=interruptible
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []
    out: list[str] = []
    readers = [
        threading.Thread(target=_lines, args=(process.stderr, lines, seen), daemon=True),
        threading.Thread(target=_lines, args=(process.stdout, queue.Queue(), out), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        pending, sent_at = list(signals), 0.0
        deadline = time.monotonic() + start_timeout
        while pending and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            target = when if len(pending) == len(signals) else "committing interrupted"
            if _matches(line, target):
                process.send_signal(pending.pop(0))
                sent_at = sent_at or time.monotonic()
        if pending:
            process.kill()
            process.wait()
            raise AssertionError(f"never reached {when!r}; its output:\n{''.join(seen)}{''.join(out)}")
        process.wait(timeout=exit_timeout)
        seconds = time.monotonic() - sent_at
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for reader in readers:
            reader.join(timeout=10)
    return Stopped(process.returncode, seconds, "".join(out), "".join(seen))


def _matches(line: str, when: str) -> bool:
    if when.startswith("embedded>="):
        words = line.split()
        return len(words) == 2 and words[0] == "embedded" and int(words[1]) >= int(when.split(">=")[1])
    return line == when


def main(argv: list[str]) -> None:
    """The process that gets the signal (see the module's docstring)."""
    _install()
    kind, args = argv[0], argv[1:]
    if kind == "cli":
        from citeline.cli.main import main as citeline

        sys.argv = ["citeline", *args]
        citeline()
    elif kind == "api":
        from citeline import Index

        docs, index = args
        Index.open(index).ingest([docs])
    elif kind == "flow":
        from citeline.orchestration.ingest import ingest_flow

        docs, index = args
        ingest_flow(paths=[docs], index_path=index)
    else:
        raise SystemExit(f"unknown kind {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
elif __name__ == "__mp_main__":  # a sharded run's worker process (spawned; it imports this script): the same model
    _install()
