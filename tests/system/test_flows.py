"""The ingestion flow against a real local Prefect server: its schedule, retries, the writer lock and Dask.

One `prefect server start` on loopback (SQLite in a temporary PREFECT_HOME) serves the whole module; it takes
about 20 s to become healthy and is always terminated.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from citeline import Index, IndexLockedError
from citeline.store import catalog, locks

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SEED_FILES = len(list((REPO / "seeds").iterdir()))  # one document each


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The API URL of a `prefect server start` subprocess; Prefect clients in this process point at it."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    home = tmp_path_factory.mktemp("prefect-server-home")
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
    }
    env.pop("PREFECT_API_URL", None)
    log = (home / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    previous = os.environ.get("PREFECT_API_URL")
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Prefect server did not start: {(home / 'server.log').read_text()}") from None
                time.sleep(0.5)
        # Subprocesses (the runner's flow runs, Dask workers) read the environment; this process the settings.
        os.environ["PREFECT_API_URL"] = url
        with temporary_settings({PREFECT_API_URL: url}):
            yield url
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def chunk_table(index_dir: Path) -> dict[int, tuple[Any, ...]]:
    """chunk_id -> (doc_id, ordinal, char_start, char_end, text, vector) from DuckDB."""
    with duckdb.connect(str(catalog.db_path(index_dir)), read_only=True) as connection:
        rows = connection.execute(
            "SELECT chunk_id, doc_id, ordinal, char_start, char_end, text, vector FROM chunks"
        ).fetchall()
    return {row[0]: row[1:] for row in rows}


async def what_the_ui_shows(flow_run_id: Any) -> dict[str, Any]:
    """A flow run as Prefect's API serves it to the UI: the run, its logs, task runs, states and artifacts."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, FlowRunFilter, LogFilter

    async with get_client() as client:
        flow_run = await client.read_flow_run(flow_run_id)
        await asyncio.sleep(2)  # logs are sent in batches, about every 2 s
        logs = await client.read_logs(LogFilter(flow_run_id={"any_": [flow_run_id]}), limit=200)
        task_runs = await client.read_task_runs(flow_run_filter=FlowRunFilter(id={"any_": [flow_run_id]}))
        states = await client.read_flow_run_states(flow_run_id)
        artifacts = await client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {"flow_run": flow_run, "logs": logs, "task_runs": task_runs, "states": states, "artifacts": artifacts}


