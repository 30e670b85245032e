"""Every socket citeline, or a library it starts, listens on is on the loopback unless the user names another
address: a ``--dask-workers`` run (Prefect's flow with a local Dask cluster: scheduler, nannies, workers, the
dashboard; and a sharded run's own local cluster), watched from outside while it runs."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import REPO

TESTS = REPO / "tests"


def _listening(root: psutil.Process) -> set[tuple[str, int]]:
    """The addresses ``root`` and its descendants listen on (TCP and UDP) right now."""
    found: set[tuple[str, int]] = set()
    try:
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return found
    for process in family:
        try:
            for conn in process.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN or (conn.type == 2 and not conn.raddr):  # 2: SOCK_DGRAM
                    found.add((conn.laddr.ip, conn.laddr.port))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _watched(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[tuple[str, int]]]:
    """Run ``citeline ARGS`` (the slowed HashEmbedder for the model, tests/_stop_signals.py) and every address its
    process tree listened on while it ran."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)])}
    process = subprocess.Popen(
        [sys.executable, str(TESTS / "_stop_signals.py"), "cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    root = psutil.Process(process.pid)
    seen: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        seen |= _listening(root)
        time.sleep(0.05)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), seen


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(["--shards", "2"], id="sharded"),
        # Prefect's temporary API server too (it listens on 127.0.0.1); minutes on a loaded machine
        pytest.param(["--prefect"], id="prefect-flow", marks=pytest.mark.slow),
    ],
)
def test_a_local_dask_run_listens_on_the_loopback_only(tmp_path: Path, how: list[str]) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(6):
        (docs / f"note-{n}.md").write_text(f"# Note {n}\n\nThe garrison's pay stopped in month {n}.\n" * 20)
    args = ["ingest", str(docs), "--index", str(tmp_path / "ix"), "--dask-workers", "2", "--json"]
    done, seen = _watched(args + how, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(seen) >= 3, seen  # the scheduler and the workers were seen listening
    exposed = {(ip, port) for ip, port in seen if not ipaddress.ip_address(ip).is_loopback}
    assert not exposed, exposed


def test_every_local_cluster_citeline_starts_has_the_loopback_settings() -> None:
    """The flow's Dask task runner (the slow run above watches it) makes its cluster with the settings a sharded run
    uses: the dashboard on the loopback."""
    from citeline.orchestration.ingest import dask_task_runner
    from citeline.sharding.runs import LOCAL_CLUSTER

    runner = dask_task_runner(dask_workers=2)
    assert runner is not None
    kwargs = runner.cluster_kwargs  # type: ignore[attr-defined]
    assert {key: kwargs[key] for key in LOCAL_CLUSTER} == LOCAL_CLUSTER
    assert ipaddress.ip_address(LOCAL_CLUSTER["dashboard_address"].rsplit(":", 1)[0]).is_loopback
