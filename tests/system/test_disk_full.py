"""A full disk while a commit writes its files: one line on stderr (the error), nothing else: no "Exception ignored
in: <generator object passage_batches...>", no DuckDB "Connection already closed!" (issue 32). The fault is an
injected ENOSPC (``tests/_faults.py`` fills a real tmpfs where the machine allows mounting one) in a child process,
so that whatever a stream left open would print when collected, or at exit, lands in the captured stderr."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

CHILD = """
import errno, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from conftest import HashEmbedder
from citeline import CitelineError, Index
from citeline.store import passages

work, step = Path(sys.argv[1]), sys.argv[2]
docs = work / "docs"
docs.mkdir()
for i in range(6):
    (docs / f"d{i}.txt").write_text(f"Levee {i}\\n\\n" + f"The river levee number {i} held the water. " * 40)
index = Index.create(work / "index", embedder=HashEmbedder())
index.ingest([docs])
for i in range(3):
    (docs / f"m{i}.txt").write_text(f"More {i}\\n\\n" + f"Another levee story {i}. " * 60)


def full(folder, batches):
    for _ in batches:  # the catalog's stream is open and half read when the disk fills up
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / passages.ROWS_FILE))
    raise AssertionError("no rows to write")


passages.write = full
try:
    index.ingest([docs]) if step == "commit" else index.rebuild()
except CitelineError as exc:
    print(exc, file=sys.stderr)
else:
    raise SystemExit("the full disk went unnoticed")
passages.write = None
import gc
gc.collect()
"""


@pytest.mark.parametrize("step", ["commit", "rebuild"])
def test_a_full_disk_prints_one_line(tmp_path: Path, step: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), step, str(TESTS)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "no space left on device" in lines[0], done.stderr