@pytest.fixture(scope="module")
def served(prefect_api: str, tmp_path_factory: pytest.TempPathFactory, seeds_dir_module: Path) -> dict[str, Any]:
    """Register the scheduled deployment the way `citeline schedule` does, trigger a run, and let a runner run it."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import arun_deployment
    from prefect.runner import Runner
    from prefect.settings import PREFECT_LOGGING_LEVEL, temporary_settings

    from citeline.orchestration.serve import build_deployment

    index_dir = tmp_path_factory.mktemp("served") / "index"
    deployment = build_deployment(
        [str(seeds_dir_module)], cron="0 3 * * *", name="test-scheduled", index_path=str(index_dir), wait=60
    )

    async def register_trigger_and_run() -> dict[str, Any]:
        runner = Runner(name="citeline-test-runner")
        deployment_id = await runner.aadd_deployment(deployment)
        async with get_client() as client:
            registered = await client.read_deployment(deployment_id)
        started = time.perf_counter()
        flow_run = await arun_deployment(name="citeline-ingest/test-scheduled", timeout=0)
        # The run's subprocess (which gets this process's settings) logs at Prefect's default level, INFO; this
        # test session's default is WARNING.
        with temporary_settings({PREFECT_LOGGING_LEVEL: "INFO"}):
            await runner.start(run_once=True)
        seconds = time.perf_counter() - started
        return {"deployment": registered, "run_seconds": seconds, **await what_the_ui_shows(flow_run.id)}

    return {**asyncio.run(register_trigger_and_run()), "index": index_dir}


@pytest.fixture(scope="module")
def seeds_dir_module() -> Path:
    return REPO / "seeds"


def test_schedule_is_registered_with_its_cron_and_parameters(served: dict[str, Any], seeds_dir_module: Path) -> None:
    deployment = served["deployment"]
    (schedule,) = deployment.schedules
    assert (schedule.schedule.cron, schedule.schedule.timezone, schedule.active) == ("0 3 * * *", "UTC", True)
    assert deployment.parameters == {
        "paths": [str(seeds_dir_module)],
        "index_path": str(served["index"]),
        "max_file_bytes": 64 * 1024 * 1024,
        "wait": 60,
        "allow_removals": False,
        "removal_threshold": 0.5,
        "dry_run": False,
        "commit_every": 20_000,  # pipeline.COMMIT_EVERY: shown in the UI's run form
        "include": [],
        "exclude": [],
        "strict": False,
        "progress_every": 30.0,  # a worker's log gets a progress line this often
    }


def test_triggered_run_of_the_deployment_builds_the_index(served: dict[str, Any]) -> None:
    assert served["flow_run"].state.is_completed(), served["flow_run"].state
    index = Index.open(served["index"])
    status = index.status()
    assert (status.documents, status.generation) == (SEED_FILES, 1)
    assert status.last_run is not None and status.last_run.status == "succeeded"
    assert index.verify().ok
    print(f"served run (trigger, subprocess, real model, {SEED_FILES} seeds): {served['run_seconds']:.1f} s")


def test_triggered_run_shows_info_lines_named_task_runs_and_artifacts(
    served: dict[str, Any], seeds_dir_module: Path
) -> None:
    import logging as logging_levels

    from citeline.model.embedding import SentenceTransformerEmbedder, onnx_file_name, onnx_model_dir
    from citeline.orchestration.ingest import index_key

    index_dir = str(served["index"].resolve())
    info = [log.message for log in served["logs"] if log.level == logging_levels.INFO]
    assert served["flow_run"].name == f"{index_dir} <- {seeds_dir_module}"
    for expected in (
        f"discovered {SEED_FILES} files under {seeds_dir_module}",
        f"parsed {SEED_FILES} files: {SEED_FILES} documents, 0 failed",
        f"plan: {SEED_FILES} added, 0 updated, 0 unchanged, 0 removed (documents)",
        "committed generation 1",
    ):
        assert any(line.startswith(expected) for line in info), (expected, info)
    chunks = rf"chunks: \d+ made from {SEED_FILES} documents, \d+ embedded, 0 reused"
    assert any(re.fullmatch(chunks, line) for line in info)
    assert any(re.fullmatch(r"embed: \d+\.\d s", line) for line in info), info
    assert any(line.startswith("query model ready") for line in info)
    names = sorted(task_run.name for task_run in served["task_runs"])
    assert names == sorted(
        [
            f"discover [{seeds_dir_module}]",
            f"parse [batch 1/1, {SEED_FILES} files]",
            "plan",
            f"chunk+embed [batch 1/1, {SEED_FILES} documents]",
            "commit",
            "prepare query model",
        ]
    ), names
    key = index_key(index_dir)
    artifacts = {artifact.key: artifact for artifact in served["artifacts"]}
    assert {f"{key}-progress", f"{key}-report", f"{key}-failures", f"{key}-metrics"} <= artifacts.keys()
    assert "index generation" in str(artifacts[f"{key}-metrics"].data)
    assert artifacts[f"{key}-progress"].data == 100.0
    assert index_dir in artifacts[f"{key}-report"].data and index_dir in artifacts[f"{key}-report"].description
    assert "every file was ingested" in str(artifacts[f"{key}-failures"].data)
    # The flow prepared the query model, as Index.ingest does: searches need no torch.
    embedder = SentenceTransformerEmbedder()
    assert (onnx_model_dir(embedder.model_path) / onnx_file_name("onnx")).exists()


def test_dask_cluster_builds_the_same_index_as_the_default_runner(
    served: dict[str, Any], tmp_path: Path, seeds_dir_module: Path
) -> None:
    import distributed

    from citeline.orchestration.ingest import ingest_flow

    index_dir = tmp_path / "dask-index"
    started = time.perf_counter()
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        # One file and about one chunk per batch: two parse and two embedding tasks to spread over the workers;
        # commits of about one chunk each: the workers parse the files of each commit's documents again.
        summary = ingest_flow(
            paths=[str(seeds_dir_module)],
            index_path=str(index_dir),
            dask_address=cluster.scheduler_address,
            files_per_batch=1,
            chunks_per_batch=1,
            commit_every=1,
        )
        # The batches ran on the workers: they imported the flow's module and opened the index there.
        opened = client.run(
            lambda: (
                len(sys.modules["citeline.orchestration.ingest"]._open_indexes)
                if "citeline.orchestration.ingest" in sys.modules
                else 0
            )
        )
    print(f"Dask flow run (2-worker LocalCluster, model loaded per worker): {time.perf_counter() - started:.1f} s")
    assert summary["status"] == "succeeded" and summary["added"] == SEED_FILES
    assert summary["generation"] > 1 and [run.status for run in Index.open(index_dir).runs()] == ["succeeded"]
    assert sum(opened.values()) >= 1, opened
    expected, got = chunk_table(served["index"]), chunk_table(index_dir)
    assert got.keys() == expected.keys()
    for chunk_id, (doc_id, ordinal, start, end, text, vector) in expected.items():
        assert got[chunk_id][:5] == (doc_id, ordinal, start, end, text)
        np.testing.assert_allclose(got[chunk_id][5], vector, atol=1e-5)
    assert Index.open(index_dir).verify().ok


@pytest.fixture
def small_index(tmp_path: Path, seeds_dir: Path, fake_embedder: Any) -> Path:
    """An index of the seeds at generation 1, built with the test embedder (no model needed to re-run)."""
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([seeds_dir])
    return index.path


def test_transient_discover_failure_is_retried(
    prefect_api: str, small_index: Path, seeds_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citeline.ingest import pipeline
    from citeline.orchestration import ingest

    real_discover, calls = pipeline.scan, []

    def flaky_discover(paths: list[str], selection: Any = None) -> list[Any]:
        calls.append(paths)
        if len(calls) == 1:
            raise OSError(errno.EIO, "Input/output error", str(paths[0]))
        return real_discover(paths, selection)

    monkeypatch.setattr(pipeline, "scan", flaky_discover)
    # The task's own retry policy, without its back-off delays.
    monkeypatch.setattr(ingest, "discover_task", ingest.discover_task.with_options(retry_delay_seconds=0))
    summary = ingest.ingest_flow(paths=[str(seeds_dir)], index_path=str(small_index))
    assert len(calls) == 2
    assert (summary["status"], summary["unchanged"], summary["generation"]) == ("succeeded", SEED_FILES, 1)


def test_run_that_fails_for_good_keeps_the_last_generation(
    prefect_api: str, small_index: Path, seeds_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citeline.ingest import pipeline
    from citeline.orchestration import ingest

    calls = []

    def broken_discover(paths: list[str], selection: Any = None) -> list[Any]:
        calls.append(paths)
        raise OSError(errno.EIO, "Input/output error", str(paths[0]))

    monkeypatch.setattr(pipeline, "scan", broken_discover)
    monkeypatch.setattr(ingest, "discover_task", ingest.discover_task.with_options(retry_delay_seconds=0))
    before = chunk_table(small_index)
    with pytest.raises(OSError, match="Input/output error"):
        ingest.ingest_flow(paths=[str(seeds_dir)], index_path=str(small_index))
    assert len(calls) == ingest.RETRIES + 1
    index = Index.open(small_index)
    assert index.status().generation == 1
    assert chunk_table(small_index).keys() == before.keys()
    last = index.runs(limit=1)[0]
    assert last.status == "failed" and "Input/output error" in last.errors[0]["reason"]
    assert index.verify().ok


def test_flow_refuses_a_second_writer_when_told_not_to_wait(
    prefect_api: str, small_index: Path, seeds_dir: Path
) -> None:
    from citeline.orchestration.ingest import ingest_flow

    with locks.writer_lock(small_index), pytest.raises(IndexLockedError, match="another process is writing"):
        ingest_flow(paths=[str(seeds_dir)], index_path=str(small_index), wait=0)
    assert Index.open(small_index).status().generation == 1


def test_flow_run_fails_with_the_refusal_when_a_root_comes_back_empty(
    prefect_api: str, small_index: Path, tmp_path: Path, seeds_dir: Path, fake_embedder: Any
) -> None:
    from citeline.errors import RemovalRefusedError
    from citeline.orchestration.ingest import ingest_flow

    empty = tmp_path / "seeds"
    shutil.copytree(seeds_dir, empty)
    Index.open(small_index, embedder=fake_embedder).ingest([empty])  # documents indexed from this root ...
    for path in list(empty.rglob("*")):  # ... which comes back empty (an unmounted share)
        if path.is_file():
            path.unlink()
    state = ingest_flow(paths=[str(empty)], index_path=str(small_index), return_state=True)
    assert state.is_failed() and "refused to remove documents" in str(state.message)
    with pytest.raises(RemovalRefusedError):
        state.result()
    index = Index.open(small_index)
    assert index.runs(limit=1)[0].status == "refused" and index.verify().ok
    dry = ingest_flow(paths=[str(empty)], index_path=str(small_index), dry_run=True)
    assert dry["status"] == "dry-run" and dry["removed"] > 0


def test_a_partial_run_warns_per_file_and_completes_with_a_message_or_fails_when_strict(
    prefect_api: str, small_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging as logging_levels

    from conftest import HashEmbedder

    from citeline.errors import PartialRunError
    from citeline.orchestration.ingest import index_key, ingest_flow

    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nA good document about rivers.")
    (docs / "records.jsonl").write_text('{"id": "1", "text": "a record"}\n{not json\n')
    state = ingest_flow(paths=[str(docs)], index_path=str(small_index), return_state=True)
    # What an automation matches: a Completed state whose message starts with "partial" and names the file.
    assert state.is_completed() and (state.message or "").startswith("partial: 1 files failed ("), state.message
    assert "records.jsonl" in (state.message or "")
    assert state.result()["status"] == "partial"
    shown = asyncio.run(what_the_ui_shows(state.state_details.flow_run_id))
    warned = [log.message for log in shown["logs"] if log.level == logging_levels.WARNING]
    assert any(line.startswith("failed ") and "records.jsonl" in line for line in warned), warned
    progress = {a.key: a for a in shown["artifacts"]}[f"{index_key(str(small_index.resolve()))}-progress"]
    assert progress.data == 100.0 and (progress.description or "").startswith("partial: 2 added"), progress
    # strict: the flow run fails naming the failures; what the run indexed stays committed.
    (docs / "more.md").write_text("# More\n\nAnother document.")
    strict = ingest_flow(paths=[str(docs)], index_path=str(small_index), strict=True, return_state=True)
    assert strict.is_failed() and "partial" in str(strict.message) and "records.jsonl" in str(strict.message)
    with pytest.raises(PartialRunError):
        strict.result()
    assert "more.md" in {d.source_id for d in Index.open(small_index).documents()}


def test_a_waiting_run_says_who_holds_the_lock_in_its_log_and_state(
    prefect_api: str, small_index: Path, seeds_dir: Path
) -> None:
    from citeline.orchestration.ingest import ingest_flow

    with locks.writer_lock(small_index):
        state = ingest_flow(paths=[str(seeds_dir)], index_path=str(small_index), wait=1, return_state=True)
    assert state.is_failed()
    shown = asyncio.run(what_the_ui_shows(state.state_details.flow_run_id))
    holder = rf"held by pid {os.getpid()} since \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    waiting = rf"waiting for the writer lock of {small_index}: {holder}; giving up after 1 s"
    assert any(re.fullmatch(waiting, log.message) for log in shown["logs"]), [log.message for log in shown["logs"]]
    assert any(s.type.value == "RUNNING" and re.fullmatch(waiting, s.message or "") for s in shown["states"])


def test_prefect_yaml_deploys_to_a_work_pool(prefect_api: str, tmp_path: Path, seeds_dir: Path) -> None:
    """`prefect deploy` itself validates prefect.yaml and registers citeline-ingest/worker with its schedule,
    its concurrency limit, paths from the environment and the checkout it ran in (no /app)."""
    from prefect.client.orchestration import get_client

    project = tmp_path / "project"  # a copy, so that `prefect deploy` cannot touch the repository
    shutil.copytree(REPO, project, ignore=shutil.ignore_patterns(".git", ".venv", "index", "__pycache__", "*.egg-info"))
    env = {
        **os.environ,
        "PREFECT_API_URL": prefect_api,
        "CITELINE_DOCUMENTS": str(seeds_dir),
        "CITELINE_INDEX": str(tmp_path / "index"),
    }
    for command in (["work-pool", "create", "citeline", "--type", "process"], ["--no-prompt", "deploy", "--all"]):
        result = subprocess.run(
            [sys.executable, "-m", "prefect", *command],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr

    async def read() -> Any:
        async with get_client() as client:
            return await client.read_deployment_by_name("citeline-ingest/worker")

    deployment = asyncio.run(read())
    assert deployment.work_pool_name == "citeline"
    assert deployment.entrypoint == "flows/ingest.py:ingest_flow"
    assert deployment.parameters == {"paths": [str(seeds_dir)], "index_path": str(tmp_path / "index")}
    assert deployment.schedules[0].schedule.cron == "0 * * * *"
    assert deployment.global_concurrency_limit is not None and deployment.global_concurrency_limit.limit == 1
    assert deployment.concurrency_options.collision_strategy.value == "CANCEL_NEW"
    assert deployment.pull_steps == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(project.resolve())}}
    ]


def test_ctrl_c_stops_schedule_cleanly(prefect_api: str, tmp_path: Path, seeds_dir: Path) -> None:
    """`citeline schedule` as a user runs it: it serves until Ctrl-C, then exits 0 without a traceback."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PREFECT_API_URL": prefect_api}
    command = [
        sys.executable,
        "-m",
        "citeline.cli.main",
        "schedule",
        str(seeds_dir),
        "--cron",
        "0 3 * * *",
        "--name",
        "ctrl-c",
        "--index",
        str(tmp_path / "ix"),
    ]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        seen = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stderr.readline()  # type: ignore[union-attr]
            seen.append(line)
            if not line or "serving citeline-ingest/ctrl-c" in line:
                break
        assert any("serving citeline-ingest/ctrl-c" in line for line in seen), "".join(seen)
        time.sleep(2)
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
            pytest.fail(f"still serving 60 s after Ctrl-C; its stderr:\n{''.join(seen)}{stderr}")
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert "stopped serving citeline-ingest/ctrl-c" in stderr


