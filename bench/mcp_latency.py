"""What MCP over stdio adds to a search: the ``search`` tool called on ``citeline mcp`` against ``Index.search`` in
this process, on the same index, the same queries interleaved.

    python bench/mcp_latency.py [--scifact ../shared/benchmarks/scifact] [--docs 2000] [--index /tmp/mcp-scifact]
                                [--queries 200] [--mode hybrid] [--client sdk|raw|both] [--no-output-check]
                                [--baseline DIR]

Builds (once) an index of the first ``--docs`` documents of SciFact's corpus with the default model and backend
(int8 ONNX where the CPU allows) in ``--index``, then opens it here and starts ``citeline mcp --index`` as a
subprocess for each client (and from the citeline source in ``--baseline DIR`` too, e.g. ``git archive`` of an
older commit unpacked there). The clients: ``sdk``, the ``mcp`` SDK's own ``ClientSession`` (its JSON-RPC models
and its check of each answer against the tool's output schema; ``--no-output-check`` leaves that check out);
``raw``, the least a client can do (each request one JSON line written to the server's stdin, each answer one line
read and given to ``json.loads``), which leaves the protocol's own cost: JSON-RPC over pipes and the server's side.
Each query runs once through each path, the order rotating (so the shared machine's drift falls on all alike),
after 10 warm-up queries each. Prints the p50/p90 of each and of the per-query difference (stdio call minus
in-process call): the protocol's overhead. Also the CPU a call costs: the server's beyond the search (its process's
CPU minus the in-process search's, and minus its busiest thread's, the one that ran the searches) and the client's,
with the SDK client's check; CPU time is inflated less than wall time by the machine's load.
bench/mcp_client_node.mjs measures the TypeScript SDK's client.

Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from citeline import Index
from citeline.errors import IndexNotFoundError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the raw client, shared with the tests
from _mcp_wire import Wire

ROOT = Path(__file__).resolve().parent.parent


def build(scifact: Path, docs: int, index_dir: Path) -> Index:
    """The index of the first ``docs`` documents of the corpus (built once; reused when it exists)."""
    try:
        return Index.open(index_dir)
    except IndexNotFoundError:
        pass
    source = index_dir.parent / f"{index_dir.name}-corpus"
    source.mkdir(parents=True, exist_ok=True)
    with (scifact / "corpus.jsonl").open(encoding="utf-8") as corpus:
        lines = list(itertools.islice(corpus, docs))
    (source / "corpus.jsonl").write_text("".join(lines), encoding="utf-8")
    index = Index.create(index_dir)
    started = time.process_time()
    summary = index.ingest([source])
    print(f"built {index_dir}: {summary.added} documents, {time.process_time() - started:.0f} CPU-s", file=sys.stderr)
    return index


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


RAW_INFO = {"name": "mcp_latency-raw", "version": "1"}


@dataclasses.dataclass
class Served:
    """One server process under measurement, with its client: its wall times and the CPU its calls cost (summed,
    in seconds)."""

    name: str
    call: Any  # async (query, mode) -> None
    process: psutil.Process
    wall: list[float] = dataclasses.field(default_factory=list)
    difference: list[float] = dataclasses.field(default_factory=list)
    cpu: dict[str, float] = dataclasses.field(default_factory=lambda: dict.fromkeys(("client", "check", "server"), 0.0))
    threads: dict[int, float] = dataclasses.field(default_factory=dict)

    def thread_cpu(self) -> dict[int, float]:
        return {thread.id: thread.user_time + thread.system_time for thread in self.process.threads()}


def _new_child(before: set[int]) -> psutil.Process:
    return next(child for child in psutil.Process().children() if child.pid not in before)


def _check_source(folder: Path, env: dict[str, str]) -> None:
    """That a server started in ``folder`` imports citeline from there."""
    imported = subprocess.run(
        [sys.executable, "-c", "import citeline; print(citeline.__file__)"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(imported).resolve().is_relative_to(folder.resolve()), (folder, imported)


async def _sdk_server(
    stack: contextlib.AsyncExitStack, name: str, command: list[str], env: Any, folder: Path, check: bool
) -> Served:
    children = {child.pid for child in psutil.Process().children()}
    read, write = await stack.enter_async_context(
        stdio_client(StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=folder))
    )
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    await session.list_tools()  # the client checks structured answers against the listed output schemas

    async def call(query: str, mode: str) -> None:
        result = await session.call_tool("search", {"query": query, "k": 10, "mode": mode})
        assert not result.is_error, result.content

    served = Served(name, call, _new_child(children))
    _time_check(served, session, check)
    return served


def _raw_server(stack: contextlib.AsyncExitStack, name: str, command: list[str], env: Any, folder: Path) -> Served:
    client = Wire(command, env, folder, client_info=RAW_INFO)
    stack.callback(client.close, wait=True)

    async def call(query: str, mode: str) -> None:
        result = client.request("tools/call", {"name": "search", "arguments": {"query": query, "k": 10, "mode": mode}})
        assert not result.get("isError"), result

    return Served(name, call, psutil.Process(client.process.pid))


async def measure(
    index: Index,
    queries: list[str],
    mode: str,
    check_output: bool = True,
    baseline: Path | None = None,
    clients: tuple[str, ...] = ("sdk",),
) -> tuple[list[Served], list[float], float]:
    """Each query through each server (``citeline mcp`` from this checkout, and from ``baseline``'s source when
    given), one per client, and through ``Index.search`` here, the order rotating. Per server: wall ms per call and
    its difference from the in-process call of the same query; CPU per call: the client's, of which its
    output-schema check, and the server process's (summed over all calls, so the clock's ticks average out). Also
    the in-process search's wall ms per query and CPU s in all."""
    sources = {"this checkout": None, **({f"baseline {baseline}": baseline} if baseline else {})}
    served: list[Served] = []
    local_wall: list[float] = []
    local_cpu = 0.0
    async with contextlib.AsyncExitStack() as stack:
        for name, source in sources.items():
            # `python -m` puts its working folder first on sys.path, ahead of PYTHONPATH and the editable install:
            # each server runs in the folder of the source it is to run (a baseline started from this checkout's
            # folder would run this checkout's code).
            folder = source or ROOT
            env = dict(os.environ, PYTHONPATH=str(folder))
            _check_source(folder, env)
            command = [sys.executable, "-m", "citeline.cli.main", "mcp", "--index", str(index.path)]
            for client in clients:
                label = f"{name}, {client} client"
                if client == "sdk":
                    served.append(await _sdk_server(stack, label, command, env, folder, check_output))
                else:
                    served.append(_raw_server(stack, label, command, env, folder))

        async def call(server: Served, query: str) -> float:
            started, own, theirs = time.perf_counter(), time.process_time(), sum(server.process.cpu_times()[:2])
            await server.call(query, mode)
            elapsed = time.perf_counter() - started
            server.cpu["client"] += time.process_time() - own
            server.cpu["server"] += sum(server.process.cpu_times()[:2]) - theirs
            return elapsed

        def local(query: str) -> tuple[float, float]:
            started, own = time.perf_counter(), time.process_time()
            index.search(query, 10, mode=mode)
            return time.perf_counter() - started, time.process_time() - own

        for query in queries[:10]:  # warm-up: models loaded, caches filled, on both sides
            for server in served:
                await call(server, query)
            local(query)
        for server in served:
            server.cpu = dict.fromkeys(server.cpu, 0.0)
            server.threads = server.thread_cpu()
        for n, query in enumerate(queries):
            turn: list[Served | None] = [
                None,
                *served,
            ]  # None: in process; the order rotates so each path goes first as often
            turn = turn[n % len(turn) :] + turn[: n % len(turn)]
            walls: dict[str | None, float] = {}
            for path in turn:
                if path is None:
                    walls[None], cpu = local(query)
                    local_cpu += cpu
                else:
                    walls[path.name] = await call(path, query)
            local_wall.append(walls[None] * 1000)
            for server in served:
                server.wall.append(walls[server.name] * 1000)
                server.difference.append((walls[server.name] - walls[None]) * 1000)
        for server in served:  # each thread's CPU over the measured calls; the busiest one ran the searches
            after = server.thread_cpu()
            busiest = max(after[tid] - server.threads.get(tid, 0.0) for tid in after)
            server.cpu["beyond_busiest"] = server.cpu["server"] - busiest
    return served, local_wall, local_cpu


