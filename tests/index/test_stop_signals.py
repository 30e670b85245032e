"""SIGTERM stops an ingest as Ctrl-C does (``docker stop``, systemd, Kubernetes send it): what was embedded whole
is committed, the ledger row says ``interrupted``, one line says what was kept, the exit status is 128 + the
signal, well within docker's 10 s grace; a second signal during that commit leaves the index consistent.

Real processes (tests/_stop_signals.py: the real ``citeline`` command, a program calling ``Index.ingest``), real
signals, the slowed HashEmbedder; the Prefect flow run's test is in tests/system/test_flows.py.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from _stop_signals import (
    DOCUMENTS,
    EMBEDDED_BEFORE_SIGNAL,
    GRACE_SECONDS,
    command,
    create_index,
    signal_at,
    write_folder,
)
from conftest import HashEmbedder

from citeline import Index
from citeline.ingest import stopping


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, Path]:
    index = tmp_path / "ix"
    create_index(index)
    return write_folder(tmp_path / "docs"), index


def _index(index: Path) -> Index:
    return Index.open(index, embedder=HashEmbedder())


def _documents(index: Path) -> int:
    return _index(index).status().documents


def _finishes(docs: Path, index: Path) -> None:
    # Consistent as the stop left it; the next run embeds the rest, and the index then holds every document.
    assert _index(index).verify().ok
    again = _index(index).ingest([docs])
    assert again.status == "succeeded" and again.updated == 0, again
    assert _documents(index) == DOCUMENTS
    assert _index(index).verify().ok


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_mid_embedding_keeps_what_is_embedded_whole(folder: tuple[Path, Path], signum: int) -> None:
    docs, index = folder
    stopped = signal_at(
        command("cli", "ingest", str(docs), "--index", str(index)), [signum], f"embedded>={EMBEDDED_BEFORE_SIGNAL}"
    )
    name = signal.Signals(signum).name
    assert stopped.returncode == 128 + signum, stopped.stderr
    assert stopped.seconds < GRACE_SECONDS
    assert "Traceback" not in stopped.stderr, stopped.stderr
    kept = _documents(index)
    assert 0 < kept < DOCUMENTS
    last = stopped.stderr.strip().splitlines()[-1]  # the one line saying what was kept
    assert re.fullmatch(
        rf"interrupted by {name}: kept {kept} documents embedded whole \({kept} added, 0 updated\), generation 1; "
        r"run \S+ is recorded as interrupted; run the same command to finish",
        last,
    ), stopped.stderr
    run = _index(index).runs(1)[0]
    assert run.status == "interrupted" and run.added == kept and run.generation == 1, run
    described = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
    assert run.errors[-1]["reason"].startswith(f"interrupted ({described}); kept what it committed"), run
    _finishes(docs, index)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_while_parsing_records_the_run_interrupted(folder: tuple[Path, Path], signum: int) -> None:
    docs, index = folder
    stopped = signal_at(command("cli", "ingest", str(docs), "--index", str(index)), [signum], "parsing")
    assert stopped.returncode == 128 + signum, stopped.stderr
    assert stopped.seconds < GRACE_SECONDS
    name = signal.Signals(signum).name
    run = _index(index).runs(1)[0]
    assert stopped.stderr.strip().splitlines()[-1] == (
        f"interrupted by {name}: nothing of it was committed; run {run.run_id} is recorded as interrupted; run the "
        "same command to finish"
    )
    assert run.status == "interrupted" and _documents(index) == 0
    _finishes(docs, index)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_during_the_commit_of_what_was_kept_leaves_the_index_consistent(
    folder: tuple[Path, Path], signum: int
) -> None:
    """The second signal abandons that commit (rolled back, as a crash would be): the index stays at its last
    generation, consistent, the run is recorded as interrupted, and the next run finishes."""
    docs, index = folder
    argv = command("cli", "ingest", str(docs), "--index", str(index))
    stopped = signal_at(argv, [signum, signum], f"embedded>={EMBEDDED_BEFORE_SIGNAL}")
    assert stopped.returncode == 128 + signum, stopped.stderr
    assert stopped.seconds < GRACE_SECONDS
    assert "Traceback" not in stopped.stderr, stopped.stderr
    assert _documents(index) == 0 and _index(index).status().generation == 0
    assert _index(index).runs(1)[0].status == "interrupted"
    _finishes(docs, index)


def test_sigterm_to_a_program_calling_index_ingest_commits_then_ends_it_as_sigterm_does(
    folder: tuple[Path, Path],
) -> None:
    """A program that set no SIGTERM handler: the run commits what it embedded whole and records itself, then the
    process ends as SIGTERM ends it (killed by the signal: status 143 in a shell)."""
    docs, index = folder
    stopped = signal_at(command("api", str(docs), str(index)), [signal.SIGTERM], f"embedded>={EMBEDDED_BEFORE_SIGNAL}")
    assert stopped.returncode == -signal.SIGTERM, stopped.stderr
    assert stopped.seconds < GRACE_SECONDS
    assert 0 < _documents(index) < DOCUMENTS
    assert _index(index).runs(1)[0].status == "interrupted"
    _finishes(docs, index)


def test_a_program_s_own_sigterm_handler_is_left_alone() -> None:
    """The library installs its handler only where SIGTERM has its default action, and only for the run."""
    seen: list[int] = []

    def own(signum: int, frame: object) -> None:
        seen.append(signum)

    previous = signal.signal(signal.SIGTERM, own)
    try:
        with stopping.deferred_sigterm(), stopping.handle_stop_signals():
            assert signal.getsignal(signal.SIGTERM) is own
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with stopping.deferred_sigterm():
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


# Slow: a sharded run's worker processes, paced, signalled; the default tier keeps the stop signals' other trials
# (mid-embedding, while parsing, a second signal, a program's own Index.ingest) and the shards' own tests.
@pytest.mark.slow
def test_sigterm_to_a_sharded_ingest_reaches_its_shards_processes(tmp_path: Path) -> None:
    """SIGTERM reaches the command's process only (docker stop, Kubernetes): it passes it on to the shards' worker
    processes, each of which commits what it embedded whole; the manifest records the run interrupted."""
    index = tmp_path / "ix"
    Index.create(index, embedder=HashEmbedder(), shards=2)
    documents = 2 * DOCUMENTS  # each shard embeds past its first window
    docs = write_folder(tmp_path / "docs", documents)
    argv = command("cli", "ingest", str(docs), "--index", str(index))
    stopped = signal_at(argv, [signal.SIGTERM], f"embedded>={EMBEDDED_BEFORE_SIGNAL}")
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr
    assert stopped.seconds < GRACE_SECONDS
    kept = _documents(index)
    assert 0 < kept < documents, stopped.stderr
    assert re.match(rf"interrupted by SIGTERM: kept {kept} documents embedded whole", stopped.stderr.splitlines()[-1])
    assert _index(index).runs(1)[0].status == "interrupted"
    assert _index(index).verify().ok
    again = _index(index).ingest([docs])
    assert again.status == "succeeded" and _documents(index) == documents