# ---------------------------------------------------------------- sharded roots: one task per shard


@pytest.fixture(scope="module")
def served_sharded(
    prefect_api: str, tmp_path_factory: pytest.TempPathFactory, seeds_dir_module: Path
) -> dict[str, Any]:
    """The scheduled deployment of a new 2-shard root (`citeline schedule --shards 2`), triggered and run once."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import arun_deployment
    from prefect.runner import Runner
    from prefect.settings import PREFECT_LOGGING_LEVEL, temporary_settings

    from citeline.orchestration.serve import build_deployment

    index_dir = tmp_path_factory.mktemp("served-sharded") / "index"
    deployment = build_deployment(
        [str(seeds_dir_module)], cron="0 4 * * *", name="test-sharded", index_path=str(index_dir), shards=2
    )

    async def register_trigger_and_run() -> dict[str, Any]:
        runner = Runner(name="citeline-test-sharded-runner")
        deployment_id = await runner.aadd_deployment(deployment)
        async with get_client() as client:
            registered = await client.read_deployment(deployment_id)
        flow_run = await arun_deployment(name="citeline-ingest/test-sharded", timeout=0)
        with temporary_settings({PREFECT_LOGGING_LEVEL: "INFO"}):  # the run's subprocess logs its INFO lines
            await runner.start(run_once=True)
        return {"deployment": registered, **await what_the_ui_shows(flow_run.id)}

    return {**asyncio.run(register_trigger_and_run()), "index": index_dir}


def test_a_served_sharded_run_shows_one_task_per_shard_and_ranks_like_the_plain_index(
    served: dict[str, Any], served_sharded: dict[str, Any], seeds_dir_module: Path
) -> None:
    from citeline import ShardedIndex

    assert served_sharded["deployment"].parameters["shards"] == 2
    assert served_sharded["flow_run"].state.is_completed(), served_sharded["flow_run"].state
    index = Index.open(served_sharded["index"])
    assert isinstance(index, ShardedIndex)
    status = index.status()
    assert (status.shards, status.documents) == (2, SEED_FILES)
    assert index.runs(1)[0].status == "succeeded" and index.verify().ok
    names = sorted(task_run.name for task_run in served_sharded["task_runs"])
    documents = [part.status().documents for part in index.shards]
    # A shard with nothing to do runs no task (ShardedIndex.ingest skips idle shards): the seeds' 4 documents are
    # routed by their ids, which hold the seeds folder's path, so one shard gets none in about 1 run of 8. Discovery
    # and parsing are the tasks of a plain flow run.
    assert names == sorted(
        [f"shard-{n:03d} [{count} documents]" for n, count in enumerate(documents) if count]
        + ["prepare query model", f"discover [{seeds_dir_module}]", f"parse [batch 1/1, {SEED_FILES} files]"]
    ), names
    assert all(task_run.state.is_completed() for task_run in served_sharded["task_runs"])
    info = [log.message for log in served_sharded["logs"]]
    assert any(line.startswith(f"plan: {SEED_FILES} added") and "over 2 shards" in line for line in info), info
    plain = Index.open(served["index"])
    for mode in ("dense", "lexical", "hybrid"):
        want = [(r.chunk_id, round(r.score, 5)) for r in plain.search("why did soldiers defect", k=5, mode=mode)]
        got = [(r.chunk_id, round(r.score, 5)) for r in index.search("why did soldiers defect", k=5, mode=mode)]
        assert got == want and len(want) == 5


def _with_embedder(monkeypatch: pytest.MonkeyPatch, embedder: Any) -> None:
    # The flow opens the index by path (with its model); a test index's model is the HashEmbedder.
    from citeline.orchestration import ingest

    class TestIndex:
        @staticmethod
        def create(path: Any, **settings: Any) -> Index:
            return Index.create(path, embedder=embedder, **settings)

    monkeypatch.setattr(ingest, "Index", TestIndex)


def test_ingest_prefect_draws_its_bar_and_a_flow_run_beside_it_draws_none(
    prefect_api: str, tmp_path: Path, seeds_dir: Path, fake_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``citeline ingest --prefect`` on a terminal (``run_from_cli(progress=True)``) draws a bar in the flow run it
    starts; a flow run another thread of the process starts meanwhile draws none: the bar is that call's choice (a
    context variable), not a process flag the CLI flips (issue 41.6)."""
    import threading

    from citeline.orchestration import ingest

    _with_embedder(monkeypatch, fake_embedder)
    bars: dict[str, bool] = {}

    class Recording(ingest.FlowReporter):
        def __init__(self, key: str, index_dir: str, bar: bool = False, every: float = 0.0):
            super().__init__(key, index_dir, bar=bar, every=every)
            bars[Path(index_dir).name] = bar
            if Path(index_dir).name == "cli":  # while the CLI's run goes: another flow run, from another thread
                beside = threading.Thread(
                    target=ingest.ingest_flow,
                    kwargs={"paths": [str(seeds_dir)], "index_path": str(tmp_path / "beside")},
                )
                beside.start()
                beside.join()

    monkeypatch.setattr(ingest, "FlowReporter", Recording)
    summary = ingest.run_from_cli(progress=True, paths=[str(seeds_dir)], index_path=str(tmp_path / "cli"))
    assert summary["status"] == "succeeded"
    assert bars == {"cli": True, "beside": False}, bars
    assert Index.open(tmp_path / "beside", embedder=fake_embedder).status().documents == summary["added"]