def _time_check(server: Served, session: ClientSession, check_output: bool) -> None:
    """Time the SDK client's check of each answer against the tool's output schema (its ``validate_tool_result``),
    or leave it out (``--no-output-check``: a client that does not check)."""
    checker = session.validate_tool_result

    async def timed(name: str, result: Any) -> None:
        if check_output:
            own = time.process_time()
            await checker(name, result)
            server.cpu["check"] += time.process_time() - own

    session.validate_tool_result = timed  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scifact", type=Path, default=ROOT.parent / "shared" / "benchmarks" / "scifact")
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--index", type=Path, default=Path("/tmp/mcp-scifact"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument(
        "--client",
        choices=("sdk", "raw", "both"),
        default="sdk",
        help="the mcp SDK's ClientSession, the least client (a JSON line out, a line in), or both (a server each)",
    )
    parser.add_argument(
        "--no-output-check",
        action="store_true",
        help="the client skips its jsonschema check of each structured answer (as a client that does not check)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also a server run from the citeline source in this folder (e.g. `git archive` of an older commit, "
        "unpacked), its calls interleaved with this checkout's",
    )
    args = parser.parse_args()
    index = build(args.scifact, args.docs, args.index)
    with (args.scifact / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = [json.loads(line)["text"] for line in itertools.islice(lines, args.queries)]
    served, local_wall, local_cpu = anyio.run(
        measure,
        index,
        queries,
        args.mode,
        not args.no_output_check,
        args.baseline,
        ("sdk", "raw") if args.client == "both" else (args.client,),
    )
    status = index.status()
    checked = "unchecked" if args.no_output_check else "checked"
    print(
        f"{status.documents} documents, {status.chunks} chunks; {len(queries)} queries, mode {args.mode}, k 10; "
        f"answers {checked} against the output schema by the client; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs"
    )
    search = local_cpu * 1000 / len(queries)
    print(
        f"in process  p50 {statistics.median(local_wall):7.2f} ms  p90 {percentile(local_wall, 0.9):7.2f} ms; "
        f"CPU {search:.2f} ms a search"
    )
    for server in served:
        cpu = {name: seconds * 1000 / len(queries) for name, seconds in server.cpu.items()}
        print(f"{server.name}:")
        for name, values in (("stdio", server.wall), ("difference", server.difference)):
            print(
                f"  {name:<11} p50 {statistics.median(values):7.2f} ms  p90 {percentile(values, 0.9):7.2f} ms  "
                f"mean {statistics.fmean(values):7.2f} ms"
            )
        print(
            f"  CPU ms a call: server process {cpu['server']:.2f} - search {search:.2f} = {cpu['server'] - search:.2f} "
            f"beyond the search ({cpu['beyond_busiest']:.2f} beyond its busiest thread, the search's); "
            f"client {cpu['client']:.2f} (its output-schema check {cpu['check']:.2f}); "
            f"the protocol's (client + server - search) {cpu['client'] + cpu['server'] - search:.2f}"
        )


if __name__ == "__main__":
    main()
