"""Issue 43's sharded ingest of an ``s3://`` root on a 2-worker Dask LocalCluster with no shared folder for the
sources: they live only in a REAL S3-compatible server (moto's server mode, tests/_object_store.py). The workers
fetch and parse the objects themselves, with credentials from their own environment (the file named by
``CITELINE_STORAGE_OPTIONS``), never from the tasks' arguments; no text passes through the coordinator; an
unchanged re-run fetches no object (GETs counted in the server's request log)."""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _common import reading_only_on_workers
from conftest import HashEmbedder

from citeline import Index, ShardedIndex
from citeline.sources import remote

pytest.importorskip("distributed")
pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from _object_store import S3Server  # after the skips: boto3 comes with moto

pytestmark = pytest.mark.slow

ROOT = "s3://docs/corpus"
OBJECTS = 24


@pytest.fixture
def server(tmp_path: Path) -> Iterator[S3Server]:
    """A fresh S3 server holding :data:`OBJECTS` small notes under ``corpus/`` of bucket ``docs``."""
    store = S3Server(tmp_path)
    for number in range(OBJECTS):
        store.put(
            f"corpus/part{number % 3}/note{number:02d}.md",
            f"# Note {number}\n\nThe garrison at crossing {number} held for {number % 7 + 1} days in the rain.\n",
        )
    yield store
    store.stop()


@pytest.fixture
def cluster(server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Two worker processes started after ``CITELINE_STORAGE_OPTIONS`` names the server's credentials file (their
    environment is this process's at their start: the way a real cluster's workers get theirs)."""
    file = tmp_path / "storage.json"
    file.write_text(json.dumps(server.options()))
    monkeypatch.setenv(remote.OPTIONS_ENV, str(file))
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        yield local


def test_a_sharded_ingest_of_an_s3_root_on_dask_reads_on_the_workers_then_an_unchanged_rerun_gets_nothing(
    cluster: Any, server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    plain = Index.create(tmp_path / "plain", embedder=HashEmbedder(), vector_index="flat")
    assert plain.ingest([ROOT]).added == OBJECTS  # in this process, from the same file of credentials
    gets = server.object_gets()
    assert gets == OBJECTS
    jobs = reading_only_on_workers(monkeypatch, (remote, "open_object"))
    sharded = Index.create(tmp_path / "sharded", embedder=HashEmbedder(), vector_index="flat", shards=2)
    assert isinstance(sharded, ShardedIndex)
    # credentials given to the run too: they stay in this process (the workers read theirs from their environment)
    run = sharded.ingest([ROOT], dask_address=cluster.scheduler_address, storage_options=server.options())
    assert (run.status, run.added, run.failed) == ("succeeded", OBJECTS, 0), run
    assert len(jobs) == 2 and all(not job.parsed.documents for job in jobs)
    assert sum(len(job.parsed.keys) for job in jobs) == OBJECTS
    assert all(server.secret.encode() not in pickle.dumps(job) for job in jobs)  # no credentials in a task
    # each object read twice on the workers (parsed for its keys, then by its shard's run), never here
    assert server.object_gets() == gets + 2 * OBJECTS
    stored = {
        name: sorted((d.doc_id, d.content_hash, d.chunks, d.source_path) for d in index.documents())
        for name, index in (("plain", plain), ("sharded", sharded))
    }
    assert stored["sharded"] == stored["plain"] and sharded.verify().ok
    urls = {f"s3://docs/corpus/part{n % 3}/note{n:02d}.md" for n in range(OBJECTS)}
    assert {d.source_path for d in sharded.documents()} == urls  # provenance keeps the URL
    assert sharded.search("garrison crossing 5", k=1)[0].sources[0].source_path.startswith("s3://docs/corpus/")

    fetched = server.object_gets()
    again = sharded.ingest([ROOT], dask_address=cluster.scheduler_address)
    assert (again.status, again.added, again.updated, again.unchanged, again.removed) == (
        "succeeded", 0, 0, OBJECTS, 0,
    ), again  # fmt: skip
    assert server.object_gets() == fetched  # listed, compared by ETag: not one object fetched
    # the workers' credentials: the file their environment names, never a run's options sent to them
    from distributed import Client

    with Client(cluster, set_as_default=False) as client:
        seen_there = client.run(_worker_storage)
    assert list(seen_there.values()) == [(server.endpoint, None)] * 2


def _worker_storage() -> tuple[str, Any]:
    # On a worker: the endpoint its storage options reach, and any run options set in its memory.
    return remote.options_for("s3")["client_kwargs"]["endpoint_url"], remote._run_options.get()


def test_the_cli_ingests_an_s3_root_into_shards_on_its_local_cluster_whose_workers_read_the_options_file(
    server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``citeline ingest s3://... --shards 2 --dask-workers 2 --storage-options FILE``: the local cluster's workers
    (this process's children) read the file too, named in their environment; ``--storage-option`` pairs, which
    live in this process's memory only, cannot reach them and are refused in one line (the real model: the CLI's)."""
    from click.testing import CliRunner

    from citeline.cli.main import cli

    monkeypatch.delenv(remote.OPTIONS_ENV, raising=False)
    file = tmp_path / "s3.json"
    file.write_text(json.dumps(server.options()))
    command = ["ingest", ROOT, "--index", str(tmp_path / "ix"), "--shards", "2", "--dask-workers", "2", "--json"]
    refused = CliRunner().invoke(cli, [*command, f"--storage-option=key={server.key}", "--storage-options", str(file)])
    assert refused.exit_code == 2 and "--storage-option does not reach Dask workers" in refused.output, refused.output
    assert server.object_gets() == 0 and not (tmp_path / "ix").exists()
    result = CliRunner().invoke(cli, [*command, "--storage-options", str(file)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert (summary["status"], summary["added"], summary["failed"]) == ("succeeded", OBJECTS, 0), summary
    assert server.object_gets() == 2 * OBJECTS  # on the workers: the keys, then each shard's run
    assert remote.OPTIONS_ENV not in os.environ  # this process's environment as it was
