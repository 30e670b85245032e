"""The Prefect flow over a remote root (citeline.sources.remote) on a real S3-compatible server
(tests/_object_store.py): the flow's parameters hold the URL, never the credentials."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

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
    assert json.loads(result.output.strip().splitlines()[-1])["added"] == 5
    secret = options["secret"].encode()
    for folder in (index_dir, Path(os.environ["PREFECT_HOME"])):
        assert [p for p in folder.rglob("*") if p.is_file() and secret in p.read_bytes()] == []
