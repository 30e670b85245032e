"""Seconds from a stop signal to the exit of the real ``citeline ingest`` (the real model), while parsing and while
embedding a first ingest: they must be well inside docker's default 10 s grace before SIGKILL (docs/runs.md).

    python bench/stop_signals.py [--signal TERM|INT] [--embed-after 110] [--parse-after 1]

Writes two folders in a temporary directory: 6,000 notes of 30 words (parsing takes a few seconds after discovery)
and 300 documents of 400 words (about 2,100 chunks: the first embed window of 1,024 texts is done after about 100 s
on 2 loaded cores). Each run is ``citeline ingest FOLDER --index IX -v``; the signal is sent ``--parse-after``
seconds after its ``discovered`` log line, or ``--embed-after`` seconds after its ``plan:`` line. Prints the exit
status, the seconds from the signal to the exit, the last line and the documents kept.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import tempfile
import time
from pathlib import Path

WORDS = ["river", "bridge", "mill", "soldier", "harbour", "letter", "winter", "garden", "market", "lamp"]


def folders(root: Path) -> tuple[Path, Path]:
    """The many-notes folder (for parsing) and the long-documents folder (for embedding)."""
    rng = random.Random(3)
    many, long = root / "many", root / "long"
    many.mkdir()
    long.mkdir()
    for number in range(6000):
        (many / f"n{number:05d}.md").write_text(f"# Note {number}\n\n" + " ".join(rng.choices(WORDS, k=30)))
    for number in range(300):
        words = " ".join(f"{rng.choice(WORDS)}{rng.randrange(1000)}" for _ in range(400))
        (long / f"d{number:03d}.md").write_text(f"# Doc {number}\n\n{words}")
    return many, long


def stop(folder: Path, index: Path, signum: int, marker: str, delay: float) -> dict[str, object]:
    """Run a first ingest of ``folder``; ``delay`` seconds after its log line containing ``marker``, send ``signum``."""
    started = time.monotonic()
    process = subprocess.Popen(
        ["citeline", "ingest", str(folder), "--index", str(index), "-v"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if marker in line:
            break
    time.sleep(delay)
    process.send_signal(signum)
    sent = time.monotonic()
    _, rest = process.communicate(timeout=120)
    seconds = time.monotonic() - sent
    status = subprocess.run(
        ["citeline", "status", "--index", str(index), "--json"], capture_output=True, text=True, check=True
    )
    return {
        "signal": signal.Signals(signum).name,
        "while": "parsing" if marker == "discovered" else "embedding",
        "into_run": round(sent - started, 1),
        "exit": process.returncode,
        "seconds": round(seconds, 2),
        "documents_kept": json.loads(status.stdout)["documents"],
        "last_line": (rest.strip().splitlines() or [""])[-1],
    }


def main() -> None:
    """Measure both stages for the signal asked for; print one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--signal", default="TERM", choices=["TERM", "INT"])
    parser.add_argument("--embed-after", type=float, default=110.0)
    parser.add_argument("--parse-after", type=float, default=1.0)
    args = parser.parse_args()
    signum = getattr(signal, f"SIG{args.signal}")
    with tempfile.TemporaryDirectory() as work:
        many, long = folders(Path(work))
        for folder, marker, delay, name in (
            (many, "discovered", args.parse_after, "p"),
            (long, "plan:", args.embed_after, "e"),
        ):
            print(json.dumps(stop(folder, Path(work) / f"ix-{name}", signum, marker, delay)), flush=True)


if __name__ == "__main__":
    main()
