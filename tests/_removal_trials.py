"""Crash trials for ``Index.remove``: SIGKILL a removing subprocess inside each stage of its commit, then check the
index is whole and exactly before or after the removal, and that re-running the removal finishes it.

A removal commits through ``store.generation.commit`` like an ingest, so its kill points are the commit protocol's
(``_reliability._install_slow_steps`` wraps ``files.write_staged``, ``files.swap_in`` and
``generation.remove_orphans``): ``vectors-tmp``, ``vectors-written``, ``bm25-tmp``, ``bm25-written``,
``committed``, plus ``select`` (the documents chosen, nothing written yet).

``python tests/_removal_trials.py remove INDEX DOCS PAUSE`` is the subprocess: it removes ``DOCS/sub*`` folders.
"""

from __future__ import annotations

import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from _reliability import (  # noqa: E402
    SlowHashEmbedder,
    _install_slow_steps,
    _marker,
    _read_lines,
    check_index,
    chunk_table,
    create_index,
)
from conftest import HashEmbedder  # noqa: E402

from citeline import Index  # noqa: E402

STAGES = ("select", "vectors-tmp", "vectors-written", "bm25-tmp", "bm25-written", "committed")
FOLDERS, FILES_PER_FOLDER = 4, 12


def write_tree(docs: Path) -> None:
    """``FOLDERS`` folders of small documents; the removal takes the first two."""
    rng = random.Random(3)
    words = ("river", "bridge", "soldier", "letter", "grain", "mill", "tax", "port", "salt", "wool", "guild")
    for folder in range(FOLDERS):
        (docs / f"sub{folder}").mkdir(parents=True, exist_ok=True)
        for number in range(FILES_PER_FOLDER):
            text = ". ".join(" ".join(rng.choice(words) for _ in range(9)).capitalize() for _ in range(6)) + ".\n"
            (docs / f"sub{folder}" / f"doc{number:02d}.txt").write_text(text, encoding="utf-8")


def removed_paths(docs: Path) -> list[Path]:
    """What every trial removes."""
    return [docs / "sub0", docs / "sub1"]


def worker_remove(index_dir: Path, docs: Path, pause: float) -> None:
    """Remove :func:`removed_paths` with the commit's stages announced and slowed."""
    from citeline.ingest import removal

    _install_slow_steps(pause)
    select = removal.matching

    def announced_select(*args: Any, **kwargs: Any) -> Any:
        chosen = select(*args, **kwargs)
        _marker("select")
        time.sleep(pause)
        return chosen

    removal.matching = announced_select
    Index.open(index_dir, embedder=SlowHashEmbedder()).remove(removed_paths(docs))
    print("done", flush=True)


def run_removal_kill_trials(workdir: Path, trials: int, *, pause: float = 0.05, seed: int = 11) -> dict[str, Any]:
    """Kill a removal at ``trials`` points (cycling through :data:`STAGES`); check and finish each index."""
    rng = random.Random(seed)
    docs = workdir / "docs"
    write_tree(docs)
    reference = create_index(workdir / "reference")
    reference.ingest([docs])
    before = chunk_table(reference.path)
    reference.remove(removed_paths(docs))
    after = chunk_table(reference.path)
    figures: dict[str, Any] = {"trials": trials, "killed": 0, "survived": 0, "killed_in": Counter(), "problems": []}
    figures["states"] = Counter()
    started = time.monotonic()
    for trial in range(trials):
        index_dir = workdir / f"trial{trial}"
        create_index(index_dir).ingest([docs])
        target = STAGES[trial % len(STAGES)]
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "remove", str(index_dir), str(docs), str(pause)],
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True).start()
        last, killed = "start", False
        while (line := lines.get(timeout=60)) is not None:
            if line.startswith("stage "):
                last = line.split()[1]
                if last == target:
                    time.sleep(rng.uniform(0, pause))
                    process.send_signal(signal.SIGKILL)
                    killed = True
                    while (more := lines.get(timeout=10)) is not None:
                        last = more.split()[1] if more.startswith("stage ") else last
                    break
        process.wait(timeout=30)
        problems = check_index(index_dir)
        state = chunk_table(index_dir)
        where = "before" if state == before else "after" if state == after else "neither"
        figures["states"][where] += 1
        if where == "neither":
            problems.append(f"the index is neither before nor after the removal ({len(state)} chunks)")
        if where == "before":  # the removal did not commit: running it again finishes it
            Index.open(index_dir, embedder=HashEmbedder()).remove(removed_paths(docs))
        problems += check_index(index_dir)
        if chunk_table(index_dir) != after:
            problems.append("after the re-run the index differs from an uninterrupted removal")
        if killed and process.returncode == -signal.SIGKILL:
            figures["killed"] += 1
            figures["killed_in"][last] += 1
            figures["survived"] += not problems
        if problems:
            figures["problems"].append({"trial": trial, "target": target, "killed_in": last, "problems": problems})
    figures["killed_in"], figures["states"] = dict(figures["killed_in"]), dict(figures["states"])
    figures["seconds"] = round(time.monotonic() - started, 1)
    return figures


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    if command != "remove":
        raise SystemExit(f"unknown command {command!r}")
    worker_remove(Path(arguments[0]), Path(arguments[1]), float(arguments[2]))