def _harbour_root(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch, documents: int = 8, shards: int = 2
) -> tuple[Path, Path]:
    # Short documents, ``documents // shards`` in each shard, and a new sharded root the flow opens with
    # ``embedder``. A document's shard hashes its id, which holds the absolute folder: d0..d11 put none in shard 2
    # of 3 under one CI tmp path, so the names are chosen here, never left to where pytest puts the folder.
    from citeline.sharding.index import shard_of
    from citeline.sources.document import doc_id_of

    _with_embedder(monkeypatch, embedder)
    corpus = tmp_path / "docs"
    corpus.mkdir()
    held = [0] * shards
    n = 0
    while sum(held) < documents // shards * shards:
        number = shard_of(doc_id_of(str(corpus.resolve()), f"d{n}.txt"), shards)
        if held[number] < documents // shards:
            held[number] += 1
            (corpus / f"d{n}.txt").write_text(f"Document {n} is about the harbour, the mill and river {n}.\n")
        n += 1
    root = tmp_path / "root"
    Index.create(root, embedder=embedder, shards=shards)
    return corpus, root


def test_a_failed_shard_fails_the_flow_run_naming_it_and_the_others_commit(
    prefect_api: str, tmp_path: Path, seeds_dir: Path, fake_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from _common import same_ranking

    from citeline import ShardedIndex
    from citeline.orchestration.ingest import ingest_flow
    from citeline.sharding.index import Manifest, ShardsFailedError, shard_dir

    corpus, root = _harbour_root(tmp_path, fake_embedder, monkeypatch, documents=12, shards=3)
    whole = Index.create(tmp_path / "whole", embedder=fake_embedder, shards=3)
    whole.ingest([corpus], parallel="serial")
    with locks.writer_lock(shard_dir(root, 1)):  # shard 1 is busy: its run gives up after `wait`
        state = ingest_flow(paths=[str(corpus)], index_path=str(root), wait=0.5, return_state=True)
    assert state.is_failed()
    message = str(state.message)
    assert "1 of 3 shards" in message and "shard-001: IndexLockedError" in message and "\n" not in message, message
    with pytest.raises(ShardsFailedError):
        state.result()
    for _ in range(60):  # Prefect records task runs' states as events, which may land after the flow returns
        shown = asyncio.run(what_the_ui_shows(state.state_details.flow_run_id))
        states = {task_run.name.split()[0]: task_run.state.type.value for task_run in shown["task_runs"]}
        if len(states) == 5:
            break
        time.sleep(0.5)
    assert states == {
        "discover": "COMPLETED", "parse": "COMPLETED", "shard-000": "COMPLETED", "shard-001": "FAILED",
        "shard-002": "COMPLETED",
    }, states  # fmt: skip
    index = Index.open(root, embedder=fake_embedder)
    assert isinstance(index, ShardedIndex)
    assert Manifest.read(root).generations == [1, 0, 1] and index.verify().ok
    run = index.runs(1)[0]
    assert run.status == "failed" and run.errors[-1]["path"] == "shard-001"
    summary = ingest_flow(paths=[str(corpus)], index_path=str(root))  # the same run again finishes shard 1
    assert summary["status"] == "succeeded" and summary["added"] == len(index.shards[1].documents())
    assert Manifest.read(root).generations == [1, 1, 1] and index.verify().ok
    assert sorted(index.snapshot().vectors.ids().tolist()) == sorted(whole.snapshot().vectors.ids().tolist())
    query = "harbour mill river 7"
    for mode in ("dense", "lexical", "hybrid"):
        same_ranking(index.rank(query, 5, mode=mode), whole.rank(query, 5, mode=mode))


def test_shard_workers_pin_a_sharded_flow_run_to_its_workers(
    prefect_api: str, tmp_path: Path, fake_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import distributed

    from citeline import SettingsError
    from citeline.orchestration.ingest import IngestParameters, ingest_flow
    from citeline.sharding.index import Manifest

    corpus, root = _harbour_root(tmp_path, fake_embedder, monkeypatch)
    with pytest.raises(SettingsError, match="shard_workers pins shards to Dask workers"):
        IngestParameters.parse(paths=[str(corpus)], shard_workers="0=w")
    with pytest.raises(SettingsError, match="SHARD=WORKER"):
        IngestParameters.parse(paths=[str(corpus)], dask_address="tcp://127.0.0.1:9", shard_workers="x=w")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        # A shard pinned to a worker that is not there fails in one line; the other shard commits.
        state = ingest_flow(
            paths=[str(corpus)],
            index_path=str(root),
            dask_address=cluster.scheduler_address,
            shard_workers="1=nowhere",
            return_state=True,
        )
        assert state.is_failed()
        assert "shard-001: ShardWorkerGoneError: shard-001 is pinned to worker nowhere" in str(state.message)
        assert Manifest.read(root).generations == [1, 0]
        # Both shards pinned to worker 1 (LocalCluster names its workers 0 and 1): both shard tasks run there.
        for changed in corpus.glob("*.txt"):  # every document changes: both shards have work
            changed.write_text(f"{changed.stem} now speaks of the lighthouse and the ferry.\n")
        with distributed.get_task_stream(client=client) as stream:
            summary = ingest_flow(
                paths=[str(corpus)],
                index_path=str(root),
                dask_address=cluster.scheduler_address,
                shard_workers={0: "1", 1: "1"},
            )
        named = {address: str(info["name"]) for address, info in client.scheduler_info()["workers"].items()}
    assert summary["status"] == "succeeded"
    ran_on = {named[entry["worker"]] for entry in stream.data if str(entry["key"]).startswith("shard_task")}
    assert ran_on == {"1"}, stream.data
    assert Index.open(root, embedder=fake_embedder).verify().ok


def test_a_sharded_flow_run_on_dask_parses_on_the_workers(
    prefect_api: str, tmp_path: Path, fake_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sharded root's flow run on Dask goes through the flow's parse tasks, as a plain run's: the workers parse
    (keys only come back), never the flow's own process, where reading a source fails here."""
    import distributed

    from citeline.ingest import pipeline
    from citeline.orchestration import shards
    from citeline.orchestration.ingest import ingest_flow

    corpus, root = _harbour_root(tmp_path, fake_embedder, monkeypatch)
    jobs: list[Any] = []
    real_call = shards.ShardTasks.__call__

    def seen(self: Any, busy: list[Any]) -> Any:
        jobs.extend(busy)
        return real_call(self, busy)

    def not_here(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a source was read in the flow's process")

    monkeypatch.setattr(shards.ShardTasks, "__call__", seen)
    monkeypatch.setattr(pipeline, "parse_source", not_here)  # the workers' processes have their own
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        state = ingest_flow(paths=[str(corpus)], index_path=str(root), dask_address=cluster.scheduler_address,
                            return_state=True)  # fmt: skip
    summary = state.result()
    assert (summary["status"], summary["added"], summary["failed"]) == ("succeeded", 8, 0), summary
    assert len(jobs) == 2 and all(not job.parsed.documents for job in jobs)  # keys only reached the shards' jobs
    assert sum(len(job.parsed.keys) for job in jobs) == 8
    shown = asyncio.run(what_the_ui_shows(state.state_details.flow_run_id))
    names = sorted(task_run.name.split()[0] for task_run in shown["task_runs"])
    assert "parse" in names and "discover" in names, names
    assert Index.open(root, embedder=fake_embedder).verify().ok


def test_a_sharded_flow_run_of_an_s3_root_on_dask_takes_credentials_from_a_prefect_block(
    prefect_api: str, tmp_path: Path, fake_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers of a sharded flow run have no credentials of their own (no environment, no options file): each
    parse and shard task loads the flow's ``storage_block`` (a Prefect Secret block) where it runs."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    import distributed
    from _object_store import S3Server
    from prefect.blocks.system import Secret

    from citeline.ingest import pipeline
    from citeline.orchestration.ingest import ingest_flow
    from citeline.sources import remote

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", remote.OPTIONS_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    _with_embedder(monkeypatch, fake_embedder)
    store = S3Server(tmp_path)
    try:
        for n in range(6):
            store.put(f"corpus/d{n}.txt", f"Document {n} is about the harbour, the mill and river {n}.\n")
        Secret(value={"s3": store.options()}).save("flow-store", overwrite=True)
        root = tmp_path / "root"
        Index.create(root, embedder=fake_embedder, shards=2)
        monkeypatch.setattr(pipeline, "parse_source", lambda *a, **k: pytest.fail("read in the flow's process"))
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
            summary = ingest_flow(
                paths=["s3://docs/corpus"], index_path=str(root), dask_address=c.scheduler_address,
                storage_block="flow-store",
            )  # fmt: skip
        assert (summary["status"], summary["added"], summary["failed"]) == ("succeeded", 6, 0), summary
        assert store.object_gets() == 2 * 6  # on the workers: parsed for the keys, then by each shard's run
    finally:
        store.stop()
    assert Index.open(root, embedder=fake_embedder).verify().ok


# ---------------------------------------------------------------- a stop signal to a flow run's process


def test_sigterm_to_a_flow_run_keeps_what_is_embedded_and_records_the_run_interrupted(
    prefect_api: str, tmp_path: Path
) -> None:
    """A flow run's process gets SIGTERM mid-embedding (a Prefect cancellation, docker stop, Kubernetes): its
    running batch stops at its next encode call, what is embedded whole is committed, the ledger row says
    interrupted, and Prefect ends the flow run (Crashed: no runner asked for a cancellation) well within 10 s."""
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
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    index = tmp_path / "ix"
    create_index(index)
    docs = write_folder(tmp_path / "docs")
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "PREFECT_LOGGING_LEVEL": "WARNING"}
    stopped = signal_at(
        command("flow", str(docs), str(index)), [signal.SIGTERM], f"embedded>={EMBEDDED_BEFORE_SIGNAL}", env=env
    )
    print(f"flow run process: status {stopped.returncode}, {stopped.seconds:.2f} s from SIGTERM to exit")
    assert stopped.returncode == -signal.SIGTERM, stopped.stderr  # Prefect ends the process as SIGTERM does
    assert stopped.seconds < GRACE_SECONDS, stopped.stderr
    opened = Index.open(index, embedder=HashEmbedder())
    kept = opened.status().documents
    assert 0 < kept < DOCUMENTS, stopped.stderr
    run = opened.runs(1)[0]
    assert run.status == "interrupted" and run.added == kept, (run, stopped.stderr)
    assert run.errors[-1]["reason"].startswith("interrupted (SIGTERM); kept what it committed"), run
    assert opened.verify().ok

    async def flow_run_state() -> Any:
        async with get_client() as client:
            runs = await client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=str(index))))
            return runs[0].state

    state = asyncio.run(flow_run_state())
    assert state is not None and state.is_final() and not state.is_completed(), state
    assert opened.ingest([docs]).status == "succeeded" and opened.status().documents == DOCUMENTS


# ---------------------------------------------------------------- the flow's encoding parameter

#: Czech in Windows-1250 that reads as plausibly in Windows-1252: the close call of tests/index/test_encodings.py.
CZECH = "Večer půjdeme do divadla."


def test_the_flow_reads_with_its_encoding_parameter(
    prefect_api: str,
    tmp_path: Path,
    fake_embedder: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from conftest import HashEmbedder

    from citeline.orchestration.ingest import ingest_flow

    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "czech.txt").write_bytes(CZECH.encode("cp1250"))
    (docs / "plain.txt").write_text("Ferries cross the river at dawn.", encoding="utf-8")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([docs])  # detection's close call: read as Windows-1252
    summary = ingest_flow(paths=[str(docs)], index_path=str(index.path), encoding="cp1250")
    assert (summary["status"], summary["updated"], summary["unchanged"]) == ("succeeded", 1, 1)
    (czech,) = [d for d in Index.open(index.path).documents() if d.source_id == "czech.txt"]
    assert czech.encoding == "cp1250" and Index.open(index.path).document(czech.doc_id).text == CZECH
    with pytest.raises(ValueError, match="unknown encoding"):
        ingest_flow(paths=[str(docs)], index_path=str(index.path), encoding="cp9999")


def test_a_flow_run_logs_progress_lines_at_its_interval(
    prefect_api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Prefect worker's run is read in its log (issue 43.6): a ``progress [...]`` line every ``progress_every``
    seconds in the flow run's logs, with the files listed and the chunks embedded of the planned total."""
    from _hash_cli import SLOW_ENV, PacedHashEmbedder
    from _stop_signals import write_folder

    from citeline.orchestration.ingest import ingest_flow

    docs = write_folder(tmp_path / "docs", 60)  # about 420 chunks, 5 ms each: two seconds of embedding
    monkeypatch.setenv(SLOW_ENV, "0.005")
    _with_embedder(monkeypatch, PacedHashEmbedder())
    flow_runs = logging.getLogger("prefect.flow_runs")  # the tests' Prefect logs at WARNING (conftest): INFO here
    level, heard = flow_runs.level, _Heard()
    flow_runs.setLevel(logging.INFO)  # setLevel, not the attribute: it clears the loggers' cached isEnabledFor
    flow_runs.addHandler(heard)  # beside Prefect's own handlers: what its run logger was given
    try:
        state = ingest_flow(
            paths=[str(docs)], index_path=str(tmp_path / "ix"), progress_every=0.2, chunks_per_batch=100,
            return_state=True,
        )  # fmt: skip
    finally:
        flow_runs.removeHandler(heard)
        flow_runs.setLevel(level)
    assert state.is_completed(), state
    lines = [message for message in heard.messages if message.startswith("progress [")]
    assert len(lines) >= 3, heard.messages
    assert all(" files 60 listed" in line for line in lines if not line.startswith("progress [discover]")), lines
    embedding = [line for line in lines if line.startswith("progress [embed]")]
    assert embedding and all(re.search(r"chunks [\d,]+ of about [\d,]+ embedded", line) for line in embedding), lines


class _Heard(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_document_the_catalog_refuses_fails_alone_in_the_flow(
    prefect_api: str, small_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow's commit task isolates a document the catalog refuses as Index.ingest does (issue 50): the run is
    partial, the document named with DuckDB's first error, the rest committed."""
    from _stateful import REFUSED_WORD, refusing_catalog
    from conftest import HashEmbedder

    from citeline.orchestration.ingest import ingest_flow

    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nA good document about rivers.")
    (docs / "refused.txt").write_text(f"A document the catalog refuses: {REFUSED_WORD}.")
    with refusing_catalog():
        state = ingest_flow(paths=[str(docs)], index_path=str(small_index), return_state=True)
    assert state.is_completed(), state.message
    summary = state.result()
    assert summary["status"] == "partial" and summary["failed"] == 1, summary
    (error,) = summary["errors"]
    assert error["path"].endswith("refused.txt") and "the catalog refused it at commit" in error["reason"]
    stored = {d.source_id for d in Index.open(small_index).documents()}
    assert "good.md" in stored and "refused.txt" not in stored
