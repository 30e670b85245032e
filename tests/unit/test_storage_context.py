"""The storage options of a run belong to the run, not the process (``citeline.sources.remote.storage``, a context
variable): two runs on two threads of one process each read with their own, nested runs restore the outer one's,
and the threads a run starts (its fetching-ahead pool, its shards on threads) read with the run's."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from citeline.sources import remote


def test_two_runs_on_two_threads_each_read_with_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(remote.OPTIONS_ENV, raising=False)
    both_inside = threading.Barrier(2, timeout=30)
    seen: dict[str, dict[str, object]] = {}

    def run(name: str) -> None:
        with remote.storage({"s3": {"key": name}}):
            both_inside.wait()  # each run's options are set while the other's are
            seen[name] = remote.options_for("s3")
            both_inside.wait()

    threads = [threading.Thread(target=run, args=(name,)) for name in ("alice", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert seen == {"alice": {"key": "alice"}, "bob": {"key": "bob"}}
    assert not remote.run_options_given()  # nothing leaks to the process


def test_a_nested_run_restores_the_outer_one_and_none_keeps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(remote.OPTIONS_ENV, raising=False)
    with remote.storage({"anon": True}):
        with remote.storage(None):  # the CLI's options around a Prefect run: kept
            assert remote.options_for("s3") == {"anon": True}
        with remote.storage({"anon": False}):
            assert remote.options_for("s3") == {"anon": False}
        assert remote.options_for("s3") == {"anon": True}
    assert remote.options_for("s3") == {}


def test_threads_a_run_starts_read_with_the_runs_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(remote.OPTIONS_ENV, raising=False)
    with remote.storage({"s3": {"key": "run"}}), ThreadPoolExecutor(4) as pool:
        # (a pool's threads start in an empty context, unless the build makes threads inherit it)
        carried = list(pool.map(remote.in_context(lambda _: remote.options_for("s3")), range(4)))
    assert carried == [{"key": "run"}] * 4
