"""The Prefect flow over a remote root (citeline.sources.remote) on a real S3-compatible server
(tests/_object_store.py): the flow's parameters hold the URL, never the credentials."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from citeline.cli.main import cli

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from _object_store import S3Server  # after the skips: boto3 comes with moto

ROOT = "s3://docs/corpus"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[S3Server]:
    """A fresh S3 server holding five notes under ``corpus/``."""
    store = S3Server(tmp_path)
    for number in range(5):
        store.put(f"corpus/note{number}.md", f"# Note {number}\n\nThe garrison at crossing {number} held.\n")
    yield store
    store.stop()


def _summary(result: Any) -> dict[str, Any]:
    # The run's summary is stdout's one line (what a script parses). stderr may carry Prefect's own lines: once, on a
    # loaded machine, httpx's "All connection attempts failed" from a Prefect client at the run's end, after the
    # summary, which broke a test that read the last line of both streams together.
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, f"stdout: {result.stdout!r}; stderr: {result.stderr!r}"
    return dict(json.loads(lines[0]))


def test_the_prefect_flow_reads_a_remote_root_and_stores_no_credential(tmp_path: Path, server: S3Server) -> None:
    # `citeline ingest --prefect`: the flow's parameters are the URL and the run options; the credentials reach the
    # run from the CLI's --storage-option, and no file Prefect wrote (its database: parameters, logs, results)
    # holds the secret
    options = server.options()
    pairs = [
        f"--storage-option=key={options['key']}",
        f"--storage-option=secret={options['secret']}",
        f"--storage-option=client_kwargs.endpoint_url={server.endpoint}",
        "--storage-option=client_kwargs.region_name=us-east-1",
    ]
    index_dir = tmp_path / "ix"
    result = CliRunner().invoke(cli, ["ingest", ROOT, "--index", str(index_dir), "--prefect", "--json", *pairs])
    assert result.exit_code == 0, result.output
    assert _summary(result)["added"] == 5
    secret = options["secret"].encode()
    for folder in (index_dir, Path(os.environ["PREFECT_HOME"])):
        assert [p for p in folder.rglob("*") if p.is_file() and secret in p.read_bytes()] == []


def test_the_flow_takes_its_storage_options_from_a_prefect_secret_block(tmp_path: Path, server: S3Server) -> None:
    # The flow is given the NAME of a Prefect Secret block (saved in the run's real Prefect database) holding the
    # storage options; it loads the block when it runs. The flow run's parameters (read back from Prefect's API),
    # its logs, the ledger and the index never hold the secret.
    from prefect.blocks.system import Secret
    from prefect.client.orchestration import get_client

    from citeline import Index
    from citeline.errors import SettingsError
    from citeline.orchestration.blocks import storage_options_of_block
    from citeline.orchestration.ingest import ingest_flow

    options = server.options()
    Secret(value={"s3": options}).save("docs-store", overwrite=True)
    assert storage_options_of_block("docs-store") == {"s3": options}
    index_dir = tmp_path / "ix"
    state = ingest_flow(paths=[ROOT], index_path=str(index_dir), storage_block="docs-store", return_state=True)
    assert state.is_completed(), state.message
    assert state.result()["added"] == 5
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(state.state_details.flow_run_id)
        logs = client.read_logs()
    assert flow_run.parameters["storage_block"] == "docs-store"
    assert options["secret"] not in json.dumps(flow_run.parameters, default=str)
    assert not [log.message for log in logs if options["secret"] in log.message]
    secret = options["secret"].encode()
    assert [p for p in index_dir.rglob("*") if p.is_file() and secret in p.read_bytes()] == []
    runs = Index.open(index_dir).runs()
    assert options["secret"] not in json.dumps([run.to_dict() for run in runs], default=str)
    # a block that is not there, or holds no mapping: one line naming the block, never its value
    Secret(value="just-a-password").save("not-a-mapping", overwrite=True)
    for name, problem in (("no-such-block", "no Prefect Secret block"), ("not-a-mapping", "must hold a mapping")):
        with pytest.raises(SettingsError, match=problem) as refused:
            storage_options_of_block(name)
        assert len(str(refused.value).splitlines()) == 1 and "just-a-password" not in str(refused.value)


def test_ingest_prefect_takes_a_storage_block_by_name(tmp_path: Path, server: S3Server) -> None:
    # `citeline ingest --prefect --storage-block NAME` mirrors the flow's parameter: the run loads the block; without
    # --prefect the option is a usage error (there is no Prefect run to load it), before anything is created.
    from prefect.blocks.system import Secret

    Secret(value={"s3": server.options()}).save("cli-store", overwrite=True)
    index_dir = tmp_path / "ix"
    plain = CliRunner().invoke(cli, ["ingest", ROOT, "--index", str(index_dir), "--storage-block", "cli-store"])
    assert plain.exit_code == 2 and "add --prefect" in plain.output and not index_dir.exists(), plain.output
    args = ["ingest", ROOT, "--index", str(index_dir), "--prefect", "--storage-block", "cli-store", "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert _summary(result)["added"] == 5
